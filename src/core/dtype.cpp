#include <kiln/dtype.h>

#include "src/support/check.h"

#include <bit>
#include <charconv>
#include <ostream>

namespace kiln {
namespace {
struct DTypeInfo {
    std::string_view name;
    std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {{"f32", 4}, {"f64", 8}, {"f16", 2},  {"bf16", 2},
                                 {"i8", 1},  {"u8", 1},  {"i32", 4}, {"i64", 8}, {"bool", 1}};
}  // namespace

std::size_t dtype_size(DType t) { return kDTypes[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
std::optional<DType> dtype_from_name(std::string_view name) {
    for (int i = 0; i < kNumDTypes; ++i)
        if (kDTypes[i].name == name) return static_cast<DType>(i);
    if (name == "boolean") return DType::boolean;
    return std::nullopt;
}
bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
bool is_integer(DType t) { return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64; }
std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

// binary16: round to nearest even, with subnormals, infinities and NaN.
Half::Half(float f) {
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

Half::operator float() const {
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

BFloat16::BFloat16(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {  // nan: keep it quiet
        bits = static_cast<std::uint16_t>((x >> 16) | 0x40u);
        return;
    }
    std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    bits = static_cast<std::uint16_t>((x + rounding) >> 16);
}
BFloat16::operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::string Device::to_string() const {
    switch (kind) {
    case Kind::cpu: return "cpu";
    case Kind::cuda: return "cuda:" + std::to_string(index);
    case Kind::hip: return "hip:" + std::to_string(index);
    }
    return "?";
}

Device Device::parse(std::string_view text) {
    std::string_view kind = text.substr(0, text.find(':'));
    int index = 0;
    if (kind.size() < text.size()) {
        std::string_view num = text.substr(kind.size() + 1);
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
        KILN_USER_CHECK(ec == std::errc() && p == num.data() + num.size() && index >= 0,
                        "device: expected cpu, cuda:N or hip:N, got '" << text << "'");
    }
    if (kind == "cpu" && index == 0) return cpu();
    if (kind == "cuda") return cuda(index);
    if (kind == "hip") return hip(index);
    KILN_USER_ERROR("device: expected cpu, cuda:N or hip:N, got '" << text << "'");
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

}  // namespace kiln
