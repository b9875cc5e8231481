// Tier 1's matmul and conv kernels: the epilogue kernel and the driver around the host's
// GEMM (matmul.h).
#include "tiers/asmjit/matmul.h"

#include "src/cpu/depthwise.h"
#include "src/cpu/gemm.h"
#include "src/cpu/im2col.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

namespace kiln::tiers::asmjit_tier {

using I64 = std::int64_t;

namespace {

// The extra params of the epilogue kernel, after the kernel's own.
enum Extra : int { kBatch = 0, kRow0, kRow1, kCol0, kCol1, kExtras };

// Elements of the tile that one chunk of rows and columns computes into (f32: 1 MiB): a
// chunk is as large as one of the GEMM's own cache blocks of columns (nc) and several of
// rows, so chunking adds no packing the GEMM would not do itself.
constexpr I64 kTileElems = I64(1) << 20;
// Columns per chunk of a matmul, and the im2col block a convolution packs at once.
constexpr I64 kChunkCols = 4096;
constexpr I64 kIm2colElems = I64(1) << 18;

kir::ExprRef substitute(const kir::ExprRef& e, int var, const kir::ExprRef& by) {
    if (!e) return e;
    if (e->kind == kir::ExprKind::Var && e->id == var) return by;
    if (e->args.empty()) return e;
    auto copy = std::make_shared<kir::Expr>(*e);
    bool changed = false;
    for (kir::ExprRef& a : copy->args) {
        kir::ExprRef s = substitute(a, var, by);
        changed = changed || s != a;
        a = std::move(s);
    }
    return changed ? kir::ExprRef(std::move(copy)) : e;
}

I64 ceil_div(I64 a, I64 b) { return (a + b - 1) / b; }

cpu::CpuIsa isa_for(int vector_bytes) {
    const cpu::CpuIsa want = vector_bytes >= 64 ? cpu::CpuIsa::avx512
                             : vector_bytes >= 32 ? cpu::CpuIsa::avx2
                                                  : cpu::CpuIsa::portable;
    return cpu::cap_cpu_isa(want);
}

}  // namespace

struct MatmulPlan {
    bool f64 = false;
    int a = -1, b = -1, nbuf = 0, nparams = 0;
    kir::ExprRef m, n, k, batch, a_off, b_off;  // batch var replaced by param nparams + kBatch
    I64 row_block = 1, col_block = 0;
    struct Conv {
        kir::ExprRef h, w, kh, kw, ow;
        I64 stride[2], pad[2], dilation[2];
    };
    std::optional<Conv> conv;
    KernelFn epilogue = nullptr;
    cpu::CpuIsa isa = cpu::CpuIsa::portable;
};

void MatmulPlanDeleter::operator()(MatmulPlan* p) const { delete p; }

std::string matmul_unsupported(const kir::Kernel& k) {
    if (!k.matmul) return "not a matmul kernel";
    const kir::MatmulHint& h = *k.matmul;
    if (h.type != kir::Type::f32 && h.type != kir::Type::f64) return "matmul accumulator type";
    const auto nb = static_cast<int>(k.buffers.size());
    if (h.a < 0 || h.a >= nb || h.b < 0 || h.b >= nb || h.out < 0 || h.out >= nb) return "malformed matmul hint";
    const DType want = h.type == kir::Type::f32 ? DType::f32 : DType::f64;
    if (k.buffers[static_cast<std::size_t>(h.a)].dtype != want || k.buffers[static_cast<std::size_t>(h.b)].dtype != want)
        return "f16/bf16 matmul operands are left to tier 2";
    if (h.acc_temp < 0 || h.acc_temp >= static_cast<int>(k.temps.size()) || h.batch_var < 0 || h.row_var < 0 ||
        h.col_var < 0 || h.batch_var >= k.num_vars || h.row_var >= k.num_vars || h.col_var >= k.num_vars)
        return "malformed matmul hint";
    if (h.row_block < 1 || h.col_block < 0) return "malformed matmul hint";
    return {};
}

kir::Kernel epilogue_kernel(const kir::Kernel& k) {
    const kir::MatmulHint& h = *k.matmul;
    kir::Kernel e;
    e.name = k.name + "_epilogue";
    e.buffers = k.buffers;
    e.buffers.push_back(kir::Buffer{"tile", h.type == kir::Type::f32 ? DType::f32 : DType::f64, false});
    e.params = k.params;
    e.param_sources = k.param_sources;
    const int p = static_cast<int>(k.params.size());
    for (const char* name : {"tile_batch", "tile_row0", "tile_row1", "tile_col0", "tile_col1"}) {
        e.params.emplace_back(name);
        e.param_sources.push_back(kir::ParamSource{});
    }
    e.temps = k.temps;
    e.num_vars = k.num_vars;
    e.extent = kir::index_const(1);
    using kir::BinaryOp;
    const kir::ExprRef r0 = kir::param(p + kRow0), c0 = kir::param(p + kCol0);
    const kir::ExprRef width = kir::binary(BinaryOp::sub, kir::param(p + kCol1), c0);
    const kir::ExprRef at = kir::binary(
        BinaryOp::add, kir::binary(BinaryOp::mul, kir::binary(BinaryOp::sub, kir::var(h.row_var), r0), width),
        kir::binary(BinaryOp::sub, kir::var(h.col_var), c0));
    std::vector<kir::StmtRef> body;
    body.push_back(kir::assign(h.acc_temp, kir::load(static_cast<int>(k.buffers.size()), h.type, at)));
    body.insert(body.end(), h.epilogue.begin(), h.epilogue.end());
    const kir::ExprRef b0 = kir::param(p + kBatch);
    kir::StmtRef cols = kir::loop(h.col_var, c0, kir::param(p + kCol1), std::move(body));
    kir::StmtRef rows = kir::loop(h.row_var, r0, kir::param(p + kRow1), {cols});
    e.body = {kir::loop(h.batch_var, b0, kir::binary(BinaryOp::add, b0, kir::index_const(1)), {rows})};
    return e;
}

MatmulPlanPtr make_matmul_plan(const kir::Kernel& k, KernelFn epilogue, int vector_bytes) {
    const kir::MatmulHint& h = *k.matmul;
    MatmulPlanPtr p(new MatmulPlan);
    p->f64 = h.type == kir::Type::f64;
    p->a = h.a;
    p->b = h.b;
    p->nbuf = static_cast<int>(k.buffers.size());
    p->nparams = static_cast<int>(k.params.size());
    const kir::ExprRef bv = kir::param(p->nparams + kBatch);
    p->m = h.m;
    p->n = h.n;
    p->k = h.k;
    p->batch = h.batch;
    p->a_off = substitute(h.a_offset, h.batch_var, bv);
    p->b_off = substitute(h.b_offset, h.batch_var, bv);  // a convolution's: its input's (Im2col::x_offset)
    p->row_block = h.row_block;
    p->col_block = h.col_block;
    if (h.im2col) {
        const kir::Im2col& im = *h.im2col;
        MatmulPlan::Conv c{im.h, im.w, im.kh, im.kw, im.ow, {}, {}, {}};
        for (int d = 0; d < 2; ++d) {
            c.stride[d] = im.stride[d];
            c.pad[d] = im.pad[d];
            c.dilation[d] = im.dilation[d];
        }
        p->conv = c;
    }
    p->epilogue = epilogue;
    p->isa = isa_for(vector_bytes);
    return p;
}

namespace {

// One call of a kernel: its dims, and the arrays the epilogue is called with.
template <class T> class Driver {
public:
    Driver(const MatmulPlan& p, void* const* buffers, const I64* params, I64* ext, void** bufs)
        : p_(p), ext_(ext), bufs_(bufs), kr_(cpu::simd_kernels<T>(p.isa)) {
        std::copy_n(params, p.nparams, ext_);
        std::copy_n(buffers, p.nbuf, bufs_);
        m_ = kir::eval_index(p.m, params);
        n_ = kir::eval_index(p.n, params);
        k_ = kir::eval_index(p.k, params);
        if (p.conv) {
            const MatmulPlan::Conv& c = *p.conv;
            geo_.h = kir::eval_index(c.h, params);
            geo_.w = kir::eval_index(c.w, params);
            geo_.kh = kir::eval_index(c.kh, params);
            geo_.kw = kir::eval_index(c.kw, params);
            geo_.ow = kir::eval_index(c.ow, params);
            geo_.c = geo_.kh * geo_.kw > 0 ? k_ / (geo_.kh * geo_.kw) : 0;
            geo_.sh = c.stride[0], geo_.sw = c.stride[1];
            geo_.ph = c.pad[0], geo_.pw = c.pad[1];
            geo_.dh = c.dilation[0], geo_.dw = c.dilation[1];
            // A 1x1 convolution with stride 1 and no padding: B is the input planes as they are.
            dense_b_ = geo_.kh == 1 && geo_.kw == 1 && geo_.sh == 1 && geo_.sw == 1 && geo_.ph == 0 && geo_.pw == 0;
            // One input channel per group (depthwise): the direct kernel the interpreter
            // runs (src/cpu/depthwise.h), instead of a GEMM of depth kh * kw.
            depthwise_ = geo_.c == 1 && !dense_b_ && geo_.ow > 0;
            if (depthwise_) dw_plan_ = cpu::depthwise_plan(geo_);
        } else {
            dense_b_ = true;
        }
    }

    // Runs outer indices [begin, end); false when scratch memory could not be had.
    bool run(I64 begin, I64 end) {
        const I64 blocks = ceil_div(m_, p_.row_block);
        const I64 cw = p_.col_block > 0 ? p_.col_block : std::max<I64>(n_, 1);
        const I64 cblocks = p_.col_block > 0 ? ceil_div(n_, p_.col_block) : 1;
        const I64 per_batch = blocks * cblocks;
        if (per_batch <= 0) return true;
        for (I64 o = begin; o < end;) {
            const I64 b = o / per_batch, first = b * per_batch, last = std::min(end, first + per_batch);
            ext_[p_.nparams + kBatch] = b;
            const T* a = static_cast<const T*>(bufs_[p_.a]) + kir::eval_index(p_.a_off, ext_);
            const T* bsrc = static_cast<const T*>(bufs_[p_.b]) + kir::eval_index(p_.b_off, ext_);
            // Outer index first + rb * cblocks + cb is row block rb, column block cb. The
            // consecutive column blocks of one row block run as one block, and consecutive
            // whole row blocks (every column block) as one (kir.h, MatmulHint); a depthwise
            // block stays within one column block (its tile holds m x col_block values).
            for (I64 q = o - first, qend = last - first; q < qend;) {
                const I64 rb = q / cblocks, cb = q % cblocks;
                const I64 run = depthwise_ ? 1 : std::min(qend - q, cblocks - cb);
                const I64 rb_end = cb == 0 && run == cblocks ? rb + (qend - q) / cblocks : rb + 1;
                const I64 r0 = rb * p_.row_block, r1 = std::min(m_, rb_end * p_.row_block);
                const I64 c0 = cb * cw, c1 = std::min(n_, (cb + run) * cw);
                if (r0 < r1 && c0 < c1 && !block(a, bsrc, r0, r1, c0, c1)) return false;
                q += (rb_end - rb - 1) * cblocks + run;
            }
            o = last;
        }
        return true;
    }

private:
    // C[r0, r1) x [c0, c1) of one batch entry of a depthwise convolution, through the
    // epilogue: each row (output channel) by the direct kernel of src/cpu/depthwise.h.
    bool depthwise_block(const T* w, const T* plane, I64 r0, I64 r1, I64 c0, I64 c1) {
        const I64 taps = geo_.kh * geo_.kw;
        // The same size on every block, so the thread's scratch stays where it is.
        const I64 tile_max = m_ * (p_.col_block > 0 ? std::min(p_.col_block, n_) : n_);
        T* tile = static_cast<T*>(kernel_scratch((tile_max + dw_plan_.scratch_elems) * static_cast<I64>(sizeof(T))));
        if (tile == nullptr) return false;
        for (I64 r = r0; r < r1; ++r)
            cpu::depthwise_plane<T>(p_.isa, geo_, dw_plan_, plane, w + r * taps, T(0), tile + (r - r0) * (c1 - c0), c0, c1, tile + tile_max);
        bufs_[p_.nbuf] = tile;
        I64* x = ext_ + p_.nparams;
        x[kRow0] = r0, x[kRow1] = r1, x[kCol0] = c0, x[kCol1] = c1;
        p_.epilogue(bufs_, ext_, 0, 1);
        return true;
    }

    // C[r0, r1) x [c0, c1) of one batch entry, through the epilogue.
    bool block(const T* a, const T* bsrc, I64 r0, I64 r1, I64 c0, I64 c1) {
        if (depthwise_) return depthwise_block(a, bsrc, r0, r1, c0, c1);
        const int nr = kr_.nr, mr = kr_.mr;
        // Columns per chunk; a convolution packs its im2col block for a chunk once.
        I64 cc = std::min<I64>(c1 - c0, kChunkCols);
        if (!dense_b_) cc = std::min(cc, std::max<I64>(nr, kIm2colElems / std::max<I64>(k_, 1) / nr * nr));
        const I64 rc = std::max<I64>(mr, kTileElems / cc / mr * mr);
        const I64 tile_elems = std::min(rc, r1 - r0) * cc;
        const I64 pack_elems = dense_b_ ? 0 : k_ * ceil_div(cc, nr) * nr;
        T* tile = static_cast<T*>(kernel_scratch((tile_elems + pack_elems) * static_cast<I64>(sizeof(T))));
        if (tile == nullptr) return false;
        T* packed = tile + tile_elems;
        bufs_[p_.nbuf] = tile;
        for (I64 c = c0; c < c1; c += cc) {
            const I64 nc = std::min(cc, c1 - c);
            if (!dense_b_) cpu::im2col_packed<T>(geo_, bsrc, c, nc, nr, packed);
            for (I64 r = r0; r < r1; r += rc) {
                const I64 nrows = std::min(rc, r1 - r);
                std::memset(tile, 0, static_cast<std::size_t>(nrows * nc) * sizeof(T));
                if (dense_b_) cpu::gemm_acc<T>(p_.isa, nrows, nc, k_, a + r * k_, k_, bsrc + c, n_, tile, nc);
                else cpu::gemm_acc_packed_b<T>(p_.isa, nrows, nc, k_, a + r * k_, k_, packed, tile, nc);
                I64* x = ext_ + p_.nparams;
                x[kRow0] = r, x[kRow1] = r + nrows, x[kCol0] = c, x[kCol1] = c + nc;
                p_.epilogue(bufs_, ext_, 0, 1);
            }
        }
        return true;
    }

    const MatmulPlan& p_;
    I64* ext_;
    void** bufs_;
    const cpu::SimdKernels<T>& kr_;
    I64 m_ = 0, n_ = 0, k_ = 0;
    cpu::Im2colShape geo_{};
    bool dense_b_ = true, depthwise_ = false;
    cpu::DwPlan dw_plan_{};  // when depthwise_
};

}  // namespace

void run_matmul(const MatmulPlan* plan, void* const* buffers, const I64* params, I64 begin, I64 end) {
    // The epilogue's params and buffers: the kernel's, then the extras and the tile.
    thread_local std::vector<I64> ext;
    thread_local std::vector<void*> bufs;
    try {
        ext.resize(static_cast<std::size_t>(plan->nparams + kExtras));
        bufs.resize(static_cast<std::size_t>(plan->nbuf + 1));
        const bool ok = plan->f64 ? Driver<double>(*plan, buffers, params, ext.data(), bufs.data()).run(begin, end)
                                  : Driver<float>(*plan, buffers, params, ext.data(), bufs.data()).run(begin, end);
        if (!ok) kernel_failed();
    } catch (const std::exception&) {
        kernel_failed();  // the GEMM's packing buffers could not be had
    }
}

}  // namespace kiln::tiers::asmjit_tier
