#include "jit/tiering/tier_manager.h"

#include "jit/tiering/version_record.h"
#include "profiling/compile_activity.h"

#include "src/support/check.h"
#include "src/support/limits.h"
#include "src/support/log.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include <time.h>

namespace kiln::jit {
namespace {
std::atomic<std::int64_t> g_compile_delay_ms{0};

// threshold * backoff, saturating (a threshold may be "never": INT64_MAX).
std::uint64_t scaled(std::int64_t threshold, std::uint64_t backoff) {
    const auto t = static_cast<std::uint64_t>(threshold);
    return t > UINT64_MAX / backoff ? UINT64_MAX : t * backoff;
}

// CPU time of the calling thread (µs): a compile's own work, whatever else the cores ran
// meanwhile (its wall time also counts the calls and compiles it shared them with).
std::uint64_t thread_cpu_us() {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}
}  // namespace

void set_compile_delay_for_testing(std::chrono::milliseconds delay) { g_compile_delay_ms.store(delay.count()); }

TierManager::TierManager(std::shared_ptr<const Executable> exe, const profiling::FunctionProfile& profile,
                         const Tunables& tunables, EngineResources tiers)
    : exe_(std::move(exe)), profile_(profile), name_(exe_->graph->name), tunables_(tunables), tiers_(std::move(tiers)) {
    if (tiers_.queue && tunables_.async_compile) ticket_ = tiers_.queue->new_ticket();
    if (!tiers_.cache) tiers_.cache = std::make_shared<CodeCache>(0);
    if (!tiers_.costs) tiers_.costs = std::make_shared<CostModel>();
    for (const auto& gr : exe_->groups) gr->tierup = std::make_shared<TierUpState>();
}

TierManager::~TierManager() { cancel_compiles(); }

void TierManager::cancel_compiles() {
    if (ticket_) tiers_.queue->cancel(ticket_);
}

void TierManager::wait_for_compiles() {
    if (ticket_) ticket_->wait_idle();
}

void TierManager::warmup(const ShapePlan& sp) {
    std::vector<std::int64_t> params;
    // Two rounds: a group whose request was skipped because a compile of it (for another
    // signature) was in flight gets its own in the second.
    for (int round = 0; round < 2; ++round) {
        for (auto& grp : exe_->groups) {
            if (!grp->kernel || has_empty_buffer(grp->group, sp)) continue;
            group_params(*grp->kernel, grp->group, sp, params);
            ensure_compiled(*grp, params);
        }
        wait_for_compiles();  // warmup compiles ahead: the next call finds the code
    }
}

void TierManager::drop(std::vector<Evicted>& evicted) {
    for (Evicted& ev : evicted) {
        const CodeEntry* e = ev.entry.get();
        for (const auto& w : ev.users) {
            std::shared_ptr<GroupRuntime> gr = std::dynamic_pointer_cast<GroupRuntime>(w.lock());
            if (!gr) continue;
            TierUpState& st = *gr->tierup;
            std::lock_guard<std::mutex> lock(st.mu);
            auto next = std::make_shared<CodeSet>(*gr->code());
            std::uint64_t dropped = 0;
            for (const CompiledVersion& v : next->versions) {
                if (v.entry.get() != e) continue;
                ++dropped;
                if (v.tier < 2) {  // tier 1 comes back after another threshold of interpreted calls
                    st.tier1_requested = false;
                    st.rebase_interpreted = true;
                } else if (v.generic) {
                    --st.generic_compiles;
                } else {
                    st.specializations.fetch_sub(1, std::memory_order_relaxed);
                }
            }
            if (!dropped) continue;
            st.backoff = std::min(st.backoff * 2, tunables_.max_backoff);
            st.uncovered = 0;
            st.probe.valid = false;
            std::erase_if(next->versions, [&](const CompiledVersion& v) { return v.entry.get() == e; });
            gr->publish(std::move(next));
            gr->evictions.fetch_add(dropped, std::memory_order_relaxed);
            if (auto* tr = trace())
                tr->instant("cache", "evict", "\"group\":\"" + profiling::ChromeTrace::escape(gr->group.name) +
                                                  "\",\"tier\":" + std::to_string(e->tier) +
                                                  ",\"bytes\":" + std::to_string(e->bytes));
        }
    }
    evicted.clear();
}

void TierManager::group_ran(GroupRuntime& gr, const std::vector<std::int64_t>& params, profiling::CodeKind ran,
                            const profiling::SignatureObservation& sig) {
    if (!gr.kernel || !compiles()) return;
    TierUpState& st = *gr.tierup;
    bool t1 = false, t2 = false, generic = false, pinned = false;
    TierUpDecision d1, d2;
    kir::Specialization spec;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        learn(gr, st, ran, sig);
        if (ran == profiling::CodeKind::interpreted) {
            t1 = weigh_tier1(gr, st);
            d1 = st.last;
        }
        if (ran != profiling::CodeKind::interpreted && prefer_tier1(gr, st, params, ran, sig)) {
            d2 = st.last;
            pinned = true;
        } else if (ran == profiling::CodeKind::generic) t2 = weigh_specialization(gr, st, params, sig);
        else if (ran != profiling::CodeKind::specialised) t2 = weigh_tier2(gr, st, params, ran, sig, &generic);
        else if (st.last.what != TierUpDecision::What::compiling) st.last = TierUpDecision{TierUpDecision::What::settled};
        if (t2) {
            st.compiling = true;
            st.last.what = TierUpDecision::What::compiles;
            spec = tier2_spec(gr, st, params, generic);
        }
        if (!pinned) d2 = st.last;
        if (t1 && !t2) st.last = d1;
    }
    if (pinned) trace_decision(gr, d2, "tier 1 at this signature");
    if (t1) {
        trace_decision(gr, d1, "tier 1");
        request_tier1(gr);
    }
    if (t2) {
        trace_decision(gr, d2, generic ? "tier 2 generic" : "tier 2 specialised");
        request_tier2(gr, std::move(spec), generic);
    }
}

