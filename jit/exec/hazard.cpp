#include "jit/exec/hazard.h"

#include <algorithm>
#include <mutex>

namespace kiln::jit {
namespace {

struct Registry {
    std::mutex mu;
    std::vector<const HazardSlot*> slots;
};

// Never destroyed: slots of threads that exit late (thread_local scratch) unregister from it.
Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}

}  // namespace

HazardSlot::HazardSlot() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.slots.push_back(this);
}

HazardSlot::~HazardSlot() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    std::erase(r.slots, this);
}

std::vector<const void*> hazards_snapshot() {
    Registry& r = registry();
    std::vector<const void*> out;
    std::lock_guard<std::mutex> lock(r.mu);
    out.reserve(r.slots.size());
    for (const HazardSlot* s : r.slots)
        if (const void* p = s->get()) out.push_back(p);
    return out;
}

}  // namespace kiln::jit
