#pragma once
// Lowering of a fusion group (passes::Group) into one KIR kernel.
//
// Requires: `group` comes from passes::partition(g) (so its invariants hold, see fuse.h).
// Ensures: for elementwise, row_reduction, matmul and conv groups, a kernel that kir::verify accepts and
// that, run over [0, eval_index(extent, params)), writes every group output exactly as the
// interpreter would compute it (within dtype tolerance: fused f16/bf16 intermediates stay
// in f32 instead of being rounded to 16 bits between ops), for every run-time shape the
// graph admits. For other groups, or a group it cannot express, nullopt and a reason in
// `*why` (when `why` is not null).
//
// Kernel layout:
// - buffers: the group's inputs (in order, named in0, in1, ...), then its outputs (out0,
//   ...); dense row-major, of the values' dtypes;
// - params: one per distinct symbolic dim the kernel needs (named "in0.d1", "out0.d0"),
//   with the buffer and dim it is read from; static dims of the graph are constants;
// - elementwise: every output has the group's shape S. When every input has shape S (or
//   holds one element) or S has rank <= 1, the outer index is the flat element index
//   (extent numel(S)); else the outer index is a row of S (extent: the product of all but
//   the row's dims) and an inner loop runs over the row: the last dim, and the dims before
//   it on which every input is whole or broadcast. A short row (at most 64 values) whose
//   input is broadcast along the static dims before it (squeeze-excite's scale in the
//   blocked layout, [N, Cb, 1, 1, 16]) runs a middle loop over those dims, so that an outer
//   index holds up to about 1024 values. Broadcast inputs are indexed
//   through index arithmetic; a symbolic input dim that may be 1 at run time contributes
//   select(p == 1, 0, stride), so one kernel serves every shape;
// - row_reduction: the outer index is a row (extent: the product of the kept dims). Loops
//   over the row compute the statistics into temporaries (softmax: max, then sum of exp;
//   layer_norm: mean, then variance; rms_norm: mean of squares; sum/mean: a sum; max/min:
//   the extreme), recomputing the fused producers from the group inputs in every pass;
//   the write (a loop over the row, or one store per row for sum/mean/max/min) applies the
//   fused consumers. A chain of row ops (fuse.h) runs each row op's statistics passes in
//   turn; a later pass gets an earlier row op's result by recomputing it inline from its
//   statistics (e.g. (x[j] - mean) * inv * gamma[j] + beta[j]), so the intermediate is never
//   stored unless it is a group output, and then once, in the last pass over the row.
//   Statistics follow the interpreter's formulas: softmax, log_softmax, layer_norm and
//   rms_norm of f32 rows (f16/bf16 too) in f32, of f64 rows in f64; floating sum/mean in
//   f64; integer sums wrap in i64; max/min in the compute type.
// - matmul: floating dtypes (2-D, batched with broadcast batch dims, 1-D operands) and its
//   fused epilogue chain, as the loop nest documented with kir::MatmulHint (kir.h): the
//   outer index is a block of rows of one batch entry, loops over columns and k accumulate
//   in a temporary of the operands' compute type (f32 and f16/bf16 accumulate in f32, like
//   the interpreter; f64 in f64), the epilogue computes the chain and stores; the hint
//   describes it for blocked backends. Integer matmuls are not lowered;
// - conv: conv2d of floating dtypes (NCHW input, OIHW weight, optional bias, grouped,
//   strided, dilated, zero padded) and its fused epilogue chain, as an implicit GEMM: the
//   matmul loop nest with the weight as A and the input's im2col matrix (kir::Im2col, never
//   built) as B; an outer index is a block of output channels and of output pixels of one
//   (sample, group) pair; conv2d_nchwc (the blocked channel layout) likewise, as a plain
//   nest without a MatmulHint (src/kir/lower_conv_nchwc.cpp);
// Not checked by the kernel (the caller guards, as the interpreter raises errors there):
// gamma/beta sizes equal to the normalised dim; max/min over a zero-length row (the kernel
// then writes -inf/+inf or the integer type's limit where the interpreter throws).
// Tests: tests/test_kir.cpp.
#include "src/ir/ir.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"

#include <optional>
#include <string>

namespace kiln::kir {

std::optional<Kernel> lower(const ir::Graph& g, const passes::Group& group, std::string* why);

}  // namespace kiln::kir
