// The tier-up policy's decisions (jit/tiering/tier_manager.h), driven by a profile the test
// writes itself: no clock is read, so each decision follows from the numbers given. The
// tiers are fakes that record what they were asked to compile and return tier 0's code.
// The fake compiles sleep 20 ms, so the costs the engine measures are those of a real
// tier-2 compile (the decisions below keep margins of 10x around them). The engine-level
// cases at the end check the same decisions on real calls, with margins of orders of
// magnitude.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "jit/exec/pipeline.h"
#include "jit/exec/run_plan.h"
#include "jit/exec/shape_plan.h"
#include "jit/tiering/cost_model.h"
#include "jit/tiering/tier_manager.h"
#include "jit/tiering/version_record.h"
#include "profiling/compile_activity.h"
#include "tiers/interp/interp_tier.h"
#include "reference.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

using namespace kiln;
using profiling::CodeKind;

namespace {

// A tier that compiles anything into tier 0's code for the group, and records each request.
class RecordingTier final : public tiers::Tier {
public:
    explicit RecordingTier(int level) : level_(level) {}
    int level() const override { return level_; }
    std::string_view name() const override { return level_ == 1 ? "fake1" : "fake2"; }
    std::string fingerprint() const override { return std::string(name()); }
    tiers::CompileResult compile(const kir::Kernel&, const kir::Specialization&) override {
        tiers::CompileResult r;
        r.bailout = tiers::Bailout::unsupported_op;
        r.detail = "needs the group";
        return r;
    }
    tiers::CompileResult compile_group(const tiers::GroupSource& src, const kir::Specialization& spec) override {
        requests.push_back(spec);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        tiers::CompileResult r;
        if (decline) {
            r.bailout = tiers::Bailout::unsupported_op;
            r.detail = "declined by the test";
            return r;
        }
        r.kernel = interp::interp_tier()->compile_group(src, spec).kernel;
        return r;
    }
    std::vector<kir::Specialization> requests;
    bool decline = false;

private:
    int level_;
};

// One function of x[B, N] -> relu(x * 2 + 1): one elementwise group with params B and N.
struct Rig {
    explicit Rig(jit::Tunables t = tunables()) {
        Graph g = trace("policy", {arg("x", DType::f32, {dyn("B"), dyn("N")})},
                        [](const std::vector<Var>& in) { return std::vector<Var>{relu(in[0] * 2.0 + 1.0)}; });
        exe = jit::lower_function(g.impl());
        REQUIRE(exe->groups.size() == 1);
        REQUIRE(exe->groups[0]->kernel);
        profile.emplace(*exe->graph, exe->groups.size());
        jit::EngineResources r;
        r.tier1 = tier1;
        r.tier2 = tier2;
        r.costs = costs;
        manager.emplace(exe, *profile, t, r);
    }
    static jit::Tunables tunables() {
        jit::Tunables t;
        t.async_compile = false;
        t.tier1_threshold = 1'000'000;  // far away: only the time model decides
        t.tier2_threshold = 1'000'000;
        return t;
    }
    jit::GroupRuntime& group() { return *exe->groups[0]; }
    // The params of a call at x[b, n], in the kernel's order.
    std::vector<std::int64_t> params(std::int64_t b, std::int64_t n) {
        const kir::Kernel& k = *group().kernel;
        std::vector<std::int64_t> p;
        for (const auto& src : k.param_sources) p.push_back(src.dim == 0 ? b : n);
        return p;
    }
    // One call of the group at x[b, n] on `kind`, timed at `ns`, as the executor reports it.
    void call(std::int64_t b, std::int64_t n, CodeKind kind, double ns) {
        profiling::GroupProfile& gp = profile->group(0);
        gp.calls.fetch_add(1);
        if (kind != CodeKind::interpreted) gp.compiled_calls.fetch_add(1);
        const auto t = static_cast<std::uint64_t>(ns);
        gp.record_time(kind, t, 1);
        const auto p = params(b, n);
        manager->group_ran(group(), p, kind, gp.record_signature(p, kind, t, 1, 1));
    }
    std::size_t versions() { return group().code()->versions.size(); }
    // Whether the group's spec binds param `dim` of the input (0: B, 1: N).
    bool binds(const kir::Specialization& s, int dim) {
        const kir::Kernel& k = *group().kernel;
        for (std::size_t p = 0; p < k.param_sources.size(); ++p)
            if (k.param_sources[p].dim == dim && s.params[p]) return true;
        return false;
    }

