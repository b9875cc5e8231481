#pragma once
// Element types and devices.
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
