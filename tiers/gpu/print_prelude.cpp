// The prelude of the printed source (see print_p.h): C types, literals, and the helper
// functions that give the ops the formulas of src/core/scalar_ops.h and the conversions of
// src/core/element.h and kiln::Half / kiln::BFloat16, written out because the source
// includes no header. Every helper is a small static device function; a kernel's prelude
// holds the ones it calls.
#include "tiers/gpu/print_p.h"

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::tiers::gpu::detail {

using kir::Type;

const char* c_type(Type t) {
    switch (t) {
    case Type::f32: return "float";
    case Type::f64: return "double";
    case Type::i8: return "signed char";
    case Type::u8: return "unsigned char";
    case Type::i32: return "int";
    case Type::i64:
    case Type::index: return "long long";
    case Type::boolean: return "bool";
    }
    return "void";
}

const char* storage_type(DType d) {
    switch (d) {
    case DType::f16:
    case DType::bf16: return "unsigned short";
    case DType::boolean: return "unsigned char";
    default: return c_type(kir::compute_type(d));
    }
}

std::string float_literal(Type t, double v) {
    char buf[64];
    if (t == Type::f32) {
        const float f = static_cast<float>(v);
        if (!std::isfinite(f)) {
            std::snprintf(buf, sizeof buf, "__builtin_bit_cast(float, 0x%08" PRIx32 "u)", std::bit_cast<std::uint32_t>(f));
            return buf;
        }
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
    } else {
        if (!std::isfinite(v)) {
            std::snprintf(buf, sizeof buf, "__builtin_bit_cast(double, 0x%016" PRIx64 "ull)", std::bit_cast<std::uint64_t>(v));
            return buf;
        }
        std::snprintf(buf, sizeof buf, "%.17g", v);
    }
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    if (t == Type::f32) s += "f";
    return s[0] == '-' ? "(" + s + ")" : s;
}

std::string int_literal(Type t, std::int64_t v) {
    switch (t) {
    case Type::boolean: return v != 0 ? "true" : "false";
    case Type::i8: return "(signed char)(" + std::to_string(static_cast<std::int8_t>(v)) + ")";
    case Type::u8: return "(unsigned char)" + std::to_string(static_cast<std::uint8_t>(v));
    case Type::i32: return "(" + std::to_string(static_cast<std::int32_t>(v)) + ")";
    case Type::i64:
    case Type::index:
        if (v == std::numeric_limits<std::int64_t>::min()) return "(-9223372036854775807LL - 1)";
        return v < 0 ? "(" + std::to_string(v) + "LL)" : std::to_string(v) + "LL";
    default: return float_literal(t, static_cast<double>(v));
    }
}

namespace {

struct Helper {
    std::string name;
    std::vector<std::string> calls;  // helpers it calls (printed before it)
    std::string text;
};

constexpr const char* kFn = "static __device__ inline ";

// The helpers of float type t (f32 or f64): NaN-propagating max/min, relu and sign that
// keep NaN, the sigmoid that never overflows exp, silu and both gelus.
void float_helpers(Type t, std::vector<Helper>& out) {
    const std::string T = c_type(t), n = std::string(kir::type_name(t)), f = t == Type::f32 ? "f" : "";
    auto lit = [&](double v) { return float_literal(t, v); };
    const std::string zero = lit(0.0), one = lit(1.0), head = kFn + T + " kiln_";
    out.push_back({"kiln_max_" + n, {},
                   head + "max_" + n + "(" + T + " x, " + T + " y) { return x != x ? x : (y != y ? y : (y > x ? y : x)); }"});
    out.push_back({"kiln_min_" + n, {},
                   head + "min_" + n + "(" + T + " x, " + T + " y) { return x != x ? x : (y != y ? y : (y < x ? y : x)); }"});
    out.push_back({"kiln_relu_" + n, {}, head + "relu_" + n + "(" + T + " x) { return x > " + zero + " ? x : (x != x ? x : " + zero + "); }"});
    out.push_back({"kiln_sign_" + n, {},
                   head + "sign_" + n + "(" + T + " x) { return x > " + zero + " ? " + one + " : (x < " + zero + " ? " + lit(-1.0) +
                       " : (x != x ? x : " + zero + ")); }"});
    out.push_back({"kiln_sigmoid_" + n, {},
                   head + "sigmoid_" + n + "(" + T + " x) {\n    if (x >= " + zero + ") return " + one + " / (" + one + " + exp" + f +
                       "(-x));\n    const " + T + " e = exp" + f + "(x);\n    return e / (" + one + " + e);\n}"});
    out.push_back({"kiln_silu_" + n, {"kiln_sigmoid_" + n}, head + "silu_" + n + "(" + T + " x) { return x * kiln_sigmoid_" + n + "(x); }"});
    out.push_back({"kiln_gelu_erf_" + n, {},
                   head + "gelu_erf_" + n + "(" + T + " x) { return " + lit(0.5) + " * x * (" + one + " + erf" + f + "(x * " +
                       lit(0.70710678118654752440) + ")); }"});
    out.push_back({"kiln_gelu_tanh_" + n, {},
                   head + "gelu_tanh_" + n + "(" + T + " x) {\n    return " + lit(0.5) + " * x * (" + one + " + tanh" + f + "(" +
                       lit(0.79788456080286535588) + " * (x + " + lit(0.044715) + " * x * x * x)));\n}"});
}

// The helpers of integer type t: division (x / 0 == 0, MIN / -1 == MIN), abs that wraps,
// and the saturating conversion from a float (NaN -> 0), computed on the float as a double.
void int_helpers(Type t, std::vector<Helper>& out) {
    const std::string T = c_type(t), n = std::string(kir::type_name(t)), head = kFn + T + " kiln_";
    const bool is_signed = t != Type::u8;
    const std::string wrap_neg = "(" + T + ")(0ull - (unsigned long long)x)";
    out.push_back({"kiln_div_" + n, {},
                   head + "div_" + n + "(" + T + " x, " + T + " y) { return y == 0 ? (" + T + ")0 : " +
                       (is_signed ? "(y == -1 ? " + wrap_neg + " : (" + T + ")(x / y))" : "(" + T + ")(x / y)") + "; }"});
    if (is_signed) out.push_back({"kiln_abs_" + n, {}, head + "abs_" + n + "(" + T + " x) { return x < 0 ? " + wrap_neg + " : x; }"});
    std::int64_t lo = 0, hi = 0;
    switch (t) {
    case Type::i8: lo = std::numeric_limits<std::int8_t>::min(), hi = std::numeric_limits<std::int8_t>::max(); break;
    case Type::u8: lo = 0, hi = std::numeric_limits<std::uint8_t>::max(); break;
    case Type::i32: lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max(); break;
    default: lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max(); break;
    }
    out.push_back({"kiln_sat_" + n, {},
                   head + "sat_" + n + "(double d) {\n    if (d != d) return 0;\n    if (d <= " +
                       float_literal(Type::f64, static_cast<double>(lo)) + ") return " + int_literal(t, lo) + ";\n    if (d >= " +
                       float_literal(Type::f64, static_cast<double>(hi)) + ") return " + int_literal(t, hi) + ";\n    return (" + T +
                       ")d;\n}"});
}

// kiln::Half and kiln::BFloat16's conversions (include/kiln/dtype.h), bit for bit.
void half_helpers(std::vector<Helper>& out) {
    out.push_back({"kiln_f16_to_f32", {}, std::string(kFn) + R"(float kiln_f16_to_f32(unsigned short h) {
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu;
    unsigned mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | ((unsigned)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    return __builtin_bit_cast(float, bits);
})"});
    out.push_back({"kiln_f32_to_f16", {}, std::string(kFn) + R"(unsigned short kiln_f32_to_f16(float f) {
    const unsigned x = __builtin_bit_cast(unsigned, f), sign = (x >> 16) & 0x8000u;
    unsigned mant = x & 0x7fffffu;
    const int exp = (int)((x >> 23) & 0xffu);
    if (exp == 0xff) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf, nan
    const int e = exp - 127 + 15;
    if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);  // overflow: inf
    if (e <= 0) {  // subnormal or zero
        if (e < -10) return (unsigned short)sign;
        mant |= 0x800000u;
        const int shift = 14 - e;
        unsigned h = mant >> shift;
        const unsigned rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
        return (unsigned short)(sign | h);
    }
    unsigned h = sign | ((unsigned)e << 10) | (mant >> 13);
    const unsigned rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
    return (unsigned short)h;
})"});
    out.push_back({"kiln_bf16_to_f32", {},
                   std::string(kFn) + "float kiln_bf16_to_f32(unsigned short h) { return __builtin_bit_cast(float, (unsigned)h << 16); }"});
    out.push_back({"kiln_f32_to_bf16", {}, std::string(kFn) + R"(unsigned short kiln_f32_to_bf16(float f) {
    const unsigned x = __builtin_bit_cast(unsigned, f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // nan: keep it quiet
    return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
})"});
}

const std::vector<Helper>& helpers() {
    static const std::vector<Helper> all = [] {
        std::vector<Helper> v;
        half_helpers(v);
        for (Type t : {Type::f32, Type::f64}) float_helpers(t, v);
        for (Type t : {Type::i8, Type::u8, Type::i32, Type::i64}) int_helpers(t, v);
        return v;
    }();
    return all;
}

}  // namespace

bool is_helper(const std::string& name) {
    for (const Helper& h : helpers())
        if (h.name == name) return true;
    return false;
}

std::string prelude(const std::set<std::string>& names, Dialect) {
    // Both dialects compile the same helpers: NVRTC and HIPRTC declare the device math
    // functions (expf, erf, rintf, ...) without a header, and __builtin_bit_cast is a
    // builtin of both front ends.
    std::set<std::string> want = names;
    for (bool grew = true; grew;) {  // close over the helpers' calls
        grew = false;
        for (const Helper& h : helpers())
            if (want.count(h.name))
                for (const std::string& c : h.calls) grew |= want.insert(c).second;
    }
    std::string out;
    for (const Helper& h : helpers())  // table order: a helper follows the ones it calls
        if (want.count(h.name)) out += h.text + "\n";
    return out;
}

}  // namespace kiln::tiers::gpu::detail
