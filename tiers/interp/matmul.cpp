// matmul with NumPy semantics, and the blocked GEMM that conv2d shares.
//
// - A 1-D left operand [K] is treated as [1, K] and a 1-D right operand [K] as [K, 1]; the
//   added dim is absent from the result (out_shape already says so).
// - Batch dims broadcast (NumPy rules) without materialising the broadcast copies: each
//   operand is made dense once and a batch index is mapped to its own batch offset.
// - f16/bf16 operands are converted to f32, multiplied in f32 and rounded once at the end;
//   f32 accumulates in f32 and f64 in f64. K == 0 gives zeros.
// - Work is split across threads by (batch, block of 64 rows).
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <algorithm>
#include <cstring>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

// Register tile of the micro-kernel and the depth of one packed panel of B.
constexpr int kMr = 4;
constexpr int kNr = 8;
constexpr I64 kKc = 256;

// c[0..mr) x [0..nr) += a rows (a[r] points at row r, kc values) times the packed panel bp
// (kc x kNr, zero beyond nr columns).
template <class C>
void micro(I64 kc, const C* const* a, const C* bp, C* c, I64 ldc, int mr, int nr) {
    C acc[kMr][kNr] = {};
    for (I64 k = 0; k < kc; ++k) {
        const C* b = bp + k * kNr;
        for (int r = 0; r < kMr; ++r) {
            const C av = a[r][k];
            for (int j = 0; j < kNr; ++j) acc[r][j] += av * b[j];
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int j = 0; j < nr; ++j) c[r * ldc + j] += acc[r][j];
}

}  // namespace

template <class C>
void gemm_acc(I64 m, I64 n, I64 k, const C* a, I64 lda, const C* b, I64 ldb, C* c, I64 ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    std::vector<C> panel(static_cast<std::size_t>(std::min(k, kKc) * kNr));
    for (I64 k0 = 0; k0 < k; k0 += kKc) {
        const I64 kc = std::min(kKc, k - k0);
        for (I64 j0 = 0; j0 < n; j0 += kNr) {
            const int nr = static_cast<int>(std::min<I64>(kNr, n - j0));
            // Pack B[k0:k0+kc, j0:j0+nr] into kc rows of kNr (zero padded).
            for (I64 kk = 0; kk < kc; ++kk) {
                const C* src = b + (k0 + kk) * ldb + j0;
                C* dst = panel.data() + kk * kNr;
                for (int j = 0; j < kNr; ++j) dst[j] = j < nr ? src[j] : C(0);
            }
            for (I64 i0 = 0; i0 < m; i0 += kMr) {
                const int mr = static_cast<int>(std::min<I64>(kMr, m - i0));
                const C* rows[kMr];
                // Rows past the edge reuse row i0; their results are discarded.
                for (int r = 0; r < kMr; ++r) rows[r] = a + (i0 + (r < mr ? r : 0)) * lda + k0;
                micro(kc, rows, panel.data(), c + i0 * ldc + j0, ldc, mr, nr);
            }
        }
    }
}

template void gemm_acc<float>(I64, I64, I64, const float*, I64, const float*, I64, float*, I64);
template void gemm_acc<double>(I64, I64, I64, const double*, I64, const double*, I64, double*, I64);

Tensor matmul(const Tensor& a_in, const Tensor& b_in, const Shape& out_shape) {
    KILN_CHECK(a_in.rank() >= 1 && b_in.rank() >= 1 && a_in.dtype() == b_in.dtype(), "interp: matmul operands");
    const DType dtype = a_in.dtype(), ct = compute_dtype(dtype);
    Tensor a = a_in.rank() == 1 ? a_in.unsqueeze(0) : a_in;
    Tensor b = b_in.rank() == 1 ? b_in.unsqueeze(1) : b_in;
    const I64 m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
    KILN_USER_CHECK(b.dim(-2) == k, "matmul: contracted dims differ: " << shape_to_string(a_in.shape()) << " @ "
                                                                      << shape_to_string(b_in.shape()));
    // The result's batch dims are out_shape minus the matrix dims that are present.
    const std::size_t out_mat = (a_in.rank() == 1 ? 0 : 1) + (b_in.rank() == 1 ? 0 : 1);
    KILN_CHECK(out_shape.size() >= out_mat, "interp: matmul output rank");
    const Shape batch(out_shape.begin(), out_shape.end() - static_cast<std::ptrdiff_t>(out_mat));
    const I64 nb = numel_of(batch);
    KILN_CHECK(nb * m * n == numel_of(out_shape), "interp: matmul output shape " << shape_to_string(out_shape));

    // Dense operands in the compute dtype; batch offsets follow each operand's own batch dims
    // (a dim of 1, or a missing leading dim, broadcasts).
    const Tensor ac = dense_as(a, ct), bc = dense_as(b, ct);
    auto batch_offsets = [&](const Tensor& t, I64 mat) {
        const I64 tb = t.rank() - 2;
        KILN_USER_CHECK(static_cast<std::size_t>(tb) <= batch.size(),
                        "matmul: cannot broadcast " << shape_to_string(a_in.shape()) << " @ " << shape_to_string(b_in.shape()));
        const std::size_t lead = batch.size() - static_cast<std::size_t>(tb);
        std::vector<I64> offs(static_cast<std::size_t>(nb));
        for (I64 i = 0; i < nb; ++i) {
            I64 rem = i, off = 0, scale = mat;
            for (std::size_t d = batch.size(); d-- > lead;) {
                const I64 idx = rem % batch[d];
                rem /= batch[d];
                const I64 td = t.dim(static_cast<I64>(d - lead));
                KILN_USER_CHECK(td == batch[d] || td == 1, "matmul: cannot broadcast " << shape_to_string(a_in.shape())
                                                                                       << " @ " << shape_to_string(b_in.shape()));
                off += (td == 1 ? 0 : idx) * scale;
                scale *= td;
            }
            offs[static_cast<std::size_t>(i)] = off;
        }
        return offs;
    };
    if (nb == 0 || m == 0 || n == 0) return Tensor::empty(out_shape, dtype);
    const std::vector<I64> aoff = batch_offsets(ac, m * k), boff = batch_offsets(bc, k * n);

    Tensor out = Tensor::zeros(out_shape, ct);
    dispatch_floating(ct, "matmul", [&](auto tag) {
        using C = decltype(tag);
        if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
            const C* pa = static_cast<const C*>(ac.data());
            const C* pb = static_cast<const C*>(bc.data());
            C* pc = static_cast<C*>(out.data());
            constexpr I64 kRows = 64;
            const I64 blocks = (m + kRows - 1) / kRows;
            core::parallel_range(nb * blocks, std::min(m, kRows) * std::max<I64>(k, 1) * n, [&](I64 lo, I64 hi) {
                for (I64 t = lo; t < hi; ++t) {
                    const I64 bi = t / blocks, i0 = (t % blocks) * kRows, rows = std::min(kRows, m - i0);
                    gemm_acc<C>(rows, n, k, pa + aoff[static_cast<std::size_t>(bi)] + i0 * k, k,
                                pb + boff[static_cast<std::size_t>(bi)], n, pc + (bi * m + i0) * n, n);
                }
            });
        } else {
            KILN_UNREACHABLE("interp: matmul compute dtype");
        }
    });
    return ct == dtype ? out : out.astype(dtype);
}

}  // namespace kiln::interp
