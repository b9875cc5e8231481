// Hostile shapes (issue 17, items 1, 2 and 5): element counts, byte sizes and strides that
// overflow int64 are a kiln::Error naming the shape, in the factories, the views, wrap,
// tracing, calls on every tier, output_shapes and warmup; never a wrap-around, a crash or an
// out-of-bounds read. The overflowing calls are rejected before anything is allocated.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr std::int64_t P(int e) { return std::int64_t{1} << e; }
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Runs `f`; checks that it throws kiln::Error (not another exception) whose message holds
// every one of `parts`.
void expect_error(const std::string& what, const std::function<void()>& f, const std::vector<std::string>& parts) {
    CAPTURE(what);
    std::string msg;
    bool threw = false;
    try {
        f();
    } catch (const Error& e) {
        threw = true;
        msg = e.what();
    } catch (const std::exception& e) {
        FAIL_CHECK("expected kiln::Error, got another exception: " << std::string(e.what()));
        return;
    }
    REQUIRE_MESSAGE(threw, "no kiln::Error thrown for " << what);
    INFO("message: ", msg);
    for (const auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "the message lacks \"" << p << "\"");
}

Graph add_one() {
    return trace("ew", {arg("a", DType::f32, {dyn("n"), dyn("m")})},
                 [](const std::vector<Var>& in) -> std::vector<Var> { return {in[0] + 1.0}; });
}

Graph mlp(const Tensor& w) {
    return trace("mlp", {arg("x", DType::f32, {dyn("b"), 784})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
        return {softmax(matmul(in[0], w), -1)};
    });
}

}  // namespace

TEST_CASE("an output whose byte size overflows is a kiln::Error on every tier, before it runs") {
    // A stride-0 view of one element: a valid input of 2^62 elements and 4 bytes of storage.
    const Tensor x = Tensor::zeros({1, 1}).broadcast_to({P(31), P(31)});
    CHECK(x.numel() == P(62));
    CHECK(x.item({P(31) - 1, 5}) == 0.0);
    for (bool jit : {false, true}) {
        CAPTURE(jit);
        Options o;
        o.jit = jit;
        o.async_compile = false;
        o.tier1_threshold = 1;
        o.tier2_threshold = 1;
        Engine e(o);
        Function f = e.load(add_one());
        // f32[2^31,2^31] is 2^64 bytes; f32[2^30,2^31] is 2^63 bytes: both more than int64 counts.
        expect_error("a + 1 at [2^31,2^31]", [&] { f({x}); }, {"[2147483648,2147483648]", "add"});
        const Tensor y = Tensor::zeros({1, 1}).broadcast_to({P(30), P(31)});
        expect_error("a + 1 at [2^30,2^31]", [&] { f({y}); }, {"[1073741824,2147483648]"});
        expect_error("output_shapes at [2^31,2^31]", [&] { f.output_shapes({{P(31), P(31)}}); }, {"[2147483648,2147483648]"});
        // The function is still usable, and answers right.
        auto out = f({Tensor::full({2, 3}, 2.0)});
        CHECK(out[0].to_doubles() == std::vector<double>(6, 3.0));
        CHECK(f.stats().failed_calls == 2);  // output_shapes is not a call
    }
}

TEST_CASE("factories reject shapes whose element count or byte size overflows") {
    const Shape huge{P(62), 784}, wraps{P(61), 2}, max{kMax}, big_zero{0, P(40), P(40)};
    expect_error("ones([2^62,784])", [&] { Tensor::ones(huge); }, {"Tensor::ones", "[4611686018427387904,784]"});
    expect_error("zeros([2^61,2])", [&] { Tensor::zeros(wraps); }, {"Tensor::zeros", "[2305843009213693952,2]"});
    expect_error("zeros([INT64_MAX])", [&] { Tensor::zeros(max); }, {"[9223372036854775807]"});
    expect_error("empty([2^62,784])", [&] { Tensor::empty(huge); }, {"Tensor::empty", "[4611686018427387904,784]"});
    expect_error("full", [&] { Tensor::full(wraps, 3.0, DType::f64); }, {"[2305843009213693952,2]"});
    expect_error("randn", [&] { Tensor::randn(huge, 1); }, {"[4611686018427387904,784]"});
    expect_error("rand", [&] { Tensor::rand(max, 1, DType::i32); }, {"[9223372036854775807]"});
    expect_error("from_vector", [&] { Tensor::from_vector(std::vector<float>{1.f}, huge); }, {"[4611686018427387904,784]"});
    // An i8 tensor of INT64_MAX elements has a byte size that fits: too large for memory, not
    // an overflow (std::bad_alloc territory), so only the element counts above are checked here.
    // Zero-size tensors stay valid, however large their other dims.
    CHECK(Tensor::empty({P(40), P(40), 0}).numel() == 0);
    expect_error("row-major strides overflow", [&] { Tensor::zeros(big_zero); }, {"[0,1099511627776,1099511627776]"});
}

