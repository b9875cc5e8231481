// The naive double-precision reference of every traced op (see reference.h): helpers,
// conversions, elementwise ops, reductions and normalisation.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace ref {

// ---------------------------------------------------------------- index helpers

std::int64_t numel_of(const Shape& s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

std::vector<std::int64_t> strides_of(const Shape& s) {
    std::vector<std::int64_t> st(s.size(), 1);
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
}

std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& s) {
    std::vector<std::int64_t> idx(s.size(), 0);
    for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
        idx[i] = flat % s[i];
        flat /= s[i];
    }
    return idx;
}

std::int64_t ravel(const std::vector<std::int64_t>& idx, const Shape& s) {
    std::int64_t flat = 0;
    for (std::size_t i = 0; i < s.size(); ++i) flat = flat * s[i] + idx[i];
    return flat;
}

std::int64_t norm_axis(std::int64_t axis, std::int64_t rank) {
    std::int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) throw std::runtime_error("ref: axis out of range");
    return a;
}

std::string shape_str(const Shape& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}

std::string dname(DType dt) { return std::string(kiln::dtype_name(dt)); }

double RTensor::at(const std::vector<std::int64_t>& index) const { return v[ravel(index, shape)]; }

RTensor make(const Shape& shape, std::vector<double> values) {
    if (static_cast<std::int64_t>(values.size()) != numel_of(shape)) throw std::runtime_error("ref::make: size");
    return {shape, std::move(values)};
}

RTensor full(const Shape& shape, double value) {
    return {shape, std::vector<double>(static_cast<std::size_t>(numel_of(shape)), value)};
}

// ---------------------------------------------------------------- conversion

RTensor from_kiln(const kiln::Tensor& t) { return {t.shape(), t.to_doubles()}; }

namespace {
template <class T, class F> kiln::Tensor typed(const RTensor& r, F conv) {
    std::vector<T> vals;
    vals.reserve(r.v.size());
    for (double d : r.v) vals.push_back(conv(d));
    return kiln::Tensor::from_vector<T>(vals, r.shape);
}
}  // namespace

kiln::Tensor to_kiln(const RTensor& r, DType dtype) {
    switch (dtype) {
    case DType::f32: return typed<float>(r, [](double d) { return static_cast<float>(d); });
    case DType::f64: return typed<double>(r, [](double d) { return d; });
    case DType::f16: return typed<kiln::Half>(r, [](double d) { return kiln::Half(static_cast<float>(d)); });
    case DType::bf16: return typed<kiln::BFloat16>(r, [](double d) { return kiln::BFloat16(static_cast<float>(d)); });
    // Integers: through int64, so that out-of-range values wrap (well defined) instead of UB.
    case DType::i8: return typed<std::int8_t>(r, [](double d) { return static_cast<std::int8_t>(static_cast<std::int64_t>(d)); });
    case DType::u8: return typed<std::uint8_t>(r, [](double d) { return static_cast<std::uint8_t>(static_cast<std::int64_t>(d)); });
    case DType::i32: return typed<std::int32_t>(r, [](double d) { return static_cast<std::int32_t>(static_cast<std::int64_t>(d)); });
    case DType::i64: return typed<std::int64_t>(r, [](double d) { return static_cast<std::int64_t>(d); });
    case DType::boolean: return typed<bool>(r, [](double d) { return d != 0.0; });
    }
    throw std::runtime_error("ref::to_kiln: dtype");
}

double wrap_to(DType dt, double v) {
    switch (dt) {
    case DType::i8: return static_cast<std::int8_t>(static_cast<std::int64_t>(v));
    case DType::u8: return static_cast<std::uint8_t>(static_cast<std::int64_t>(v));
    case DType::i32: return static_cast<std::int32_t>(static_cast<std::int64_t>(v));
    case DType::i64: return static_cast<double>(static_cast<std::int64_t>(v));
    case DType::boolean: return v != 0.0 ? 1.0 : 0.0;
    default: return v;
    }
}

RTensor wrap_all(RTensor r, DType dt) {
    for (double& d : r.v) d = wrap_to(dt, d);
    return r;
}

// ---------------------------------------------------------------- broadcasting

Shape broadcast_shape(const Shape& a, const Shape& b) {
    std::size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
        std::int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
        if (da != db && da != 1 && db != 1) throw std::runtime_error("ref: cannot broadcast");
        out[n - 1 - i] = da == 1 ? db : da;
    }
    return out;
}

RTensor broadcast_to(const RTensor& x, const Shape& shape) {
    RTensor out{shape, std::vector<double>(static_cast<std::size_t>(numel_of(shape)))};
    std::size_t lead = shape.size() - x.shape.size();
    for (std::int64_t f = 0; f < out.numel(); ++f) {
        auto oi = unravel(f, shape);
        std::vector<std::int64_t> xi(x.shape.size());
        for (std::size_t d = 0; d < x.shape.size(); ++d) xi[d] = x.shape[d] == 1 ? 0 : oi[lead + d];
        out.v[f] = x.at(xi);
    }
    return out;
}