namespace {
using profiling::CodeKind;
using What = TierUpDecision::What;
}  // namespace

void TierManager::learn(GroupRuntime& gr, TierUpState& st, CodeKind ran, const profiling::SignatureObservation& sig) {
    // One signature's time on `ran` against its time on each lower kind of code: the same
    // work, so their ratio is what the step was worth. Taught once per pair and group, after
    // a few timed calls on the new code (its first call may pay for cold caches).
    constexpr std::uint64_t kTimedBeforeLearning = 3;
    if (!sig.kept || sig.time.timed[profiling::index_of(ran)] < kTimedBeforeLearning) return;
    for (std::size_t from = 0; from < profiling::index_of(ran); ++from) {
        const auto bit = static_cast<std::uint16_t>(1u << (from * profiling::kNumCodeKinds + profiling::index_of(ran)));
        if ((st.learned & bit) || sig.time.timed[from] == 0) continue;
        st.learned |= bit;
        const auto f = static_cast<CodeKind>(from);
        tiers_.costs->record_ratio(f, ran, gr.group.kind, sig.time.mean_ns(ran) / sig.time.mean_ns(f));
    }
}

bool TierManager::prefer_tier1(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params, CodeKind ran,
                               const profiling::SignatureObservation& sig) {
    // Clearly slower: beyond the noise of a few timed calls on a shared host. The kinds of
    // code are compared by their fastest timed calls (TimeByKind::best_ns), not their means:
    // interference only ever adds time, and a mean of two calls on a busy host (or a first
    // call into cold caches) had pinned tier 1 on 11 of squeezenet1_1's 26 convs, making the
    // model ~1.5x slower (AVX2, 1 thread, AMD EPYC Zen 4, the other core compiling).
    constexpr double kTier1Faster = 1.25;
    constexpr std::uint64_t kTimed = 2;
    // A pin's rechecks (TierUpState::Recheck): tier 2's first timed calls came while the
    // host was still busy (a compile just ended, another core's thread asleep) in about one
    // MLP process in ten even with the calls timed beside compiles left out (2 threads,
    // 0.215 ms a call pinned, 0.145 not; AVX2, AMD EPYC Zen 4).
    constexpr std::uint64_t kRecheckCalls = 64;
    constexpr int kRechecks = 3;
    if (!tunables_.by_time || !sig.kept) return false;
    const auto recheck = std::find_if(st.rechecks.begin(), st.rechecks.end(),
                                      [&](const TierUpState::Recheck& r) { return r.params == params; });
    // Every tier-1 call comes here: only a trial's calls and a pin's have anything to decide.
    if (ran == CodeKind::baseline && st.tier1_trials.empty() && recheck == st.rechecks.end()) return false;
    auto timed = [&](CodeKind k) { return sig.time.timed[profiling::index_of(k)]; };
    // The tier-2 kind this signature ran: the faster one's time is what tier 1 must beat.
    const CodeKind t2 = timed(CodeKind::specialised) >= kTimed ? CodeKind::specialised : CodeKind::generic;
    if (timed(t2) < kTimed) return false;
    const double tier2_ns = sig.time.best_ns(t2);
    const bool tier1_timed = timed(CodeKind::baseline) >= kTimed;
    const double tier1_ns = tier1_timed ? sig.time.best_ns(CodeKind::baseline) : 0.0;
    // Adds this signature to the published set of those that run tier 1, or takes it out.
    auto publish = [&](bool add) {
        auto next = std::make_shared<CodeSet>(*gr.code());
        if (add) next->tier1_signatures.push_back(params);
        else std::erase(next->tier1_signatures, params);
        gr.publish(std::move(next));
        if (add) ++st.tier1_pins;
        else --st.tier1_pins;
    };
    auto decided = [&] {
        TierUpDecision d{What::tier1_faster, 2, t2 == CodeKind::generic};
        d.est.now_ns = tier2_ns;
        d.est.next_ns = tier1_ns;
        st.last = d;
        return true;
    };
    // The signature runs tier 1 from now on (published already, or `publish` it): its first
    // recheck is due after kRecheckCalls of its tier-1 calls.
    auto pin = [&](bool publish_it) {
        if (publish_it) publish(true);
        if (recheck == st.rechecks.end()) st.rechecks.push_back({params, kRecheckCalls, 0, 0, false});
        return decided();
    };
    if (recheck != st.rechecks.end()) {
        if (ran == CodeKind::baseline && !recheck->running) {
            if (--recheck->calls_left > 0) return false;
            recheck->running = true;  // tier 2 runs again here
            recheck->timed_from = timed(t2);
            ++recheck->done;
            publish(false);
            return false;
        }
        if (ran != CodeKind::baseline && recheck->running) {
            if (timed(t2) < recheck->timed_from + kTimed) return false;
            recheck->running = false;
            support::log().debug("{}: {} recheck {} of a signature: tier 2 {:.1f} us a call against tier 1's {:.1f} us", name_,
                                 gr.group.name, recheck->done, tier2_ns * 1e-3, tier1_ns * 1e-3);
            if (tier2_ns > kTier1Faster * tier1_ns) {  // still clearly slower: tier 1 again
                recheck->calls_left = kRecheckCalls << (2 * recheck->done);
                if (recheck->done >= kRechecks) st.rechecks.erase(recheck);
                publish(true);
                return decided();
            }
            st.rechecks.erase(recheck);  // tier 2 is no slower now: it stays
            return false;
        }
    }
    if (ran == CodeKind::baseline) {
        // A trial's calls on tier 1: decide once two of them are timed.
        const auto trial = std::find(st.tier1_trials.begin(), st.tier1_trials.end(), params);
        if (trial == st.tier1_trials.end() || !tier1_timed) return false;
        st.tier1_trials.erase(trial);
        if (tier2_ns > kTier1Faster * tier1_ns) {
            support::log().debug("{}: {} keeps tier 1 at a signature after its trial: {:.1f} us a call against tier 2's {:.1f} us",
                                 name_, gr.group.name, tier1_ns * 1e-3, tier2_ns * 1e-3);
            return pin(false);  // (the trial published it)
        }
        publish(false);  // tier 2 is no slower here: back to it
        return false;
    }
    const std::shared_ptr<const CodeSet> code = gr.code();
    if (code->tier1_signatures.size() >= limits::tier1_signatures_kept ||
        std::none_of(code->versions.begin(), code->versions.end(), [](const CompiledVersion& v) { return v.tier < 2; }) ||
        std::find(code->tier1_signatures.begin(), code->tier1_signatures.end(), params) != code->tier1_signatures.end())
        return false;  // (the last: a call that chose its code before the set changed)
    if (tier1_timed) {
        if (!(tier2_ns > kTier1Faster * tier1_ns)) return false;
        support::log().debug("{}: {} runs tier 1 at a signature: {:.1f} us a call against tier 2's {:.1f} us",
                             name_, gr.group.name, tier1_ns * 1e-3, tier2_ns * 1e-3);
        return pin(true);
    }
    // Tier 1 never timed at this signature: try it (its calls decide, above) when the tier-2
    // code is clearly slower than the interpreter's time here times the ratio the cost model
    // expects of tier 1 (a trial costs calls on slower code if it fails).
    if (timed(CodeKind::interpreted) == 0 || st.tier1_trials_started >= limits::tier1_signatures_kept) return false;
    const double expected_ns = sig.time.best_ns(CodeKind::interpreted) *
                               tiers_.costs->time_ratio(CodeKind::interpreted, CodeKind::baseline, gr.group.kind);
    if (!(tier2_ns > kTier1Faster * expected_ns)) return false;
    ++st.tier1_trials_started;
    st.tier1_trials.push_back(params);
    publish(true);
    return false;
}

