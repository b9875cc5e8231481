#pragma once
// The persistent code cache (KILN_CACHE_DIR): object code of tier-2 kernels written by one
// process and loaded by the next, so a restarted service does not pay for its compiles again.
//
// - Key: the code cache's key (jit/exec/code_cache.h: tier, tier fingerprint = backend version,
//   host CPU and features, code generation settings; normalised kernel IR; bound params)
//   plus Kiln's version. The file name is a 128-bit hash of it; the file holds the whole
//   key, so a hash collision or a file of another configuration is detected, not loaded.
// - Format: "KILNOBJ" magic, format version, key, entry symbol, object bytes, then a 64-bit
//   checksum of everything before it. A truncated, corrupted or foreign entry is rejected
//   (counted, logged), and the recompiled code replaces it.
// - Beside code (NAME.kobj), records about it (NAME.krec: the tier-2 versions a function held,
//   jit/tiering/version_record.h) in the same format; the stats count only code.
// - Writes are atomic: a private temporary file in the directory, then rename(2); readers
//   see the old entry or the new one, never a part.
// - The directory is created with mode 0700 when missing. An existing directory must belong
//   to this user and be writable by nobody else; otherwise open() throws kiln::Error: code
//   from a directory others can write would run in this process.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kiln::jit {

struct DiskEntry {
    std::string object;  // relocatable object file
    std::string symbol;  // its entry point
};

struct DiskCacheStats {
    std::uint64_t hits = 0, misses = 0, writes = 0, rejected = 0, write_failures = 0;
};

class DiskCache {
public:
    // Opens (creating when missing) the cache directory `dir`; throws kiln::Error naming
    // KILN_CACHE_DIR, the path and the problem when it is unsafe or unusable.
    static std::unique_ptr<DiskCache> open(const std::string& dir);

    // What an entry holds: object code (NAME.kobj, counted in the stats), or a record about
    // code (NAME.krec, e.g. jit/tiering/version_record.h; not counted).
    enum class Kind : std::uint8_t { code, record };
    // The entry stored under `key`, or nullopt (missing, or rejected: see above).
    std::optional<DiskEntry> load(const std::string& key, Kind kind = Kind::code);
    // Whether code for `key` is stored (not read, not checked, not counted).
    bool contains(const std::string& key) const;
    // Stores an entry (atomically replacing any previous one); failures are counted and
    // logged, never thrown.
    void store(const std::string& key, const DiskEntry& entry, Kind kind = Kind::code);
    // Counts an entry that read back fine but that the tier could not load, and removes it.
    void reject(const std::string& key, const std::string& why, Kind kind = Kind::code);

    const std::string& dir() const { return dir_; }
    std::string path_of(const std::string& key, Kind kind = Kind::code) const;  // where `key` is stored
    DiskCacheStats stats() const;

private:
    explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
    std::string full_key(const std::string& key) const;

    std::string dir_;
    std::atomic<std::uint64_t> hits_{0}, misses_{0}, writes_{0}, rejected_{0}, write_failures_{0};
};

}  // namespace kiln::jit
