// Device code in the engine's code cache (jit/tiering/device_tiering.h): the device tier-up
// policy admits what it compiles into the device's cache, shares code between groups with
// the same kernel IR, and takes evicted code out of the groups that published it, which then
// request it again after another threshold of calls. The tier is a fake that records its
// compiles and returns code that is never launched (nothing here runs on a device): what is
// checked is the bookkeeping, which a GPU run cannot see from outside.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/pipeline.h"
#include "jit/tiering/device_tiering.h"

#include <atomic>
#include <memory>
#include <vector>

using namespace kiln;

namespace {

class UnlaunchedKernel final : public tiers::CompiledKernel {
public:
    tiers::Place place() const override { return tiers::Place::device; }
    void launch(const tiers::LaunchArgs&) const override { FAIL("device code ran in a test without a device"); }
    std::size_t code_bytes() const override { return 1000; }
};

class CountingTier final : public tiers::Tier {
public:
    int level() const override { return 2; }
    std::string_view name() const override { return "fake_cuda"; }
    std::string fingerprint() const override { return "fake_cuda 1"; }
    tiers::CompileResult compile(const kir::Kernel&, const kir::Specialization& spec) override {
        compiles.fetch_add(1);
        bound.push_back(spec);
        tiers::CompileResult r;
        r.kernel = std::make_shared<UnlaunchedKernel>();
        return r;
    }
    std::atomic<int> compiles{0};
    std::vector<kir::Specialization> bound;
};

// x -> exp(x) or tanh(x): one group each, with one param (n).
std::shared_ptr<const jit::Executable> lowered(bool use_exp) {
    Graph g = trace("f", {arg("x", DType::f32, {dyn("n")})},
                    [use_exp](const std::vector<Var>& in) { return std::vector<Var>{use_exp ? exp(in[0]) : tanh(in[0])}; });
    auto exe = jit::lower_function(g.impl());
    REQUIRE(exe->groups.size() == 1);
    REQUIRE(exe->groups[0]->kernel);
    return exe;
}

jit::Tunables tunables() {
    jit::Tunables t;
    t.tier1_threshold = 2;
    t.tier2_threshold = 3;
    t.async_compile = false;  // compiles run in group_ran: every step below is deterministic
    return t;
}

// One function on cuda:0 with the fake tier and the given device cache.
struct DeviceRig {
    DeviceRig(std::shared_ptr<const jit::Executable> exe, std::shared_ptr<CountingTier> tier,
              std::shared_ptr<jit::CodeCache> cache)
        : manager(std::move(exe), Device::cuda(0), std::move(tier), tunables(), nullptr, nullptr, nullptr,
                  std::move(cache)) {}
    // One call of the group at params {n}, as the executor makes it: a call that ran a
    // version touches its cache entry (recency), then the policy hears of it.
    void call(std::int64_t n, int ran_tier = 0) {
        code().calls.fetch_add(1);
        for (const auto& v : code().code.load()->versions)
            if (v.tier == ran_tier) {
                v.entry->touch();
                break;
            }
        manager.group_ran(0, {n}, ran_tier);
    }
    jit::DeviceGroupCode& code() { return *manager.state().groups[0]; }
    std::vector<int> tiers() {
        std::vector<int> t;
        for (const auto& v : code().code.load()->versions) t.push_back(v.tier);
        return t;
    }
    jit::DeviceTierManager manager;
};

}  // namespace

