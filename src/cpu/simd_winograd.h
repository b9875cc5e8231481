#pragma once
// The Winograd F(4x4, 3x3) kernel (winograd.h) over a traits type S of f32 (simd_kernels.h's
// traits, plus sub(a, b), set1(x), load_lanes(p, lo, hi) (lanes [lo, hi) of p, zeros
// elsewhere, the others not read), and deint4: the values p[4i + j] of 4W floats at p as
// vector j, for j < 4). Included by simd_<isa>.cpp inside its target region,
// after simd_kernels.h; like it, it includes nothing and calls no template of the standard
// library (an instantiation compiled there for AVX-512 could be the one the linker keeps for
// the whole program): winograd.h and <cstring> come before the region.
//
// Per chunk of whole tile rows of the block:
// 1. input transform, per input channel: per tile row, B^T d down its 6 input rows (vectors
//    along the pixels of a row, zeros for the padding); then d B across, on the columns
//    deinterleaved by 4 (vector lane i = tile i of the chunk); V[xi][ic][tile];
// 2. per 32 output channels: 36 GEMMs (xi), register tiles of T tiles x 2 vectors of
//    channels over the input channels (U read from its tile, V broadcast), into
//    M[tile][xi][32];
// 3. output transform per tile and vector of channels: A^T M A, 16 vectors (one per output
//    pixel) transposed to channel rows and stored into the block's rows.
namespace kiln::cpu::simd {

// k = B^T d for one column of 6 values (or the transpose: the same for rows), for the
// points 0, -1, 1, 1/2, -2 (winograd.h), with e = d3 - d1, f = d4 - d2:
//   k0 = (d0 + d4 - 2 d2) + 1.5 e        k3 = f + 2 e
//   k1 = (d1 + d4) + 0.5 d3 - 2.5 d2     k4 = f - 0.5 e
//   k2 = (d4 - d1) + 0.5 d2 + 2.5 d3     k5 = (d1 + d5 - 2 d3) + 1.5 f
template <class S> [[gnu::always_inline]] inline void wino_bt(const typename S::V (&d)[6], typename S::V (&k)[6]) {
    using V = typename S::V;
    const V half = S::set1(0.5f), mhalf = S::set1(-0.5f), two = S::set1(2.0f), mtwo = S::set1(-2.0f);
    const V c15 = S::set1(1.5f), c25 = S::set1(2.5f), mc25 = S::set1(-2.5f);
    const V e = S::sub(d[3], d[1]), f = S::sub(d[4], d[2]);
    k[0] = S::fma(c15, e, S::fma(mtwo, d[2], S::add(d[0], d[4])));
    k[1] = S::fma(mc25, d[2], S::fma(half, d[3], S::add(d[1], d[4])));
    k[2] = S::fma(c25, d[3], S::fma(half, d[2], S::sub(d[4], d[1])));
    k[3] = S::fma(two, e, f);
    k[4] = S::fma(mhalf, e, f);
    k[5] = S::fma(c15, f, S::fma(mtwo, d[3], S::add(d[1], d[5])));
}

// y = A^T m for one column of 6 values (4 results), with a = m1 + m2, b = m2 - m1:
//   y0 = m0 + a + m3 + m4            y2 = a + 4 m4 + m3 / 4
//   y1 = b - 2 m4 + m3 / 2           y3 = b - 8 m4 + m3 / 8 + m5
template <class S> [[gnu::always_inline]] inline void wino_at(const typename S::V (&m)[6], typename S::V (&y)[4]) {
    using V = typename S::V;
    const V half = S::set1(0.5f), quarter = S::set1(0.25f), eighth = S::set1(0.125f);
    const V mtwo = S::set1(-2.0f), four = S::set1(4.0f), meight = S::set1(-8.0f);
    const V a = S::add(m[1], m[2]), b = S::sub(m[2], m[1]);
    y[0] = S::add(S::add(m[0], a), S::add(m[3], m[4]));
    y[1] = S::fma(half, m[3], S::fma(mtwo, m[4], b));
    y[2] = S::fma(quarter, m[3], S::fma(four, m[4], a));
    y[3] = S::add(S::fma(eighth, m[3], S::fma(meight, m[4], b)), m[5]);
}

// acc[t][v] over the input channels: m[t * 36 * kWinoLanes + v * W] = sum over ic of
// v_[ic * ldv + t] * u[ic * kWinoLanes + v * W]. With PF, each step also prefetches the row
// of the next panel of U that the next point reads (pf): U is read once per chunk, from
// memory where it outgrows the caches (resnet18's 256 channels: 9.4 MB), and its panels lie
// ustride apart, which no hardware prefetcher follows.
template <class S, int T, bool PF = false>
[[gnu::always_inline]] inline void wino_micro(std::int64_t cin, const float* u, const float* vt, std::int64_t ldv, float* m,
                                              const float* pf = nullptr) {
    using V = typename S::V;
    constexpr int W = S::W;
    V acc[T][2];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = S::zero();
    for (std::int64_t ic = 0; ic < cin; ++ic) {
        if constexpr (PF) {
            __builtin_prefetch(pf + ic * kWinoLanes);
            __builtin_prefetch(pf + ic * kWinoLanes + 16);
        }
        const V u0 = S::load(u + ic * kWinoLanes), u1 = S::load(u + ic * kWinoLanes + W);
        const float* vr = vt + ic * ldv;
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            const V b = S::bcast(vr + t);
            acc[t][0] = S::fma(b, u0, acc[t][0]);
            acc[t][1] = S::fma(b, u1, acc[t][1]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
        S::store(m + t * kWinoPoints * kWinoLanes, acc[t][0]);
        S::store(m + t * kWinoPoints * kWinoLanes + W, acc[t][1]);
    }
}

// The micro-kernel of n < T tiles (a chunk's last few).
template <class S, int T>
void wino_micro_n(int n, std::int64_t cin, const float* u, const float* vt, std::int64_t ldv, float* m) {
    if constexpr (T > 0) {
        if (n == T) return wino_micro<S, T>(cin, u, vt, ldv, m);
        wino_micro_n<S, T - 1>(n, cin, u, vt, ldv, m);
    }
}

// Padded columns [c, c + W) of image row `row` (w values; pw zeros before it, zeros after).
template <class S>
[[gnu::always_inline]] inline typename S::V wino_cols(const float* row, std::int64_t c, std::int64_t pw, std::int64_t w) {
    const std::int64_t x0 = c - pw;
    if (x0 >= 0 && x0 + S::W <= w) return S::load(row + x0);
    const std::int64_t lo = x0 < 0 ? -x0 : 0, hi = w - x0 < S::W ? w - x0 : S::W;
    if (hi <= lo) return S::zero();
    return S::load_lanes(row + x0, lo, hi);  // (lanes outside [lo, hi) are not read)
}

// V[xi * xs + tile] of one input channel x for the chunk's tile rows [cy0, cy1) (tiles
// numbered from cy0's first, ntx per row, nt in all). Per tile row: B^T d down its 6 input
// rows, read straight from the image (rows outside it are zeros; columns by masked loads at
// the edges), into tmp (6 lines of lw, of which the first 4 ntx + 2 columns are written).
// Its columns [0, 4 ntx) go to line a[i] and [4, 4 ntx + 4) to line b[i] at 4 ntx per tile
// row, so that the chunk's tiles lie at 4 floats apart across its rows (a: a tile's columns
// 0-3, b: 4-5 and two more); then d B across a and b, W tiles a vector (no lanes lost to a
// row's end: a 14 x 14 image has 4 tiles a row). Stores of whole vectors spill past a row's
// end into the next row's place, which its own stores overwrite (and past the last, into
// slack, zero from the kernel's start).
template <class S>
void wino_input(const WinoGeometry& g, const WinoLayout& L, const float* x, std::int64_t cy0, std::int64_t cy1, float* tmp,
                float* ab, float* v, std::int64_t xs) {
    using V = typename S::V;
    constexpr int W = S::W;
    const std::int64_t ntx = g.tiles_x(), lw = L.lw, cols = (4 * ntx + 2 + W - 1) / W * W, pitch = 4 * ntx;
    const std::int64_t nt = (cy1 - cy0) * ntx;
    for (std::int64_t ty = cy0; ty < cy1; ++ty) {
        const std::int64_t iy0 = 4 * ty - g.ph;
        for (std::int64_t c = 0; c < cols; c += W) {
            V d[6], k[6];
#pragma GCC unroll 6
            for (int i = 0; i < 6; ++i)
                d[i] = iy0 + i >= 0 && iy0 + i < g.h ? wino_cols<S>(x + (iy0 + i) * g.w, c, g.pw, g.w) : S::zero();
            wino_bt<S>(d, k);
#pragma GCC unroll 6
            for (int i = 0; i < 6; ++i) S::store(tmp + i * lw + c, k[i]);
        }
        const std::int64_t at = (ty - cy0) * pitch;
        for (int i = 0; i < 6; ++i)
            for (std::int64_t c = 0; c < pitch; c += W) {
                S::store(ab + (2 * i) * L.abw + at + c, S::load(tmp + i * lw + c));
                S::store(ab + (2 * i + 1) * L.abw + at + c, S::load(tmp + i * lw + c + 4));
            }
    }
    for (int i = 0; i < 6; ++i) {
        const float *a = ab + (2 * i) * L.abw, *b = ab + (2 * i + 1) * L.abw;
        float* vi = v + i * 6 * xs;
        for (std::int64_t t = 0; t < nt; t += W) {
            V d[6], k[6];
            S::deint4(a + 4 * t, d[0], d[1], d[2], d[3]);
            V unused[2];  // (columns 6 and 7: their shuffles are dead code)
            S::deint4(b + 4 * t, d[4], d[5], unused[0], unused[1]);
            wino_bt<S>(d, k);
#pragma GCC unroll 6
            for (int j = 0; j < 6; ++j) S::store(vi + j * xs + t, k[j]);
        }
    }
}

// The output pixels of tile t (row ty, column tx) for the vector of channels at lane lo of
// M's rows: A^T M A, stored to channel rows [oc, oc + n) of out.
template <class S>
void wino_output(const WinoGeometry& g, const float* m, std::int64_t ty, std::int64_t tx, float* out, std::int64_t ldo,
                 std::int64_t n) {
    using V = typename S::V;
    constexpr int W = S::W;
    V s[4][6];
    for (int l = 0; l < 6; ++l) {
        V col[6], y[4];
#pragma GCC unroll 6
        for (int k = 0; k < 6; ++k) col[k] = S::load(m + (k * 6 + l) * kWinoLanes);
        wino_at<S>(col, y);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) s[r][l] = y[r];
    }
    V px[16];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        V y[4];
        wino_at<S>(s[r], y);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) px[r * 4 + c] = y[c];
    }
    const std::int64_t nx = g.ow - 4 * tx < 4 ? g.ow - 4 * tx : 4, ny = g.oh - 4 * ty < 4 ? g.oh - 4 * ty : 4;
    alignas(64) float buf[W];
