#pragma once
// The code generator of the blocked GEMM behind emit_gemm (codegen.h), private to the LLVM
// tier: one class whose dense matrix paths (the packed loop nest, streamed rows, the register
// tiles and the epilogue) are defined in gemm.cpp and whose convolution paths (the depthwise
// kernel's calls, the grid of phase planes, im2col packing) in gemm_conv.cpp. The plan of
// both is at the top of gemm.cpp.
#include "tiers/llvm/codegen.h"
#include "tiers/llvm/ir_loops.h"

#include "src/cpu/depthwise.h"
#include "src/cpu/gemm.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tiers::llvm_tier::gemm_detail {

using llvm::Value;

// chan() at 512 bits: dense images of at most these pixels collect their runs in rows
// (crows_: 32 rows of them, 37 KiB at 256 pixels) for one epilogue over each row, as at 256
// bits; larger ones run it per run.
inline constexpr std::int64_t kChanRowsMax = 256;
inline constexpr std::int64_t kBPrefetchK = 16;  // blocked(): depth steps a 256-bit tile prefetches B ahead
// micro(): depth steps per iteration of a 256-bit tile of 4 or more rows. 128 x 768 x 3072
// MatMul + bias (bert-base's first linear), 1 thread, AMD EPYC Zen 3, median of six
// interleaved runs: 9.81 ms at 1, 8.62 at 4, 8.52 at 8 (ONNX Runtime 8.60).
inline constexpr int kUnrollK = 4;
inline constexpr std::int64_t kStreamCols = 512;  // columns per call of the rows kernel (stream())
// Pixels of one channel per call of the depthwise kernel (depthwise()): fewer calls, and
// fewer input rows read twice by consecutive calls; the stack buffer holds them.
inline constexpr std::int64_t kDwCols = 2048;
inline constexpr std::int64_t kStreamRows = cpu::kMaxStreamedRows;  // blocks of at most these rows stream B
// chan(): the most output pixels of a register tile (2 R accumulators), and the fewest
// where a row is longer. Up to 14 fit AVX-512's registers, but runs of 14 ran no faster than
// two of 7 on resnet18's 14 x 14 layers and their code compiled ~30% slower (resnet18's
// tier-2 compile time 420-560 -> 390-420 ms in all, AMD EPYC Zen 4).
inline constexpr std::int64_t kMaxChanRun = 7;
inline constexpr std::int64_t kMinChanRun = 4;
// chan() where a tile's weights are larger than twice this: the depth in blocks of this many
// bytes of the tile's weights (they stay in L1 while kChanBlockRuns runs read them: of a
// dense image, or the runs of as many whole output rows), the runs' partial sums kept on the
// stack between blocks. 1 thread, AMD EPYC Zen 5, 512 bits: squeezenet1_1's classifier
// (512 -> 1000 1x1 at 13 x 13, whose tile of 32 channels reads 64 KB of weights a run)
// 1.08-1.27 -> 0.84-0.98 ms (ONNX Runtime 0.81-0.93); resnet18's 512 -> 512 3x3 at 7 x 7
// (590 KB a tile) 1.34-1.40 -> 1.08-1.11 ms (ONNX Runtime 1.05-1.09), its 256 -> 512 of
// stride 2 0.66 -> 0.61 ms, the whole model at batch 1 13.9-14.3 -> 12.8-13.0 ms with the
// same median tier-2 compile (15.3-16.1 ms); blocks of 8 KB or runs 4 or 8 at a time were
// no faster, 32 KB slower.
inline constexpr std::int64_t kChanDepthBytes = 16384;
inline constexpr std::int64_t kChanBlockRuns = 16;
static_assert(kDwCols <= kStreamRows * kStreamCols, "depthwise() runs in the stack buffer");

class GemmGen : IrLoops {
public:
    GemmGen(const kir::Kernel& k, const CodegenTarget& target, KernelEmitter& em);