bool TierManager::weigh_tier1(GroupRuntime& gr, TierUpState& st) {
    if (!tiers_.tier1 || st.tier1_requested) return false;
    const profiling::GroupProfile& prof = profile_.group(gr.index);
    if (st.rebase_interpreted) {  // count from the call after the eviction (this one)
        st.interpreted_base = prof.interpreted_calls() - 1;
        st.rebase_interpreted = false;
    }
    TierUpDecision d{What::waits, 1};
    d.waited = prof.interpreted_calls() - st.interpreted_base;
    d.bound = scaled(tunables_.tier1_threshold, st.backoff);
    const auto calls = prof.calls.load(std::memory_order_relaxed);
    const double ratio = tiers_.costs->time_ratio(CodeKind::interpreted, CodeKind::baseline, gr.group.kind);
    d.est = estimate_tierup(prof.mean_ns(CodeKind::interpreted), ratio, calls, tunables_.min_future_calls,
                            tiers_.costs->compile_us(1, gr.group.kind), st.backoff);
    st.last = d;
    if (!(at_bound(d, ratio) || (tunables_.by_time && d.est.pays()))) return false;
    st.tier1_requested = true;
    st.last.what = What::compiles;
    return true;
}

bool TierManager::weigh_tier2(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params, CodeKind ran,
                              const profiling::SignatureObservation& sig, bool* generic) {
    if (!tiers_.tier2) return false;
    if (st.blacklisted) {
        st.last = TierUpDecision{What::blacklisted, 2};
        return false;
    }
    if (st.compiling) {
        if (st.last.what != What::compiles) st.last.what = What::compiling;
        return false;
    }
    if (ran == CodeKind::baseline && st.tier1_pins > 0) {  // a signature that runs tier 1 by choice needs no tier-2 code
        const std::shared_ptr<const CodeSet> code = gr.code();
        for (const auto& s : code->tier1_signatures)
            if (s == params) return false;
    }
    ++st.uncovered;
    const profiling::GroupProfile& prof = profile_.group(gr.index);
    const int specs = st.specializations.load(std::memory_order_relaxed);
    // One signature seen: a specialisation; several: the dims that varied stay free.
    *generic = sig.distinct > 1 || specs >= tunables_.max_specializations;
    if (*generic && st.generic_compiles >= tunables_.max_generic_versions) {
        st.last = TierUpDecision{What::full, 2, true};
        return false;
    }
    const CodeKind next = *generic ? CodeKind::generic : CodeKind::specialised;
    double now = prof.mean_ns(ran);
    if (now == 0 && ran == CodeKind::baseline)  // not timed on tier 1 yet: the interpreter's time, scaled
        now = prof.mean_ns(CodeKind::interpreted) *
              tiers_.costs->time_ratio(CodeKind::interpreted, CodeKind::baseline, gr.group.kind);
    TierUpDecision d{What::waits, 2, *generic};
    d.waited = st.uncovered;
    d.bound = scaled(tunables_.tier2_threshold, st.backoff);
    const double ratio = tiers_.costs->time_ratio(ran, next, gr.group.kind);
    d.est = estimate_tierup(now, ratio, prof.calls.load(std::memory_order_relaxed), tunables_.min_future_calls,
                            tiers_.costs->compile_us(2, gr.group.kind), st.backoff);
    // Code already made costs nothing to take (probed only when that decides).
    if (tunables_.by_time && d.waited < d.bound && !d.est.pays() && made_already(gr, st, params, *generic, sig.distinct))
        d.est.cost_us = 0;
    st.last = d;
    return (at_bound(d, ratio) || (tunables_.by_time && d.est.pays())) && !covered(gr, params, false);
}

