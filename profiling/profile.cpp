#include "profiling/profile.h"

#include <algorithm>

namespace kiln::profiling {

FunctionProfile::FunctionProfile(const ir::Graph& g) : nodes_(new NodeCounters[g.nodes.size()]) {
    for (ir::ValueId id : g.inputs)
        for (const Dim& d : g.nodes[static_cast<std::size_t>(id)].type.dims)
            for (const auto& s : d.symbols())
                if (std::find(input_symbols_.begin(), input_symbols_.end(), s) == input_symbols_.end())
                    input_symbols_.push_back(s);
}

void FunctionProfile::record_call(const std::vector<Shape>& shapes, const ir::Bindings& b) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = signatures_.find(shapes);
    if (it != signatures_.end()) ++it->second;
    else if (signatures_.size() < kMaxSignatures) signatures_.emplace(shapes, 1);
    else ++other_;
    // Histograms are bounded the same way: a dim that takes many values keeps its first ones.
    for (const auto& s : input_symbols_)
        if (auto v = b.get(s)) {
            auto& h = histograms_[s];
            auto hit = h.find(*v);
            if (hit != h.end()) ++hit->second;
            else if (h.size() < kMaxSignatures) h.emplace(*v, 1);
        }
}

std::vector<SignatureCount> FunctionProfile::signatures() const {
    std::vector<SignatureCount> out;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [shapes, n] : signatures_) out.push_back({shapes, n});
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.calls > b.calls; });
    return out;
}

std::map<std::string, std::map<std::int64_t, std::uint64_t>> FunctionProfile::dim_histograms() const {
    std::lock_guard<std::mutex> lock(mu_);
    return histograms_;
}

std::uint64_t FunctionProfile::other_signatures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return other_;
}

}  // namespace kiln::profiling
