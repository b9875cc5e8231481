// The blocked-layout convolution (conv_nchwc.h): the choice of kernel, and the portable one
// (plain loops over the same sum) for hosts without AVX2.
#include "src/cpu/conv_nchwc.h"

#include "src/core/scalar_ops.h"

namespace kiln::cpu {
namespace {

void portable(const NchwcGeometry& g, const float* x, const float* w, const float* bias, float* out, std::int64_t ldb,
              std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1) {
    constexpr std::int64_t L = kNchwcLanes;
    const std::int64_t k = (g.depthwise ? 1 : g.cin) * g.kh * g.kw, plane = g.h * g.w;
    for (std::int64_t ob = ob0; ob < ob1; ++ob)
        for (std::int64_t p = p0; p < p1; ++p) {
            const std::int64_t y = p / g.ow, xo = p % g.ow;
            for (std::int64_t l = 0; l < L; ++l) {
                const bool past = !g.depthwise && ob * L + l >= g.cout;  // (0 before the epilogue)
                float s = bias && !past ? bias[ob * L + l] : 0.0f;
                for (std::int64_t c = 0; c < (past ? 0 : g.depthwise ? 1 : g.cin); ++c)
                    for (std::int64_t i = 0; i < g.kh; ++i)
                        for (std::int64_t j = 0; j < g.kw; ++j) {
                            const std::int64_t iy = y * g.sh - g.ph + i * g.dh, ix = xo * g.sw - g.pw + j * g.dw;
                            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                            const std::int64_t pix = iy * g.w + ix;
                            const float v = g.depthwise       ? x[(ob * plane + pix) * L + l]
                                            : g.blocked_input ? x[((c / L) * plane + pix) * L + c % L]
                                                              : x[c * plane + pix];
                            s += w[(ob * k + (c * g.kh + i) * g.kw + j) * L + l] * v;
                        }
                if (g.residual) s += g.residual[(ob - ob0) * ldb + (p - p0) * L + l];
                // (the vector kernels' clamp: min(hi, max(lo, s)), a NaN s stays NaN)
                if (s < g.lo) s = static_cast<float>(g.lo);
                if (s > g.hi) s = static_cast<float>(g.hi);
                if (g.silu) s = core::scalar::silu(s);
                out[(ob - ob0) * ldb + (p - p0) * L + l] = s;
            }
        }
}

}  // namespace

void conv_nchwc_f32(CpuIsa isa, const NchwcGeometry& g, const float* x, const float* w, const float* bias, float* out,
                    std::int64_t ldb, std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (cap_cpu_isa(isa)) {
    case CpuIsa::avx512: return kAvx512Nchwc(g, x, w, bias, out, ldb, ob0, ob1, p0, p1);
    case CpuIsa::avx2: return kAvx2Nchwc(g, x, w, bias, out, ldb, ob0, ob1, p0, p1);
    case CpuIsa::portable: break;
    }
#endif
    portable(g, x, w, bias, out, ldb, ob0, ob1, p0, p1);
}

}  // namespace kiln::cpu
