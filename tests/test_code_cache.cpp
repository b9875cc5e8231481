// The engine's code cache (jit/exec/code_cache.h): LRU order and accounting on fake code, keys
// that ignore names but not semantics, sharing of code between functions of one engine,
// and a bound small enough to evict during traffic (results stay the interpreter's).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/code_cache.h"
#include "jit/exec/group_runtime.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "have_tier.h"
#include "reference.h"

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace kiln;

namespace {

using ref::kNever;

class FakeKernel final : public tiers::HostKernel {
public:
    explicit FakeKernel(std::size_t bytes) : bytes_(bytes) {}
    tiers::KernelFn entry() const override { return nullptr; }
    std::size_t code_bytes() const override { return bytes_; }

private:
    std::size_t bytes_;
};

std::shared_ptr<const tiers::CompiledKernel> fake(std::size_t bytes) { return std::make_shared<FakeKernel>(bytes); }

// Constants reach kernels as buffers, so `c` changes the data, not the code; `act` changes the code.
Graph chain(const std::string& name, double c, bool sig = false) {
    return trace(name, {arg("x", DType::f32, {dyn("B"), 16}), arg("y", DType::f32, {16})}, [&](const std::vector<Var>& in) {
        Var h = in[0] * in[1] + c;
        return std::vector<Var>{sig ? sigmoid(h) : relu(h)};
    });
}

// x -> three different row groups and elementwise groups: several distinct kernels.
Graph many_groups() {
    return trace("many", {arg("x", DType::f32, {dyn("B"), 24})}, [&](const std::vector<Var>& in) {
        Var a = softmax(in[0] * 2.0, -1);
        Var b = sum(exp(in[0]) + 1.0, -1);
        Var c = max(in[0] - 3.0, -1);
        Var d = mean(tanh(in[0]), -1);
        return std::vector<Var>{a, b + c + d};
    });
}

using kiln::test::have_tier;

Options sync_opts(std::int64_t t1, std::int64_t t2, std::int64_t cache_bytes) {
    Options o = ref::jit_options(t1, t2);
    o.code_cache_bytes = cache_bytes;
    return o;
}

}  // namespace

TEST_CASE("code cache: least recently used entries leave first; the newest stays; bytes are accounted") {
    jit::CodeCache cache(100);
    auto user = std::shared_ptr<jit::GroupRuntime>();  // no group: eviction has no one to tell
    std::vector<jit::Evicted> ev;
    auto a = cache.insert("a", fake(40), 2, user, &ev);
    auto b = cache.insert("b", fake(40), 2, user, &ev);
    CHECK(ev.empty());
    CHECK(cache.stats().bytes == 80);
    a->touch();  // a is now more recent than b
    auto c = cache.insert("c", fake(40), 2, user, &ev);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].entry == b);
    CHECK_FALSE(b->resident.load());
    CHECK(a->resident.load());
    CHECK(cache.stats().bytes == 80);
    CHECK(cache.stats().evictions == 1);
    CHECK(cache.find("b", user) == nullptr);
    CHECK(cache.find("a", user) == a);
    CHECK(cache.stats().hits == 1);
    CHECK(cache.stats().misses == 1);
    // A second insert of a resident key returns the resident entry.
    CHECK(cache.insert("a", fake(40), 2, user, &ev) == a);
    // An entry larger than the bound evicts every other and stays alone.
    ev.clear();
    auto big = cache.insert("big", fake(500), 2, user, &ev);
    CHECK(ev.size() == 2);
    CHECK(cache.stats().entries == 1);
    CHECK(cache.stats().bytes == 500);
    CHECK(big->resident.load());
    // Unbounded: nothing leaves.
    jit::CodeCache unbounded(0);
    for (int i = 0; i < 50; ++i) unbounded.insert("k" + std::to_string(i), fake(1000), 1, user, &ev);
    CHECK(unbounded.stats().entries == 50);
}