bool TierManager::weigh_specialization(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params,
                                       const profiling::SignatureObservation& sig) {
    if (!tiers_.tier2 || st.compiling || st.blacklisted) return false;
    if (st.specializations.load(std::memory_order_relaxed) >= tunables_.max_specializations) {
        st.last = TierUpDecision{What::full, 2, false};
        return false;
    }
    constexpr auto g = profiling::index_of(CodeKind::generic);
    if (!sig.kept) return false;
    TierUpDecision d{What::waits, 2, false};
    if (!tunables_.by_time) {  // KILN_TIERUP=count: after tier2_threshold calls at the signature
        d.waited = sig.time.calls;
        d.bound = scaled(tunables_.tier2_threshold, st.backoff);
        st.last = d;
        return d.waited >= d.bound && !covered(gr, params, true);
    }
    if (sig.time.timed[g] < tunables_.min_timed_for_specialization) return false;
    d.est = estimate_tierup(sig.time.mean_ns(CodeKind::generic),
                            tiers_.costs->time_ratio(CodeKind::generic, CodeKind::specialised, gr.group.kind),
                            sig.time.calls, tunables_.min_future_calls, tiers_.costs->compile_us(2, gr.group.kind),
                            st.backoff);
    if (!d.est.pays() && made_already(gr, st, params, false, sig.distinct)) d.est.cost_us = 0;
    st.last = d;
    return d.est.pays() && !covered(gr, params, true);
}

bool TierManager::at_bound(const TierUpDecision& d, double ratio) const {
    // With the time model on, a bound compiles only code expected to be faster: the engine
    // may have measured that the next tier does not speed this kind of group up.
    return d.waited >= d.bound && (!tunables_.by_time || ratio < 1.0);
}

bool TierManager::covered(const GroupRuntime& gr, const std::vector<std::int64_t>& params, bool specialised) const {
    for (const auto& v : gr.code()->versions)
        if (v.tier >= 2 && (!specialised || !v.generic) && v.guard.check(params.data())) return true;
    return false;
}

