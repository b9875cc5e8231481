#include "jit/tiering/disk_cache.h"

#include <kiln/version.h>

#include "src/support/check.h"
#include "src/support/hash.h"
#include "src/support/log.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::jit {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '\0'};
constexpr std::uint32_t kFormat = 1;
constexpr std::size_t kMaxFileBytes = std::size_t{256} << 20;  // larger files are not ours

std::atomic<std::uint64_t> g_tmp_counter{0};

void put_u64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, const std::string& s) {
    put_u64(out, s.size());
    out += s;
}

std::uint64_t checksum(const char* p, std::size_t n) { return support::Hasher().bytes(p, n).digest(); }

// Reads the fields of a file back; every read is bounds-checked.
class Reader {
public:
    Reader(const std::string& s, std::size_t end) : s_(s), end_(end) {}
    bool u64(std::uint64_t* v) {
        if (end_ - pos_ < 8) return false;
        *v = 0;
        for (int i = 0; i < 8; ++i) *v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s_[pos_ + i])) << (8 * i);
        pos_ += 8;
        return true;
    }
    bool str(std::string* out) {
        std::uint64_t n = 0;
        if (!u64(&n) || n > end_ - pos_) return false;
        out->assign(s_, pos_, n);
        pos_ += n;
        return true;
    }
    bool skip(std::size_t n) {
        if (end_ - pos_ < n) return false;
        pos_ += n;
        return true;
    }
    std::size_t pos() const { return pos_; }

private:
    const std::string& s_;
    std::size_t end_, pos_ = 0;
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::unique_ptr<DiskCache> DiskCache::open(const std::string& dir) {
    KILN_USER_CHECK(!dir.empty(), "KILN_CACHE_DIR='' is malformed: expected a directory path");
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        KILN_USER_CHECK(errno == ENOENT, "KILN_CACHE_DIR='" << dir << "': cannot use it: " << errno_text());
        // Create the missing parents with default permissions, the cache itself private.
        std::string leaf = dir;
        while (leaf.size() > 1 && leaf.back() == '/') leaf.pop_back();
        const std::filesystem::path parent = std::filesystem::path(leaf).parent_path();
        std::error_code ec;
        if (!parent.empty()) std::filesystem::create_directories(parent, ec);
        KILN_USER_CHECK(!ec, "KILN_CACHE_DIR='" << dir << "': cannot create '" << parent.string() << "': " << ec.message());
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            KILN_USER_ERROR("KILN_CACHE_DIR='" << dir << "': cannot create it: " << errno_text());
        KILN_USER_CHECK(::stat(dir.c_str(), &st) == 0, "KILN_CACHE_DIR='" << dir << "': cannot use it: " << errno_text());
    }
    KILN_USER_CHECK(S_ISDIR(st.st_mode), "KILN_CACHE_DIR='" << dir << "' is not a directory");
    KILN_USER_CHECK(st.st_uid == ::geteuid(), "KILN_CACHE_DIR='" << dir << "' belongs to user id " << st.st_uid
                                                                   << ", not to this process's user id " << ::geteuid()
                                                                   << "; Kiln loads code only from a directory of its own user");
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        KILN_USER_ERROR("KILN_CACHE_DIR='" << dir << "' is writable by " << ((st.st_mode & S_IWOTH) ? "other users" : "its group")
                                           << " (mode " << mode << "); Kiln would load code others can replace. "
                                           << "Expected a directory only its owner can write (chmod 700)");
    }
    KILN_USER_CHECK(::access(dir.c_str(), R_OK | W_OK | X_OK) == 0,
                    "KILN_CACHE_DIR='" << dir << "': no read/write access: " << errno_text());
    return std::unique_ptr<DiskCache>(new DiskCache(dir));
}

std::string DiskCache::full_key(const std::string& key) const {
    return std::string("kiln ") + version_string() + "\n" + key;
}

std::string DiskCache::path_of(const std::string& key, Kind kind) const {
    const std::string k = full_key(key);
    const std::uint64_t a = support::Hasher().str(k).digest();
    const std::uint64_t b = support::Hasher().str("second half").str(k).digest();
    return dir_ + "/" + support::hex64(a) + support::hex64(b) + (kind == Kind::code ? ".kobj" : ".krec");
}

bool DiskCache::contains(const std::string& key) const {
    std::error_code ec;
    return std::filesystem::exists(path_of(key), ec);
}

std::optional<DiskEntry> DiskCache::load(const std::string& key, Kind kind) {
    const bool count = kind == Kind::code;
    const std::string path = path_of(key, kind);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (count) misses_.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    std::string data;
    char buf[1 << 16];
    while (in && data.size() <= kMaxFileBytes) {
        in.read(buf, sizeof buf);
        data.append(buf, static_cast<std::size_t>(in.gcount()));
    }
    auto bad = [&](const char* why) -> std::optional<DiskEntry> {
        reject(key, why, kind);
        return std::nullopt;
    };
    if (data.size() > kMaxFileBytes) return bad("larger than any entry Kiln writes");
    if (data.size() < sizeof kMagic + 16 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
        return bad("truncated or not a Kiln cache entry");
    const std::size_t body = data.size() - 8;
    Reader tail(data, data.size());
    tail.skip(body);
    std::uint64_t sum = 0;
    tail.u64(&sum);
    if (sum != checksum(data.data(), body)) return bad("checksum mismatch (truncated or corrupted)");
    Reader r(data, body);
    std::uint64_t format = 0;
    std::string stored_key;
    DiskEntry e;
    if (!r.skip(sizeof kMagic) || !r.u64(&format) || format != kFormat) return bad("another format version");
    if (!r.str(&stored_key) || !r.str(&e.symbol) || !r.str(&e.object) || r.pos() != body)
        return bad("malformed fields");
    if (stored_key != full_key(key)) return bad("written for another kernel or configuration");
    if (count) hits_.fetch_add(1, std::memory_order_relaxed);
    return e;
}

void DiskCache::store(const std::string& key, const DiskEntry& entry, Kind kind) {
    const bool count = kind == Kind::code;
    std::string data(kMagic, sizeof kMagic);
    put_u64(data, kFormat);
    put_str(data, full_key(key));
    put_str(data, entry.symbol);
    put_str(data, entry.object);
    put_u64(data, checksum(data.data(), data.size()));

    const std::string path = path_of(key, kind);
    const std::string tmp = dir_ + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++g_tmp_counter);
    auto fail = [&](const std::string& what) {
        write_failures_.fetch_add(1, std::memory_order_relaxed);
        support::log().warn("KILN_CACHE_DIR: cannot write {}: {}: {}", path, what, errno_text());
        ::unlink(tmp.c_str());
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail("open");
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::close(fd);
            return fail("write");
        }
        done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0) return fail("close");
    if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename");
    if (count) writes_.fetch_add(1, std::memory_order_relaxed);
}

void DiskCache::reject(const std::string& key, const std::string& why, Kind kind) {
    if (kind == Kind::code) rejected_.fetch_add(1, std::memory_order_relaxed);
    const std::string path = path_of(key, kind);
    support::log().warn("KILN_CACHE_DIR: ignoring {}: {}; the kernel is compiled again and the entry replaced", path, why);
    ::unlink(path.c_str());
}

DiskCacheStats DiskCache::stats() const {
    DiskCacheStats s;
    s.hits = hits_.load(std::memory_order_relaxed);
    s.misses = misses_.load(std::memory_order_relaxed);
    s.writes = writes_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.write_failures = write_failures_.load(std::memory_order_relaxed);
    return s;
}

}  // namespace kiln::jit