    void run(Value* begin, Value* end);

private:
    const kir::MatmulHint& h_;
    const kir::Kernel& kern_;
    KernelEmitter& em_;
    llvm::Type* t_ = nullptr;
    llvm::FixedVectorType* vt_ = nullptr;
    int es_ = 4, vw_ = 8, nv_ = 2, nr_ = 16, mr_ = 6;
    DType da_ = DType::f32, db_ = DType::f32;  // how A and B are stored (f16/bf16: widened on load)
    std::int64_t kc_ = 256, nc_ = 128;
    llvm::AllocaInst* tile_ = nullptr;
    llvm::AllocaInst* sbuf_ = nullptr;  // stream(): kStreamCols columns of up to kStreamRows rows
    llvm::AllocaInst* geo_ = nullptr;   // depthwise(): the geometry (cpu::Im2colShape)
    llvm::AllocaInst* dwp_ = nullptr;   // depthwise(): the planes', then the filters' pointers
    llvm::AllocaInst* dacc_ = nullptr;  // grid(): the accumulators
    llvm::AllocaInst* cacc_t_ = nullptr;  // chan(): its accumulators
    llvm::AllocaInst* crows_ = nullptr;   // chan()'s dense images (kChanRowsMax): a tile's rows of the block's pixels
    std::int64_t crows_ld_ = 0;           // (their stride)
    llvm::AllocaInst* cpart_ = nullptr;   // chan()'s depth blocks: the partial sums of kChanBlockRuns runs
    llvm::AllocaInst* dw_inits_ = nullptr;  // depthwise_planes(): each plane's bias (DirectDw)
    llvm::AllocaInst* dw_ok_ = nullptr;     // depthwise_planes(): the planes' bases are uniform
    Value *m_ = nullptr, *n_ = nullptr, *k_dim_ = nullptr, *blocks_ = nullptr, *cblocks_ = nullptr, *nce_ = nullptr;
    Value *a_ = nullptr, *bbuf_ = nullptr, *bp_ = nullptr, *cacc_ = nullptr;
    Value* bpk_ = nullptr;  // B packed once (MatmulHint::b_packed), or null: packed per call
    // At 256 bits a dense 1x1 conv (dense_conv() bound true, operands of the compute type)
    // runs blocked() as the GEMM of its weights and its image, a K x pixels matrix at stride
    // N that pack_b() packs like a matmul's B (run()).
    bool dense_gemm_ = false;
    // The code may use AVX-512 instructions (CodegenTarget::prefer_512): not where KILN_CPU_ISA
    // caps it, even when a test forces 512-bit vectors (which LLVM then splits).
    bool avx512_ = false;
    bool whole_depth_ = false;  // B packed once and M bound to <= kStreamRows: one depth block, no software prefetch (run())
    Value* wino_u_ = nullptr;  // A as its Winograd transform (MatmulHint::winograd), when winograd_applies()
    std::int64_t bpanel_ = 0;  // columns per panel of that B (its kir::Derived's lanes)
    std::int64_t bslab_ = 0;   // columns per slab of a panel (kir::Derived::sub, or the panel)
    std::int64_t bslab_elems_ = 0;  // elements from one slab of a panel to the next (k x slab)
    Value *im_h_ = nullptr, *im_w_ = nullptr, *im_kw_ = nullptr, *im_khw_ = nullptr, *im_ow_ = nullptr;  // im2col

    Value* elem(Value* base, Value* idx) { return b_.CreateInBoundsGEP(t_, base, idx); }

    // Operands (A, B, the conv input) as stored: element `idx` of one stored as `d`, and a
    // load of `n` such elements (n == 1: a scalar) widened to the compute type.
    llvm::Type* storage(DType d) {
        switch (d) {
        case DType::f16: case DType::bf16: return b_.getInt16Ty();
        case DType::f64: return b_.getDoubleTy();
        default: return b_.getFloatTy();
        }
    }
    Value* selem(DType d, Value* base, Value* idx) { return b_.CreateInBoundsGEP(storage(d), base, idx); }
    Value* load_in(DType d, Value* p, int n) {
        auto vec = [&](llvm::Type* e) -> llvm::Type* { return n == 1 ? e : llvm::FixedVectorType::get(e, static_cast<unsigned>(n)); };
        Value* raw = b_.CreateAlignedLoad(vec(storage(d)), p, llvm::Align(dtype_size(d)));
        switch (d) {
        case DType::f16: return b_.CreateFPExt(b_.CreateBitCast(raw, vec(b_.getHalfTy())), vec(t_));
        case DType::bf16: return bf16_to_float(b_, raw);
        default: return raw;
        }
    }
    bool widened_b() const { return db_ == DType::f16 || db_ == DType::bf16; }
    bool widened_a() const { return da_ == DType::f16 || da_ == DType::bf16; }
    // Outer indices [outer, outer + run), column blocks of one row block: rows [i0, i0 + rows)
    // and columns [j0, j1) of batch entry `bidx`.
    void block(Value* outer, Value* run);