kir::Specialization TierManager::tier2_spec(const GroupRuntime& gr, const TierUpState& st,
                                            const std::vector<std::int64_t>& params, bool generic) const {
    kir::Specialization spec;
    spec.params.resize(gr.kernel->params.size());
    // A first generic version binds what every observed signature agreed on; a later one nothing.
    std::vector<bool> varying;
    if (generic && st.generic_compiles == 0) varying = profile_.group(gr.index).varying_params();
    for (std::size_t p = 0; p < params.size() && p < spec.params.size(); ++p) {
        const bool bind = !generic || (st.generic_compiles == 0 && p < varying.size() && !varying[p]);
        if (bind) spec.params[p] = params[p];
    }
    return spec;
}

bool TierManager::made_already(const GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params,
                               bool generic, std::size_t distinct) const {
    // The version a probe is for: a generic one is the same while the group's distinct
    // signatures are; a specialisation is its params.
    TierUpState::Probe& p = st.probe;
    if (p.valid && p.generic == generic && p.generic_compiles == st.generic_compiles &&
        (generic ? p.distinct == distinct : p.params == params))
        return p.made;
    const std::string key = code_key(*tiers_.tier2, gr.kir_text(), tier2_spec(gr, st, params, generic));
    p = TierUpState::Probe{true, generic, st.generic_compiles, distinct, params,
                           tiers_.cache->contains(key) ||
                               (tiers_.disk && tiers_.tier2->persists_code() && tiers_.disk->contains(key))};
    return p.made;
}

void TierManager::trace_decision(const GroupRuntime& gr, const TierUpDecision& d, const char* why) {
    auto* tr = trace();
    if (!tr) return;
    auto num = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", v);
        return std::string(buf);
    };
    tr->instant("tierup", name_ + "/" + gr.group.name + " -> " + why,
                "\"group\":\"" + profiling::ChromeTrace::escape(gr.group.name) + "\",\"tier\":" +
                    std::to_string(d.tier) + ",\"generic\":" + (d.generic ? "true" : "false") +
                    ",\"now_us\":" + num(d.est.now_ns * 1e-3) + ",\"next_us\":" + num(d.est.next_ns * 1e-3) +
                    ",\"future_calls\":" + num(d.est.future_calls) + ",\"saving_ms\":" + num(d.est.saving_us * 1e-3) +
                    ",\"cost_ms\":" + num(d.est.cost_us * 1e-3) + ",\"calls_waited\":" + std::to_string(d.waited) +
                    ",\"bound\":" + std::to_string(d.bound) + ",\"by\":\"" +
                    (d.what == What::tier1_faster ? "measured" : d.est.pays() ? "time" : "threshold") + "\"");
}

TierUpDecision TierManager::decision(const GroupRuntime& gr) const {
    if (!gr.tierup) return {};
    std::lock_guard<std::mutex> lock(gr.tierup->mu);
    return gr.tierup->last;
}

std::string TierManager::describe(const GroupRuntime& gr) const {
    if (!gr.kernel) return "";
    TierUpState& st = *gr.tierup;
    TierUpDecision d;
    std::string declined;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        d = st.last;
        declined = st.tier1_declined;
    }
    auto ms = [](double us) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g ms", us * 1e-3);
        return std::string(buf);
    };
    const std::string step =
        d.tier == 1 ? "tier 1" : d.generic ? "a generic tier-2 version" : "a tier-2 specialisation";
    const std::string numbers = "saves " + ms(d.est.saving_us) + " (" + ms(d.est.now_ns * 1e-3) + " -> " +
                                ms(d.est.next_ns * 1e-3) + " a call x " + std::to_string(static_cast<std::uint64_t>(d.est.future_calls)) +
                                " calls), costs " + ms(d.est.cost_us);
    std::string out;
    switch (d.what) {
        case What::none: out = compiles() ? "not run yet" : "no compiling tier"; break;
        case What::waits:
            out = "waits for " + step + ": " + numbers;
            if (d.bound) out += "; " + std::to_string(d.waited) + " of " + std::to_string(d.bound) + " calls before the threshold";
            break;
        case What::compiles: out = "requested " + step + ": " + numbers; break;
        case What::compiling: out = "compiling " + step; break;
        case What::settled: out = "runs specialised code"; break;
        case What::full: out = d.generic ? "generic versions used up" : "specialisations used up"; break;
        case What::blacklisted: out = "blacklisted after repeated compile failures"; break;
        case What::tier1_faster:
            out = "runs tier 1 at " + std::to_string(gr.code()->tier1_signatures.size()) +
                  " signature(s) where it measured faster than tier 2 (last: " + ms(d.est.next_ns * 1e-3) + " against " +
                  ms(d.est.now_ns * 1e-3) + " a call)";
            break;
    }
    if (!declined.empty()) out += "; tier 1 declined it: " + declined;
    return out;
}

