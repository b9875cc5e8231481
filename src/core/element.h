#pragma once
// Element-type plumbing shared by the tensor code and the interpreter: a switch from DType
// to a C++ type, and value conversion with defined results for every pair (NaN and
// out-of-range floats saturate when converted to integers instead of being UB).
#include <kiln/dtype.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln::core {

// Calls f(T{}) with the storage type of `t`.
template <class F> decltype(auto) dispatch(DType t, F&& f) {
    switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(Half{});
    case DType::bf16: return f(BFloat16{});
    case DType::i8: return f(std::int8_t{});
    case DType::u8: return f(std::uint8_t{});
    case DType::i32: return f(std::int32_t{});
    case DType::i64: return f(std::int64_t{});
    case DType::boolean: return f(bool{});
    }
    return f(float{});
}

template <class T> inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type arithmetic runs in for a storage type: f16/bf16 compute in float.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

template <class To, class From> inline To convert(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (is_half_v<From>) {
        return convert<To>(static_cast<float>(v));
    } else if constexpr (is_half_v<To>) {
        return To(static_cast<float>(v));
    } else if constexpr (std::is_same_v<To, bool>) {
        return v != From(0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
        if (std::isnan(v)) return To(0);
        constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
        constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
        double d = static_cast<double>(v);
        if (d <= lo) return std::numeric_limits<To>::min();
        if (d >= hi) return std::numeric_limits<To>::max();
        return static_cast<To>(d);
    } else {
        return static_cast<To>(v);
    }
}

inline double load_double(const void* p, DType t) {
    return dispatch(t, [&](auto tag) -> double {
        using T = decltype(tag);
        return convert<double>(*static_cast<const T*>(p));
    });
}
inline void store_double(void* p, DType t, double v) {
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        *static_cast<T*>(p) = convert<T>(v);
    });
}

}  // namespace kiln::core