    std::shared_ptr<RecordingTier> tier1 = std::make_shared<RecordingTier>(1);
    std::shared_ptr<RecordingTier> tier2 = std::make_shared<RecordingTier>(2);
    std::shared_ptr<jit::CostModel> costs = std::make_shared<jit::CostModel>();
    std::shared_ptr<const jit::Executable> exe;
    std::optional<profiling::FunctionProfile> profile;
    std::optional<jit::TierManager> manager;
};

}  // namespace

TEST_CASE("tierup policy: the estimate weighs the saving over the expected calls against the cost") {
    // 1 ms a call, 4x faster next: 0.75 ms saved a call, over max(10 calls, 16) = 12 ms.
    jit::TierUpEstimate e = jit::estimate_tierup(1e6, 0.25, 10, 16, 11'000, 1);
    CHECK(e.future_calls == 16);
    CHECK(e.saving_us == doctest::Approx(12'000));
    CHECK(e.pays());
    CHECK_FALSE(jit::estimate_tierup(1e6, 0.25, 10, 16, 13'000, 1).pays());
    CHECK_FALSE(jit::estimate_tierup(1e6, 0.25, 10, 16, 11'000, 2).pays());  // backoff doubles the cost
    CHECK(jit::estimate_tierup(1e6, 0.25, 100, 16, 13'000, 1).pays());       // 100 calls so far: 100 to come
    CHECK_FALSE(jit::estimate_tierup(0, 0.25, 100, 16, 0, 1).pays());         // never timed: nothing to weigh
    CHECK(jit::estimate_tierup(1e3, 1.0, 1, 16, 0, 1).pays());                // made already: free to take
}

TEST_CASE("tierup policy: the cost model starts from estimates and takes what it measures") {
    jit::CostModel m;
    using passes::GroupKind;
    const double initial = m.compile_us(2, GroupKind::matmul);
    CHECK(initial > m.compile_us(1, GroupKind::matmul));  // tier 2 costs more than tier 1
    m.record_compile(2, GroupKind::matmul, 5'000);
    CHECK(m.compile_us(2, GroupKind::matmul) == 5'000);  // the first measurement replaces the estimate
    CHECK(m.compiles_measured(2, GroupKind::matmul) == 1);
    m.record_compile(2, GroupKind::matmul, 15'000);
    CHECK(m.compile_us(2, GroupKind::matmul) > 5'000);
    CHECK(m.compile_us(2, GroupKind::matmul) < 15'000);
    CHECK(m.compile_us(2, GroupKind::conv) != 5'000);  // another kind keeps its own
    const double before = m.time_ratio(CodeKind::generic, CodeKind::specialised, GroupKind::elementwise);
    for (int i = 0; i < 20; ++i) m.record_ratio(CodeKind::generic, CodeKind::specialised, GroupKind::elementwise, 1.0);
    const double after = m.time_ratio(CodeKind::generic, CodeKind::specialised, GroupKind::elementwise);
    CHECK(before < 0.99);
    CHECK(after > before);
    CHECK(after == doctest::Approx(1.0).epsilon(0.01));  // specialising this kind measured no gain
}

TEST_CASE("tierup policy: a group with a large measured time compiles on its first call") {
    Rig rig;
    rig.tier1->decline = true;  // as tier 1 does for f16 matmul groups
    rig.call(8, 64, CodeKind::interpreted, 30e6);  // 30 ms on the interpreter
    REQUIRE(rig.tier2->requests.size() == 1);
    CHECK(rig.binds(rig.tier2->requests[0], 0));  // one signature seen: a specialisation
    CHECK(rig.binds(rig.tier2->requests[0], 1));
    CHECK(rig.versions() == 1);
    CHECK(rig.tier1->requests.size() == 1);  // tier 1 was asked too (it declined)
    CHECK(rig.manager->describe(rig.group()).find("tier 1 declined it") != std::string::npos);
}

TEST_CASE("tierup policy: a cheap group waits, and compiles at the thresholds") {
    jit::Tunables t = Rig::tunables();
    t.tier1_threshold = 5;
    t.tier2_threshold = 12;
    Rig rig(t);
    for (int i = 1; i <= 4; ++i) rig.call(8, 64, CodeKind::interpreted, 2e3);  // 2 µs a call
    CHECK(rig.tier1->requests.empty());
    CHECK(rig.tier2->requests.empty());
    INFO(rig.manager->describe(rig.group()));
    CHECK(rig.manager->describe(rig.group()).find("waits for") != std::string::npos);
    rig.call(8, 64, CodeKind::interpreted, 2e3);  // the 5th: tier 1's bound
    CHECK(rig.tier1->requests.size() == 1);
    CHECK(rig.tier2->requests.empty());
    for (int i = 6; i <= 11; ++i) rig.call(8, 64, CodeKind::baseline, 1e3);
    CHECK(rig.tier2->requests.empty());
    rig.call(8, 64, CodeKind::baseline, 1e3);  // the 12th call below tier 2: tier 2's bound
    CHECK(rig.tier2->requests.size() == 1);
}

TEST_CASE("tierup policy: a bound compiles no code the engine measured to be no faster") {
    jit::Tunables t = Rig::tunables();
    t.tier2_threshold = 3;
    Rig rig(t);
    rig.tier1->decline = true;
    for (int i = 0; i < 30; ++i)  // this engine measured tier 2 slower than the interpreter here
        rig.costs->record_ratio(CodeKind::interpreted, CodeKind::specialised, passes::GroupKind::elementwise, 2.0);
    for (int i = 0; i < 5; ++i) rig.call(8, 64, CodeKind::interpreted, 1e6);
    CHECK(rig.tier2->requests.empty());
    // With KILN_TIERUP=count the bound is the bound.
    t.by_time = false;
    Rig counted(t);
    counted.costs = rig.costs;
    for (int i = 0; i < 3; ++i) counted.call(8, 64, CodeKind::interpreted, 1e6);
    CHECK(counted.tier2->requests.size() == 1);
}

TEST_CASE("tierup policy: KILN_TIERUP=count ignores the time model") {
    jit::Tunables t = Rig::tunables();
    t.by_time = false;
    t.tier1_threshold = 3;
    Rig rig(t);
    rig.call(8, 64, CodeKind::interpreted, 30e6);
    rig.call(8, 64, CodeKind::interpreted, 30e6);
    CHECK(rig.tier1->requests.empty());
    CHECK(rig.tier2->requests.empty());
    rig.call(8, 64, CodeKind::interpreted, 30e6);
    CHECK(rig.tier1->requests.size() == 1);
    CHECK(rig.tier2->requests.empty());
}

TEST_CASE("tierup policy: churning dims get a generic version before any specialisation") {
    Rig rig;
    rig.tier1->decline = true;
    // 1 ms a call: a tier-2 compile (15 ms estimated for an elementwise group) pays once
    // 0.8 ms x the calls so far exceeds it, at the 19th call; by then B took 19 values.
    std::int64_t calls = 0;
    while (rig.tier2->requests.empty() && calls < 100) {
        ++calls;
        rig.call(calls, 64, CodeKind::interpreted, 1e6);
    }
    REQUIRE(rig.tier2->requests.size() == 1);
    CHECK(calls > 1);
    const kir::Specialization& first = rig.tier2->requests[0];
    CHECK_FALSE(rig.binds(first, 0));  // B varied: left free
    CHECK(rig.binds(first, 1));        // N never changed: bound
    const std::vector<std::int64_t> p = rig.params(1000, 64);
    REQUIRE(rig.versions() == 1);
    const jit::CompiledVersion& v = rig.group().code()->versions[0];
    CHECK(v.generic);
    CHECK(v.guard.check(p.data()));  // serves a B never seen
    const std::vector<std::int64_t> other_n = rig.params(3, 65);
    CHECK_FALSE(v.guard.check(other_n.data()));
    // A changed N fails its guard (and costs 30 ms on the interpreter): a second generic
    // version binds nothing.
    rig.call(3, 65, CodeKind::interpreted, 30e6);
    REQUIRE(rig.tier2->requests.size() == 2);
    CHECK_FALSE(rig.binds(rig.tier2->requests[1], 0));
    CHECK_FALSE(rig.binds(rig.tier2->requests[1], 1));
    // Generic versions are used up: no third one, whatever comes.
    for (int i = 0; i < 30; ++i) rig.call(5, 66 + i, CodeKind::interpreted, 30e6);
    std::size_t generic = 0;
    for (const auto& ver : rig.group().code()->versions) generic += ver.generic ? 1 : 0;
    CHECK(generic == 2);
}

TEST_CASE("tierup policy: a specialisation is compiled only when its gain pays") {
    Rig rig;
    rig.tier1->decline = true;
    rig.call(1, 64, CodeKind::interpreted, 1e6);
    rig.call(2, 64, CodeKind::interpreted, 1e6);
    rig.call(3, 64, CodeKind::interpreted, 30e6);  // pays: a generic version (B varied)
    REQUIRE(rig.tier2->requests.size() == 1);
    CHECK_FALSE(rig.binds(rig.tier2->requests[0], 0));
    // 50 µs a call on generic code at B=7: a specialisation would save ~10% of it, 5 µs a
    // call, which 200 calls do not make worth a 15 ms compile.
    for (int i = 0; i < 200; ++i) rig.call(7, 64, CodeKind::generic, 50e3);
    CHECK(rig.tier2->requests.size() == 1);
    CHECK(rig.group().tierup->specializations.load() == 0);
    INFO(rig.manager->describe(rig.group()));
    CHECK(rig.manager->describe(rig.group()).find("waits for a tier-2 specialisation") != std::string::npos);
    // 200 ms a call at B=9: 20 ms saved a call; over 16 expected calls it pays at once.
    rig.call(9, 64, CodeKind::generic, 200e6);
    CHECK(rig.tier2->requests.size() == 1);  // one timed call is not enough to judge
    rig.call(9, 64, CodeKind::generic, 200e6);
    REQUIRE(rig.tier2->requests.size() == 2);
    CHECK(rig.binds(rig.tier2->requests[1], 0));
    CHECK(rig.group().tierup->specializations.load() == 1);
}

TEST_CASE("tierup policy: tiers are compared by their fastest timed calls, so one slow call does not pin tier 1") {
    Rig rig;
    rig.call(1, 64, CodeKind::interpreted, 30e6);
    REQUIRE(rig.versions() == 2);
    for (int i = 0; i < 2; ++i) rig.call(1, 64, CodeKind::baseline, 1e6);
    // B=1: tier 2's first timed call 4 ms (a busy host, cold caches), the next ones 1 ms, as
    // fast as tier 1: its mean of the first two (2.5 ms) is past 1.25 x tier 1, its best is not.
    rig.call(1, 64, CodeKind::specialised, 4e6);
    rig.call(1, 64, CodeKind::specialised, 1e6);
    rig.call(1, 64, CodeKind::specialised, 1e6);
    CHECK(rig.group().code()->tier1_signatures.empty());
    // B=2: tier 2 three times slower on every call: tier 1 there.
    for (int i = 0; i < 2; ++i) rig.call(2, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 2; ++i) rig.call(2, 64, CodeKind::specialised, 3e6);
    REQUIRE(rig.group().code()->tier1_signatures.size() == 1);
    CHECK(rig.group().code()->tier1_signatures[0] == rig.params(2, 64));
    // The signature's record keeps both: the mean (for the cost model) and the best.
    for (const profiling::GroupSignature& s : rig.profile->group(0).signatures())
        if (s.params == rig.params(1, 64)) {
            CHECK(s.time.best_ns(CodeKind::specialised) == doctest::Approx(1e6));
            CHECK(s.time.mean_ns(CodeKind::specialised) == doctest::Approx(2e6));
        }
}

TEST_CASE("tierup policy: a signature whose tier-2 code runs clearly slower than its tier-1 code runs tier 1 (measured, or on trial)") {
    Rig rig;
    rig.call(1, 64, CodeKind::interpreted, 30e6);  // tier 1 (and a tier-2 specialisation) at once
    REQUIRE(rig.tier1->requests.size() == 1);
    REQUIRE(rig.tier2->requests.size() == 1);
    REQUIRE(rig.versions() == 2);
    const auto p1 = rig.params(1, 64), p2 = rig.params(2, 64);
    // B=1: tier 1 ran it in 1 ms; tier 2 takes 2 ms. One timed call is not enough to judge.
    for (int i = 0; i < 2; ++i) rig.call(1, 64, CodeKind::baseline, 1e6);
    rig.call(1, 64, CodeKind::specialised, 2e6);
    CHECK(rig.group().code()->tier1_signatures.empty());
    rig.call(1, 64, CodeKind::specialised, 2e6);
    REQUIRE(rig.group().code()->tier1_signatures.size() == 1);
    CHECK(rig.group().code()->tier1_signatures[0] == p1);
    INFO(rig.manager->describe(rig.group()));
    CHECK(rig.manager->describe(rig.group()).find("runs tier 1 at 1 signature") != std::string::npos);
    // The executor's choice: tier 1 at B=1 (marked as chosen, not a failed guard)...
    bool preferred = false;
    const jit::CompiledVersion* v = jit::select_version(*rig.group().code(), p1.data(), &preferred);
    REQUIRE(v != nullptr);
    CHECK(v->tier == 1);
    CHECK(preferred);
    // ... and the specialisation's guard still decides elsewhere (B=2 fails it: tier 1, not chosen).
    preferred = false;
    v = jit::select_version(*rig.group().code(), p2.data(), &preferred);
    REQUIRE(v != nullptr);
    CHECK_FALSE(preferred);
    // A signature timed on tier 2 (2 ms) but never on tier 1 runs tier 1 on trial when the
    // interpreter's time there says tier 1 should be clearly faster (1 ms x the elementwise
    // estimate of 0.3); two timed tier-1 calls decide: at B=3 tier 1 is no faster (2 ms
    // against 2 ms), so B=3 goes back to tier 2.
    const auto p3 = rig.params(3, 64);
    rig.call(3, 64, CodeKind::interpreted, 1e6);
    rig.call(3, 64, CodeKind::specialised, 2e6);
    CHECK(rig.group().code()->tier1_signatures.size() == 1);
    rig.call(3, 64, CodeKind::specialised, 2e6);
    REQUIRE(rig.group().code()->tier1_signatures.size() == 2);  // on trial
    preferred = false;
    v = jit::select_version(*rig.group().code(), p3.data(), &preferred);
    REQUIRE(v != nullptr);
    CHECK(v->tier == 1);
    CHECK(preferred);
    rig.call(3, 64, CodeKind::baseline, 2e6);
    CHECK(rig.group().code()->tier1_signatures.size() == 2);  // one timed call does not decide
    rig.call(3, 64, CodeKind::baseline, 2e6);
    CHECK(rig.group().code()->tier1_signatures.size() == 1);  // back to tier 2
    CHECK(rig.group().code()->tier1_signatures[0] == p1);
    // At B=4 the trial shows tier 1 three times as fast: B=4 stays on tier 1.
    rig.call(4, 64, CodeKind::interpreted, 1e6);
    for (int i = 0; i < 2; ++i) rig.call(4, 64, CodeKind::specialised, 3e6);
    for (int i = 0; i < 2; ++i) rig.call(4, 64, CodeKind::baseline, 1e6);
    CHECK(rig.group().code()->tier1_signatures.size() == 2);
    CHECK(rig.group().code()->tier1_signatures[1] == rig.params(4, 64));
    // No trial where tier 2 runs as fast as tier 1 is expected to (B=5: 0.3 ms against the
    // interpreter's 1 ms), nor where the interpreter never ran (B=6).
    rig.call(5, 64, CodeKind::interpreted, 1e6);
    for (int i = 0; i < 3; ++i) rig.call(5, 64, CodeKind::specialised, 0.3e6);
    for (int i = 0; i < 3; ++i) rig.call(6, 64, CodeKind::specialised, 3e6);
    CHECK(rig.group().code()->tier1_signatures.size() == 2);
    // A signature where tier 2 is within the noise (1.1x) keeps tier 2.
    Rig rig2;
    rig2.call(1, 64, CodeKind::interpreted, 30e6);
    for (int i = 0; i < 2; ++i) rig2.call(1, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 4; ++i) rig2.call(1, 64, CodeKind::specialised, 1.1e6);
    CHECK(rig2.group().code()->tier1_signatures.empty());
    // KILN_TIERUP=count takes the thresholds' code as it is.
    jit::Tunables t = Rig::tunables();
    t.by_time = false;
    t.tier1_threshold = 1;
    t.tier2_threshold = 1;
    Rig rig3(t);
    rig3.call(1, 64, CodeKind::interpreted, 30e6);
    REQUIRE(rig3.versions() == 2);
    for (int i = 0; i < 2; ++i) rig3.call(1, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 4; ++i) rig3.call(1, 64, CodeKind::specialised, 3e6);
    CHECK(rig3.group().code()->tier1_signatures.empty());
}

TEST_CASE("tierup policy: a pinned signature runs tier 2 again after 64 tier-1 calls, and keeps it where it is no slower now") {
    Rig rig;
    rig.call(1, 64, CodeKind::interpreted, 30e6);
    REQUIRE(rig.versions() == 2);
    auto pins = [&] { return rig.group().code()->tier1_signatures.size(); };
    // B=1: tier 2's first two timed calls came at a busy moment (2 ms against tier 1's 1 ms).
    for (int i = 0; i < 2; ++i) rig.call(1, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 2; ++i) rig.call(1, 64, CodeKind::specialised, 2e6);
    REQUIRE(pins() == 1);
    for (int i = 0; i < 63; ++i) rig.call(1, 64, CodeKind::baseline, 1e6);
    CHECK(pins() == 1);
    rig.call(1, 64, CodeKind::baseline, 1e6);  // the 64th: tier 2 runs again
    CHECK(pins() == 0);
    rig.call(1, 64, CodeKind::specialised, 0.9e6);
    CHECK(pins() == 0);
    rig.call(1, 64, CodeKind::specialised, 0.9e6);  // two new timed calls: no slower than tier 1
    CHECK(pins() == 0);
    // It stays on tier 2: late tier-1 calls (ones that chose their code before) and more
    // tier-2 calls change nothing.
    for (int i = 0; i < 300; ++i) rig.call(1, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 4; ++i) rig.call(1, 64, CodeKind::specialised, 0.9e6);
    CHECK(pins() == 0);
    // B=2: tier 2 clearly slower at every recheck (3 ms against 1 ms): tier 1 again each time,
    // the rechecks 64, 256 and 1024 tier-1 calls apart, then for good.
    for (int i = 0; i < 2; ++i) rig.call(2, 64, CodeKind::baseline, 1e6);
    for (int i = 0; i < 2; ++i) rig.call(2, 64, CodeKind::specialised, 3e6);
    REQUIRE(pins() == 1);
    for (const int gap : {64, 256, 1024}) {
        for (int i = 0; i < gap - 1; ++i) rig.call(2, 64, CodeKind::baseline, 1e6);
        CHECK(pins() == 1);
        rig.call(2, 64, CodeKind::baseline, 1e6);
        CHECK(pins() == 0);
        for (int i = 0; i < 2; ++i) rig.call(2, 64, CodeKind::specialised, 3e6);
        CHECK(pins() == 1);
    }
    for (int i = 0; i < 20000; ++i) rig.call(2, 64, CodeKind::baseline, 1e6);
    CHECK(pins() == 1);
    CHECK(rig.group().code()->tier1_signatures[0] == rig.params(2, 64));
}

TEST_CASE("tierup policy: a call timed while a compile runs counts untimed in its signature's record") {
    using profiling::CompileActivity;
    // The activity marks: quiet only where no compile ran at the mark nor began or ended since.
    const CompileActivity::Mark before = CompileActivity::mark();
    CHECK(CompileActivity::quiet_since(before));
    {
        CompileActivity::Scope compiling;
        CHECK_FALSE(CompileActivity::quiet_since(before));
        const CompileActivity::Mark during = CompileActivity::mark();
        CHECK_FALSE(CompileActivity::quiet_since(during));
    }
    CHECK_FALSE(CompileActivity::quiet_since(before));
    CHECK(CompileActivity::quiet_since(CompileActivity::mark()));
    // The executor: three interpreted calls of one group, the second beside a compile.
    Graph g = trace("quiet", {arg("x", DType::f32, {4, 8})},
                    [](const std::vector<Var>& in) { return std::vector<Var>{relu(in[0] * 2.0 + 1.0)}; });
    const auto exe = jit::lower_function(g.impl());
    REQUIRE(exe->groups.size() == 1);
    const Tensor x = Tensor::randn({4, 8}, 1);
    const auto shapes = jit::make_shape_plan(*exe, {x.shape()}, "test");
    profiling::FunctionProfile profile(*exe->graph, exe->groups.size());
    struct Seen final : jit::CallObserver {
        bool compiles() const override { return true; }
        void group_ran(jit::GroupRuntime&, const std::vector<std::int64_t>&, CodeKind,
                       const profiling::SignatureObservation& sig) override {
            timed.push_back(sig.time.timed[profiling::index_of(CodeKind::interpreted)]);
        }
        std::vector<std::uint64_t> timed;
    } seen;
    const jit::CallPlan call{*exe, *shapes, profile, &seen};
    const std::vector<Tensor> in{x};
    int top = 0;
    const Tensor want = jit::run_groups(call, in, &top)[0];
    {
        CompileActivity::Scope compiling;
        CHECK(ref::max_rel_diff(jit::run_groups(call, in, &top)[0], want) == 0.0);
    }
    jit::run_groups(call, in, &top);
    CHECK(seen.timed == std::vector<std::uint64_t>{1, 1, 2});
    CHECK(profile.group(0).timed_calls(CodeKind::interpreted) == 3);  // the group's totals keep all three
}

TEST_CASE("tierup policy: what a group measured on two kinds of code teaches the cost model") {
    Rig rig;
    const double before = rig.costs->time_ratio(CodeKind::interpreted, CodeKind::baseline, passes::GroupKind::elementwise);
    for (int i = 0; i < 2; ++i) rig.call(8, 64, CodeKind::interpreted, 1e6);
    for (int i = 0; i < 3; ++i) rig.call(8, 64, CodeKind::baseline, 0.5e6);  // measured 2x, not the estimate
    const double after = rig.costs->time_ratio(CodeKind::interpreted, CodeKind::baseline, passes::GroupKind::elementwise);
    CHECK(before < 0.45);
    CHECK(after > before);
    CHECK(after < 0.5);
}

#if defined(KILN_HAVE_LLVM)
TEST_CASE("tierup policy (engine): an expensive group compiles after its first call, a cheap one waits") {
    Options o;  // the default policy (KILN_TIERUP=time), thresholds far away
    o.tier1_threshold = 1'000'000;
    o.tier2_threshold = 1'000'000;
    o.async_compile = false;
    Tensor w = Tensor::randn({1024, 1024}, 1);
    Graph big = trace("big", {arg("x", DType::f32, {1024, 1024})},
                      [&](const std::vector<Var>& in) { return std::vector<Var>{matmul(in[0], w)}; });
    Graph small = trace("small", {arg("x", DType::f32, {4})},
                        [](const std::vector<Var>& in) { return std::vector<Var>{in[0] + 1.0}; });
    Engine engine(o);
    Function fb = engine.load(big), fs = engine.load(small);
    Tensor xb = Tensor::randn({1024, 1024}, 2), xs = Tensor::randn({4}, 3);
    fb({xb});  // 2 GFLOP on the interpreter: tens of milliseconds
    fb({xb});
    FunctionStats sb = fb.stats();
    INFO(sb.to_json());
    CHECK(sb.compiles >= 1);
    CHECK(sb.calls_by_tier[2] == 1);  // the second call ran compiled
    for (int i = 0; i < 20; ++i) fs({xs});  // microseconds a call
    FunctionStats ss = fs.stats();
    INFO(ss.to_json());
    // Tier 1 may have paid (its compile costs a fraction of a millisecond, and a group's
    // first call is slow: cold caches); tier 2 does not.
    CHECK(ss.groups[0].compiles_by_tier[2] == 0);
    CHECK(ss.calls_by_tier[2] == 0);
    CHECK(ss.groups[0].tierup.find("waits for") != std::string::npos);
    CHECK(ss.groups[0].us_per_call_by_tier[0] > 0);
}

TEST_CASE("tierup policy (engine): code another function made already is taken at the first call") {
    Options o;
    o.tier1_threshold = 1'000'000;
    o.tier2_threshold = 1'000'000;
    o.async_compile = false;
    Graph g = trace("twice", {arg("x", DType::f32, {4})},
                    [](const std::vector<Var>& in) { return std::vector<Var>{in[0] * 3.0 + 1.0}; });
    Engine engine(o);
    Function f1 = engine.load(g);
    f1.warmup({{{4}}});
    REQUIRE(f1.stats().compiles >= 1);
    Function f2 = engine.load(g);
    Tensor x = Tensor::randn({4}, 1);
    f2({x});  // cheap, but its code is in the engine's code cache: free to take
    f2({x});
    FunctionStats s = f2.stats();
    INFO(s.to_json());
    CHECK(s.code_cache_hits >= 1);
    CHECK(s.calls_by_tier[2] == 1);
}

TEST_CASE("tierup policy (engine): a restarted process finds its versions in KILN_CACHE_DIR") {
    const std::filesystem::path dir_path =
        std::filesystem::temp_directory_path() / ("kiln-tierup-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_path);
    const std::string dir = dir_path.string();
    Tensor w = Tensor::randn({32, 16}, 1);
    Graph g = trace("recorded", {arg("x", DType::f32, {dyn("B"), 32})},
                    [&](const std::vector<Var>& in) { return std::vector<Var>{relu(matmul(in[0], w))}; });
    Options o = ref::jit_options(ref::kNever, 2);
    o.cache_dir = dir;
    std::size_t held = 0;
    {
        Engine e1(o);
        Function f = e1.load(g);
        for (std::int64_t b : {4, 4, 4, 9, 9, 9, 9})  // a specialisation for B=4, then a generic version
            f({Tensor::randn({b, 32}, static_cast<std::uint64_t>(b))});
        const FunctionStats s = f.stats();
        INFO(s.to_json());
        REQUIRE(s.compiles >= 2);
        for (const auto& gs : s.groups) held += gs.versions;
        CHECK(f.warmup() == held);  // what it holds is what it recorded
    }
    {
        // Explicitly, before traffic: every recorded version, loaded instead of compiled.
        Engine e2(o);
        Function f = e2.load(g);
        CHECK(f.warmup() == held);
        f({Tensor::randn({4, 32}, 4)});
        f({Tensor::randn({13, 32}, 13)});
        const FunctionStats s = f.stats();
        INFO(s.to_json());
        CHECK(s.compiles == 0);
        CHECK(s.persistent_cache_hits == held);
        CHECK(s.calls_by_tier[2] == 2);
    }
    {
        // By default (KILN_TIERUP=time, far thresholds): code already in the cache is free to
        // take, so the call after the first runs it.
        Options t = o;
        t.tierup = "time";
        t.tier2_threshold = 1'000'000;
        Engine e3(t);
        Function f = e3.load(g);
        f({Tensor::randn({4, 32}, 4)});
        f({Tensor::randn({4, 32}, 4)});
        const FunctionStats s = f.stats();
        INFO(s.to_json());
        CHECK(s.compiles == 0);
        CHECK(s.persistent_cache_hits >= 1);
        CHECK(s.calls_by_tier[2] == 1);
    }
    CHECK(Engine(ref::jit_options(ref::kNever, 2)).load(g).warmup() == 0);  // no KILN_CACHE_DIR: nothing recorded
    std::filesystem::remove_all(dir_path);
}
#else
TEST_CASE("tierup policy (engine): skipped") { kiln::test::lacks_tier(2); }
#endif

TEST_CASE("tierup policy: the record of a function's tier-2 versions reads back as written") {
    std::vector<jit::RecordedVersion> v = {{0, 0x1234abcdULL, false, {std::int64_t{8}, std::int64_t{64}}},
                                           {3, 0xffffffffffffffffULL, true, {std::nullopt, std::int64_t{-1}}},
                                           {7, 1, true, {}}};
    const std::string text = jit::format_versions(v);
    CHECK(jit::parse_versions(text) == v);
    // Damaged lines are skipped, the others kept.
    const std::string damaged = "v1 0 zz s 1 3\nv2 0 1 s 0\nv1 1 2 x 0\nv1 1 2 s 2 5\nv1 1 2 s 1 5 6\n" + text;
    CHECK(jit::parse_versions(damaged) == v);
    CHECK(jit::parse_versions("").empty());
}