    // Rows [i0, i0 + rows) of C, columns [j0, j1), through packed strips of B and register
    // tiles (the loop nest at the top of gemm.cpp).
    void blocked(Value* ab, Value* bb, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1);

    // Rows [i0, i0 + rows) of C (at most kStreamRows), columns [j0, j1): B read row by row in
    // order, by src/cpu's kernel for a few rows of A (codegen.h, kRowsF32Symbol), into
    // a stack buffer of kStreamCols columns at a time, then the epilogue. A register tile
    // here would read B column strip by column strip (a stride of n elements per depth
    // index), which the hardware prefetchers do not follow: 3 to 5 times slower at 1 to 5 rows.
    void stream(Value* ab, Value* bb, Value* i0, Value* rows, Value* j0, Value* j1);

    // A 3x3 conv of stride 1 whose hint carries its weights' Winograd transform, with
    // vectors of 256 bits or more (src/cpu has the kernel) and blocks of whole 32-channel
    // tiles and whole bands of 4 output rows (bound: the lowering only sets the hint so).
    bool winograd_applies();
    // Rows [i0, i0 + rows) of C, columns [j0, j1): per column block, the raw convolution by
    // src/cpu's Winograd kernel (codegen.h, kWinogradF32Symbol) into the thread's kernel
    // scratch, then the epilogue from there.
    void winograd(Value* xb, Value* i0, Value* rows, Value* j0, Value* j1);

    // Rows [i0, i0 + rows) of C (output channels reading the batch entry's one input plane
    // `xb`), columns [j0, j1): each row by src/cpu's depthwise kernel (codegen.h,
    // kDepthwiseF32Symbol) into the stack buffer, kStreamCols pixels at a time, then the
    // epilogue. An implicit GEMM of depth kh * kw would spend its time packing.
    void depthwise(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1);

    // Batch entries [outer, outer + count) of a depthwise convolution whose planes are one
    // column block each (one output channel, all of its pixels, per entry): per kStreamCols
    // pixels, one call of the kernel into rows of the stack buffer, then the epilogue of each.
    void depthwise_planes(Value* outer, Value* count);

    // Pixels per depthwise kernel call of at most `cols`: whole output rows where a row fits
    // (from a row-aligned start, each call builds the input rows of its band once and
    // computes no output row that the next call computes again).
    Value* dw_step(std::int64_t cols);
    // Entry k of the depthwise kernel's pointer arrays: plane x, filter w.
    void set_dw_planes(Value* k, Value* x, Value* w);

    // The depthwise kernel (codegen.h, kDepthwiseF32Symbol) on `count` entries of the
    // pointer arrays from entry `first` (null: 0), pixels [p0, p1), into rows of the stack
    // buffer; or (`out` set) into out + k * ld, each plane started from inits[k] (null: 0).
    // Its outputs clamped to [lo, hi] (cpu::DwPlan; the default bounds change nothing), then
    // with `silu` put through SiLU.
    void call_depthwise(Value* count, Value* p0, Value* p1, Value* inits = nullptr, Value* out = nullptr,
                        Value* ld = nullptr, Value* first = nullptr, double lo = -std::numeric_limits<double>::infinity(),
                        double hi = std::numeric_limits<double>::infinity(), bool silu = false);
    // The depthwise kernel's plan (src/cpu/depthwise.h) where the geometry is bound.
    std::optional<cpu::DwPlan> bound_dw_plan();

