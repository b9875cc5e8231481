#include "jit/tiering/device_tiering.h"

#include "jit/exec/code_cache.h"
#include "profiling/compile_activity.h"

#include "src/support/log.h"
#include "tiers/gpu/gpu_tier.h"

#include <algorithm>
#include <chrono>

namespace kiln::jit {

namespace {

// A device's place in GpuTiers' vectors: CUDA and HIP devices interleaved by ordinal.
std::size_t slot_of(Device d) {
    return static_cast<std::size_t>(std::max(d.index, 0)) * 2 + (d.kind == Device::Kind::hip ? 1 : 0);
}

}  // namespace

std::shared_ptr<tiers::Tier> GpuTiers::get(Device d) {
    if (!jit_ || d.kind == Device::Kind::cpu || d.index < 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t i = slot_of(d);
    if (tiers_.size() <= i) {
        tiers_.resize(i + 1);
        tried_.resize(i + 1, false);
    }
    if (!tried_[i]) {
        tried_[i] = true;
        std::string why;
        tiers_[i] = tiers::gpu::make_gpu_tier(d, &why);
        if (!tiers_[i]) support::log().warn("{}: no GPU tier ({}); device calls run on the interpreter", d.to_string(), why);
    }
    return tiers_[i];
}

std::shared_ptr<CodeCache> GpuTiers::cache(Device d) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t i = slot_of(d);
    if (caches_.size() <= i) caches_.resize(i + 1);
    if (!caches_[i]) caches_[i] = std::make_shared<CodeCache>(cache_bytes_);
    return caches_[i];
}

CodeCacheStats GpuTiers::cache_stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    CodeCacheStats total;
    total.limit_bytes = cache_bytes_;
    for (const auto& c : caches_) {
        if (!c) continue;
        const CodeCacheStats s = c->stats();
        total.bytes += s.bytes;
        total.entries += s.entries;
        total.hits += s.hits;
        total.misses += s.misses;
        total.evictions += s.evictions;
    }
    return total;
}

bool publish_device_version(DeviceGroupCode& code, DeviceVersion v) {
    std::lock_guard<std::mutex> lock(code.publish_mu);
    // Evicted between its admission and now: its users were told before this group published
    // it, so publishing it now would keep it past its eviction.
    if (v.entry && !v.entry->resident.load(std::memory_order_acquire)) return false;
    auto next = std::make_shared<DeviceCodeSet>(*code.code.load());
    // Specialisations first (more bound params first), the generic version last.
    auto at = std::find_if(next->versions.begin(), next->versions.end(), [&](const DeviceVersion& o) {
        return o.guard.bound.size() < v.guard.bound.size();
    });
    next->versions.insert(at, std::move(v));
    code.code.store(std::move(next), std::memory_order_release);
    return true;
}

void drop_device_code(std::vector<Evicted>& evicted) {
    for (Evicted& ev : evicted) {
        for (const auto& w : ev.users) {
            std::shared_ptr<DeviceGroupCode> code = std::dynamic_pointer_cast<DeviceGroupCode>(w.lock());
            if (!code) continue;
            std::lock_guard<std::mutex> lock(code->publish_mu);
            auto next = std::make_shared<DeviceCodeSet>(*code->code.load());
            std::uint64_t dropped = 0;
            for (const DeviceVersion& v : next->versions) {
                if (v.entry != ev.entry) continue;
                ++dropped;
                if (v.guard.bound.empty()) {
                    code->generic_evicted = true;
                } else {
                    std::vector<std::int64_t> sig;
                    for (const auto& bound : v.guard.bound) sig.push_back(bound.second);
                    code->evicted_signatures.push_back(std::move(sig));
                }
            }
            if (!dropped) continue;
            std::erase_if(next->versions, [&](const DeviceVersion& v) { return v.entry == ev.entry; });
            code->code.store(std::move(next), std::memory_order_release);
            code->evictions.fetch_add(dropped, std::memory_order_relaxed);
            code->has_evicted.store(true, std::memory_order_release);
        }
    }
    evicted.clear();
}