RTensor map(const RTensor& x, const std::function<double(double)>& f) {
    RTensor out = x;
    for (double& d : out.v) d = f(d);
    return out;
}

RTensor zip(const RTensor& a, const RTensor& b, const std::function<double(double, double)>& f) {
    Shape s = broadcast_shape(a.shape, b.shape);
    RTensor A = broadcast_to(a, s), B = broadcast_to(b, s);
    RTensor out{s, std::vector<double>(A.v.size())};
    for (std::size_t i = 0; i < out.v.size(); ++i) out.v[i] = f(A.v[i], B.v[i]);
    return out;
}

// ---------------------------------------------------------------- elementwise

RTensor add(const RTensor& a, const RTensor& b, DType dt) {
    return wrap_all(zip(a, b, [](double x, double y) { return x + y; }), dt);
}
RTensor sub(const RTensor& a, const RTensor& b, DType dt) {
    return wrap_all(zip(a, b, [](double x, double y) { return x - y; }), dt);
}
RTensor mul(const RTensor& a, const RTensor& b, DType dt) {
    return wrap_all(zip(a, b, [](double x, double y) { return x * y; }), dt);
}
RTensor div(const RTensor& a, const RTensor& b, DType dt) {
    if (kiln::is_integer(dt)) {
        return wrap_all(zip(a, b, [](double x, double y) {
                            if (y == 0) return 0.0;
                            auto xi = static_cast<std::int64_t>(x), yi = static_cast<std::int64_t>(y);
                            return static_cast<double>(xi / yi);  // C++ truncates toward zero
                        }),
                        dt);
    }
    return zip(a, b, [](double x, double y) { return x / y; });
}
RTensor pow(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return std::pow(x, y); }); }
RTensor maximum(const RTensor& a, const RTensor& b) {
    return zip(a, b, [](double x, double y) { return x >= y ? x : y; });
}
RTensor minimum(const RTensor& a, const RTensor& b) {
    return zip(a, b, [](double x, double y) { return x <= y ? x : y; });
}
RTensor lt(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x < y ? 1.0 : 0.0; }); }
RTensor le(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x <= y ? 1.0 : 0.0; }); }
RTensor gt(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x > y ? 1.0 : 0.0; }); }
RTensor ge(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x >= y ? 1.0 : 0.0; }); }
RTensor eq(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x == y ? 1.0 : 0.0; }); }
RTensor ne(const RTensor& a, const RTensor& b) { return zip(a, b, [](double x, double y) { return x != y ? 1.0 : 0.0; }); }

RTensor where(const RTensor& c, const RTensor& a, const RTensor& b) {
    Shape s = broadcast_shape(broadcast_shape(c.shape, a.shape), b.shape);
    RTensor C = broadcast_to(c, s), A = broadcast_to(a, s), B = broadcast_to(b, s);
    RTensor out{s, std::vector<double>(C.v.size())};
    for (std::size_t i = 0; i < out.v.size(); ++i) out.v[i] = C.v[i] != 0 ? A.v[i] : B.v[i];
    return out;
}

RTensor clamp(const RTensor& x, double lo, double hi) {
    return map(x, [=](double v) { return v < lo ? lo : (v > hi ? hi : v); });
}

double cast_value(double v, DType from, DType to) {
    if (to == DType::boolean) return v != 0.0 ? 1.0 : 0.0;
    if (kiln::is_floating(to)) {
        // Rounding to the narrower float is left to the tolerance, except overflow to infinity.
        if (to == DType::f16 && std::fabs(v) >= 65520.0) return v > 0 ? INFINITY : -INFINITY;
        return v;
    }
    // to an integer dtype
    if (kiln::is_floating(from)) {
        if (std::isnan(v)) return 0.0;
        double t = std::trunc(v);
        double lo = 0, hi = 0;
        switch (to) {
        case DType::i8: lo = -128; hi = 127; break;
        case DType::u8: lo = 0; hi = 255; break;
        case DType::i32: lo = -2147483648.0; hi = 2147483647.0; break;
        default:
            lo = static_cast<double>(std::numeric_limits<std::int64_t>::min());
            hi = static_cast<double>(std::numeric_limits<std::int64_t>::max());
            break;
        }
        if (t <= lo) return lo;
        if (t >= hi) return hi;
        return t;
    }
    return wrap_to(to, v);  // integer or bool source: wraps to the width
}

RTensor cast(const RTensor& x, DType from, DType to) {
    return map(x, [=](double v) { return cast_value(v, from, to); });
}

