// The GPU source printer (gpu_source.h): the kernel's frame (the KilnArgs struct, the entry,
// the typed buffer pointers, the grid-stride loop) around one of its forms:
// - generic: one item per outer index, running the kernel's body (every kernel kind);
// - vector: the generic form four items at a time, with 128-bit loads and stores of the
//   buffers read or written at the outer index (elementwise kernels);
// - warp per row (print_rows.cpp) and the tiled matmul (below);
// - matmul (a MatmulHint): one item per output element, the dot product over k in the
//   accumulator's type and then the hint's epilogue. The generic form's outer index is a
//   block of up to limits::matmul_row_block rows: far too coarse for a GPU. A convolution
//   (a hint with im2col) takes the same forms as an implicit GEMM: its operands' elements
//   are the loop nest's own (B's a select of a load of the image and 0 where padded).
#include "tiers/gpu/print_p.h"

#include "src/support/hash.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <set>

namespace kiln::tiers::gpu {
namespace {

using detail::Printer;
using detail::Unsupported;
using kir::ExprRef;
using kir::Type;

constexpr int kBlock = 256;  // threads per block (__launch_bounds__)

// [A-Za-z0-9_] only, at most 40 characters.
std::string sanitize(const std::string& name) {
    std::string s;
    for (char c : name) {
        if (s.size() >= 40) break;
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        s += ok ? c : '_';
    }
    return s.empty() ? "kernel" : s;
}

ExprRef imul(const ExprRef& a, const ExprRef& b) { return kir::binary(kir::BinaryOp::mul, a, b); }
ExprRef iadd(const ExprRef& a, const ExprRef& b) { return kir::binary(kir::BinaryOp::add, a, b); }

// The grid-stride loop over [first, end) (by default [0, a.work)) with item variable `item`;
// returns where its body starts in p.out (the temporaries' declarations go there).
std::size_t open_items(Printer& p, const std::string& item, const std::string& first = "", const std::string& end = "a.work") {
    p.open("for (long long " + item + " = " + (first.empty() ? "" : first + " + ") +
           "blockIdx.x * (long long)blockDim.x + threadIdx.x; " + item + " < " + end + "; " + item +
           " += (long long)gridDim.x * blockDim.x)");
    return p.out.size();
}

// Generic form: work = the kernel's extent; the body once per outer index.
std::size_t print_generic(Printer& p, GpuSource& src) {
    const kir::Kernel& k = p.kernel();
    if (!k.extent) throw Unsupported{"the kernel has no extent"};
    src.work = k.extent;
    const std::size_t at = open_items(p, "outer");
    p.stmts(k.body);
    p.close();
    return at;
}

// The buffers the vector form reads and writes 128 bits at a time: f32 and i32 buffers
// indexed by exactly the outer index (for a buffer stored to, at every store).
struct VectorPlan {
    std::set<int> loads, stores;
};

// Whether kernel k takes the vector form: its body is straight-line stores and assignments
// (no loop) that never read a temporary before assigning it (so the four items a thread runs
// one after another cannot see each other's temporaries), and it reads or writes at least
// one buffer at exactly the outer index (contiguous: the form checks the alignment of those
// buffers when it runs).
bool plan_vector(const kir::Kernel& k, VectorPlan* plan) {
    if (!k.extent || k.body.empty()) return false;
    auto wide = [&](int b) {
        if (b < 0 || static_cast<std::size_t>(b) >= k.buffers.size()) return false;
        const DType d = k.buffers[static_cast<std::size_t>(b)].dtype;
        return d == DType::f32 || d == DType::i32;
    };
    std::set<int> assigned, loads, stores, scattered;
    bool ok = true;
    std::function<void(const ExprRef&)> walk = [&](const ExprRef& e) {
        if (!e) return;
        if (e->kind == kir::ExprKind::Temp && !assigned.count(e->id)) ok = false;
        if (e->kind == kir::ExprKind::Load && e->args.size() == 1 && e->args[0] && e->args[0]->kind == kir::ExprKind::Outer &&
            wide(e->id))
            loads.insert(e->id);
        for (const auto& a : e->args) walk(a);
    };
    for (const kir::StmtRef& st : k.body) {
        if (!st || st->kind == kir::StmtKind::Loop) return false;
        walk(st->value);
        if (st->kind == kir::StmtKind::Assign) {
            assigned.insert(st->var);
            continue;
        }
        walk(st->index);
        if (st->index && st->index->kind == kir::ExprKind::Outer && wide(st->buffer)) stores.insert(st->buffer);
        else scattered.insert(st->buffer);
    }
    for (int b : scattered) stores.erase(b);
    if (!ok || (loads.empty() && stores.empty())) return false;
    plan->loads = std::move(loads);
    plan->stores = std::move(stores);
    return true;
}

// Vector form: work = the kernel's extent, each thread taking four consecutive items at a
// time with 128-bit loads and stores of the plan's buffers when all of them are 16-byte
// aligned (checked when the kernel runs: views may start anywhere), then the items left
// (the last work % 4, or all of them when a buffer is not aligned) one at a time.
std::size_t print_vector(Printer& p, GpuSource& src, const VectorPlan& plan) {
    const kir::Kernel& k = p.kernel();
    src.work = k.extent;
    src.per_thread = 4;
    const std::size_t at = p.out.size();
    auto vec_type = [&](int b) { return k.buffers[static_cast<std::size_t>(b)].dtype == DType::f32 ? "float4" : "int4"; };
    std::string addresses;
    std::set<int> all = plan.loads;
    all.insert(plan.stores.begin(), plan.stores.end());
    for (int b : all) {
        addresses += (addresses.empty() ? "" : " | ") + std::string("(unsigned long long)") + Printer::buffer_name(b);
        p.buffers_used.insert(b);
    }
    p.line("long long first = 0;  // where the one-item loop starts");
    p.open("if (((" + addresses + ") & 15ULL) == 0)");
    p.line("const long long quads = a.work >> 2;");
    open_items(p, "q", "", "quads");
    for (int b : plan.loads)
        p.line("const " + std::string(vec_type(b)) + " vl" + std::to_string(b) + " = ((const " + vec_type(b) + "*)" +
               Printer::buffer_name(b) + ")[q];");
    for (int b : plan.stores) p.line(std::string(vec_type(b)) + " vs" + std::to_string(b) + ";");
    static const char* const kLane[] = {".x", ".y", ".z", ".w"};
    for (int lane = 0; lane < 4; ++lane) {
        p.lanes.clear();
        for (int b : plan.loads) p.lanes[b] = "vl" + std::to_string(b) + kLane[lane];
        for (int b : plan.stores) p.lanes[b] = "vs" + std::to_string(b) + kLane[lane];
        p.line("{");  // a scope per item
        ++p.indent;
        p.line("const long long outer = (q << 2) + " + std::to_string(lane) + ";");
        p.stmts(k.body);
        p.close();
    }
    p.lanes.clear();
    for (int b : plan.stores)
        p.line("((" + std::string(vec_type(b)) + "*)" + Printer::buffer_name(b) + ")[q] = vs" + std::to_string(b) + ";");
    p.close();
    p.line("first = quads << 2;");
    p.close();
    open_items(p, "outer", "first");
    p.stmts(k.body);
    p.close();
    return at;
}

// Warp-per-row form (print_p.h: WarpPlan): work = extent * 32 items, 32 lanes per outer
// index (a CUDA warp; a HIP wave32, or half a wave64). The grid-stride step is a multiple of
// 64, so the 32 lanes of a row always share their outer index and run the same iterations
// of it (the shuffles need every lane).
std::size_t print_warp_rows(Printer& p, GpuSource& src, std::vector<ExprRef>& keep, const detail::WarpPlan& plan) {
    const kir::Kernel& k = p.kernel();
    src.work = imul(k.extent, kir::index_const(32));
    keep.push_back(src.work);
    p.warp = &plan;
    const std::size_t at = open_items(p, "item");
    p.line("const long long outer = item >> 5;");
    p.line("const int lane = (int)(item & 31);");
    p.stmts(k.body);
    p.close();
    p.warp = nullptr;
    return at;
}

// Throws Unsupported unless kernel k's matmul hint has what the matmul forms read.
void check_hint(const kir::Kernel& k) {
    const kir::MatmulHint& h = *k.matmul;
    if (!h.m || !h.n || !h.k || !h.batch || !h.a_offset || !h.b_offset) throw Unsupported{"an incomplete matmul hint"};
    if (h.batch_var < 0 || h.row_var < 0 || h.col_var < 0) throw Unsupported{"a matmul hint without loop variables"};
    if (h.acc_temp < 0 || static_cast<std::size_t>(h.acc_temp) >= k.temps.size() || k.temps[static_cast<std::size_t>(h.acc_temp)] != h.type)
        throw Unsupported{"a matmul hint whose accumulator is not a temporary of its type"};
}

// The operands of a matmul kernel's dot product: A's element at (row_var, k_var) and B's at
// (k_var, col_var), expressions of the hint's row and column variables, k_var, the batch
// variable and params. For a dense B they are built from the hint (k_var a fresh variable;
// with `hoisted_offsets`, A's and B's offsets are read from two more fresh variables, which
// the caller declares by printing a_decl / b_decl after `a_off` / `b_off`); for a convolution
// they are the loop nest's own: its loop over k whose body is the one assignment
// t<acc> = t<acc> + A * B (src/kir/lower_conv.cpp), B being the im2col select.
struct Operands {
    int k_var = -1;
    ExprRef a_el, b_el;
    std::string a_decl, b_decl;  // ", v<i> = a_off" and ", v<j> = b_off", or empty
};
Operands operands(const kir::Kernel& k, std::vector<ExprRef>& keep, bool hoisted_offsets) {
    const kir::MatmulHint& h = *k.matmul;
    Operands o;
    if (!h.im2col) {
        o.k_var = std::max({k.num_vars, h.batch_var + 1, h.row_var + 1, h.col_var + 1});
        const ExprRef kvar = kir::var(o.k_var);
        ExprRef a_off = h.a_offset, b_off = h.b_offset;
        if (hoisted_offsets) {
            a_off = kir::var(o.k_var + 1), b_off = kir::var(o.k_var + 2);
            o.a_decl = ", " + Printer::var_name(o.k_var + 1) + " = a_off";
            o.b_decl = ", " + Printer::var_name(o.k_var + 2) + " = b_off";
        }
        o.a_el = kir::load(h.a, h.type, iadd(a_off, iadd(imul(kir::var(h.row_var), h.k), kvar)));
        o.b_el = kir::load(h.b, h.type, iadd(b_off, iadd(imul(kvar, h.n), kir::var(h.col_var))));
        keep.insert(keep.end(), {kvar, a_off, b_off, o.a_el, o.b_el});
        return o;
    }
    std::function<bool(const std::vector<kir::StmtRef>&)> find = [&](const std::vector<kir::StmtRef>& body) {
        for (const kir::StmtRef& st : body) {
            if (!st || st->kind != kir::StmtKind::Loop) continue;
            if (st->body.size() == 1 && st->body[0] && st->body[0]->kind == kir::StmtKind::Assign && st->body[0]->var == h.acc_temp) {
                const ExprRef& v = st->body[0]->value;
                const bool sum = v && v->kind == kir::ExprKind::Binary && v->bop == kir::BinaryOp::add && v->args.size() == 2 &&
                                 v->args[0]->kind == kir::ExprKind::Temp && v->args[0]->id == h.acc_temp;
                const ExprRef prod = sum ? v->args[1] : nullptr;
                if (prod && prod->kind == kir::ExprKind::Binary && prod->bop == kir::BinaryOp::mul && prod->args.size() == 2 &&
                    prod->args[0]->kind == kir::ExprKind::Load && prod->args[0]->id == h.a) {
                    o = {st->var, prod->args[0], prod->args[1]};
                    return true;
                }
            }
            if (find(st->body)) return true;
        }
        return false;
    };
    if (!find(k.body)) throw Unsupported{"a convolution's loop nest without its dot product"};
    return o;
}

// Matmul form: work = batch * m * n items (batch, row, col), each the dot product of a row
// of A and a column of B in the accumulator type, in k order as the loop nest sums, then
// the epilogue, which reads the accumulator temp and the three loop variables and stores.
std::size_t print_matmul(Printer& p, GpuSource& src, std::vector<ExprRef>& keep) {
    const kir::Kernel& k = p.kernel();
    const kir::MatmulHint& h = *k.matmul;
    check_hint(k);
    const Operands ops = operands(k, keep, false);
    src.work = imul(imul(h.batch, h.m), h.n);
    const std::string m = p.expr(h.m), n = p.expr(h.n);
    const std::size_t at = open_items(p, "item");
    const std::string b = Printer::var_name(h.batch_var), r = Printer::var_name(h.row_var), c = Printer::var_name(h.col_var);
    p.line("const long long " + c + " = item % " + n + ", item_rows = item / " + n + ";");  // m, n > 0 where work > 0
    p.line("const long long " + r + " = item_rows % " + m + ", " + b + " = item_rows / " + m + ";");
    // The dot product, as KIR statements (so loads and the sum print like the nest's).
    const ExprRef acc = kir::temp(h.acc_temp, h.type);
    std::vector<kir::StmtRef> body{
        kir::assign(h.acc_temp, kir::constant(h.type, 0.0)),
        kir::loop(ops.k_var, kir::index_const(0), h.k,
                  {kir::assign(h.acc_temp, kir::binary(kir::BinaryOp::add, acc, kir::binary(kir::BinaryOp::mul, ops.a_el, ops.b_el)))})};
    keep.push_back(acc);
    p.stmts(body);
    p.stmts(h.epilogue);
    p.close();
    return at;
}

// Tiled matmul form: one block of 256 threads per S x S tile of C (of one batch entry; S is
// 64 or 32), A's and B's tiles staged in shared memory 16 values of k at a time, each thread
// holding an R x R block of accumulators (R = S / 16: rows ty + 16 i, columns tx + 16 j).
// work = tiles * 256: the kernel
// walks the tiles from blockIdx.x in steps of gridDim.x (the host launches work / 256
// blocks, or fewer). Each accumulator sums in k order, as the loop nest does; then the
// epilogue runs for each output element in range.
std::size_t print_matmul_tiled(Printer& p, GpuSource& src, std::vector<ExprRef>& keep, int S) {
    const kir::Kernel& k = p.kernel();
    const kir::MatmulHint& h = *k.matmul;
    check_hint(k);
    const std::string s = std::to_string(S), s1 = std::to_string(S - 1), R = std::to_string(S / 16);
    const std::string a_count = std::to_string(S * 16), b_shift = S == 64 ? "6" : "5";
    const ExprRef cm1 = kir::index_const(S - 1), cs = kir::index_const(S);
    auto tiles = [&](const ExprRef& d) { return kir::binary(kir::BinaryOp::div, iadd(d, cm1), cs); };
    src.work = imul(imul(imul(h.batch, tiles(h.m)), tiles(h.n)), kir::index_const(256));
    keep.push_back(src.work);
    const std::string T = detail::c_type(h.type);
    const std::string zero = detail::float_literal(h.type, 0.0);
    p.line("__shared__ " + T + " As[16][" + s + " + 1];");
    p.line("__shared__ " + T + " Bs[16][" + s + "];");
    p.expr_line("const long long M = ", h.m, ";");
    p.expr_line("const long long N = ", h.n, ";");
    p.expr_line("const long long K = ", h.k, ";");
    p.line("const long long tiles_m = (M + " + s1 + ") / " + s + ", tiles_n = (N + " + s1 + ") / " + s + ";");
    p.line("const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;");
    p.open("for (long long tile = blockIdx.x; tile < (a.work >> 8); tile += gridDim.x)");
    const std::size_t at = p.out.size();
    const std::string b = Printer::var_name(h.batch_var), r = Printer::var_name(h.row_var), c = Printer::var_name(h.col_var);
    p.line("const long long tn = tile % tiles_n, tm = (tile / tiles_n) % tiles_m, " + b + " = tile / tiles_n / tiles_m;");
    // A's element at (r, k) and B's at (k, c). Dense operands load at offsets computed once
    // per tile (a_off, b_off); a convolution's are the loop nest's own expressions.
    const Operands ops = operands(k, keep, true);
    if (!h.im2col) {
        p.expr_line("const long long a_off = ", h.a_offset, ";");
        p.expr_line("const long long b_off = ", h.b_offset, ";");
    }
    const std::string gk = Printer::var_name(ops.k_var);
    p.line(T + " acc[" + R + "][" + R + "];");
    p.line("for (int i = 0; i < " + R + "; ++i) for (int j = 0; j < " + R + "; ++j) acc[i][j] = " + zero + ";");
    p.open("for (long long k0 = 0; k0 < K; k0 += 16)");
    // A's tile: S rows x 16 k; B's: 16 k x S columns; zeros outside the matrices.
    p.open("for (int l = threadIdx.x; l < " + a_count + "; l += 256)");
    p.line("const int rr = l >> 4, kk = l & 15;");
    p.line("const long long " + r + " = tm * " + s + " + rr, " + gk + " = k0 + kk" + ops.a_decl + ";");
    p.open("if (" + r + " < M && " + gk + " < K)");
    p.expr_line("As[kk][rr] = ", ops.a_el, ";");
    p.close();
    p.line("else As[kk][rr] = " + zero + ";");
    p.close();
    p.open("for (int l = threadIdx.x; l < " + a_count + "; l += 256)");
    p.line("const int kk = l >> " + b_shift + ", cc = l & " + s1 + ";");
    p.line("const long long " + gk + " = k0 + kk, " + c + " = tn * " + s + " + cc" + ops.b_decl + ";");
    p.open("if (" + gk + " < K && " + c + " < N)");
    p.expr_line("Bs[kk][cc] = ", ops.b_el, ";");
    p.close();
    p.line("else Bs[kk][cc] = " + zero + ";");
    p.close();
    p.line("__syncthreads();");
    p.open("for (int kk = 0; kk < 16; ++kk)");
    p.line(T + " ar[" + R + "], bc[" + R + "];");
    p.line("for (int i = 0; i < " + R + "; ++i) ar[i] = As[kk][ty + 16 * i];");
    p.line("for (int j = 0; j < " + R + "; ++j) bc[j] = Bs[kk][tx + 16 * j];");
    p.line("for (int i = 0; i < " + R + "; ++i) for (int j = 0; j < " + R + "; ++j) acc[i][j] = acc[i][j] + ar[i] * bc[j];");
    p.close();
    p.line("__syncthreads();");
    p.close();
    // The epilogue of each output element in range.
    p.open("for (int i = 0; i < " + R + "; ++i) for (int j = 0; j < " + R + "; ++j)");
    p.line("const long long " + r + " = tm * " + s + " + ty + 16 * i, " + c + " = tn * " + s + " + tx + 16 * j;");
    p.line("if (" + r + " >= M || " + c + " >= N) continue;");
    p.temps_used.insert(h.acc_temp);
    p.line(Printer::temp_name(h.acc_temp) + " = acc[i][j];");
    p.stmts(h.epilogue);
    p.close();
    p.close();
    return at;
}

// The value of index expression `e` when every param it reads is bound by `spec`.
std::optional<std::int64_t> bound_value(const ExprRef& e, const kir::Specialization& spec) {
    std::vector<std::int64_t> params(spec.params.size(), 0);
    bool all = true;
    std::function<void(const ExprRef&)> walk = [&](const ExprRef& x) {
        if (!x) return;
        if (x->kind == kir::ExprKind::Param) {
            const auto i = static_cast<std::size_t>(x->id);
            if (x->id < 0 || i >= spec.params.size() || !spec.params[i]) all = false;
            else params[i] = *spec.params[i];
        }
        for (const auto& arg : x->args) walk(arg);
    };
    walk(e);
    if (!all) return std::nullopt;
    return kir::eval_index(e, params.data());
}

}  // namespace

GpuSource print_source(const kir::Kernel& k, const kir::Specialization& spec, Dialect dialect) {
    GpuSource src;
    src.block = kBlock;
    src.num_buffers = static_cast<int>(k.buffers.size());
    src.num_params = static_cast<int>(k.params.size());
    try {
        if (spec.params.size() > k.params.size()) throw Unsupported{"the specialisation binds more params than the kernel has"};
        Printer p(k, spec, dialect);
        std::vector<ExprRef> keep;  // expressions the printer made: alive while it remembers them
        p.indent = 1;
        const bool matmul = k.matmul.has_value();
        detail::WarpPlan plan;
        const bool rows = !matmul && k.extent && detail::plan_warp_rows(k, &plan);
        // The tiled form for products of at least 128 rows known when printing (with fewer, the
        // element form measured faster on an H200: MLP batch 32 0.11 ms against 0.23; a tile of
        // few rows idles most of its threads, and few tiles leave the device idle: the
        // element form is faster there, and serves the generic kernel whose rows vary).
        // Tiles of 64 when they make at least 256 blocks (about two per multiprocessor of a
        // large GPU), else of 32, which make four times as many. Both dialects: the tile's
        // layout is in threads of a block, whatever the warp or wavefront width.
        const std::optional<std::int64_t> m_rows = matmul ? bound_value(k.matmul->m, spec) : std::nullopt;
        const std::optional<std::int64_t> n_cols = matmul ? bound_value(k.matmul->n, spec) : std::nullopt;
        const std::optional<std::int64_t> batch = matmul ? bound_value(k.matmul->batch, spec) : std::nullopt;
        // Convolutions: tiles when the output channels fill a tile of 32 and the pixels four
        // (their rows are the channels, which are few: resnet's 64 would not reach 128).
        const bool tiled = m_rows && (matmul && k.matmul->im2col ? *m_rows >= 32 && n_cols && *n_cols >= 128 : *m_rows >= 128);
        const bool big = m_rows && n_cols && batch && *batch * ((*m_rows + 63) / 64) * ((*n_cols + 63) / 64) >= 256;
        VectorPlan vplan;
        const bool vector = !matmul && !rows && plan_vector(k, &vplan);
        const std::size_t at = matmul ? (tiled ? print_matmul_tiled(p, src, keep, big ? 64 : 32) : print_matmul(p, src, keep))
                               : rows   ? print_warp_rows(p, src, keep, plan)
                               : vector ? print_vector(p, src, vplan)
                                        : print_generic(p, src);

        // Declarations of what the body used, then the body.
        std::string body;
        for (int b : p.buffers_used) {
            const kir::Buffer& buf = k.buffers[static_cast<std::size_t>(b)];
            const std::string T = detail::storage_type(buf.dtype), cq = buf.output ? "" : "const ";
            body += "    " + cq + T + "* " + Printer::buffer_name(b) + " = (" + cq + T + "*)a.buf[" + std::to_string(b) + "];\n";
        }
        // Temporaries live across the whole item (as the evaluator's do across one outer index).
        std::string temps;
        for (int t : p.temps_used) {
            const Type tt = k.temps[static_cast<std::size_t>(t)];
            const std::string zero = kir::is_float(tt) ? detail::float_literal(tt, 0.0) : detail::int_literal(tt, 0);
            temps += "        " + std::string(detail::c_type(tt)) + " " + Printer::temp_name(t) + " = " + zero + ";\n";
        }
        body += p.out.substr(0, at) + temps + p.out.substr(at);

        std::string head = dialect == Dialect::cuda ? "// CUDA C for NVRTC" : "// HIP for HIPRTC";
        head += ", printed by Kiln from kernel " + k.name + "\n";
        head += detail::prelude(p.helpers, dialect);
        head += "struct KilnArgs { void* buf[" + std::to_string(std::max(1, src.num_buffers)) + "]; long long param[" +
                std::to_string(std::max(1, src.num_params)) + "]; long long work; };\n";
        support::Hasher hs;
        hs.str(head).str(body).u64(static_cast<std::uint64_t>(dialect));
        src.entry = "kiln_" + sanitize(k.name) + "_" + support::hex64(hs.digest()).substr(0, 12);
        // Both dialects: extern "C" keeps the entry's name; HIPRTC predefines __global__,
        // __launch_bounds__ and the thread builtins as NVRTC does.
        src.code = head + "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlock) + ") " + src.entry +
                   "(KilnArgs a) {\n" + body + "}\n";
        src.ok = true;
    } catch (const Unsupported& u) {
        src = GpuSource{};
        src.why = u.why;
    } catch (const std::exception& e) {  // kir builders reject a malformed hint
        src = GpuSource{};
        src.why = std::string("malformed kernel: ") + e.what();
    }
    return src;
}

}  // namespace kiln::tiers::gpu
