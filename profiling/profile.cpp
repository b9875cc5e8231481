#include "profiling/profile.h"

#include "src/support/hash.h"

#include <algorithm>

namespace kiln::profiling {

FunctionProfile::FunctionProfile(const ir::Graph& g, std::size_t groups)
    : groups_(new GroupProfile[groups]), num_groups_(groups) {
    for (ir::ValueId id : g.inputs)
        for (const Dim& d : g.nodes[static_cast<std::size_t>(id)].type.dims)
            for (const auto& s : d.symbols())
                if (std::find(input_symbols_.begin(), input_symbols_.end(), s) == input_symbols_.end())
                    input_symbols_.push_back(s);
}

std::uint64_t FunctionProfile::total_group_ns() const {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < num_groups_; ++i) total += groups_[i].ns.load(std::memory_order_relaxed);
    return total;
}

namespace {

std::size_t hash_of(const std::vector<Shape>& shapes) {
    support::Hasher h;
    h.u64(shapes.size());
    for (const Shape& s : shapes) {
        h.u64(s.size());
        for (auto d : s) h.i64(d);
    }
    return static_cast<std::size_t>(h.digest());
}

}  // namespace

FunctionProfile::Signature* FunctionProfile::signature(const std::vector<Shape>& shapes, const ir::Bindings& b) {
    const std::size_t mask = kSlots - 1;
    const std::size_t start = hash_of(shapes) & mask;
    // Lock-free: slots are published once, complete (release), and never change.
    std::size_t i = start;
    for (;; i = (i + 1) & mask) {
        Signature* s = table_[i].load(std::memory_order_acquire);
        if (!s) break;
        if (s->shapes_ == shapes) return s;
    }
    if (full_.load(std::memory_order_relaxed)) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    for (;; i = (i + 1) & mask) {  // slots filled since the probe above
        Signature* s = table_[i].load(std::memory_order_relaxed);
        if (!s) break;
        if (s->shapes_ == shapes) return s;
    }
    if (kept_.size() >= kMaxSignatures) return nullptr;
    auto sig = std::make_unique<Signature>();
    sig->shapes_ = shapes;
    for (const auto& sym : input_symbols_) sig->values_.push_back(b.get(sym));
    Signature* s = sig.get();
    kept_.push_back(std::move(sig));
    table_[i].store(s, std::memory_order_release);
    if (kept_.size() >= kMaxSignatures) full_.store(true, std::memory_order_relaxed);
    return s;
}

void FunctionProfile::record_other(const ir::Bindings& b) {
    std::lock_guard<std::mutex> lock(mu_);
    ++other_;
    for (const auto& sym : input_symbols_)
        if (auto v = b.get(sym)) {
            auto& h = other_histograms_[sym];
            auto hit = h.find(*v);
            if (hit != h.end()) ++hit->second;
            else if (h.size() < kMaxSignatures) h.emplace(*v, 1);
        }
}

std::vector<SignatureCount> FunctionProfile::signatures() const {
    std::vector<SignatureCount> out;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& s : kept_)
            if (auto n = s->calls_.load(std::memory_order_relaxed)) out.push_back({s->shapes_, n});
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.calls != b.calls ? a.calls > b.calls : a.shapes < b.shapes; });
    return out;
}

std::map<std::string, std::map<std::int64_t, std::uint64_t>> FunctionProfile::dim_histograms() const {
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : kept_) {
        const auto n = s->calls_.load(std::memory_order_relaxed);
        if (n == 0) continue;  // planned (warmup, output_shapes), never called
        for (std::size_t k = 0; k < input_symbols_.size(); ++k)
            if (s->values_[k]) out[input_symbols_[k]][*s->values_[k]] += n;
    }
    // Calls past the signature limit; a symbol keeps at most kMaxSignatures values.
    for (const auto& [sym, h] : other_histograms_) {
        auto& m = out[sym];
        for (const auto& [v, n] : h)
            if (auto it = m.find(v); it != m.end()) it->second += n;
            else if (m.size() < kMaxSignatures) m.emplace(v, n);
    }
    return out;
}

std::uint64_t FunctionProfile::other_signatures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return other_;
}

}  // namespace kiln::profiling
