#pragma once
// Element types and devices.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64, boolean };
inline constexpr int kNumDTypes = 9;

std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                       // "f32", "bool", ...
std::optional<DType> dtype_from_name(std::string_view name);  // inverse of dtype_name
bool is_floating(DType t);                                    // f32, f64, f16, bf16
bool is_integer(DType t);                                     // i8, u8, i32, i64
std::ostream& operator<<(std::ostream& os, DType t);

// IEEE binary16 and bfloat16 storage types: 16 bits, converted through float.
struct Half {
    std::uint16_t bits = 0;
    Half() = default;
    explicit Half(float f);
    explicit operator float() const;
};
struct BFloat16 {
    std::uint16_t bits = 0;
    BFloat16() = default;
    explicit BFloat16(float f);
    explicit operator float() const;
};

// Conversions are inline: kernels convert every element of f16/bf16 tensors.
// binary16: round to nearest even, with subnormals, infinities and NaN.
inline Half::Half(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    std::uint32_t sign = (x >> 16) & 0x8000u;
    std::uint32_t mant = x & 0x7fffffu;
    int exp = static_cast<int>((x >> 23) & 0xffu);
    if (exp == 0xff) {  // inf or nan
        bits = static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
        return;
    }
    int e = exp - 127 + 15;
    if (e >= 0x1f) {  // overflow -> inf
        bits = static_cast<std::uint16_t>(sign | 0x7c00u);
        return;
    }
    if (e <= 0) {  // subnormal or zero
        if (e < -10) {
            bits = static_cast<std::uint16_t>(sign);
            return;
        }
        mant |= 0x800000u;
        int shift = 14 - e;
        std::uint32_t half_mant = mant >> shift;
        std::uint32_t rem = mant & ((1u << shift) - 1);
        std::uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
        bits = static_cast<std::uint16_t>(sign | half_mant);
        return;
    }
    std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
    std::uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: correct
    bits = static_cast<std::uint16_t>(half);
}

inline Half::operator float() const {
    std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    std::uint32_t exp = (bits >> 10) & 0x1fu;
    std::uint32_t mant = bits & 0x3ffu;
    std::uint32_t out;
    if (exp == 0) {
        if (mant == 0) {
            out = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            out = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        out = sign | 0x7f800000u | (mant << 13);
    } else {
        out = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(out);
}

inline BFloat16::BFloat16(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {  // nan: keep it quiet
        bits = static_cast<std::uint16_t>((x >> 16) | 0x40u);
        return;
    }
    std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    bits = static_cast<std::uint16_t>((x + rounding) >> 16);
}
inline BFloat16::operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// The DType of a C++ element type, for Tensor::from / data_as / to_vector.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Where a tensor lives. Only the CPU runs kernels in this version; the GPU kinds are
// named so that options, guards and errors can speak of them.
struct Device {
    enum class Kind : std::uint8_t { cpu, cuda, hip };
    Kind kind = Kind::cpu;
    int index = 0;

    static constexpr Device cpu() { return {Kind::cpu, 0}; }
    static constexpr Device cuda(int i = 0) { return {Kind::cuda, i}; }
    static constexpr Device hip(int i = 0) { return {Kind::hip, i}; }
    std::string to_string() const;                 // "cpu", "cuda:0", "hip:1"
    static Device parse(std::string_view text);    // throws kiln::Error
    friend bool operator==(const Device&, const Device&) = default;
};
std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace kiln
