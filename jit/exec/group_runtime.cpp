#include "jit/exec/group_runtime.h"

#include "jit/exec/hazard.h"

#include <algorithm>

namespace kiln::jit {

GroupRuntime::GroupRuntime(std::size_t i, passes::Group grp, std::optional<kir::Kernel> k, std::string why,
                           std::shared_ptr<const tiers::CompiledKernel> tier0)
    : index(i), group(std::move(grp)), kernel(std::move(k)), lower_failure(std::move(why)), interpreted(std::move(tier0)) {}

GroupRuntime::~GroupRuntime() = default;

bool GroupRuntime::add_derived(std::vector<void*>& buffers) const {
    const std::vector<kir::Derived>& ds = kernel->derived;
    bool fresh = false;
    std::call_once(derived_once_, [&] {
        fresh = true;
        std::vector<Tensor> made;
        for (const kir::Derived& d : ds) {
            const DType dt = kernel->buffers[static_cast<std::size_t>(d.source)].dtype;
            Tensor t = Tensor::empty({d.elems()}, dt);
            kir::fill_derived(d, dt, buffers[static_cast<std::size_t>(d.source)], t.data());
            made.push_back(std::move(t));
        }
        derived_ = std::move(made);
    });
    for (const Tensor& t : derived_) buffers.push_back(t.data());
    return fresh;
}

const CompiledVersion* select_version(const CodeSet& code, const std::int64_t* params, bool* preferred) {
    for (const auto& sig : code.tier1_signatures) {
        if (!std::equal(sig.begin(), sig.end(), params)) continue;
        for (const auto& v : code.versions)
            if (v.tier < 2 && v.guard.check(params)) {
                if (v.entry) v.entry->touch();
                if (preferred) *preferred = true;
                return &v;
            }
        break;
    }
    for (const auto& v : code.versions)
        if (v.guard.check(params)) {
            if (v.entry) v.entry->touch();
            return &v;
        }
    return nullptr;
}

void GroupRuntime::publish(std::shared_ptr<const CodeSet> c) {
    std::vector<std::shared_ptr<const CodeSet>> unused;  // freed after the lock is released
    {
        std::lock_guard<std::mutex> lock(code_mu_);
        retired_.push_back(std::move(current_));
        current_ = std::move(c);
        code_ptr_.store(current_.get(), std::memory_order_seq_cst);
        const std::vector<const void*> hazards = hazards_snapshot();
        for (auto& r : retired_)
            if (std::find(hazards.begin(), hazards.end(), r.get()) == hazards.end()) unused.push_back(std::move(r));
        std::erase(retired_, nullptr);
    }
}

}  // namespace kiln::jit