TEST_CASE("a zero-size tensor whose other dims overflow int64 together has numel 0 and copies (found by fuzz_shapes)") {
    // The product of the dims before the zero overflows: numel and the strided copies must not
    // compute it in int64 (undefined behaviour, which UBSan reports).
    const Tensor z = Tensor::zeros({P(40), P(40), 0, 0});
    CHECK(z.numel() == 0);
    float v[1] = {0};
    for (const auto& strides : {std::vector<std::int64_t>{9, 0, 1, 3}, std::vector<std::int64_t>{4, 5, 4, 2}}) {
        const Tensor w = Tensor::wrap_strided(v, {P(40), P(40), 0, 0}, strides, DType::f32);
        CHECK(w.numel() == 0);
        CHECK(w.to_doubles().empty());
        CHECK(w.clone().numel() == 0);
        CHECK(w.astype(DType::bf16).numel() == 0);
        w.copy_from(z);
    }
    // A zero-size view is contiguous whatever its strides, so reshape gives a view and
    // contiguous() the tensor itself (a copy of [0,2^40,2^40] cannot be made).
    const Tensor e = Tensor::wrap_strided(v, {0, P(40), P(40)}, {0, 0, 2}, DType::f32);
    CHECK(e.is_contiguous());
    CHECK(e.reshape({0}).shares_storage(e));
    CHECK(e.contiguous().shares_storage(e));
    // A slice of it starting far along axis 0 does not move the (absent) first element:
    // (2^40 - 5) * the stride of axis 0 (2^40) overflows.
    const Tensor sl = z.slice(0, P(40) - 5, P(40));
    CHECK(sl.shape() == Shape{5, P(40), 0, 0});
    CHECK(sl.numel() == 0);
    CHECK(sl.offset() == 0);
    // item checks every index before it computes an offset: 2^39 * the stride of axis 0
    // (2^40) overflows, and axis 2 rejects the index anyway.
    expect_error("item of a zero-size tensor", [&] { (void)z.item({P(39), 5, 0, 0}); }, {"out of range for axis 2 of size 0"});
}

TEST_CASE("Tensor::empty of booleans holds valid booleans (found by fuzz_shapes)") {
    // A large block comes back from the allocator's cache with its old bytes: 190 is no bool,
    // and reading it as one is undefined (UBSan reports it). empty() gives false.
    { const Tensor junk = Tensor::full({P(21)}, 190.0, DType::u8); }
    const std::vector<double> v = Tensor::empty({P(21)}, DType::boolean).to_doubles();
    CHECK(std::count(v.begin(), v.end(), 0.0) == P(21));
}

TEST_CASE("to_string of a huge view reads only the elements it prints (found by fuzz_shapes)") {
    // 2^62 elements: to_doubles overflows int64 bytes; [2, 2^40]: 16 TiB of doubles.
    const Tensor huge = Tensor::full({1}, 2.5).broadcast_to({P(31), P(31)});
    CHECK(huge.to_string(3) == "Tensor(f32[2147483648,2147483648], [2.5, 2.5, 2.5, ...])");
    const Tensor big = Tensor::full({2, 1}, 1.0, DType::i32).broadcast_to({2, P(40)});
    CHECK(big.to_string(2) == "Tensor(i32[2,1099511627776], [1, 1, ...])");
    CHECK(big.to_string(0) == "Tensor(i32[2,1099511627776], [...])");
    // Row-major order through a strided view; every element when there are few enough.
    const Tensor t = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3}).transpose(0, 1);
    CHECK(t.to_string() == "Tensor(f32[3,2], [0, 3, 1, 4, 2, 5])");
    CHECK(t.to_string(4) == "Tensor(f32[3,2], [0, 3, 1, 4, ...])");
    CHECK(Tensor::full({}, 7.0).to_string() == "Tensor(f32[], [7])");
    CHECK(Tensor::zeros({0, 3}).to_string() == "Tensor(f32[0,3], [])");
}

