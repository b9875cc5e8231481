// im2col_packed (im2col.h): walks the pixels in runs that stay within one output row and
// one panel, so there is no division per element.
#include "src/cpu/im2col.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

using I64 = std::int64_t;

I64 ceil_div(I64 a, I64 b) { return (a + b - 1) / b; }

}  // namespace

template <class T> void im2col_packed(const Im2colShape& s, const T* src, I64 p0, I64 np, I64 nr, T* col) {
    const I64 ckk = s.c * s.kh * s.kw, tail = ceil_div(np, nr) * nr - np;
    for (I64 c = 0; c < s.c; ++c) {
        const T* plane = src + c * s.h * s.w;
        for (I64 i = 0; i < s.kh; ++i)
            for (I64 j = 0; j < s.kw; ++j) {
                T* row = col + ((c * s.kh + i) * s.kw + j) * nr;
                const I64 off = j * s.dw - s.pw;  // input column = xo * sw + off
                // Output columns whose tap is inside the input row: [xa, xb).
                const I64 xa = std::min(s.ow, off >= 0 ? 0 : ceil_div(-off, s.sw));
                const I64 xb = s.w - 1 - off < 0 ? xa : std::clamp((s.w - 1 - off) / s.sw + 1, xa, s.ow);
                for (I64 q = 0; q < np;) {
                    const I64 p = p0 + q, y = p / s.ow, x0 = p % s.ow;
                    // The rest of this output row, within this panel.
                    const I64 len = std::min({s.ow - x0, np - q, nr - q % nr});
                    T* dst = row + (q / nr) * ckk * nr + q % nr;
                    const I64 iy = y * s.sh - s.ph + i * s.dh;
                    if (iy < 0 || iy >= s.h) {
                        std::fill_n(dst, len, T(0));
                    } else {
                        // Zeros left of xa, input values in [xa, xb), zeros from xb.
                        const T* in = plane + iy * s.w;
                        const I64 a = std::clamp(xa, x0, x0 + len), b = std::clamp(xb, a, x0 + len);
                        std::fill(dst, dst + (a - x0), T(0));
                        if (s.sw == 1) std::copy(in + a + off, in + b + off, dst + (a - x0));
                        else
                            for (I64 xo = a; xo < b; ++xo) dst[xo - x0] = in[xo * s.sw + off];
                        std::fill(dst + (b - x0), dst + len, T(0));
                    }
                    q += len;
                }
                if (tail > 0) std::fill_n(row + (np / nr) * ckk * nr + np % nr, tail, T(0));
            }
    }
}

template void im2col_packed<float>(const Im2colShape&, const float*, I64, I64, I64, float*);
template void im2col_packed<double>(const Im2colShape&, const double*, I64, I64, I64, double*);

}  // namespace kiln::cpu
