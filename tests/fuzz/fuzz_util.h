#pragma once
// Shared by the fuzz targets (tests/fuzz/fuzz_*.cpp): choices read from the input bytes, and
// the rule every target checks: each outcome of a public call is a result or a kiln::Error.
// Anything else (another exception, a result that breaks an invariant, a disagreement) is a
// finding: it is printed to stderr and the process aborts, so that libFuzzer, or the replay
// runner (replay_main.cpp), stops and keeps the input.
#include <kiln/kiln.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace kiln::fuzz {

// The most elements a fuzz input may make Kiln allocate or visit in one tensor (8 MiB of
// doubles): larger requests that are legitimate are skipped, never made.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 20;

[[noreturn]] inline void finding(const std::string& what) {
    std::cerr << "\nFUZZ FINDING: " << what << std::endl;
    std::abort();
}

// With KILN_FUZZ_VERBOSE=1 in the environment, the targets say what each input did (to read
// what a seed or a regression input exercises): KILN_FUZZ_LOG(message << parts).
inline bool verbose() {
    static const bool v = std::getenv("KILN_FUZZ_VERBOSE") && std::string(std::getenv("KILN_FUZZ_VERBOSE")) == "1";
    return v;
}
#define KILN_FUZZ_LOG(msg)                                 \
    do {                                                   \
        if (::kiln::fuzz::verbose()) std::cerr << msg << "\n"; \
    } while (0)

// KILN_FUZZ_CHECK(condition, message << parts): a finding when the condition is false.
#define KILN_FUZZ_CHECK(cond, msg)                                              \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::ostringstream kiln_fuzz_os_;                                   \
            kiln_fuzz_os_ << msg << " [" #cond "]";                             \
            ::kiln::fuzz::finding(kiln_fuzz_os_.str());                         \
        }                                                                       \
    } while (0)

// Runs f(): true when it returned, false when it threw kiln::Error (its message in *error, if
// given); any other exception is a finding naming `what`.
template <class F>
bool attempt(std::string_view what, F&& f, std::string* error = nullptr) {
    try {
        f();
        return true;
    } catch (const Error& e) {
        if (error) *error = e.what();
        return false;
    } catch (const std::exception& e) {
        finding(std::string(what) + ": threw " + typeid(e).name() + " (not kiln::Error): " + e.what());
    } catch (...) {
        finding(std::string(what) + ": threw something that is not a std::exception");
    }
}

// The input bytes as a stream of choices; past the end, every choice reads zeros. Each choice
// reads the same number of bytes whatever the state, and a target never makes two choices in
// the arguments of one call (their order would depend on the compiler), so that an input means
// the same in the fuzz build (clang) and in the replays (gcc).
class Bytes {
public:
    Bytes(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}

    bool empty() const { return p_ == end_; }
    std::uint8_t byte() { return p_ == end_ ? 0 : *p_++; }
    std::uint64_t bits(int nbytes) {
        std::uint64_t v = 0;
        for (int i = 0; i < nbytes; ++i) v |= static_cast<std::uint64_t>(byte()) << (8 * i);
        return v;
    }
    bool flag() { return byte() & 1; }
    // A whole number in [lo, hi] (hi - lo < 2^16; lo when hi < lo), from one byte (two when hi - lo > 255).
    std::int64_t in(std::int64_t lo, std::int64_t hi) {
        const std::uint64_t n = hi > lo ? static_cast<std::uint64_t>(hi - lo) + 1 : 1;
        return lo + static_cast<std::int64_t>(bits(n > 256 ? 2 : 1) % n);
    }
    template <class T> T pick(std::initializer_list<T> options) { return options.begin()[in(0, static_cast<std::int64_t>(options.size()) - 1)]; }
    template <class T> const T& pick(const std::vector<T>& options) { return options[static_cast<std::size_t>(in(0, static_cast<std::int64_t>(options.size()) - 1))]; }

    // A dim, stride, axis or index: mostly small, else a value at an edge of int64 arithmetic
    // (2^31, 2^62, INT64_MAX, negatives, ...) or any 64-bit value.
    std::int64_t extent() {
        const std::uint8_t b = byte();
        if (b < 160) return b % 10;
        static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
        static constexpr std::int64_t kEdges[] = {16, 33, 1000, 65536, (std::int64_t{1} << 31) - 1, std::int64_t{1} << 31,
                                                  std::int64_t{1} << 32, std::int64_t{1} << 40, std::int64_t{1} << 61,
                                                  std::int64_t{1} << 62, kMax, kMax - 1, kMax / 2 + 1, -1, -2, -5,
                                                  -(std::int64_t{1} << 31), std::numeric_limits<std::int64_t>::min(),
                                                  3486784401 /* 3^20 */, 1000000007};
        constexpr std::size_t n = sizeof(kEdges) / sizeof(kEdges[0]);
        if (b < 160 + n) return kEdges[b - 160];
        return static_cast<std::int64_t>(bits(8));
    }
    // A value: ordinary ones, or an edge of the float types (huge, tiny, denormal, ±inf, NaN).
    double value() {
        const std::uint8_t b = byte();
        static constexpr double kValues[] = {0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 100.0, 65504.0, 65520.0, 1e20, -3e38,
                                             3.4e38, 1e-38, 1e-45, 5e-324, -0.0, 1e300,
                                             std::numeric_limits<double>::infinity(),
                                             -std::numeric_limits<double>::infinity(),
                                             std::numeric_limits<double>::quiet_NaN(), 127.5, 255.9, -129.0,
                                             2147483648.0, 9.3e18};
        constexpr std::size_t n = sizeof(kValues) / sizeof(kValues[0]);
        if (b < n) return kValues[b];
        const std::uint64_t raw = bits(8);
        double d;
        std::memcpy(&d, &raw, sizeof d);
        return d;
    }
    DType dtype() {
        return pick({DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64,
                     DType::boolean});
    }

private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
};

// "[2,3]"
inline std::string str(const Shape& s) { return shape_to_string(s); }

// ---- the size rules of kiln/tensor.h, computed independently ----
// The element count (0 when a dim is 0), or -1 when a dim is negative or the count overflows.
inline std::int64_t count(const Shape& s) {
    bool zero = false;
    for (std::int64_t d : s) {
        if (d < 0) return -1;
        zero = zero || d == 0;
    }
    if (zero) return 0;
    std::int64_t n = 1;
    for (std::int64_t d : s)
        if (__builtin_mul_overflow(n, d, &n)) return -1;
    return n;
}
// Whether a dense tensor of `s` can exist: its count, byte size and row-major strides (a zero
// dim counting as 1) fit in int64.
inline bool dense_fits(const Shape& s, DType dt) {
    std::int64_t n = count(s), bytes = 0, stride = 1;
    if (n < 0 || __builtin_mul_overflow(n, static_cast<std::int64_t>(dtype_size(dt)), &bytes)) return false;
    for (std::size_t i = s.size(); i-- > 1;)
        if (__builtin_mul_overflow(stride, s[i] > 0 ? s[i] : 1, &stride)) return false;
    return true;
}

}  // namespace kiln::fuzz