void TierManager::ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params) {
    if (!tiers_.tier2 || !gr.kernel) return;
    TierUpState& st = *gr.tierup;
    for (const auto& v : gr.code()->versions)
        if (v.tier >= 2 && v.guard.check(params.data())) return;
    bool generic = false;
    kir::Specialization spec;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        if (st.blacklisted || st.compiling) return;
        generic = st.specializations.load(std::memory_order_relaxed) >= tunables_.max_specializations;
        if (generic && st.generic_compiles >= tunables_.max_generic_versions) return;
        st.compiling = true;
        st.last = TierUpDecision{What::compiles, 2, generic};
        spec = tier2_spec(gr, st, params, generic);
    }
    request_tier2(gr, std::move(spec), generic);
}

// Queued jobs run by priority: the group's share of its function's time so far (hot groups
// tier up first), plus `boost` (tier-1 jobs, microseconds each, go before tier-2 ones).
void TierManager::submit(GroupRuntime& gr, double boost, std::function<void()> job) {
    if (!ticket_) {
        job();
        return;
    }
    const std::uint64_t total = profile_.total_group_ns();
    const std::uint64_t ns = profile_.group(gr.index).ns.load(std::memory_order_relaxed);
    const double share = total ? static_cast<double>(ns) / static_cast<double>(total) : 0.0;
    tiers_.queue->submit(ticket_, boost + share, std::move(job));
}

void TierManager::request_tier1(GroupRuntime& gr) {
    submit(gr, tunables_.tier1_priority_boost, [this, g = gr.shared_from_this()] { compile_tier1(*g); });
}

void TierManager::request_tier2(GroupRuntime& gr, kir::Specialization spec, bool generic) {
    submit(gr, 0.0, [this, g = gr.shared_from_this(), spec = std::move(spec), generic] { compile_tier2(*g, spec, generic); });
}

void TierManager::trace_compile(const tiers::Tier& tier, const GroupRuntime& gr, const kir::Specialization& spec,
                                bool generic, std::chrono::steady_clock::time_point t0, const char* outcome,
                                const char* cache) {
    auto* tr = trace();
    if (!tr) return;
    std::string bound;
    for (std::size_t p = 0; p < spec.params.size(); ++p)
        if (spec.params[p]) bound += (bound.empty() ? "" : ",") + gr.kernel->params[p] + "=" + std::to_string(*spec.params[p]);
    tr->complete("compile", name_ + "/" + gr.group.name + " -> tier " + std::to_string(tier.level()), t0,
                 std::chrono::steady_clock::now(),
                 "\"backend\":\"" + std::string(tier.name()) + "\",\"tier\":" + std::to_string(tier.level()) +
                     ",\"group\":\"" + profiling::ChromeTrace::escape(gr.group.name) + "\",\"generic\":" +
                     (generic ? "true" : "false") + ",\"bound\":\"" + profiling::ChromeTrace::escape(bound) +
                     "\",\"outcome\":\"" + outcome + "\",\"cache\":\"" + cache + "\"");
}