    // A depthwise epilogue the kernel can do itself: C stored as computed (of the compute
    // type), at an index `base + column` (base free of the column), plus at most a bias that
    // does not vary along the columns, then at most a clamp to constant bounds (relu6, Clip:
    // tiers/kir_forms.h, constant_clamp; the kernel's clamp gives the same values), or in
    // f32 SiLU of it (silu(v), v * sigmoid(v) or sigmoid(v) * v: the kernel computes it as
    // this tier does, tiers/llvm/vmath.cpp, exp_sigmoid_f32). depthwise_planes() then has the
    // kernel start each plane from its bias and write the output, with no stack buffer and
    // no epilogue pass.
    struct DirectDw {
        kir::ExprRef base;        // the store's index without the column
        const kir::Expr* bias;    // the bias load, or null
        double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
        bool silu = false;
    };
    std::optional<DirectDw> direct_dw() const;

    // A 1x1 convolution of stride 1 without padding: its im2col matrix is the image itself
    // (input channel x pixels), so the output pixels of a batch entry form one run.
    Value* dense_conv();
    // A dense 1x1 conv of one output pixel (squeeze-excite's convs after a global pool), a
    // bound fact: each row of C is a dot product, run by dots() instead of register tiles
    // that would fill one of their NR lanes.
    bool one_pixel_dense();
    void dots(Value* ab, Value* xb, Value* i0, Value* rows);

    // The grid's row length: ow, and the columns of the phase plane the last taps reach.
    Value* grid_pitch();

    // Whether grid() serves this convolution: a dense one, or one whose output rows are at
    // least 3/4 of the grid's rows (the rest is computed for nothing).
    Value* grid_applies();

    // Rows [i0, i0 + rows) of C (output channels), columns [j0, j1) (output pixels), without
    // im2col packing. The input rows the block's output rows read are copied, per input
    // channel, into sh x sw phase planes (stride sh x sw): phase (a, b) holds the zero-padded
    // input at rows v * sh + a and columns u * sw + b, in rows of wq = grid_pitch() elements
    // (only phase 0 along a filter dim of 1: phase_rows(), phase_cols()).
    // On that grid, output pixel (y, x) of the block reads, for tap (i, j) with
    // i * dh = oy * sh + a and j * dw = ox * sw + b, element (y + oy) * wq + x + ox of phase
    // (a, b): a strip of NR consecutive grid pixels is one unmasked vector load per tap, even
    // where it crosses output rows, and its pixels with x >= ow are computed and not stored.
    // A dense convolution's grid is the image itself (no copy).
    void grid(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1);

    // The grid of output pixels [j0, j1): the length of its rows (wq), the first output row
    // (ya: 0 for a dense conv), its rows (q_rows: a dense conv's are the image's), the
    // elements of one phase plane, the input channels.
    struct GridGeo {
        Value *wq, *ya, *q_rows, *plane, *cin;
    };
    GridGeo grid_geo(Value* j0, Value* j1);

    // The channel-lane path (gemm_chan.cpp): rows [i0, i0 + rows) of C (output channels),
    // columns [j0, j1) (output pixels), with the vector lanes along the channels, for
    // images whose pixels would fill the lanes of grid() poorly. chan_run(): its pixels per
    // register tile where it applies (bound dims, f32 in 512-bit vectors, and fewer vector
    // cycles than grid() by at least 5%), else 0.
    std::int64_t chan_run();
    // Whether chan()'s runs collect into rows of the block's pixels (crows_): dense images of
    // at most kChanRowsMax pixels.
    bool chan_rows(bool dense, std::int64_t npix) const { return dense && npix <= kChanRowsMax; }
    void chan(Value* xb, Value* i0, Value* rows, Value* j0, Value* j1);
    // chan()'s depth blocks at runs of `run` pixels: the input channels of one (a tile's
    // weights of them in kChanDepthBytes, at least one channel), or 0 where the whole depth's
    // weights fit (one block) or a row of an image that is not dense has more than
    // kChanBlockRuns runs.
    std::int64_t chan_depth_block(std::int64_t run);
    // Transposes VW vectors of VW lanes in place: m[c][r] = m[r][c] (shuffles).
    void transpose(std::vector<Value*>& m);
    // The element of tap (i, j) for grid pixel 0 of the planes of one input channel at pl.
    Value* tap_at(Value* pl, Value* i, Value* j, Value* plane, Value* wq);

