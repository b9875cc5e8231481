// conv2d (NCHW input, OIHW weight, grouped, strided, dilated, zero padded) and the 2-D
// pools.
//
// - conv2d lowers each (sample, group, block of output pixels) to im2col + GEMM
//   (gemm_acc, shared with matmul), so the scratch column buffer stays bounded; the output
//   block starts from the bias (or 0). f16/bf16 compute in f32 and round once at the end;
//   f32 accumulates in f32, f64 in f64.
// - Pools ignore padded positions: max_pool2d takes the max over the real elements of a
//   window (NaN propagates) and avg_pool2d divides the double sum by the number of real
//   elements (count_include_pad = false). A window with no real element (only possible
//   when H or W is 0) gives the dtype's lowest value (-inf for floats) for max and NaN for
//   avg; global_avg_pool2d over an empty plane gives NaN.
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

struct Window {
    I64 k, s, p, d;
};

template <class C> bool is_nan(C v) {
    if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
    else return false;
}

}  // namespace

Tensor conv2d(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor &x = in[0], &w = in[1];
    KILN_CHECK(x.rank() == 4 && w.rank() == 4 && out_shape.size() == 4, "interp: conv2d ranks");
    const auto &stride = node.attrs.ints("stride"), &padding = node.attrs.ints("padding"),
               &dilation = node.attrs.ints("dilation");
    const I64 groups = node.attrs.i("groups");
    const I64 n = x.dim(0), cin = x.dim(1), h = x.dim(2), wd = x.dim(3);
    const I64 o = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    KILN_USER_CHECK(cin == cg * groups, "conv2d: input has " << cin << " channels, expected weight dim 1 (" << cg
                                                             << ") * groups (" << groups << ")");
    KILN_CHECK(o % groups == 0 && out_shape[0] == n && out_shape[1] == o, "interp: conv2d output shape");
    if (in.size() == 3)
        KILN_USER_CHECK(in[2].rank() == 1 && in[2].dim(0) == o,
                        "conv2d: bias has shape " << shape_to_string(in[2].shape()) << ", expected [" << o << "]");
    const Window wh{kh, stride[0], padding[0], dilation[0]}, ww{kw, stride[1], padding[1], dilation[1]};
    const I64 oh = out_shape[2], ow = out_shape[3], og = o / groups;
    const I64 npix = oh * ow, ckk = cg * kh * kw;
    const DType ct = compute_dtype(x.dtype());
    Tensor out = Tensor::empty(out_shape, ct);
    if (out.numel() == 0) return ct == x.dtype() ? out : out.astype(x.dtype());

    const Tensor xc = dense_as(x, ct), wc = dense_as(w, ct);
    const std::vector<double> bias = in.size() == 3 ? in[2].to_doubles() : std::vector<double>(static_cast<std::size_t>(o), 0.0);
    // Pixels per task: keep the column buffer near 2^18 elements, a multiple of 8 wide.
    const I64 pb = std::min(npix, std::max<I64>(8, ((I64(1) << 18) / std::max<I64>(ckk, 1)) / 8 * 8));
    const I64 pblocks = (npix + pb - 1) / pb;

    dispatch_floating(ct, "conv2d", [&](auto tag) {
        using C = decltype(tag);
        if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
            const C* px = static_cast<const C*>(xc.data());
            const C* pw = static_cast<const C*>(wc.data());
            C* po = static_cast<C*>(out.data());
            core::parallel_range(n * groups * pblocks, og * std::max<I64>(ckk, 1) * pb, [&](I64 lo, I64 hi) {
                std::vector<C> col(static_cast<std::size_t>(ckk * pb));
                for (I64 t = lo; t < hi; ++t) {
                    const I64 ni = t / (groups * pblocks), g = (t / pblocks) % groups, p0 = (t % pblocks) * pb;
                    const I64 np = std::min(pb, npix - p0);
                    // im2col: row (c, i, j) of the block holds input pixels for every output pixel.
                    for (I64 c = 0; c < cg; ++c) {
                        const C* plane = px + ((ni * cin) + g * cg + c) * h * wd;
                        for (I64 i = 0; i < kh; ++i)
                            for (I64 j = 0; j < kw; ++j) {
                                C* row = col.data() + ((c * kh + i) * kw + j) * np;
                                for (I64 q = 0; q < np; ++q) {
                                    const I64 p = p0 + q, y = p / ow, xo = p % ow;
                                    const I64 iy = y * wh.s - wh.p + i * wh.d, ix = xo * ww.s - ww.p + j * ww.d;
                                    row[q] = (iy >= 0 && iy < h && ix >= 0 && ix < wd) ? plane[iy * wd + ix] : C(0);
                                }
                            }
                    }
                    C* dst = po + (ni * o + g * og) * npix + p0;
                    for (I64 oc = 0; oc < og; ++oc)
                        std::fill_n(dst + oc * npix, np, static_cast<C>(bias[static_cast<std::size_t>(g * og + oc)]));
                    gemm_acc<C>(og, np, ckk, pw + g * og * ckk, ckk, col.data(), np, dst, npix);
                }
            });
        } else {
            KILN_UNREACHABLE("interp: conv2d compute dtype");
        }
    });
    return ct == x.dtype() ? out : out.astype(x.dtype());
}