TEST_CASE("code cache: keys ignore names but not what the code computes") {
    auto key_of = [](const Graph& g) {
        const auto plan = jit::lower_function(g.impl());
        REQUIRE(plan->groups.size() == 1);
        const auto& k = plan->groups[0]->kernel;
        REQUIRE(k.has_value());
        return jit::normalised_kir(*k);
    };
    CHECK(key_of(chain("one", 0.5)) == key_of(chain("two", 0.5)));
    CHECK(key_of(chain("one", 0.5)) == key_of(chain("two", 0.25)));
    CHECK(key_of(chain("one", 0.5)) != key_of(chain("one", 0.5, true)));
    // A scalar bound of maximum/minimum (relu6's 0 and 6 from ONNX Clip) is part of the code
    // (kir::lower inlines it so that the code generators fold it): other bounds, other code.
    auto clipped = [](double hi) {
        return trace("clip", {arg("x", DType::f32, {dyn("B"), 16})}, [&](const std::vector<Var>& in) {
            return std::vector<Var>{minimum(maximum(in[0], Var(Tensor::full({}, 0.0))), Var(Tensor::full({}, hi)))};
        });
    };
    const std::string six = key_of(clipped(6.0));
    CHECK(six.find("min(max(b0[") != std::string::npos);
    CHECK(six.find(", 0), 6)") != std::string::npos);
    CHECK(six != key_of(clipped(5.0)));
}

TEST_CASE("code cache: KILN_CODE_CACHE_BYTES takes plain bytes or K/M/G; malformed values are errors") {
    auto with = [](const char* v) {
        ::setenv("KILN_CODE_CACHE_BYTES", v, 1);
        Options o = Options::from_env();
        ::unsetenv("KILN_CODE_CACHE_BYTES");
        return o.code_cache_bytes;
    };
    CHECK(Options().code_cache_bytes == 256 << 20);
    CHECK(with("4096") == 4096);
    CHECK(with("64K") == 64 << 10);
    CHECK(with("3m") == 3 << 20);
    CHECK(with("0") == 0);
    for (const char* badv : {"-1", "12X", "K", "1.5M", ""}) {
        ::setenv("KILN_CODE_CACHE_BYTES", badv, 1);
        try {
            (void)Options::from_env();
            FAIL("accepted KILN_CODE_CACHE_BYTES='" << badv << "'");
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find("KILN_CODE_CACHE_BYTES") != std::string::npos);
        }
        ::unsetenv("KILN_CODE_CACHE_BYTES");
    }
}

TEST_CASE("code cache: a second function with the same kernels reuses the first one's code") {
    const int level = have_tier(2) ? 2 : have_tier(1) ? 1 : 0;
    if (level == 0) return test::skip("this build or host has no compiling tier (neither tier 1 nor tier 2)");
    Engine engine(level == 2 ? sync_opts(kNever, 1, 0) : sync_opts(1, kNever, 0));
    Function f1 = engine.load(chain("first", 0.5));
    Function f2 = engine.load(chain("second", 0.5));  // same computation, other names
    Function f3 = engine.load(chain("third", 0.75, true));  // another activation: other code
    Function ref = Engine([] { Options o; o.jit = false; return o; }()).load(chain("ref", 0.5));
    std::vector<Tensor> in = {Tensor::randn({8, 16}, 1), Tensor::randn({16}, 2)};
    for (int i = 0; i < 4; ++i) {
        auto a = f1(in), b = f2(in), r = ref(in);
        CHECK(ref::max_rel_diff(a[0], r[0]) < 1e-5);
        CHECK(ref::max_rel_diff(b[0], r[0]) < 1e-5);
        (void)f3(in);
    }
    CHECK(f1.stats().compiles == 1);
    CHECK(f1.stats().calls_by_tier[static_cast<std::size_t>(level)] > 0);
    CHECK(f2.stats().compiles == 0);
    CHECK(f2.stats().code_cache_hits == 1);
    CHECK(f2.stats().calls_by_tier[static_cast<std::size_t>(level)] > 0);
    CHECK(f3.stats().compiles == 1);
    // Per group: the compile is counted under its tier, with its time; a cache hit is not.
    const auto lv = static_cast<std::size_t>(level);
    REQUIRE(f1.stats().groups.size() == 1);
    CHECK(f1.stats().groups[0].compiles_by_tier[lv] == 1);
    CHECK(f1.stats().groups[0].compile_ms_by_tier[lv] > 0.0);
    // Its CPU time on the compiling thread is counted, and lies within its wall time (both in µs).
    CHECK(f1.stats().groups[0].compile_cpu_ms_by_tier[lv] > 0.0);
    CHECK(f1.stats().groups[0].compile_cpu_ms_by_tier[lv] <= f1.stats().groups[0].compile_ms_by_tier[lv] + 0.002);
    CHECK(f1.stats().groups[0].compiles_by_tier[3 - lv] == 0);
    REQUIRE(f2.stats().groups.size() == 1);
    CHECK(f2.stats().groups[0].compiles_by_tier[lv] == 0);
    CHECK(f2.stats().groups[0].compile_ms_by_tier[lv] == 0.0);
    CHECK(f2.stats().groups[0].compile_cpu_ms_by_tier[lv] == 0.0);
    CHECK(f1.stats().to_json().find("\"compiles_by_tier\":[") != std::string::npos);
    CHECK(f1.stats().to_json().find("\"compile_cpu_ms_by_tier\":[") != std::string::npos);
    EngineStats es = engine.stats();
    CHECK(es.code_cache_hits == 1);
    CHECK(es.code_cache_misses == 2);
    CHECK(es.code_cache_entries == 2);
    CHECK(es.code_cache_bytes > 0);
    CHECK(es.to_json().find("\"code_cache_entries\":2") != std::string::npos);
}

