#pragma once
// Hazard pointers for the code sets of groups (jit/exec/group_runtime.h): a call reads a group's
// published CodeSet through a raw pointer without touching a lock or a reference count on
// a line other threads write.
//
// Reader (one HazardSlot per call scratch, so per thread and nesting level):
//   const CodeSet* p = slot.protect(group.code_pointer());  ... use p ...  slot.clear();
// protect() publishes the pointer in the slot and re-reads the source until both agree,
// so a writer that replaced the pointer before the re-read is seen by the reader, and one
// that replaced it after sees the slot (sequentially consistent store and loads).
// Writer (publishing, under the group's lock): store the new pointer, then free only the
// retired sets no slot holds (hazards_snapshot()); the others wait for the next publish or
// the group's destruction.
#include <atomic>
#include <vector>

namespace kiln::jit {

class HazardSlot {
public:
    HazardSlot();   // registers the slot
    ~HazardSlot();  // unregisters it
    HazardSlot(const HazardSlot&) = delete;
    HazardSlot& operator=(const HazardSlot&) = delete;

    template <class T> const T* protect(const std::atomic<const T*>& src) {
        const T* p = src.load(std::memory_order_acquire);
        for (;;) {
            p_.store(p, std::memory_order_seq_cst);
            const T* q = src.load(std::memory_order_seq_cst);
            if (q == p) return p;
            p = q;
        }
    }
    void clear() { p_.store(nullptr, std::memory_order_release); }
    const void* get() const { return p_.load(std::memory_order_seq_cst); }

private:
    alignas(64) std::atomic<const void*> p_{nullptr};
};

// The pointers every registered slot holds now (after the caller's seq_cst store of the
// new pointer). Takes the registry's lock: for writers, never for readers.
std::vector<const void*> hazards_snapshot();

}  // namespace kiln::jit