    // The phases of the grid, along rows and columns: the stride, or 1 for a filter of one
    // row (column), whose taps read phase 0 alone (a 1x1 convolution of stride 2).
    std::int64_t phase_rows();
    std::int64_t phase_cols();

    // Whether grid() lays its planes out by filter column instead of column phase (bound
    // dims only): plane (a, j) holds, for each output column x, the input column
    // x * sw + j * dw - pw, in rows of ow elements, so that tap (i, j) of output pixel
    // (y, x) reads element (y + oy) * ow + x of plane (a, j) and a strip of NR grid pixels
    // is NR output pixels, none computed for nothing. Chosen where the pitch wq = ow +
    // (kw - 1) * dw / sw wastes at least 4% of the lanes (a 3 x 3 conv at 13 x 13: 25%):
    // the copy holds kw planes per row phase instead of sw. 512-bit vectors only: 1 thread,
    // AMD EPYC Zen 4, squeezenet's 64 -> 256 3x3 at 13 x 13 (batch 8) 4.9 -> 4.2 ms, its
    // 32 -> 128 at 27 x 27 4.6 -> 4.4 ms, resnet18's 128 -> 128 at 28 x 28 2.33 -> 2.14 ms;
    // with AVX2's tiles the last two ran 5-20% slower (three planes' lines per strip in L1
    // instead of one's), so AVX2 keeps the pitch.
    bool exact_planes();
    // The planes per row phase of one input channel: kw for exact planes, else phase_cols().
    std::int64_t plane_cols();

    // The phase planes of grid(): for each of `cin` input channels and phase (a, b), q_rows
    // rows of wq elements, row v and column u holding the input at row (ya + v) * sh + a - ph
    // and column u * sw + b - pw (zero outside the image); then `slack` zeros.
    // With exact_planes(), plane (a, j) instead, rows of ow elements, column x holding the
    // input at column x * sw + j * dw - pw.
    void phase_planes(Value* xb, Value* buf, Value* cin, Value* ya, Value* q_rows, Value* wq, Value* slack);

    struct GridStrip {
        Value *ab, *buf, *i0, *gs, *kh;
        Value *plane, *wq;  // elements of a phase plane, of a grid row
        Value* pf = nullptr;  // A's rows to prefetch over the tile's depth loop (see grid())
        // A block of input channels [c0, c1) (grid_depth_block()): the tile starts from its
        // partial sums at psum (rows of NR) unless c0 is 0, and leaves them there unless c1
        // is the last channel. Null: every input channel, from 0 into the stack tile.
        Value *c0 = nullptr, *c1 = nullptr, *psum = nullptr;
    };
    // Input channels per depth block of a grid over phase planes whose strip of B (depth x NR)
    // outgrows L1, or 0 (the whole depth at once).
    std::int64_t grid_depth_block();

    // The MR x NR tile of rows i0 + ir .. (the last of `left` rows repeated up to MR: one
    // kernel for leftover rows, whose epilogue stores the real rows only) over the grid
    // strip starting at st.gs, into the stack tile.
    void micro_grid(const GridStrip& st, Value* ir, Value* left);

    // The epilogue of the stack tile (`rows` rows from row0, grid strip gs..) on the output
    // pixels the strip covers, clipped to the block [j0, j1): a run per grid row it touches
    // (store_runs), or for a dense 1x1 conv, whose grid is the image, one run (store_dense).
    void store_runs(Value* gs, Value* g1, Value* wq, Value* ya, Value* j0, Value* j1, Value* row0, Value* rows);
    void store_dense(Value* gs, Value* j0, Value* j1, Value* row0, Value* rows);