TEST_CASE("wrap and wrap_strided reject overflowing shapes and strides") {
    float v[4] = {1, 2, 3, 4};
    expect_error("wrap_strided [2^40,2^40] stride 0", [&] { Tensor::wrap_strided(v, {P(40), P(40)}, {0, 0}, DType::f32); },
                 {"Tensor::wrap", "[1099511627776,1099511627776]"});
    expect_error("wrap [2^40,2^40]", [&] { Tensor::wrap(v, {P(40), P(40)}, DType::f32); }, {"[1099511627776,1099511627776]"});
    expect_error("wrap_strided extent", [&] { Tensor::wrap_strided(v, {3, 2}, {P(62), 1}, DType::f32); }, {"[3,2]"});
    // A valid stride-0 view of one value: 2^40 elements, 4 bytes of storage.
    Tensor t = Tensor::wrap_strided(v, {P(20), P(20)}, {0, 0}, DType::f32);
    CHECK(t.numel() == P(40));
    CHECK(t.item({P(20) - 1, P(20) - 1}) == 1.0);
}

TEST_CASE("views reject overflowing and negative target shapes") {
    const Tensor one = Tensor::zeros({1, 1});
    expect_error("broadcast_to [2^40,2^40,2^40]", [&] { one.broadcast_to({P(40), P(40), P(40)}); },
                 {"Tensor::broadcast_to", "[1099511627776,1099511627776,1099511627776]"});
    expect_error("broadcast_to [-3,1]", [&] { one.broadcast_to({-3, 1}); }, {"[-3,1]"});
    expect_error("reshape", [&] { Tensor::zeros({4}).reshape({P(62), 8}); }, {"[4611686018427387904,8]"});
    // Copies of a valid but huge view: their byte size overflows.
    const Tensor v = one.broadcast_to({P(31), P(31)});
    expect_error("clone", [&] { v.clone(); }, {"[2147483648,2147483648]"});
    expect_error("to_doubles", [&] { v.to_doubles(); }, {"[2147483648,2147483648]"});
    expect_error("astype", [&] { v.astype(DType::f64); }, {"[2147483648,2147483648]"});
    // A slice step far past the end gives one element and a sane stride.
    const Tensor s = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).slice(0, 1, 4, kMax);
    CHECK(s.shape() == Shape{1});
    CHECK(s.item({0}) == 2.0);
}

TEST_CASE("tracing rejects static shapes whose size overflows") {
    expect_error("arg f32[2^62,784]",
                 [] { trace("t", {arg("x", DType::f32, {P(62), 784})}, [](const std::vector<Var>& in) { return in[0]; }); },
                 {"'x'", "[4611686018427387904,784]"});
    expect_error("broadcast to f32[2^40,2^40]",
                 [] {
                     trace("t", {arg("a", DType::f32, {P(40), 1}), arg("b", DType::f32, {1, P(40)})},
                           [](const std::vector<Var>& in) { return in[0] + in[1]; });
                 },
                 {"add", "[1099511627776,1099511627776]"});
}

TEST_CASE("output_shapes and warmup reject what a call would reject") {
    const Tensor w = Tensor::randn({784, 10}, 1);
    Options o;
    o.jit = true;
    o.async_compile = false;
    Engine e(o);
    Function f = e.load(mlp(w));
    const std::vector<std::pair<Shape, std::vector<std::string>>> bad = {
        {{-5, 784}, {"'x'", "-5", "[-5,784]"}},
        {{P(62), 784}, {"'x'", "[4611686018427387904,784]"}},
        {{kMax, 784}, {"'x'", "[9223372036854775807,784]"}},
        {{3, 785}, {"'x'", "784", "785"}},
    };
    for (const auto& [shape, parts] : bad) {
        CAPTURE(shape_to_string(shape));
        expect_error("output_shapes", [&] { f.output_shapes({shape}); }, parts);
        expect_error("warmup", [&] { f.warmup({{shape}}); }, parts);
    }
    CHECK(f.stats().compiles == 0);
    CHECK(f.output_shapes({{P(40), 784}}) == std::vector<Shape>{{P(40), 10}});
    CHECK(f.output_shapes({{0, 784}}) == std::vector<Shape>{{0, 10}});
    auto y = f({Tensor::randn({2, 784}, 3)});
    CHECK(y[0].shape() == Shape{2, 10});
}
