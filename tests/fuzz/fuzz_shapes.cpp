// Fuzz target (a): shapes and strides (small, zero, negative, near 2^31, 2^62 and INT64_MAX)
// fed to the Tensor factories, wrap and wrap_strided, a chain of views and readers, and calls
// of two traced functions (output_shapes, warmup, operator(), run).
//
// The size rules of kiln/tensor.h are computed here independently: a call they reject must
// throw kiln::Error, one they accept must succeed, and every tensor made must be consistent
// (numel the product of its dims, its elements inside its storage, its values those of a
// shadow copy kept with tests/reference.h). Requests that are valid but would allocate or visit
// more than kMaxElements elements are not made.
#include "fuzz_util.h"

#include "src/core/storage.h"
#include "tests/differential.h"
#include "tests/reference.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace kiln;
using fuzz::attempt;
using fuzz::Bytes;
using fuzz::count;
using fuzz::dense_fits;
using fuzz::kMaxElements;
using fuzz::str;

namespace {

constexpr std::int64_t kShadowMax = 4096;  // tensors this small are checked value by value
constexpr std::int64_t kBufferElems = 4096;

// ---- the size rules of kiln/tensor.h, computed independently (with fuzz_util.h's) ----
// The bytes a strided view spans (0 when empty), or -1 when that overflows.
std::int64_t span_bytes(const Shape& s, const std::vector<std::int64_t>& st, DType dt) {
    if (count(s) == 0) return 0;
    std::int64_t last = 0, step = 0, bytes = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
        if (__builtin_mul_overflow(s[i] - 1, st[i], &step) || __builtin_add_overflow(last, step, &last)) return -1;
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, static_cast<std::int64_t>(dtype_size(dt)), &bytes))
        return -1;
    return bytes;
}
bool small(const Shape& s, std::int64_t limit = kMaxElements) {
    const std::int64_t n = count(s);
    return n >= 0 && n <= limit;
}
// Whether the values of a tensor of `s` are kept in a shadow: few, and the reference's loops
// over a dim and index arithmetic (products of the dims, a zero counting as 1) stay small.
bool shadowable(const Shape& s) {
    std::int64_t p = 1;
    for (std::int64_t d : s)
        if (d < 0 || d > kShadowMax || __builtin_mul_overflow(p, std::max<std::int64_t>(d, 1), &p)) return false;
    return small(s, kShadowMax);
}

// The tensor under test, with what the fuzzer knows about it.
struct Subject {
    Tensor t;
    Tensor buffer;             // the memory a wrap borrows
    bool readable = true;      // false: a wrap reaching past its buffer (reading it is the caller's bug)
    std::optional<ref::RTensor> shadow;  // its values, while it is small
};

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Whether `t` is laid out row-major: no elements, or strides that step through them in order
// (a dim of 1 takes any stride).
bool row_major(const Tensor& t) {
    if (count(t.shape()) == 0) return true;
    std::int64_t expected = 1;
    for (std::size_t i = t.shape().size(); i-- > 0;) {
        if (t.shape()[i] == 1) continue;
        if (t.strides()[i] != expected) return false;
        expected *= t.shape()[i];
    }
    return true;
}

