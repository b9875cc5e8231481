// Lowering of matmul groups (see lower.h): the matmul (NumPy semantics: 2-D, batched with
// broadcast batch dims, 1-D operands) and its fused epilogue chain, as the plain loop nest
// that kir.h documents with MatmulHint, plus the hint itself.
#include "src/kir/lower_ctx.h"
#include "src/support/limits.h"

#include <algorithm>
#include <sstream>

namespace kiln::kir::detail {
namespace {

using ir::ValueId;

// Rows and columns per outer index (one block of one batch entry; src/support/limits.def).
constexpr std::int64_t kRowBlock = limits::matmul_row_block;
constexpr std::int64_t kColBlock = limits::matmul_col_block;
// A 2-D B that is a graph constant is also packed in panels of this many columns
// (kir::Derived, transposed source; MatmulHint::b_packed): a backend's register tiles then
// read it in order, with no packing per call. Column blocks are whole panels (multiples of 32).
// Each panel is two slabs of 16 columns (kir::Derived::sub), so that a 256-bit strip of 16
// columns reads one slab in order rather than every other cache line of the panel (a stack of
// 24 cold 768 x 768 linears at 128 rows, AMD EPYC Zen 4, 1 thread, 256 bits: 38.1-38.5 ->
// 35.4-37.3 ms; 512 bits within noise); a 512-bit strip of 32 reads its two vectors from the
// two slabs.
constexpr std::int64_t kPackCols = 32;
constexpr std::int64_t kPackSlab = 16;

}  // namespace

void lower_matmul(Lowering& L) {
    const ValueId mm = L.group.nodes.front();
    const ir::Node& mn = L.node(mm);
    if (mn.op != ir::Op::matmul || mn.inputs.size() != 2) throw Unsupported{"the group does not start with a matmul"};
    if (L.group.outputs.size() != 1) throw Unsupported{"a matmul group with more than one output"};
    const ValueId out = L.group.outputs.front();
    const ValueId A = mn.inputs[0], B = mn.inputs[1];
    const DType dt = L.node(A).type.dtype;
    if (!is_floating(dt) || L.node(B).type.dtype != dt) {
        std::ostringstream os;
        os << "matmul of " << dt << " is not lowered (floating dtypes only)";
        throw Unsupported{os.str()};
    }
    const Type t = compute_type(dt);
    const auto& ad = L.node(A).type.dims;
    const auto& bd = L.node(B).type.dims;
    const auto& od = mn.type.dims;
    if (L.node(out).type.dims != od) throw Unsupported{"the epilogue changes the matmul's shape"};
    const std::size_t ra = ad.size(), rb = bd.size(), ro = od.size();
    if (ra < 1 || rb < 1) throw Unsupported{"matmul of a scalar"};
    const bool has_m = ra >= 2, has_n = rb >= 2;
    const std::size_t mat = (has_m ? 1 : 0) + (has_n ? 1 : 0);
    if (ro < mat) throw Unsupported{"matmul output rank"};
    const std::size_t nbd = ro - mat;  // batch dims of the output

    auto dim = [&](ValueId v, std::size_t axis) { return L.known_dim(v, axis); };
    // A batched A times a 2-D B (a linear layer over [batch, sequence, features]) is one
    // product of all A's rows: B is then packed once, not once per batch entry.
    bool fold = has_m && has_n && rb == 2 && nbd > 0 && ra == nbd + 2;
    for (std::size_t d = 0; fold && d < nbd; ++d) fold = ad[d] == od[d];
    const ExprRef M = fold ? L.product(out, 0, nbd + 1) : has_m ? dim(A, ra - 2) : index_const(1);
    const ExprRef K = dim(A, ra - 1);
    const ExprRef N = has_n ? dim(B, rb - 1) : index_const(1);
    const ExprRef batch = fold ? index_const(1) : L.product(out, 0, nbd);
    // Balanced blocks (a bert-base linear of 768 columns: 4 x 192, not 3 x 256, which left
    // one of two threads idle a third of the time); columns in whole register tiles.
    const std::int64_t row_block = balanced_block(M, kRowBlock, 8);
    // Columns that would be one block make two (of whole register tiles): a product of one
    // row block (a batch-1 linear) is then two outer indices that two threads share.
    const std::int64_t col_block = two_blocks_if_one(N, balanced_block(N, kColBlock, 32), 32);
    const ExprRef blocks = ceil_div(M, row_block), cblocks = ceil_div(N, col_block);

    const int vb = L.new_var(), vi = L.new_var(), vj = L.new_var(), vk = L.new_var();
    const ExprRef bv = var(vb), iv = var(vi), jv = var(vj), kv = var(vk);

    // Element offset of batch entry `bv` in operand v (its batch dims align right with the
    // output's; a dim of 1 broadcasts).
    auto batch_offset = [&](ValueId v) {
        const auto& vd = L.node(v).type.dims;
        const std::size_t rv = vd.size(), vbatch = rv >= 2 ? rv - 2 : 0;
        if (vbatch > nbd) throw Unsupported{"matmul operand with more batch dims than the output"};
        ExprRef stride = L.product(v, vbatch, rv), off = index_const(0);
        for (std::size_t d = vbatch; d-- > 0;) {
            const std::size_t e = d + nbd - vbatch;
            ExprRef idx = idiv(bv, L.product(out, e + 1, nbd));
            if (e != 0) idx = irem(idx, dim(out, e));
            const ExprRef vdim = dim(v, d);
            if (!(vd[d].is_static() && vd[d].value() == 1)) {
                ExprRef term = imul(idx, stride);
                if (!vd[d].is_static() && !(vd[d] == od[e]))
                    term = select(binary(BinaryOp::eq, vdim, index_const(1)), index_const(0), term);
                off = iadd(off, term);
            }
            stride = imul(stride, vdim);
        }
        return off;
    };
    const ExprRef aoff = fold ? index_const(0) : batch_offset(A), boff = fold ? index_const(0) : batch_offset(B);
    const int abuf = L.input_buffer(A, "a matmul operand"), bbuf = L.input_buffer(B, "a matmul operand");

    // The dot product.
    const int acc = L.new_temp(t);
    const ExprRef at = temp(acc, t);
    std::vector<StmtRef> jbody;
    jbody.push_back(assign(acc, constant(t, 0.0)));
    const ExprRef a_el = load(abuf, t, iadd(aoff, iadd(imul(iv, K), kv)));
    const ExprRef b_el = load(bbuf, t, iadd(boff, iadd(imul(kv, N), jv)));
    jbody.push_back(loop(vk, index_const(0), K, {assign(acc, binary(BinaryOp::add, at, binary(BinaryOp::mul, a_el, b_el)))}));

    // The epilogue: the chain from the matmul's result to the output, stored at (b, i, j).
    std::vector<std::size_t> starts;
    std::vector<ExprRef> seg;
    if (fold) {
        starts.push_back(0), seg.push_back(iv);  // row iv spans the batch dims and M
    } else {
        if (nbd > 0) starts.push_back(0), seg.push_back(bv);
        if (has_m) starts.push_back(nbd), seg.push_back(iv);
    }
    if (has_n) starts.push_back(nbd + (has_m ? 1 : 0)), seg.push_back(jv);
    Space sp = L.make_space(out, starts, seg);
    std::vector<StmtRef> epi;
    Phase ph{&sp, &epi, {}};
    L.special[mm] = [at](Phase&) { return at; };
    L.store_outputs({out}, ph);
    for (const StmtRef& s : epi) jbody.push_back(s);

    // outer -> (batch entry, row block, column block).
    const ExprRef per_batch = imul(blocks, cblocks);
    const ExprRef ob = idiv(outer(), per_batch);
    const ExprRef row0 = imul(irem(idiv(outer(), cblocks), blocks), index_const(row_block));
    const ExprRef col0 = imul(irem(outer(), cblocks), index_const(col_block));
    StmtRef jl = loop(vj, col0, imin(iadd(col0, index_const(col_block)), N), std::move(jbody));
    StmtRef il = loop(vi, row0, imin(iadd(row0, index_const(row_block)), M), {jl});
    L.k.body = {loop(vb, ob, iadd(ob, index_const(1)), {il})};
    L.k.extent = imul(batch, per_batch);

    MatmulHint h;
    h.a = abuf;
    h.b = bbuf;
    h.out = L.output_buffer(out);
    h.type = t;
    h.m = M;
    h.n = N;
    h.k = K;
    h.batch = batch;
    h.row_block = row_block;
    h.col_block = col_block;
    h.batch_var = vb;
    h.row_var = vi;
    h.col_var = vj;
    h.acc_temp = acc;
    h.a_offset = aoff;
    h.b_offset = boff;
    h.epilogue = std::move(epi);
    std::int64_t n_c = 0, k_c = 0;
    if (dt == DType::f32 && rb == 2 && L.node(B).op == ir::Op::constant && const_value(N, &n_c) && const_value(K, &k_c) &&
        k_c >= 1 && n_c >= 1) {
        h.b_packed = static_cast<int>(L.k.derived.size());
        Derived d{bbuf, 1, n_c, k_c, kPackCols};
        d.transposed = true;
        d.sub = kPackSlab;
        L.k.derived.push_back(d);
    }
    L.k.matmul = std::move(h);
}

}  // namespace kiln::kir::detail