RTensor abs(const RTensor& x, DType dt) { return wrap_all(map(x, [](double v) { return std::fabs(v); }), dt); }
RTensor neg(const RTensor& x, DType dt) { return wrap_all(map(x, [](double v) { return -v; }), dt); }
RTensor exp(const RTensor& x) { return map(x, [](double v) { return std::exp(v); }); }
RTensor log(const RTensor& x) { return map(x, [](double v) { return std::log(v); }); }
RTensor sqrt(const RTensor& x) { return map(x, [](double v) { return std::sqrt(v); }); }
RTensor rsqrt(const RTensor& x) { return map(x, [](double v) { return 1.0 / std::sqrt(v); }); }
RTensor reciprocal(const RTensor& x) { return map(x, [](double v) { return 1.0 / v; }); }
RTensor sin(const RTensor& x) { return map(x, [](double v) { return std::sin(v); }); }
RTensor cos(const RTensor& x) { return map(x, [](double v) { return std::cos(v); }); }
RTensor tanh(const RTensor& x) { return map(x, [](double v) { return std::tanh(v); }); }
RTensor sigmoid(const RTensor& x) { return map(x, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }); }
RTensor relu(const RTensor& x) { return map(x, [](double v) { return v > 0 ? v : 0.0; }); }
RTensor gelu(const RTensor& x, bool tanh_approx) {
    if (tanh_approx) {
        const double k = std::sqrt(2.0 / std::numbers::pi);
        return map(x, [=](double v) { return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))); });
    }
    return map(x, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
}
RTensor silu(const RTensor& x) { return map(x, [](double v) { return v / (1.0 + std::exp(-v)); }); }
RTensor erf(const RTensor& x) { return map(x, [](double v) { return std::erf(v); }); }
RTensor floor(const RTensor& x) { return map(x, [](double v) { return std::floor(v); }); }
RTensor ceil(const RTensor& x) { return map(x, [](double v) { return std::ceil(v); }); }
double round_half_even(double x) {
    double f = std::floor(x);
    double diff = x - f;
    if (diff < 0.5) return f;
    if (diff > 0.5) return f + 1.0;
    return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;  // a tie: the even neighbour
}
RTensor round(const RTensor& x) { return map(x, round_half_even); }
RTensor sign(const RTensor& x) { return map(x, [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }); }
RTensor logical_not(const RTensor& x) { return map(x, [](double v) { return v == 0 ? 1.0 : 0.0; }); }

// ---------------------------------------------------------------- reductions

namespace {

std::vector<bool> reduced_mask(std::vector<std::int64_t> axes, std::int64_t rank) {
    std::vector<bool> m(static_cast<std::size_t>(rank), axes.empty());
    for (auto a : axes) m[norm_axis(a, rank)] = true;
    return m;
}

// Calls f(out_flat, value) for every element, and returns the output shape.
Shape reduce_shape(const Shape& s, const std::vector<bool>& m, bool keepdim) {
    Shape out;
    for (std::size_t d = 0; d < s.size(); ++d) {
        if (!m[d]) out.push_back(s[d]);
        else if (keepdim) out.push_back(1);
    }
    return out;
}

std::int64_t out_flat(const std::vector<std::int64_t>& idx, const Shape& s, const std::vector<bool>& m) {
    std::int64_t f = 0;
    for (std::size_t d = 0; d < s.size(); ++d)
        if (!m[d]) f = f * s[d] + idx[d];
    return f;
}

RTensor reduce(const RTensor& x, const std::vector<std::int64_t>& axes, bool keepdim, double init,
               const std::function<double(double, double)>& f) {
    auto m = reduced_mask(axes, static_cast<std::int64_t>(x.shape.size()));
    Shape os = reduce_shape(x.shape, m, keepdim);
    RTensor out = full(os, init);
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        auto idx = unravel(i, x.shape);
        std::int64_t o = out_flat(idx, x.shape, m);
        out.v[o] = f(out.v[o], x.v[i]);
    }
    return out;
}

std::int64_t reduced_count(const Shape& s, const std::vector<std::int64_t>& axes) {
    auto m = reduced_mask(axes, static_cast<std::int64_t>(s.size()));
    std::int64_t n = 1;
    for (std::size_t d = 0; d < s.size(); ++d)
        if (m[d]) n *= s[d];
    return n;
}

// The flat indices of each lane along `axis`: lanes[k] lists the elements of lane k in order.
std::vector<std::vector<std::int64_t>> lanes(const Shape& s, std::int64_t axis) {
    std::vector<std::vector<std::int64_t>> out;
    Shape outer = s;
    outer[axis] = 1;
    for (std::int64_t o = 0; o < numel_of(outer); ++o) {
        auto idx = unravel(o, outer);
        std::vector<std::int64_t> lane;
        for (std::int64_t k = 0; k < s[axis]; ++k) {
            idx[axis] = k;
            lane.push_back(ravel(idx, s));
        }
        out.push_back(lane);
    }
    return out;
}