// Whether two elements of `t` may share memory (then writing it has no one answer).
bool overlaps(const Tensor& t) {
    if (t.numel() > kShadowMax) return true;
    std::vector<std::int64_t> offsets;
    for (std::int64_t f = 0; f < t.numel(); ++f) {
        const auto idx = ref::unravel(f, t.shape());
        std::int64_t off = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
        offsets.push_back(off);
    }
    std::sort(offsets.begin(), offsets.end());
    return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

// Checks that `outcome` (true: returned) is what the rules expect.
void expect_outcome(bool returned, bool valid, const std::string& what, const std::string& error = "") {
    KILN_FUZZ_LOG(what << (returned ? ": returned" : ": kiln::Error: " + error));
    KILN_FUZZ_CHECK(returned == valid, what << (valid ? " threw kiln::Error on a valid request: " + error
                                                      : " returned on a request the size rules reject"));
}

// Every invariant of a tensor that a public method can see.
void check_invariants(const Subject& s, const std::string& what) {
    const Tensor& t = s.t;
    if (!t.defined()) {
        KILN_FUZZ_CHECK(t.numel() == 0 && t.rank() == 0 && t.shape().empty() && t.strides().empty() && t.offset() == 0 &&
                            t.is_contiguous() && t.data() == nullptr && t.to_string() == "Tensor(undefined)",
                        what << ": an undefined tensor answers its queries wrongly");
        return;
    }
    const Shape& sh = t.shape();
    KILN_FUZZ_CHECK(t.rank() == static_cast<std::int64_t>(sh.size()) && t.strides().size() == sh.size(),
                    what << ": rank " << t.rank() << ", shape " << str(sh) << ", " << t.strides().size() << " strides");
    const std::int64_t n = count(sh);
    KILN_FUZZ_CHECK(n >= 0 && t.numel() == n, what << ": shape " << str(sh) << " has numel " << t.numel());
    for (std::int64_t i = 0; i < t.rank(); ++i)
        KILN_FUZZ_CHECK(t.dim(i) == sh[i] && t.dim(i - t.rank()) == sh[i] && t.strides()[i] >= 0,
                        what << ": dim or stride " << i << " of " << str(sh));
    KILN_FUZZ_CHECK(!attempt("dim", [&] { (void)t.dim(t.rank()); }), what << ": dim(rank) returned");
    KILN_FUZZ_CHECK(t.is_contiguous() == row_major(t), what << ": is_contiguous() of " << str(sh) << " strides " << str(t.strides()));
    if (n > 0) {  // the last element lies inside the storage
        const std::int64_t span = span_bytes(sh, t.strides(), t.dtype());
        std::int64_t start = 0, end = 0;
        KILN_FUZZ_CHECK(span > 0 && t.offset() >= 0 &&
                            !__builtin_mul_overflow(t.offset(), static_cast<std::int64_t>(dtype_size(t.dtype())), &start) &&
                            !__builtin_add_overflow(start, span, &end) && end <= static_cast<std::int64_t>(t.storage()->bytes),
                        what << ": shape " << str(sh) << ", strides " << str(t.strides()) << ", offset " << t.offset()
                             << " reach past a storage of " << t.storage()->bytes << " bytes");
    }
    if (!s.readable || !s.shadow) return;
    KILN_FUZZ_CHECK(s.shadow->shape == sh, what << ": shape " << str(sh) << ", the shadow's " << str(s.shadow->shape));
    const std::vector<double> v = t.to_doubles();
    for (std::size_t i = 0; i < v.size(); ++i)
        KILN_FUZZ_CHECK(same(v[i], s.shadow->v[i]), what << ": element " << i << " of " << str(sh) << " is " << v[i]
                                                         << ", expected " << s.shadow->v[i]);
}

// ---- making the subject ----
Shape read_shape(Bytes& in) {
    Shape s(static_cast<std::size_t>(in.in(0, 4)));
    for (auto& d : s) d = in.extent();
    return s;
}

Subject make_dense(Bytes& in, int kind) {
    const Shape shape = read_shape(in);
    const DType read = in.dtype();
    const DType dt = kind == 6 ? DType::f64 : read;  // from_vector here takes doubles
    Subject s;
    if (dense_fits(shape, dt) && !small(shape)) {  // too big to allocate: a broadcast view instead
        KILN_FUZZ_CHECK(attempt("broadcast_to", [&] { s.t = Tensor::zeros({}, dt).broadcast_to(shape); }),
                        "a scalar's broadcast_to(" << str(shape) << ") threw");
        return s;
    }
    const double value = in.value();
    std::string error;
    const bool ok = attempt("factory", [&] {
        switch (kind) {
        case 0: s.t = Tensor::empty(shape, dt); break;
        case 1: s.t = Tensor::zeros(shape, dt); break;
        case 2: s.t = Tensor::ones(shape, dt); break;
        case 3: s.t = Tensor::full(shape, value, dt); break;
        case 4: s.t = Tensor::randn(shape, in.bits(2), dt); break;
        case 5: s.t = Tensor::rand(shape, in.bits(2), dt, -3.0, 3.0); break;
        default: {
            std::vector<double> v(small(shape) ? static_cast<std::size_t>(count(shape)) : 1);
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7) - 3.0;
            s.t = Tensor::from_vector(v, shape);
            break;
        }
        }
    }, &error);
    expect_outcome(ok, dense_fits(shape, dt), "factory " + std::to_string(kind) + " of " + str(shape), error);
    if (!ok) return s;
    KILN_FUZZ_CHECK(s.t.shape() == shape && s.t.is_contiguous() && s.t.offset() == 0, "a factory's tensor " << str(shape));
    if (shadowable(shape)) {
        s.shadow = ref::RTensor{shape, s.t.to_doubles()};
        for (double x : s.shadow->v)
            KILN_FUZZ_CHECK((kind != 1 || x == 0.0) && (kind != 2 || x == 1.0) && (kind != 3 || same(x, s.shadow->v[0])),
                            "factory " << kind << " of " << str(shape) << " holds " << x);
    }
    return s;
}