Tensor pool2d(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    KILN_CHECK(x.rank() == 4 && out_shape.size() == 4, "interp: pool ranks");
    const bool is_max = node.op == ir::Op::max_pool2d;
    const auto &kernel = node.attrs.ints("kernel"), &stride = node.attrs.ints("stride"),
               &padding = node.attrs.ints("padding");
    const I64 h = x.dim(2), wd = x.dim(3), oh = out_shape[2], ow = out_shape[3];
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    const Tensor xc = x.contiguous();
    core::dispatch(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        using C = core::compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            KILN_UNREACHABLE("interp: pooling on bool");
        } else {
            const T* px = static_cast<const T*>(xc.data());
            T* po = static_cast<T*>(out.data());
            const I64 planes = x.dim(0) * x.dim(1);
            core::parallel_range(planes, oh * ow * kernel[0] * kernel[1], [&](I64 lo, I64 hi) {
                for (I64 pl = lo; pl < hi; ++pl) {
                    const T* src = px + pl * h * wd;
                    T* dst = po + pl * oh * ow;
                    for (I64 y = 0; y < oh; ++y) {
                        const I64 y0 = y * stride[0] - padding[0];
                        const I64 ya = std::max<I64>(y0, 0), yb = std::min(y0 + kernel[0], h);
                        for (I64 xo = 0; xo < ow; ++xo) {
                            const I64 x0 = xo * stride[1] - padding[1];
                            const I64 xa = std::max<I64>(x0, 0), xb = std::min(x0 + kernel[1], wd);
                            if (is_max) {
                                C best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                                              : std::numeric_limits<C>::lowest();
                                bool nan = false;
                                for (I64 iy = ya; iy < yb && !nan; ++iy)
                                    for (I64 ix = xa; ix < xb; ++ix) {
                                        const C v = ld<T>(src[iy * wd + ix]);
                                        if (is_nan(v)) {
                                            best = v;
                                            nan = true;
                                            break;
                                        }
                                        if (v > best) best = v;
                                    }
                                dst[y * ow + xo] = st<T>(best);
                            } else {
                                double sum = 0;
                                for (I64 iy = ya; iy < yb; ++iy)
                                    for (I64 ix = xa; ix < xb; ++ix) sum += static_cast<double>(ld<T>(src[iy * wd + ix]));
                                const I64 count = std::max<I64>(yb - ya, 0) * std::max<I64>(xb - xa, 0);
                                dst[y * ow + xo] = core::convert<T>(count ? sum / static_cast<double>(count)
                                                                          : std::numeric_limits<double>::quiet_NaN());
                            }
                        }
                    }
                }
            });
        }
    });
    return out;
}

Tensor global_avg_pool2d(const Tensor& x, const Shape& out_shape) {
    KILN_CHECK(x.rank() == 4, "interp: global_avg_pool2d rank");
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    const Tensor xc = x.contiguous();
    const I64 plane = x.dim(2) * x.dim(3);
    dispatch_floating(x.dtype(), "global_avg_pool2d", [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(xc.data());
        T* po = static_cast<T*>(out.data());
        core::parallel_range(out.numel(), std::max<I64>(plane, 1), [&](I64 lo, I64 hi) {
            for (I64 i = lo; i < hi; ++i) {
                double sum = 0;
                for (I64 k = 0; k < plane; ++k) sum += static_cast<double>(ld<T>(px[i * plane + k]));
                po[i] = core::convert<T>(plane ? sum / static_cast<double>(plane) : std::numeric_limits<double>::quiet_NaN());
            }
        });
    });
    return out;
}

}  // namespace kiln::interp