RTensor arg_extreme(const RTensor& x, std::int64_t axis, bool keepdim, bool want_max) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    Shape os = x.shape;
    os[a] = 1;
    RTensor out = full(os, 0.0);
    auto ls = lanes(x.shape, a);
    for (std::size_t o = 0; o < ls.size(); ++o) {
        std::int64_t best = 0;
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(ls[o].size()); ++k) {
            double v = x.v[ls[o][k]], b = x.v[ls[o][best]];
            if (std::isnan(b)) break;  // the first NaN is the extreme
            if (std::isnan(v) || (want_max ? v > b : v < b)) best = k;
            if (std::isnan(v)) break;
        }
        out.v[o] = static_cast<double>(best);
    }
    if (!keepdim) os.erase(os.begin() + a);
    out.shape = os;
    return out;
}

}  // namespace

RTensor sum(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim, DType dt) {
    return wrap_all(reduce(x, axes, keepdim, 0.0, [](double acc, double v) { return acc + v; }), dt);
}
RTensor mean(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim) {
    RTensor s = reduce(x, axes, keepdim, 0.0, [](double acc, double v) { return acc + v; });
    double n = static_cast<double>(reduced_count(x.shape, axes));
    for (double& d : s.v) d /= n;
    return s;
}
RTensor max(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim) {
    return reduce(x, axes, keepdim, -std::numeric_limits<double>::infinity(),
                  [](double acc, double v) { return v > acc ? v : acc; });
}
RTensor min(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim) {
    return reduce(x, axes, keepdim, std::numeric_limits<double>::infinity(),
                  [](double acc, double v) { return v < acc ? v : acc; });
}
RTensor prod(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim, DType dt) {
    return wrap_all(reduce(x, axes, keepdim, 1.0, [](double acc, double v) { return acc * v; }), dt);
}
RTensor argmax(const RTensor& x, std::int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, true); }
RTensor argmin(const RTensor& x, std::int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, false); }

// ---------------------------------------------------------------- normalisation

RTensor softmax(const RTensor& x, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    RTensor out = x;
    for (const auto& lane : lanes(x.shape, a)) {
        double m = -std::numeric_limits<double>::infinity();
        for (auto i : lane) m = std::max(m, x.v[i]);
        double s = 0;
        for (auto i : lane) s += std::exp(x.v[i] - m);
        for (auto i : lane) out.v[i] = std::exp(x.v[i] - m) / s;
    }
    return out;
}

RTensor log_softmax(const RTensor& x, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    RTensor out = x;
    for (const auto& lane : lanes(x.shape, a)) {
        double m = -std::numeric_limits<double>::infinity();
        for (auto i : lane) m = std::max(m, x.v[i]);
        double s = 0;
        for (auto i : lane) s += std::exp(x.v[i] - m);
        for (auto i : lane) out.v[i] = x.v[i] - m - std::log(s);
    }
    return out;
}

RTensor layer_norm(const RTensor& x, const RTensor& gamma, const RTensor& beta, double eps) {
    std::int64_t a = static_cast<std::int64_t>(x.shape.size()) - 1;
    RTensor out = x;
    for (const auto& lane : lanes(x.shape, a)) {
        double n = static_cast<double>(lane.size()), mu = 0, var = 0;
        for (auto i : lane) mu += x.v[i];
        mu /= n;
        for (auto i : lane) var += (x.v[i] - mu) * (x.v[i] - mu);
        var /= n;  // biased
        for (std::size_t k = 0; k < lane.size(); ++k)
            out.v[lane[k]] = (x.v[lane[k]] - mu) / std::sqrt(var + eps) * gamma.v[k] + beta.v[k];
    }
    return out;
}

RTensor rms_norm(const RTensor& x, const RTensor& gamma, double eps) {
    std::int64_t a = static_cast<std::int64_t>(x.shape.size()) - 1;
    RTensor out = x;
    for (const auto& lane : lanes(x.shape, a)) {
        double ms = 0;
        for (auto i : lane) ms += x.v[i] * x.v[i];
        ms /= static_cast<double>(lane.size());
        for (std::size_t k = 0; k < lane.size(); ++k) out.v[lane[k]] = x.v[lane[k]] / std::sqrt(ms + eps) * gamma.v[k];
    }
    return out;
}

RTensor batch_norm(const RTensor& x, const RTensor& mean, const RTensor& var, const RTensor& gamma,
                   const RTensor& beta, double eps) {
    RTensor out = x;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        std::int64_t c = unravel(i, x.shape)[1];
        out.v[i] = (x.v[i] - mean.v[c]) / std::sqrt(var.v[c] + eps) * gamma.v[c] + beta.v[c];
    }
    return out;
}

}  // namespace ref