Subject make_wrap(Bytes& in, bool strided) {
    const DType dt = in.dtype();
    Subject s;
    s.buffer = Tensor::rand({kBufferElems}, in.byte(), dt, -100.0, 100.0);
    const Shape shape = read_shape(in);
    std::vector<std::int64_t> st;
    if (strided) {
        st.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(shape.size()) + in.pick({0, 0, 0, 1, -1}))));
        for (auto& x : st) x = in.extent();
    } else if (dense_fits(shape, dt)) {
        st = contiguous_strides(shape);
    }
    const std::int64_t span = st.size() == shape.size() && count(shape) >= 0 ? span_bytes(shape, st, dt) : -1;
    const bool valid = (strided || dense_fits(shape, dt)) && span >= 0 &&
                       std::none_of(st.begin(), st.end(), [](std::int64_t x) { return x < 0; });
    std::string error;
    const bool ok = attempt("wrap", [&] {
        s.t = strided ? Tensor::wrap_strided(s.buffer.data(), shape, st, dt) : Tensor::wrap(s.buffer.data(), shape, dt);
    }, &error);
    expect_outcome(ok, valid, std::string(strided ? "wrap_strided " : "wrap ") + str(shape) + " strides " + str(st), error);
    if (!ok) return s;
    s.readable = span <= kBufferElems * static_cast<std::int64_t>(dtype_size(dt));
    if (s.readable && shadowable(shape)) {  // the values, read from the buffer by hand
        const std::vector<double> flat = s.buffer.to_doubles();
        s.shadow = ref::RTensor{shape, std::vector<double>(static_cast<std::size_t>(count(shape)))};
        for (std::int64_t f = 0; f < count(shape); ++f) {
            const auto idx = ref::unravel(f, shape);
            std::int64_t off = 0;
            for (std::size_t i = 0; i < idx.size(); ++i) off += idx[i] * st[i];
            s.shadow->v[static_cast<std::size_t>(f)] = flat[static_cast<std::size_t>(off)];
        }
    }
    return s;
}

Subject make_subject(Bytes& in) {
    const int kind = static_cast<int>(in.in(0, 9));
    if (kind <= 6) return make_dense(in, kind);
    if (kind <= 8) return make_wrap(in, kind == 8);
    return Subject{};  // undefined
}

// ---- views and readers ----
// A shape for reshape: random dims, sometimes one of them fitted to the element count.
Shape reshape_target(Bytes& in, const Tensor& t) {
    Shape s = read_shape(in);
    if (!s.empty() && in.flag()) {
        Shape rest = s;
        rest.erase(rest.begin());
        const std::int64_t n = t.numel(), r = count(rest);
        s[0] = r > 0 && n % r == 0 ? n / r : s[0];
    }
    return s;
}

// A shape for broadcast_to: the tensor's own with some dims of 1 widened and some dims prepended.
Shape broadcast_target(Bytes& in, const Tensor& t) {
    if (in.flag()) return read_shape(in);
    Shape s = t.shape();
    for (auto& d : s)
        if (d == 1 && in.flag()) d = in.extent();
    for (std::int64_t k = in.in(0, 2); k > 0; --k) s.insert(s.begin(), in.extent());
    return s;
}

std::int64_t axis_in(Bytes& in, std::int64_t rank) { return in.flag() ? in.extent() : in.in(-rank - 1, rank); }
bool axis_ok(std::int64_t a, std::int64_t rank) { return a >= -rank && a < rank; }
std::int64_t norm(std::int64_t a, std::int64_t rank) { return a < 0 ? a + rank : a; }