TEST_CASE("code cache: under a bound, cold code is evicted, hot code stays compiled; answers stay the interpreter's") {
    for (int level : {1, 2}) {
        if (test::lacks_tier(level)) continue;  // the other level may still run
        CAPTURE(level);
        auto opts = [&](std::int64_t bytes) { return level == 2 ? sync_opts(kNever, 2, bytes) : sync_opts(1, kNever, bytes); };
        Options io;
        io.jit = false;
        Function hot_ref = Engine(io).load(many_groups());
        Function cold_ref = Engine(io).load(chain("cold", 0.5, true));
        auto check = [&](Function& f, Function& r, const std::vector<Tensor>& in) {
            auto a = f(in), b = r(in);
            REQUIRE(a.size() == b.size());
            for (std::size_t k = 0; k < a.size(); ++k) CHECK(ref::max_rel_diff(a[k], b[k]) < 1e-5);
        };
        auto hot_in = [](int i) { return std::vector<Tensor>{Tensor::randn({2, 24}, static_cast<std::uint64_t>(i))}; };
        auto cold_in = [](int i) {
            return std::vector<Tensor>{Tensor::randn({3, 16}, static_cast<std::uint64_t>(i)), Tensor::randn({16}, 5)};
        };
        // How much code each function needs, unbounded.
        std::uint64_t hot_bytes = 0, all_bytes = 0;
        {
            Engine e(opts(0));
            Function hot = e.load(many_groups());
            for (int i = 0; i < 4; ++i) (void)hot(hot_in(i));
            hot_bytes = e.stats().code_cache_bytes;
            Function cold = e.load(chain("cold", 0.5, true));
            for (int i = 0; i < 4; ++i) (void)cold(cold_in(i));
            all_bytes = e.stats().code_cache_bytes;
            CHECK(e.stats().code_cache_evictions == 0);
        }
        REQUIRE(all_bytes > hot_bytes);
        // Room for the hot function's code and part of the cold one's.
        const auto bound = static_cast<std::int64_t>(hot_bytes + (all_bytes - hot_bytes) / 2);
        Engine engine(opts(bound));
        Function hot = engine.load(many_groups());
        Function cold = engine.load(chain("cold", 0.5, true));
        for (int i = 0; i < 6; ++i) check(cold, cold_ref, cold_in(i));  // cold code first ...
        for (int i = 0; i < 40; ++i) check(hot, hot_ref, hot_in(i));    // ... then hot traffic evicts it
        const auto before = hot.stats().calls_by_tier[static_cast<std::size_t>(level)];
        for (int i = 0; i < 20; ++i) check(hot, hot_ref, hot_in(100 + i));
        EngineStats es = engine.stats();
        INFO("bounded: " << es.to_json());
        CHECK(es.code_cache_evictions > 0);
        CHECK(cold.stats().evictions > 0);
        CHECK(es.code_cache_bytes <= static_cast<std::uint64_t>(bound));
        CHECK(hot.stats().calls_by_tier[static_cast<std::size_t>(level)] - before == 20);  // hot code stayed
        for (int i = 0; i < 6; ++i) check(cold, cold_ref, cold_in(200 + i));  // evicted code still answers right
        std::uint64_t versions = 0;
        for (const auto& g : cold.stats().groups) versions += g.versions;
        for (const auto& g : hot.stats().groups) versions += g.versions;
        CHECK(versions <= engine.stats().code_cache_entries);  // only resident code is published
    }
}
