#pragma once
// A 64-bit FNV-1a style hash with a strong final mix; stable across runs and platforms.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::support {

class Hasher {
public:
    Hasher& bytes(const void* data, std::size_t n) {
        const auto* p = static_cast<const unsigned char*>(data);
        for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
        return *this;
    }
    Hasher& u64(std::uint64_t v) { return bytes(&v, sizeof v); }
    Hasher& i64(std::int64_t v) { return bytes(&v, sizeof v); }
    Hasher& f64(double v) { return bytes(&v, sizeof v); }
    Hasher& str(std::string_view s) { u64(s.size()); return bytes(s.data(), s.size()); }
    std::uint64_t digest() const {
        std::uint64_t z = h_;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

private:
    std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

// 16 lowercase hex digits (file names of dumps and cache entries).
inline std::string hex64(std::uint64_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = kDigits[v & 0xf];
    return s;
}

}  // namespace kiln::support
