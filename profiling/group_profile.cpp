#include "profiling/group_profile.h"

#include <algorithm>

namespace kiln::profiling {

std::string_view code_kind_name(CodeKind k) {
    switch (k) {
        case CodeKind::interpreted: return "interpreted";
        case CodeKind::baseline: return "baseline";
        case CodeKind::generic: return "generic";
        case CodeKind::specialised: return "specialised";
    }
    return "?";
}

double GroupProfile::mean_ns(CodeKind k) const {
    const auto timed = timed_by_kind_[index_of(k)].load(std::memory_order_relaxed);
    const auto t = ns_by_kind_[index_of(k)].load(std::memory_order_relaxed);
    return timed ? static_cast<double>(t) / static_cast<double>(timed) : 0.0;
}

SignatureObservation GroupProfile::record_signature(const std::vector<std::int64_t>& params, CodeKind k,
                                                    std::uint64_t call_ns, std::uint64_t weight,
                                                    std::uint64_t n_calls) {
    SignatureObservation obs;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sigs_.find(params);
    if (it == sigs_.end()) {
        if (sigs_.size() >= kMaxSignatures) {
            obs.distinct = sigs_.size();
            return obs;
        }
        it = sigs_.emplace(params, TimeByKind{}).first;
        if (sigs_.size() == 1) {
            first_ = params;
            varying_.assign(params.size(), false);
        } else {
            for (std::size_t p = 0; p < params.size() && p < first_.size(); ++p)
                if (params[p] != first_[p]) varying_[p] = true;
        }
    }
    TimeByKind& t = it->second;
    t.calls += n_calls;
    t.ns[index_of(k)] += weight * call_ns;
    t.timed[index_of(k)] += weight;
    if (weight > 0 && call_ns > 0 && (t.best[index_of(k)] == 0 || call_ns < t.best[index_of(k)])) t.best[index_of(k)] = call_ns;
    obs.kept = true;
    obs.time = t;
    obs.distinct = sigs_.size();
    return obs;
}

std::vector<GroupSignature> GroupProfile::signatures() const {
    std::vector<GroupSignature> out;
    {
        std::lock_guard<std::mutex> lock(mu_);
        out.reserve(sigs_.size());
        for (const auto& [params, t] : sigs_) out.push_back({params, t});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const GroupSignature& a, const GroupSignature& b) { return a.time.calls > b.time.calls; });
    return out;
}

std::size_t GroupProfile::distinct_signatures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sigs_.size();
}

std::vector<bool> GroupProfile::varying_params() const {
    std::lock_guard<std::mutex> lock(mu_);
    return varying_;
}

}  // namespace kiln::profiling
