#pragma once
// The engine's code cache: every kernel an engine's functions compiled, keyed by all the
// code depends on (code_key: the tier and its fingerprint, the kernel IR with its names
// removed, the params bound), accounted in bytes, bounded with least-recently-used
// eviction (Options::code_cache_bytes, KILN_CODE_CACHE_BYTES).
//
// - Sharing: a group that needs code another group (of any function of the engine) already
//   has gets the same entry (a hit) instead of compiling again: identical layers of a model
//   compile once, and a function loaded again reuses what its predecessor compiled.
// - Recency: a call that runs an entry's code touches it (CodeEntry::touch): one relaxed
//   load of the cache's clock and, only when the entry was not used since the clock last
//   moved, one relaxed store. The clock moves when code is admitted, so a steady state of
//   calls writes nothing shared.
// - Eviction: when admitting code takes the cache over its bound, the least recently used
//   other entries leave it (the new entry stays, even alone over the bound). insert() hands
//   them back; the caller passes them to the tier manager's drop (jit/tiering/tier_manager.h) once
//   it holds no group lock, which takes their versions out of every group that published
//   them. Running calls keep the code they loaded alive; the last reference frees it.
#include "tiers/tier.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::jit {

// What publishes an entry's code: a group of a function on the CPU (jit/exec/group_runtime.h)
// or on a device (jit/exec/run_device.h: DeviceGroupCode). Each cache holds one kind: the
// CPU tiers' cache groups, a device's cache device groups; whoever admits code takes the
// evicted entries out of their users (jit/tiering/tier_manager.h, device_tiering.h).
class CodeUser {
public:
    virtual ~CodeUser() = default;
};

struct CodeEntry {
    std::string key;
    std::shared_ptr<const tiers::CompiledKernel> code;
    std::size_t bytes = 0;
    int tier = 0;
    std::uint64_t admitted = 0;                       // admission order (ties of last_use)
    std::atomic<std::uint64_t> last_use{0};           // the cache clock when last run
    const std::atomic<std::uint64_t>* clock = nullptr;
    // False once evicted (set under the cache's lock; read by publishers under their group's
    // lock, so that code evicted between its lookup and its publication is not published).
    std::atomic<bool> resident{true};
    std::vector<std::weak_ptr<CodeUser>> users;       // groups that published it (cache lock)

    void touch() {
        const std::uint64_t now = clock->load(std::memory_order_relaxed);
        if (last_use.load(std::memory_order_relaxed) != now) last_use.store(now, std::memory_order_relaxed);
    }
};

struct CodeCacheStats {
    std::uint64_t bytes = 0, entries = 0, limit_bytes = 0;
    std::uint64_t hits = 0, misses = 0, evictions = 0;
};

// An entry taken out of the cache, with the groups that may still hold it.
struct Evicted {
    std::shared_ptr<CodeEntry> entry;
    std::vector<std::weak_ptr<CodeUser>> users;
};

class CodeCache {
public:
    explicit CodeCache(std::size_t limit_bytes);  // 0: unbounded
    CodeCache(const CodeCache&) = delete;
    CodeCache& operator=(const CodeCache&) = delete;

    // The resident entry for `key`, recording `user` (counted as a hit), or null (a miss).
    std::shared_ptr<CodeEntry> find(const std::string& key, const std::shared_ptr<CodeUser>& user);
    // find() for a caller about to make the code: while another caller has claimed `key`
    // (its compile is in flight), waits for it to end. Returns the resident entry (a hit),
    // or null with `key` claimed by this caller (a miss), who then makes the code, inserts
    // it if it can and calls release(key) in any case. So two groups that need the same code
    // at once compile it once.
    std::shared_ptr<CodeEntry> find_or_claim(const std::string& key, const std::shared_ptr<CodeUser>& user);
    void release(const std::string& key);
    // Whether code for `key` is resident or being made (nothing counted, nothing touched).
    bool contains(const std::string& key) const;
    // Admits freshly made code for `key` and records `user`; when another compile admitted
    // the key first, returns that entry instead (the new code is dropped). Entries evicted
    // to make room are appended to `evicted`.
    std::shared_ptr<CodeEntry> insert(const std::string& key, std::shared_ptr<const tiers::CompiledKernel> code, int tier,
                                      const std::shared_ptr<CodeUser>& user, std::vector<Evicted>* evicted);
    CodeCacheStats stats() const;

private:
    std::size_t limit_;
    std::atomic<std::uint64_t> clock_{1};
    mutable std::mutex mu_;
    std::unordered_map<std::string, std::shared_ptr<CodeEntry>> map_;
    std::unordered_set<std::string> claimed_;  // keys whose code is being made
    std::condition_variable released_;
    std::uint64_t bytes_ = 0, admitted_ = 0;
    std::uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

// The key of the code `tier` would make for `kernel` under `spec`: the tier's name and
// fingerprint, `kir_text` (the kernel printed with its names removed: normalised_kir), and
// the bound params. Equal keys mean interchangeable code.
std::string code_key(const tiers::Tier& tier, const std::string& kir_text, const kir::Specialization& spec);
// The kernel's text with the kernel, buffer and param names blanked: two groups that
// compute the same thing on the same types print the same.
std::string normalised_kir(const kir::Kernel& kernel);

}  // namespace kiln::jit