TierManager::Obtained TierManager::obtain(tiers::Tier& tier, GroupRuntime& gr, const kir::Specialization& spec,
                                          bool generic, std::vector<Evicted>* evicted) {
    Obtained o;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed_us = [&] {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
    };
    const std::string key = code_key(tier, gr.kir_text(), spec);
    const std::shared_ptr<GroupRuntime> self = gr.shared_from_this();
    // 1. Code another group of this engine already has, or is making now (then this waits).
    if ((o.entry = tiers_.cache->find_or_claim(key, self))) {
        counters_.cache_hits.fetch_add(1, std::memory_order_relaxed);
        trace_compile(tier, gr, spec, generic, t0, "compiled", "hit");
        return o;
    }
    struct Release {  // after the insert below, so that the waiters find the code
        CodeCache& cache;
        const std::string& key;
        ~Release() { cache.release(key); }
    } release{*tiers_.cache, key};
    // 2. Code an earlier process left in KILN_CACHE_DIR.
    DiskCache* disk = tier.persists_code() ? tiers_.disk.get() : nullptr;
    if (disk) {
        if (auto stored = disk->load(key)) {
            tiers::CompileResult r = tier.load(stored->object, stored->symbol);
            if (r.kernel) {
                o.us = elapsed_us();
                counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
                o.entry = tiers_.cache->insert(key, std::move(r.kernel), tier.level(), self, evicted);
                trace_compile(tier, gr, spec, generic, t0, "compiled", "disk");
                return o;
            }
            if (r.bailout != tiers::Bailout::unavailable) disk->reject(key, "the tier cannot load it: " + r.detail);
        }
    }
    // 3. A compile.
    if (auto ms = g_compile_delay_ms.load(); ms > 0 && tier.level() >= 2)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    tiers::CompileResult r;
    const std::uint64_t cpu0 = thread_cpu_us();
    try {
        profiling::CompileActivity::Scope compiling;  // calls timed meanwhile are no measure of their code
        r = tier.compile_group({*exe_->graph, gr.group, &*gr.kernel}, spec);
    } catch (const std::exception& e) {  // a tier must not throw; if it does, it is a failure like any other
        r = tiers::CompileResult{};
        r.bailout = tiers::Bailout::backend_error;
        r.detail = e.what();
    }
    o.compiled = true;
    o.us = elapsed_us();
    const std::uint64_t cpu_us = thread_cpu_us() - cpu0;
    trace_compile(tier, gr, spec, generic, t0, r.kernel ? "compiled" : tiers::bailout_name(r.bailout).data(), "miss");
    counters_.compile_us.fetch_add(o.us, std::memory_order_relaxed);
    counters_.bailouts[static_cast<std::size_t>(r.bailout)].fetch_add(1, std::memory_order_relaxed);
    if (r.kernel) {
        counters_.compiles.fetch_add(1, std::memory_order_relaxed);
        const auto t = static_cast<std::size_t>(std::clamp(tier.level(), 0, static_cast<int>(kNumTiers) - 1));
        gr.compiles_by_tier[t].fetch_add(1, std::memory_order_relaxed);
        gr.compile_us_by_tier[t].fetch_add(o.us, std::memory_order_relaxed);
        gr.compile_cpu_us_by_tier[t].fetch_add(cpu_us, std::memory_order_relaxed);
        tiers_.costs->record_compile(tier.level(), gr.group.kind, static_cast<double>(o.us));
    } else {
        counters_.compile_failures.fetch_add(1, std::memory_order_relaxed);
    }
    if (r.kernel) {
        if (disk && !r.object.empty()) disk->store(key, DiskEntry{std::move(r.object), std::move(r.symbol)});
        o.entry = tiers_.cache->insert(key, std::move(r.kernel), tier.level(), self, evicted);
    }
    o.result = std::move(r);
    return o;
}

void TierManager::compile_tier1(GroupRuntime& gr) {
    const kir::Kernel& k = *gr.kernel;
    TierUpState& st = *gr.tierup;
    kir::Specialization spec;
    spec.params.resize(k.params.size());  // nothing bound: one version serves every shape
    std::vector<Evicted> evicted;
    Obtained o = obtain(*tiers_.tier1, gr, spec, true, &evicted);
    {
        std::lock_guard<std::mutex> lock(st.mu);
        if (!o.entry) {
            // Not retried: a generic kernel's bail-out is deterministic (tier1_requested stays set).
            support::log().info("{}: {} stays below tier 1 ({}: {})", name_, gr.group.name,
                                tiers::bailout_name(o.result.bailout), o.result.detail);
            st.tier1_declined = o.result.detail.empty() ? std::string(tiers::bailout_name(o.result.bailout)) : o.result.detail;
            return;
        }
        // Code evicted since it was found is not published (the cache no longer accounts it).
        if (o.entry->resident.load(std::memory_order_acquire)) {
            auto next = std::make_shared<CodeSet>(*gr.code());
            next->versions.push_back(
                CompiledVersion{std::move(spec), Guard{}, o.entry->code, o.entry, tiers_.tier1->level(), true});
            gr.publish(std::move(next));
            support::log().info("{}: {} -> tier {} ({} us)", name_, gr.group.name, tiers_.tier1->level(), o.us);
        } else {
            st.tier1_requested = false;
            st.interpreted_base = profile_.group(gr.index).interpreted_calls();
        }
    }
    drop(evicted);
}

void TierManager::compile_tier2(GroupRuntime& gr, kir::Specialization spec, bool generic) {
    TierUpState& st = *gr.tierup;
    Guard guard;
    for (std::size_t p = 0; p < spec.params.size(); ++p)
        if (spec.params[p]) guard.bound.emplace_back(static_cast<int>(p), *spec.params[p]);
    std::vector<Evicted> evicted;
    Obtained o = obtain(*tiers_.tier2, gr, spec, generic, &evicted);
    const bool slow = o.entry && o.compiled && o.us > tunables_.compile_budget_us;
    if (slow) counters_.bailouts[static_cast<std::size_t>(tiers::Bailout::timeout)].fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(st.mu);
        st.compiling = false;
        st.uncovered = 0;
        st.probe.valid = false;
        if (!o.entry || slow) {
            if (++st.failures >= tunables_.max_failures) st.blacklisted = true;
            st.backoff = std::min(st.backoff * 2, tunables_.max_backoff);
            support::log().info("{}: {} compile {} ({}: {}){}", name_, gr.group.name, slow ? "over budget" : "failed",
                                tiers::bailout_name(slow ? tiers::Bailout::timeout : o.result.bailout), o.result.detail,
                                st.blacklisted ? "; blacklisted" : "");
            if (st.blacklisted) st.last = TierUpDecision{What::blacklisted, 2};
        }
        if (o.entry && o.entry->resident.load(std::memory_order_acquire)) {
            auto next = std::make_shared<CodeSet>(*gr.code());
            CompiledVersion v{std::move(spec), std::move(guard), o.entry->code, o.entry, tiers_.tier2->level(), generic};
            auto first_lower = std::find_if(next->versions.begin(), next->versions.end(),
                                            [&](const CompiledVersion& c) { return c.tier < v.tier; });
            if (generic) {
                ++st.generic_compiles;
                next->versions.insert(first_lower, std::move(v));  // after the specialisations, before tier 1
            } else {
                st.specializations.fetch_add(1, std::memory_order_relaxed);
                next->versions.insert(next->versions.begin(), std::move(v));
            }
            gr.publish(std::move(next));
            support::log().info("{}: {} -> tier {} ({}, {} us{})", name_, gr.group.name, tiers_.tier2->level(),
                                generic ? "generic" : "specialised", o.us,
                                o.compiled ? "" : ", from a cache");
        }
    }
    drop(evicted);
    if (o.entry) save_versions();
}