// One view or reader applied to the subject; checks its outcome against the rules.
void step(Bytes& in, Subject& s) {
    const Tensor t = s.t;
    const bool def = t.defined();
    const std::int64_t r = t.rank();
    const bool can_copy = def && s.readable && small(t.shape());
    const int op = static_cast<int>(in.in(0, 12));
    Tensor out;
    bool valid = def, returned = false;
    std::optional<ref::RTensor> shadow;
    std::string what, error;
    switch (op) {
    case 0: {
        const Shape to = reshape_target(in, t);
        what = "reshape to " + str(to);
        valid = valid && count(to) == t.numel() && dense_fits(to, DType::i8);
        if (valid && !t.is_contiguous() && !can_copy) return;  // the copy it makes is not allowed here
        returned = attempt(what, [&] { out = t.reshape(to); }, &error);
        if (returned && s.shadow && shadowable(out.shape())) shadow = ref::reshape(*s.shadow, to);
        break;
    }
    case 1: {
        const Shape to = broadcast_target(in, t);
        what = "broadcast_to " + str(to);
        valid = valid && count(to) >= 0 && to.size() >= t.shape().size();
        for (std::size_t i = 0; valid && i < t.shape().size(); ++i) {
            const std::int64_t d = t.shape()[i], w = to[to.size() - t.shape().size() + i];
            valid = d == w || d == 1;
        }
        returned = attempt(what, [&] { out = t.broadcast_to(to); }, &error);
        if (returned && s.shadow && shadowable(to)) shadow = ref::broadcast_to(*s.shadow, to);
        break;
    }
    case 2: {
        std::vector<std::int64_t> perm(static_cast<std::size_t>(std::max<std::int64_t>(0, r + in.pick({0, 0, 0, 1, -1}))));
        for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = in.flag() ? static_cast<std::int64_t>(i) : axis_in(in, r);
        std::vector<bool> seen(static_cast<std::size_t>(r), false);
        valid = valid && static_cast<std::int64_t>(perm.size()) == r;
        for (std::int64_t a : perm) {
            valid = valid && axis_ok(a, r) && !seen[static_cast<std::size_t>(norm(a, r))];
            if (valid) seen[static_cast<std::size_t>(norm(a, r))] = true;
        }
        what = "permute " + str(perm);
        returned = attempt(what, [&] { out = t.permute(perm); }, &error);
        if (returned && s.shadow && shadowable(out.shape())) shadow = ref::permute(*s.shadow, perm);
        break;
    }
    case 3: {
        const std::int64_t a = axis_in(in, r), b = axis_in(in, r);
        what = "transpose " + std::to_string(a) + " " + std::to_string(b);
        valid = valid && axis_ok(a, r) && axis_ok(b, r);
        returned = attempt(what, [&] { out = t.transpose(a, b); }, &error);
        if (returned && s.shadow && shadowable(out.shape())) shadow = ref::transpose(*s.shadow, a, b);
        break;
    }
    case 4: {
        const std::int64_t a = axis_in(in, r), b = in.extent(), e = in.flag() ? INT64_MAX : in.extent();
        const std::int64_t stp = in.flag() ? in.in(1, 3) : in.extent();
        what = "slice axis " + std::to_string(a) + " [" + std::to_string(b) + ":" + std::to_string(e) + ":" + std::to_string(stp) + "]";
        valid = valid && axis_ok(a, r) && stp >= 1;
        if (valid) {  // the new stride must fit when two or more elements remain
            const std::int64_t n = t.shape()[static_cast<std::size_t>(norm(a, r))];
            auto clampi = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + n, 0) : std::min(v, n); };
            const std::int64_t len = clampi(e) > clampi(b) ? (clampi(e) - clampi(b) - 1) / stp + 1 : 0;
            std::int64_t st = 0;
            valid = len <= 1 || !__builtin_mul_overflow(t.strides()[static_cast<std::size_t>(norm(a, r))], stp, &st);
        }
        returned = attempt(what, [&] { out = t.slice(a, b, e, stp); }, &error);
        if (returned && s.shadow && shadowable(out.shape()))
            shadow = ref::slice(*s.shadow, a, b, e, std::min<std::int64_t>(stp, std::max<std::int64_t>(1, s.shadow->shape[static_cast<std::size_t>(norm(a, r))])));
        break;
    }
    case 5: {
        const std::int64_t a = axis_in(in, r + 1);
        what = "unsqueeze " + std::to_string(a);
        valid = valid && axis_ok(a, r + 1);
        returned = attempt(what, [&] { out = t.unsqueeze(a); }, &error);
        if (returned && s.shadow && shadowable(out.shape())) shadow = ref::unsqueeze(*s.shadow, {a});
        break;
    }
    case 6: {
        const std::int64_t a = axis_in(in, r);
        what = "squeeze " + std::to_string(a);
        valid = valid && axis_ok(a, r) && t.shape()[static_cast<std::size_t>(norm(a, r))] == 1;
        returned = attempt(what, [&] { out = t.squeeze(a); }, &error);
        if (returned && s.shadow && shadowable(out.shape())) shadow = ref::squeeze(*s.shadow, {a});
        break;
    }
    case 7:
    case 8: {  // clone, contiguous, astype: dense copies
        const DType to = op == 8 ? in.dtype() : t.dtype();
        const bool clone = in.flag();
        const bool itself = op == 7 && !clone && def && row_major(t);  // contiguous() returns the tensor
        what = op == 8 ? "astype " + std::string(dtype_name(to)) : clone ? "clone" : "contiguous";
        valid = valid && (itself || dense_fits(t.shape(), to));
        if (valid && !itself && !can_copy) return;
        returned = attempt(what, [&] { out = op == 8 ? t.astype(to) : clone ? t.clone() : t.contiguous(); }, &error);
        if (returned) {
            KILN_FUZZ_CHECK(out.is_contiguous() && out.dtype() == to && out.shape() == t.shape(), what << " of " << str(t.shape()));
            KILN_FUZZ_CHECK(out.shares_storage(t) == itself, what << " of " << str(t.shape()) << (itself ? " copied" : " did not copy"));
            if (s.shadow) shadow = op == 8 ? ref::RTensor{out.shape(), out.to_doubles()} : *s.shadow;
        }
        break;
    }
    case 9: {  // item, at an index in range or not
        std::vector<std::int64_t> idx(static_cast<std::size_t>(std::max<std::int64_t>(0, r + in.pick({0, 0, 0, 1, -1}))));
        for (std::size_t i = 0; i < idx.size(); ++i)
            idx[i] = in.flag() || i >= t.shape().size() || t.shape()[i] == 0 ? in.extent() : static_cast<std::int64_t>(in.bits(8) % static_cast<std::uint64_t>(t.shape()[i]));
        valid = valid && static_cast<std::int64_t>(idx.size()) == r;
        for (std::size_t i = 0; valid && i < idx.size(); ++i) valid = idx[i] >= 0 && idx[i] < t.shape()[i];
        if (valid && !s.readable) return;
        double v = 0;
        what = "item " + str(idx);
        returned = attempt(what, [&] { v = t.item(idx); }, &error);
        if (returned && s.shadow) KILN_FUZZ_CHECK(same(v, s.shadow->at(idx)), what << " of " << str(t.shape()) << " is " << v);
        expect_outcome(returned, valid, what, error);
        return;
    }
    case 10: {  // to_doubles and to_string read every element, or the first few
        if (!def || !s.readable) return;
        std::string text;
        const std::int64_t max = in.pick<std::int64_t>({0, 1, 5, 32, -1});
        KILN_FUZZ_CHECK(attempt("to_string", [&] { text = t.to_string(max); }), "to_string threw kiln::Error on " << str(t.shape()));
        KILN_FUZZ_CHECK(text.rfind("Tensor(", 0) == 0, "to_string: " << text);
        if (!small(t.shape())) return;
        std::vector<double> v;
        KILN_FUZZ_CHECK(attempt("to_doubles", [&] { v = t.to_doubles(); }) && static_cast<std::int64_t>(v.size()) == t.numel(),
                        "to_doubles of " << str(t.shape()));
        return;
    }
    case 11: {  // copy_from into the subject (when no two of its elements share memory)
        if (!can_copy) return;
        const Shape from = in.flag() ? t.shape() : read_shape(in);
        const DType dt = in.dtype();
        if (overlaps(t) || !small(from) || !dense_fits(from, dt)) return;
        const Tensor src = Tensor::full(from, in.value(), dt);
        what = "copy_from " + str(from);
        returned = attempt(what, [&] { t.copy_from(src); }, &error);
        expect_outcome(returned, from == t.shape(), what + " into " + str(t.shape()), error);
        if (returned && s.shadow) s.shadow = ref::RTensor{t.shape(), src.astype(t.dtype()).to_doubles()};
        check_invariants(s, what);
        return;
    }
    default: {  // unsqueeze then squeeze back: the same view
        if (!def) return;
        what = "unsqueeze(0).squeeze(0)";
        valid = true;
        returned = attempt(what, [&] { out = t.unsqueeze(0).squeeze(0); }, &error);
        if (returned) KILN_FUZZ_CHECK(out.shape() == t.shape() && out.strides() == t.strides(), what);
        shadow = s.shadow;
        break;
    }
    }
    expect_outcome(returned, valid, what + " of " + (def ? str(t.shape()) + " strides " + str(t.strides()) : "an undefined tensor"), error);
    if (!returned) return;
    s.t = out;
    s.shadow = shadow;
    check_invariants(s, what);
}

}  // namespace

void fuzz_calls(Bytes& in, const Tensor& t, bool readable);  // fuzz_shapes_calls.cpp

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Bytes in(data, size);
    Subject s = make_subject(in);
    KILN_FUZZ_LOG("subject: " << (s.t.defined() ? s.t.to_string(0) : "undefined") << (s.readable ? "" : " (not readable)"));
    check_invariants(s, "the new tensor");
    for (std::int64_t k = in.in(0, 7); k > 0; --k) step(in, s);
    if (!in.empty()) fuzz_calls(in, s.t, s.readable);
    return 0;
}
