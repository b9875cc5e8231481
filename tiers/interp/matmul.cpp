// matmul with NumPy semantics, on the interpreter's GEMM (gemm.h, shared with conv2d).
//
// - A 1-D left operand [K] is treated as [1, K] and a 1-D right operand [K] as [K, 1]; the
//   added dim is absent from the result (out_shape already says so).
// - Batch dims broadcast (NumPy rules) without materialising the broadcast copies: each
//   operand is made dense once and a batch index is mapped to its own batch offset.
// - f16/bf16 operands are converted to f32, multiplied in f32 and rounded once at the end;
//   f32 accumulates in f32 and f64 in f64 (with FMA where the CPU has it, so results may
//   differ from a separate multiply and add in the last bit). K == 0 gives zeros. As in
//   the plain sum of products, a NaN in row i of A (column j of B) makes row i (column j)
//   of the result NaN, and an Inf makes it Inf or NaN.
// - Work is split into (batch, row part, column part) tasks: one task per matrix on one
//   thread, about four per thread otherwise (split_gemm picks the parts).
#include "src/core/strided.h"
#include "src/support/check.h"
#include "src/cpu/gemm.h"
#include "tiers/interp/kernels.h"

#include <algorithm>

namespace kiln::interp {

using I64 = std::int64_t;

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
            const cpu::CpuIsa isa = cpu::kernel_cpu_isa();
            const int width = core::parallel_width();
            const I64 parts = width > 1 && nb * m * n * k >= (I64(1) << 20) ? (4 * width + nb - 1) / nb : 1;
            const cpu::GemmSplit sp = cpu::split_gemm(m, n, k, parts);
            const I64 per_matrix = sp.row_parts * sp.col_parts;
            core::parallel_range(nb * per_matrix, sp.rows_per_part * sp.cols_per_part * std::max<I64>(k, 1), [&](I64 lo, I64 hi) {
                for (I64 t = lo; t < hi; ++t) {
                    const I64 bi = t / per_matrix, part = t % per_matrix;
                    const I64 i0 = (part / sp.col_parts) * sp.rows_per_part, j0 = (part % sp.col_parts) * sp.cols_per_part;
                    const I64 rows = std::min(sp.rows_per_part, m - i0), cols = std::min(sp.cols_per_part, n - j0);
                    cpu::gemm_acc<C>(isa, rows, cols, k, pa + aoff[static_cast<std::size_t>(bi)] + i0 * k, k,
                                pb + boff[static_cast<std::size_t>(bi)] + j0, n, pc + (bi * m + i0) * n + j0, n);
                }
            });
        } else {
            KILN_UNREACHABLE("interp: matmul compute dtype");
        }
    });
    return ct == dtype ? out : out.astype(dtype);
}

}  // namespace kiln::interp
