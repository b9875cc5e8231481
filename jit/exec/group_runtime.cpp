#include "jit/exec/group_runtime.h"

#include "jit/exec/hazard.h"
#include "src/kir/lower.h"

#include <algorithm>

namespace kiln::jit {

// The lowering decides what it can express and says why when it cannot.
GroupRuntime::GroupRuntime(const ir::Graph& g, passes::Group grp) : group(std::move(grp)) {
    kernel = kir::lower(g, group, &lower_failure);
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