TEST_CASE("device code cache: compiles are admitted, shared between groups, evicted and requested again") {
    auto tier = std::make_shared<CountingTier>();
    // Room for two kernels of 1000 bytes: a third evicts the least recently run.
    auto cache = std::make_shared<jit::CodeCache>(2500);
    DeviceRig a(lowered(true), tier, cache), b(lowered(false), tier, cache), twin(lowered(true), tier, cache);

    // Two calls: the generic kernel (tier 1); three calls at n = 64: a specialisation.
    a.call(64);
    CHECK(tier->compiles == 0);
    a.call(64);
    CHECK(tier->compiles == 1);
    CHECK(a.tiers() == std::vector<int>{1});
    a.call(64);
    CHECK(tier->compiles == 2);
    CHECK(a.tiers() == std::vector<int>{2, 1});  // the specialisation first
    CHECK(cache->stats().entries == 2);
    CHECK(cache->stats().bytes == 2000);

    // Another function with the same kernel IR gets a's generic kernel from the cache.
    twin.call(64);
    twin.call(64);
    CHECK(tier->compiles == 2);
    CHECK(twin.tiers() == std::vector<int>{1});
    CHECK(twin.code().code.load()->versions[0].entry == a.code().code.load()->versions.back().entry);
    CHECK(cache->stats().hits == 1);

    // Run a's specialisation last: b's generic kernel then evicts the generic one, which a
    // and its twin both lose; a keeps its specialisation.
    a.code().code.load()->versions.front().entry->touch();
    b.call(8);
    b.call(8);
    CHECK(tier->compiles == 3);
    CHECK(cache->stats().evictions == 1);
    CHECK(cache->stats().entries == 2);
    CHECK(a.tiers() == std::vector<int>{2});
    CHECK(twin.tiers().empty());
    CHECK(a.code().evictions == 1);
    CHECK(twin.code().evictions == 1);

    // The policy hears of the eviction at the next call below tier 2 and asks for the generic
    // kernel again after another tier-1 threshold (2) of calls from there; compiling it
    // evicts b's, the least recently used.
    a.call(64, 2);  // a call that ran the specialisation: the policy has nothing to ask
    CHECK(tier->compiles == 3);
    a.call(128);
    a.call(128);
    CHECK(tier->compiles == 3);
    a.call(128);
    CHECK(tier->compiles == 4);
    CHECK(a.tiers() == std::vector<int>{2, 1});
    CHECK(b.tiers().empty());
    CHECK(cache->stats().evictions == 2);
    CHECK(cache->stats().bytes <= 2500);
}

TEST_CASE("device code cache: an evicted specialisation comes back after another tier-2 threshold") {
    auto tier = std::make_shared<CountingTier>();
    auto cache = std::make_shared<jit::CodeCache>(1500);  // one kernel at a time
    DeviceRig a(lowered(true), tier, cache);
    a.call(64);
    a.call(64);  // generic
    a.call(64);  // specialised on n = 64: evicts the generic kernel
    CHECK(tier->compiles == 2);
    CHECK(a.tiers() == std::vector<int>{2});
    CHECK(a.code().evictions == 1);
    REQUIRE(tier->bound.size() == 2);
    CHECK(tier->bound[1].params == std::vector<std::optional<std::int64_t>>{64});
    // Calls at n = 32 run tier 0 (no generic code): the third brings the generic kernel back
    // (the first hears of the eviction), which evicts the specialisation.
    a.call(32);
    a.call(32);
    CHECK(tier->compiles == 2);
    a.call(32);
    CHECK(tier->compiles == 3);
    CHECK(a.tiers() == std::vector<int>{1});
    // The specialisation at 64 needs another three calls there (run on the generic code).
    a.call(64, 1);
    a.call(64, 1);
    CHECK(tier->compiles == 3);
    a.call(64, 1);
    CHECK(tier->compiles == 4);
    CHECK(a.tiers() == std::vector<int>{2});
    CHECK(cache->stats().evictions == 3);
}

TEST_CASE("device code cache: code evicted before it was published is not published") {
    auto cache = std::make_shared<jit::CodeCache>(1500);
    auto user = std::make_shared<jit::DeviceGroupCode>();
    std::vector<jit::Evicted> evicted;
    auto first = cache->insert("first", std::make_shared<UnlaunchedKernel>(), 1, user, &evicted);
    auto second = cache->insert("second", std::make_shared<UnlaunchedKernel>(), 2, user, &evicted);
    REQUIRE(evicted.size() == 1);
    CHECK(!first->resident);
    jit::DeviceVersion v;
    v.code = first->code;
    v.entry = first;
    CHECK_FALSE(jit::publish_device_version(*user, v));
    CHECK(user->code.load()->versions.empty());
    jit::drop_device_code(evicted);  // nothing was published: nothing to record
    CHECK(user->evictions == 0);
    CHECK_FALSE(user->has_evicted);
}
