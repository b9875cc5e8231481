// Normalisations: softmax, log_softmax, layer_norm, rms_norm, batch_norm.
//
// Row statistics and the transforms are computed in double and rounded once to the
// output dtype.
// - softmax/log_softmax subtract the row maximum first (NaN anywhere in a row makes the
//   whole row NaN; a row of all -inf gives NaN, as exp(-inf - -inf) is undefined). A
//   non-last axis is moved last through a permuted view made contiguous.
// - layer_norm: mean and biased variance (two passes) over the last axis;
//   y = (x - mean) / sqrt(var + eps) * gamma + beta.
// - rms_norm: y = x / sqrt(mean(x^2) + eps) * gamma.
// - batch_norm (inference form, running statistics given): per channel c of axis 1,
//   y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c].
// Parameter sizes are checked at run time (symbolic dims may only be checked here).
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <cmath>
#include <limits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

void check_param(const char* op, const char* name, const Tensor& p, I64 want, const char* axis) {
    KILN_USER_CHECK(p.rank() == 1 && p.dim(0) == want, op << ": " << name << " has shape " << shape_to_string(p.shape())
                                                          << ", expected [" << want << "] (the size of " << axis
                                                          << ")");
}

}  // namespace

Tensor softmax(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    const I64 axis = node.attrs.i("axis");
    KILN_CHECK(axis >= 0 && axis < x.rank(), "interp: softmax axis " << axis << " out of range");
    const bool log = node.op == ir::Op::log_softmax;
    if (x.numel() == 0) return Tensor::empty(out_shape, x.dtype());
    std::vector<I64> perm, inv(static_cast<std::size_t>(x.rank()));
    for (I64 d = 0; d < x.rank(); ++d)
        if (d != axis) perm.push_back(d);
    perm.push_back(axis);
    for (std::size_t i = 0; i < perm.size(); ++i) inv[static_cast<std::size_t>(perm[i])] = static_cast<I64>(i);
    const Tensor xr = x.permute(perm).contiguous();
    const I64 d = x.dim(axis), m = x.numel() / d;
    Tensor yr = Tensor::empty(xr.shape(), x.dtype());
    dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(xr.data());
        T* py = static_cast<T*>(yr.data());
        core::parallel_range(m, 16 * d, [&](I64 b, I64 e) {
            std::vector<double> t(static_cast<std::size_t>(d));
            for (I64 row = b; row < e; ++row) {
                const T* xi = px + row * d;
                T* yi = py + row * d;
                double mx = -std::numeric_limits<double>::infinity();
                for (I64 k = 0; k < d; ++k) {
                    t[static_cast<std::size_t>(k)] = static_cast<double>(ld<T>(xi[k]));
                    if (t[static_cast<std::size_t>(k)] > mx) mx = t[static_cast<std::size_t>(k)];
                }
                double sum = 0;
                for (I64 k = 0; k < d; ++k) {
                    double& v = t[static_cast<std::size_t>(k)];
                    v -= mx;
                    if (log) sum += std::exp(v);
                    else sum += (v = std::exp(v));
                }
                if (log) {
                    const double ls = std::log(sum);
                    for (I64 k = 0; k < d; ++k) yi[k] = core::convert<T>(t[static_cast<std::size_t>(k)] - ls);
                } else {
                    for (I64 k = 0; k < d; ++k) yi[k] = core::convert<T>(t[static_cast<std::size_t>(k)] / sum);
                }
            }
        });
    });
    return yr.permute(inv).contiguous();
}

Tensor layer_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor& x = in[0];
    const bool rms = node.op == ir::Op::rms_norm;
    const char* name = rms ? "rms_norm" : "layer_norm";
    KILN_CHECK(x.rank() >= 1, "interp: " << name << " on a scalar");
    const I64 d = x.dim(-1);
    check_param(name, "gamma", in[1], d, "the last axis");
    if (!rms) check_param(name, "beta", in[2], d, "the last axis");
    const double eps = node.attrs.f("eps");
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (x.numel() == 0) return out;
    const std::vector<double> gamma = in[1].to_doubles();
    const std::vector<double> beta = rms ? std::vector<double>(static_cast<std::size_t>(d), 0.0) : in[2].to_doubles();
    const Tensor xc = x.contiguous();
    const I64 m = x.numel() / d;
    dispatch_floating(x.dtype(), name, [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(xc.data());
        T* py = static_cast<T*>(out.data());
        core::parallel_range(m, 8 * d, [&](I64 b, I64 e) {
            std::vector<double> t(static_cast<std::size_t>(d));
            for (I64 row = b; row < e; ++row) {
                const T* xi = px + row * d;
                T* yi = py + row * d;
                double sum = 0;
                for (I64 k = 0; k < d; ++k) {
                    const double v = static_cast<double>(ld<T>(xi[k]));
                    t[static_cast<std::size_t>(k)] = v;
                    sum += rms ? v * v : v;
                }
                const double mean = rms ? 0.0 : sum / static_cast<double>(d);
                double var = 0;
                if (rms) {
                    var = sum / static_cast<double>(d);
                } else {
                    for (I64 k = 0; k < d; ++k) {
                        const double c = t[static_cast<std::size_t>(k)] - mean;
                        var += c * c;
                    }
                    var /= static_cast<double>(d);
                }
                const double inv = 1.0 / std::sqrt(var + eps);
                for (I64 k = 0; k < d; ++k) {
                    const std::size_t j = static_cast<std::size_t>(k);
                    yi[k] = core::convert<T>((t[j] - mean) * inv * gamma[j] + beta[j]);
                }
            }
        });
    });
    return out;
}

Tensor rms_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    return layer_norm(node, in, out_shape);
}

Tensor batch_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor& x = in[0];
    KILN_CHECK(x.rank() >= 2, "interp: batch_norm on rank " << x.rank());
    const I64 n = x.dim(0), c = x.dim(1);
    const char* names[] = {"mean", "var", "gamma", "beta"};
    for (int i = 0; i < 4; ++i) check_param("batch_norm", names[i], in[static_cast<std::size_t>(i + 1)], c, "axis 1");
    const double eps = node.attrs.f("eps");
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (x.numel() == 0) return out;
    const std::vector<double> mean = in[1].to_doubles(), var = in[2].to_doubles(), gamma = in[3].to_doubles(),
                              beta = in[4].to_doubles();
    const Tensor xc = x.contiguous();
    const I64 s = x.numel() / (n * c);  // elements per (sample, channel)
    dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(xc.data());
        T* py = static_cast<T*>(out.data());
        core::parallel_range(n * c, 4 * s, [&](I64 b, I64 e) {
            for (I64 plane = b; plane < e; ++plane) {
                const std::size_t ch = static_cast<std::size_t>(plane % c);
                const double inv = 1.0 / std::sqrt(var[ch] + eps);
                const T* xi = px + plane * s;
                T* yi = py + plane * s;
                for (I64 k = 0; k < s; ++k)
                    yi[k] = core::convert<T>((static_cast<double>(ld<T>(xi[k])) - mean[ch]) * inv * gamma[ch] + beta[ch]);
            }
        });
    });
    return out;
}

}  // namespace kiln::interp