const std::string& TierManager::versions_key_locked() {
    // Hashing the graph reads every constant (hundreds of MB for a large model): once.
    if (versions_key_.empty()) versions_key_ = versions_key(*tiers_.tier2, *exe_->graph);
    return versions_key_;
}

void TierManager::save_versions() {
    if (!tiers_.disk || !tiers_.tier2 || !tiers_.tier2->persists_code()) return;
    std::lock_guard<std::mutex> lock(saved_mu_);
    if (kir_hashes_.empty()) kir_hashes_.resize(exe_->groups.size(), 0);
    std::vector<RecordedVersion> versions;
    for (const auto& grp : exe_->groups) {
        if (!grp->kernel) continue;
        const auto code = grp->code();
        for (const CompiledVersion& v : code->versions) {
            if (v.tier < 2) continue;
            std::uint64_t& h = kir_hashes_[grp->index];  // hashed once, when the group first has a version
            if (!h) h = kir_hash(grp->kir_text());
            versions.push_back({grp->index, h, v.generic, v.spec.params});
        }
    }
    std::string text = format_versions(versions);
    if (text == saved_) return;
    tiers_.disk->store(versions_key_locked(), DiskEntry{text, "versions"}, DiskCache::Kind::record);
    saved_ = std::move(text);
}

std::size_t TierManager::warmup_recorded() {
    if (!tiers_.disk || !tiers_.tier2 || !tiers_.tier2->persists_code()) return 0;
    std::string key;
    {
        std::lock_guard<std::mutex> lock(saved_mu_);
        key = versions_key_locked();
    }
    const auto stored = tiers_.disk->load(key, DiskCache::Kind::record);
    if (!stored) return 0;
    // Per group, the versions recorded for it whose kernel still hashes the same.
    std::vector<std::vector<RecordedVersion>> todo(exe_->groups.size());
    for (RecordedVersion& v : parse_versions(stored->object)) {
        if (v.group >= exe_->groups.size()) continue;
        const GroupRuntime& gr = *exe_->groups[v.group];
        if (!gr.kernel || v.params.size() != gr.kernel->params.size() || v.kir_hash != kir_hash(gr.kir_text())) continue;
        todo[v.group].push_back(std::move(v));
    }
    auto holds = [](const GroupRuntime& gr, const RecordedVersion& v) {
        for (const CompiledVersion& c : gr.code()->versions)
            if (c.tier >= 2 && c.spec.params == v.params) return true;
        return false;
    };
    // One compile per group at a time: round r requests each group's r-th version.
    for (std::size_t round = 0;; ++round) {
        bool any = false;
        for (std::size_t g = 0; g < todo.size(); ++g) {
            if (round >= todo[g].size()) continue;
            any = true;
            GroupRuntime& gr = *exe_->groups[g];
            const RecordedVersion& v = todo[g][round];
            if (holds(gr, v)) continue;
            TierUpState& st = *gr.tierup;
            {
                std::lock_guard<std::mutex> lock(st.mu);
                if (st.blacklisted || st.compiling) continue;
                if (v.generic ? st.generic_compiles >= tunables_.max_generic_versions
                              : st.specializations.load(std::memory_order_relaxed) >= tunables_.max_specializations)
                    continue;
                st.compiling = true;
                st.last = TierUpDecision{What::compiles, 2, v.generic};
            }
            request_tier2(gr, kir::Specialization{v.params}, v.generic);
        }
        wait_for_compiles();
        if (!any) break;
    }
    std::size_t held = 0;
    for (std::size_t g = 0; g < todo.size(); ++g)
        for (const RecordedVersion& v : todo[g]) held += holds(*exe_->groups[g], v) ? 1 : 0;
    return held;
}

}  // namespace kiln::jit