    // for (t = 0; t < count; ++t) body(t): straight-line code for a bound count of at most
    // `unroll` taps (micro_grid unrolls a filter row's taps, kUnrolledTaps), else a loop.
    template <class F> void taps(Value* count, const std::string& name, std::int64_t unroll, F body) {
        // Tap by tap, the offsets fold into the loads' addresses (see kUnrolledTaps).
        if (auto* known = llvm::dyn_cast<llvm::ConstantInt>(count); known && known->getSExtValue() <= unroll) {
            for (std::int64_t t = 0; t < known->getSExtValue(); ++t) body(i64(t));
            return;
        }
        loop(i64(0), count, i64(1), name, body, true);
    }

    // Packs B[pc:pc+kc, jc:jc+nc] (row-major, ld n) into strips of NR columns, each kc x NR
    // contiguous, the last strip zero padded.
    void pack_b(Value* bb, Value* pc, Value* jc, Value* kc, Value* nc);

    // Packs B[pc:pc+kc, jc:jc+nc] of an im2col operand (kir::Im2col; `xb` points at the batch
    // entry's first input channel) into strips of NR columns, like pack_b. For one strip and
    // depth index (input channel, window row i, window column j), the strip's columns split
    // into runs that each lie in one output row y (consecutive xo). A run reads input row
    // iy = y * sh - ph + i * dh at columns xo * sw - pw + j * dw, so its in-bounds part is
    // one interval: zeros, a strided copy (a plain copy for stride 1), zeros. The index
    // arithmetic (divisions) is per run, not per element.
    void pack_im2col(Value* xb, Value* pc, Value* jc, Value* kc, Value* nc);

    // A run of a stride-1 im2col strip that is not a whole strip (it crosses an output row,
    // or touches the padding): dq[t] = src[t] for t in [lo, hi), 0 for t in [0, lo) and
    // [hi, len), as NV masked vector loads and stores (no lane outside [0, len) is written,
    // none outside [lo, hi) read), instead of a scalar loop: in planes of 56 pixels or fewer
    // most strips cross a row.
    void masked_run(Value* src, Value* dq, Value* lo, Value* hi, Value* len);

    // for the runs of `cols` consecutive output pixels starting at (y0, x0), each within one
    // output row: body(q, y, xo, len) for the run of columns [q, q + len).
    template <class F> void run_loop(Value* cols, Value* y0, Value* x0, F body);

    struct Tile {
        Value *ab, *strip, *pc, *kc, *first, *last, *i0, *jr;
        std::int64_t bstride;  // elements from one depth index of the strip to the next
    };
    // Elements from vector v of a strip's depth index to the strip's first: v * VW, or where
    // a strip of B packed once spans slabs (512 bits over slabs of 16), into the next slab.
    std::int64_t bvec_offset(int v) const {
        const std::int64_t at = v * vw_;
        return bpk_ && nr_ > bslab_ ? at / bslab_ * bslab_elems_ + at % bslab_ : at;
    }

    // The register tile of `rows` rows starting at block row `ir`, over the packed strip:
    // the depth block's products added to zero (first depth block) or to the partial sums;
    // on the last depth block stored to rows [trow, trow + rows) of the stack tile, else to
    // the partial sums. With 1 or 2 rows the depth loop keeps 4 / rows sets of accumulators
    // (depth index k in set k mod sets), so that enough independent FMA chains hide the FMA
    // latency. `vecs` > 0: a narrower tile of the strip's first `vecs` vectors (the last
    // strip of a bound N whose tail is that narrow; see blocked()).
    void micro(const Tile& t, Value* ir, int rows, Value* trow, int vecs = 0);

    // The epilogue of rows [row0, row0 + rows) and columns [col0, col0 + cols) of C, whose
    // sums are in `buf` (row r at buf + r * ld), element by element (the column loop
    // vectorises): the stack tile of finished register tiles, or stream()'s buffer.
    void epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols);
    void hinted_epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols);
    // Whether the epilogue may compute an element twice (epilogue()'s last vector of a row):
    // it reads nothing along the row but the sums.
    bool epilogue_rereadable() const;
    // The same over rows of up to hundreds of columns (stream()'s and the depthwise paths'
    // buffers): each row in pieces of two vectors with a bound count, then its last columns.
    void long_epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols);
};

}  // namespace kiln::tiers::llvm_tier::gemm_detail