DeviceTierManager::DeviceTierManager(std::shared_ptr<const Executable> exe, Device device,
                                     std::shared_ptr<tiers::Tier> tier, const Tunables& tunables,
                                     std::shared_ptr<CompileQueue> queue, std::shared_ptr<DiskCache> disk,
                                     std::shared_ptr<profiling::ChromeTrace> trace, std::shared_ptr<CodeCache> cache)
    : exe_(std::move(exe)), tier_(std::move(tier)), tunables_(tunables), queue_(std::move(queue)),
      disk_(std::move(disk)), trace_(std::move(trace)), cache_(std::move(cache)), state_(device, exe_->groups.size()),
      policies_(exe_->groups.size()) {
    if (!cache_) cache_ = std::make_shared<CodeCache>(0);
    if (queue_) ticket_ = queue_->new_ticket();
}

DeviceTierManager::~DeviceTierManager() { cancel_compiles(); }

void DeviceTierManager::cancel_compiles() {
    if (queue_ && ticket_) queue_->cancel(ticket_);
}

void DeviceTierManager::wait_for_compiles() {
    if (ticket_) ticket_->wait_idle();
}

std::vector<double> DeviceTierManager::compile_times() const {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
}

void DeviceTierManager::group_ran(std::size_t group, const std::vector<std::int64_t>& params, int tier) {
    if (!tier_ || tier == 2) return;
    DeviceGroupCode& code = *state_.groups[group];
    if (code.blacklisted.load(std::memory_order_relaxed)) return;
    const kir::Kernel& k = *exe_->groups[group]->kernel;
    const bool all_static = k.params.empty();
    std::unique_lock<std::mutex> lock(mu_);
    GroupPolicy& p = policies_[group];
    if (code.has_evicted.load(std::memory_order_acquire)) take_evictions(code, p);
    const std::uint64_t sig_calls = ++p.signature_calls[params];
    const auto t1 = static_cast<std::uint64_t>(std::max<std::int64_t>(tunables_.tier1_threshold, 1));
    const auto t2 = static_cast<std::uint64_t>(std::max<std::int64_t>(tunables_.tier2_threshold, 1));
    kir::Specialization bound;
    for (auto v : params) bound.params.emplace_back(v);
    if (all_static) {  // one version, specialised by construction
        if (!p.generic_requested && code.calls.load(std::memory_order_relaxed) - p.calls_base >= t1) {
            p.generic_requested = true;
            lock.unlock();
            request(group, bound, 2);
        }
        return;
    }
    if (!p.generic_requested && code.calls.load(std::memory_order_relaxed) - p.calls_base >= t1) {
        p.generic_requested = true;
        lock.unlock();
        request(group, kir::Specialization{std::vector<std::optional<std::int64_t>>(params.size())}, 1);
        return;
    }
    if (sig_calls == t2 && p.specializations < tunables_.max_specializations) {
        ++p.specializations;
        lock.unlock();
        request(group, std::move(bound), 2);
    }
}

void DeviceTierManager::take_evictions(DeviceGroupCode& code, GroupPolicy& p) {
    std::lock_guard<std::mutex> lock(code.publish_mu);
    code.has_evicted.store(false, std::memory_order_relaxed);
    if (code.generic_evicted && p.generic_requested) {
        p.generic_requested = false;
        p.calls_base = code.calls.load(std::memory_order_relaxed);
    }
    for (const auto& sig : code.evicted_signatures)
        if (auto it = p.signature_calls.find(sig); it != p.signature_calls.end()) {
            it->second = 0;  // another threshold of calls at the signature brings it back
            if (p.specializations > 0) --p.specializations;
        }
    code.generic_evicted = false;
    code.evicted_signatures.clear();
}