#pragma GCC unroll 2
    for (int h = 0; h < 16 / W; ++h) {
        V r[W];
#pragma GCC unroll 16
        for (int i = 0; i < W; ++i) r[i] = px[h * W + i];
        S::transpose(r);  // r[o]: channel o's pixels h * W .. h * W + W (W / 4 rows of 4)
        for (std::int64_t o = 0; o < n; ++o) {
            S::store(buf, r[o]);
            for (int q = 0; q < W / 4; ++q) {
                const std::int64_t dy = h * (W / 4) + q;
                if (dy >= ny) break;
                float* dst = out + o * ldo + dy * g.ow + 4 * tx;
                if (nx == 4) std::memcpy(dst, buf + 4 * q, 4 * sizeof(float));
                else
                    for (std::int64_t c = 0; c < nx; ++c) dst[c] = buf[4 * q + c];
            }
        }
    }
}

template <class S, int T>
void winograd43(const WinoGeometry& g, const float* x, const float* u, const WinoBlock& b, float* out, float* ws,
                const WinoLayout& L) {
    constexpr int W = S::W, P = 2 * W;
    const std::int64_t ntx = g.tiles_x(), cin = g.cin, ldv = L.ldv, xs = cin * ldv;
    float *tmp = ws + L.tmp, *ab = ws + L.ab, *v = ws + L.v, *m = ws + L.m;
    for (std::int64_t i = 0; i < L.v; ++i) ws[i] = 0.0f;  // tmp's and a / b's slack read as zeros
    for (std::int64_t cy0 = b.ty0; cy0 < b.ty1; cy0 += L.chunk_rows) {
        const std::int64_t cy1 = cy0 + L.chunk_rows < b.ty1 ? cy0 + L.chunk_rows : b.ty1, nt = (cy1 - cy0) * ntx;
        for (std::int64_t ic = 0; ic < cin; ++ic)
            wino_input<S>(g, L, x + ic * g.h * g.w, cy0, cy1, tmp, ab, v + ic * ldv, xs);
        const std::int64_t full = nt / T * T;
        for (std::int64_t oc = 0; oc < b.rows; oc += kWinoLanes) {
            const float* ut = u + (b.oc0 + oc) / kWinoLanes * cin * kWinoLanes;
            const std::int64_t ustride = b.og_tiles * cin * kWinoLanes;
            // Both halves of a 32-channel tile (256 bits) per point, while that point's V is in L1.
            for (int xi = 0; xi < kWinoPoints; ++xi)
                for (int h = 0; h < kWinoLanes / P && oc + h * P < b.rows; ++h) {
                    const float* up = ut + xi * ustride + h * P;
                    const float* vx = v + xi * xs;
                    float* mx = m + xi * kWinoLanes + h * P;
                    // The next panel: the next point's, else the next tile's first (else none).
                    const float* next = xi + 1 < kWinoPoints           ? ut + (xi + 1) * ustride
                                        : oc + kWinoLanes < b.rows ? ut + cin * kWinoLanes
                                                                   : nullptr;
                    std::int64_t t = 0;
                    if (h == 0 && next != nullptr && full > 0) {
                        wino_micro<S, T, true>(cin, up, vx, ldv, mx, next);
                        t = T;
                    }
                    for (; t < full; t += T)
                        wino_micro<S, T>(cin, up, vx + t, ldv, mx + t * kWinoPoints * kWinoLanes);
                    if (full < nt)
                        wino_micro_n<S, T - 1>(static_cast<int>(nt - full), cin, up, vx + full, ldv,
                                               mx + full * kWinoPoints * kWinoLanes);
                }
            for (std::int64_t t = 0; t < nt; ++t) {
                const std::int64_t ty = cy0 + t / ntx, tx = t % ntx;
                float* o = out + oc * b.ldo + 4 * (ty - b.ty0) * g.ow;
                for (std::int64_t lo = 0; lo < kWinoLanes && oc + lo < b.rows; lo += W)
                    wino_output<S>(g, m + t * kWinoPoints * kWinoLanes + lo, ty, tx, o + lo * b.ldo, b.ldo,
                                   b.rows - oc - lo < W ? b.rows - oc - lo : W);
            }
        }
    }
}

}  // namespace kiln::cpu::simd