void DeviceTierManager::request(std::size_t group, kir::Specialization spec, int tier) {
    if (queue_ && tunables_.async_compile) {
        queue_->submit(ticket_, tier == 1 ? 2.0 : 1.0,
                       [this, group, spec = std::move(spec), tier] { compile(group, spec, tier); });
    } else {
        compile(group, spec, tier);
    }
}

void DeviceTierManager::compile(std::size_t group, const kir::Specialization& spec, int tier) {
    const GroupRuntime& gr = *exe_->groups[group];
    const std::shared_ptr<DeviceGroupCode>& user = state_.groups[group];
    DeviceGroupCode& code = *user;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string key = code_key(*tier_, gr.kir_text(), spec);
    // Code another group of the engine made for this kernel IR and params on this device is
    // shared; else this compile claims the key (a second group that wants it waits for it).
    std::shared_ptr<CodeEntry> entry = cache_->find_or_claim(key, user);
    struct Release {
        CodeCache& cache;
        const std::string& key;
        bool claimed;
        ~Release() {
            if (claimed) cache.release(key);
        }
    } release{*cache_, key, entry == nullptr};
    tiers::CompileResult r;
    bool from_disk = false;
    if (entry) {
        r.kernel = entry->code;
    } else {
        if (disk_)
            if (auto stored = disk_->load(key)) {
                r = tiers::gpu::load_gpu_code(*tier_, *gr.kernel, spec, stored->object, stored->symbol);
                if (r.kernel) from_disk = true;
                else disk_->reject(key, "the GPU tier cannot load it: " + r.detail);
            }
        if (!from_disk) {
            {
                profiling::CompileActivity::Scope compiling;  // calls timed meanwhile are no measure of their code
                r = tier_->compile(*gr.kernel, spec);
            }
            if (r.kernel && disk_ && !r.object.empty()) disk_->store(key, DiskEntry{r.object, r.symbol});
        }
    }
    const auto t1 = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (trace_)
        trace_->complete("compile", gr.group.name, t0, t1,
                         "\"tier\":" + std::to_string(tier) + ",\"device\":\"" + state_.device.to_string() +
                             "\",\"result\":\"" + std::string(r.kernel ? std::string_view("compiled") : tiers::bailout_name(r.bailout)) +
                             "\",\"cache\":\"" + (entry ? "memory" : from_disk ? "disk" : "miss") + "\"");
    if (!r.kernel) {
        counters_.compile_failures.fetch_add(1, std::memory_order_relaxed);
        counters_.bailouts[static_cast<std::size_t>(r.bailout)].fetch_add(1, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(mu_);
        const bool hopeless = r.bailout == tiers::Bailout::unsupported_op || r.bailout == tiers::Bailout::unsupported_dtype ||
                              r.bailout == tiers::Bailout::unsupported_shape;
        if (hopeless || ++policies_[group].failures >= tunables_.max_failures) code.blacklisted.store(true);
        support::log().info("{} on {}: no GPU code ({}): {}", gr.group.name, state_.device.to_string(),
                            tiers::bailout_name(r.bailout), r.detail);
        return;
    }
    if (from_disk) {
        counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
    } else if (!entry) {
        counters_.compiles.fetch_add(1, std::memory_order_relaxed);
        counters_.compile_us.fetch_add(static_cast<std::uint64_t>(ms * 1000.0), std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(mu_);
        times_.push_back(ms);
    }
    std::vector<Evicted> evicted;
    if (!entry) entry = cache_->insert(key, r.kernel, tier, user, &evicted);
    DeviceVersion v;
    v.code = entry->code;
    v.entry = entry;
    v.tier = tier;
    for (std::size_t i = 0; i < spec.params.size(); ++i)
        if (spec.params[i]) v.guard.bound.emplace_back(static_cast<int>(i), *spec.params[i]);
    publish_device_version(code, std::move(v));
    drop_device_code(evicted);
}

}  // namespace kiln::jit
