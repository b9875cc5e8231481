#pragma once
// Kernel IR (KIR): the loop-level IR of one fused group, and the single input of every code
// generator (tier 1's asmjit generator, tier 2's LLVM ORC generator) and of the KIR
// evaluator (eval.h). It holds no backend types.
//
// A kernel is a function
//     void kernel(void* const* buffers, const int64_t* params, int64_t begin, int64_t end)
// that runs `body` once for each value of the outer index `outer` in [begin, end). The
// runtime evaluates `extent` (an expression of the params) and splits [0, extent) into
// chunks across threads, so every backend gets parallelism the same way. Buffers are dense
// (row-major, contiguous) arrays of their dtype; f16/bf16 elements are loaded as f32 and
// stored from f32. Params are int64 values (dims of the group's buffers, or values of
// symbolic dims: ParamSource) that a
// specialisation may bind to constants (see Specialization).
//
// Semantics of every op are those of the interpreter (tiers/interp), which is the
// specification; the scalar formula of each op is in src/core/scalar_ops.h (e.g. max/min
// propagate NaN, integer division by zero gives 0) and casts are core::convert.
#include <kiln/dtype.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::kir {

// Scalar types of expressions. `index` is a signed 64-bit loop/index value.
enum class Type : std::uint8_t { f32, f64, i8, u8, i32, i64, boolean, index };
std::string_view type_name(Type t);
Type compute_type(DType d);  // f16/bf16 -> f32, others map one to one
bool is_float(Type t);

#define KIR_UNARY_OPS(X)                                                                                  \
    X(neg) X(abs) X(exp) X(log) X(sqrt) X(rsqrt) X(reciprocal) X(sin) X(cos) X(tanh) X(sigmoid) X(relu) \
    X(gelu_erf) X(gelu_tanh) X(silu) X(erf) X(floor) X(ceil) X(round) X(sign) X(logical_not)
#define KIR_BINARY_OPS(X) \
    X(add) X(sub) X(mul) X(div) X(pow) X(max) X(min) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(logical_and) X(logical_or)

enum class UnaryOp : std::uint8_t {
#define X(n) n,
    KIR_UNARY_OPS(X)
#undef X
};
enum class BinaryOp : std::uint8_t {
#define X(n) n,
    KIR_BINARY_OPS(X)
#undef X
};
std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);
bool is_comparison(BinaryOp op);  // eq, ne, lt, le, gt, ge: boolean results

enum class ExprKind : std::uint8_t {
    Const,   // `f` (float types) or `i` (others)
    Param,   // params[id] (index type)
    Outer,   // the outer index (index type)
    Var,     // loop variable `id` (index type)
    Temp,    // scalar temporary `id`
    Load,    // buffers[id][args[0]] (args[0] is an index expression, in elements)
    Unary,   // uop(args[0])
    Binary,  // bop(args[0], args[1]); comparisons give boolean
    Select,  // args[0] (boolean) ? args[1] : args[2]
    Cast,    // args[0] converted to `type` (the interpreter's conversion rules)
};

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

struct Expr {
    ExprKind kind = ExprKind::Const;
    Type type = Type::index;
    double f = 0.0;
    std::int64_t i = 0;
    int id = -1;
    UnaryOp uop = UnaryOp::neg;
    BinaryOp bop = BinaryOp::add;
    std::vector<ExprRef> args;
};

// Builders (check operand types; throw std::logic_error on misuse: these are Kiln's own bugs).
ExprRef constant(Type t, double value);
ExprRef index_const(std::int64_t v);
ExprRef param(int id);
ExprRef outer();
ExprRef var(int id);
ExprRef temp(int id, Type t);
ExprRef load(int buffer, Type t, ExprRef index);
ExprRef unary(UnaryOp op, ExprRef a);
ExprRef binary(BinaryOp op, ExprRef a, ExprRef b);
ExprRef select(ExprRef cond, ExprRef a, ExprRef b);
ExprRef cast(Type t, ExprRef a);

// Structural equality: the same kind, type, constant value, id, op and operands (compared
// recursively), whether or not they are the same objects. The lowering folds index
// arithmetic with it; the CPU tiers match KIR forms with it (tiers/kir_forms.h).
bool same_expr(const Expr& a, const Expr& b);
bool same_expr(const ExprRef& a, const ExprRef& b);  // a null expression equals only null
// Does `e` read loop variable `var` anywhere (false for a null expression)?
bool uses_var(const ExprRef& e, int var);

enum class StmtKind : std::uint8_t {
    Loop,    // for (var = begin; var < end; ++var) body
    Store,   // buffers[buffer][index] = value
    Assign,  // temps[var] = value
};

struct Stmt;
using StmtRef = std::shared_ptr<const Stmt>;

struct Stmt {
    StmtKind kind = StmtKind::Store;
    int var = -1;        // Loop: loop variable id; Assign: temp id
    ExprRef begin, end;  // Loop
    int buffer = -1;     // Store
    ExprRef index;       // Store
    ExprRef value;       // Store, Assign
    std::vector<StmtRef> body;  // Loop
};

StmtRef loop(int var, ExprRef begin, ExprRef end, std::vector<StmtRef> body);
StmtRef store(int buffer, ExprRef index, ExprRef value);
StmtRef assign(int temp, ExprRef value);

struct Buffer {
    std::string name;
    DType dtype = DType::f32;
    bool output = false;
};

// Where a param's value comes from at run time: dim `dim` of buffer `buffer` (an input or
// an output; the runtime knows every buffer's shape before it calls the kernel), or, when
// `symbol` is not empty, the value of the symbolic dim ?symbol in the call (buffer and dim
// are then -1): a size no buffer holds, such as the start of a narrow view.
struct ParamSource {
    int buffer = 0;
    int dim = 0;
    std::string symbol;
    bool from_symbol() const { return !symbol.empty(); }
    static ParamSource of_symbol(std::string name) { return {-1, -1, std::move(name)}; }
};

// A structured description of a matmul group's kernel (a contraction plus its epilogue),
// attached to the plain loop nest so that a backend may replace the naive loops with a
// blocked GEMM. The loop nest alone is complete and correct (kir::evaluate and any naive
// backend run it and ignore the hint); a backend that uses the hint must compute the same
// values (within the float tolerance of a reordered sum). The nest it describes:
//
//   for outer in [0, batch * blocks)              blocks = (m + row_block - 1) / row_block
//     for v<batch_var> in [outer / blocks, outer / blocks + 1):          (the batch index)
//       for v<row_var> in [(outer % blocks) * row_block, min(... + row_block, m)):
//         for v<col_var> in [0, n):
//           t<acc_temp> = 0
//           for vk in [0, k):
//             t<acc_temp> = t<acc_temp> + b<a>[a_offset + row * k + vk] * b<b>[b_offset + vk * n + col]
//           <epilogue>
//
// i.e. one outer index is one block of `row_block` rows of one batch entry (the runtime's
// thread split parallelises over row blocks). With col_block > 0 an outer index is one
// block of rows AND one block of columns: with cblocks = (n + col_block - 1) / col_block,
// outer in [0, batch * blocks * cblocks) covers batch entry outer / (blocks * cblocks), the
// rows of row block (outer / cblocks) % blocks and the columns [cb * col_block,
// min((cb + 1) * col_block, n)) with cb = outer % cblocks (matmuls and convolutions use
// this, so that the threads split the columns of a product of few rows, or the output
// pixels). A backend may run the consecutive column blocks of one row block that fall in
// the outer indices it was given as one block (one pass of B's rows over all of them). With im2col set, the load of B in the k loop is
// replaced by B[vk, col] as Im2col defines it (a select of a load and 0). A is dense row-major [m, k] at element offset
// `a_offset` of buffer `a`, B dense row-major [k, n] at `b_offset` of buffer `b` (no
// transposition: a transposed operand is materialised by an earlier group); both have type
// `type` (f32 or f64), which is also the accumulator's type. `a_offset` and `b_offset` are
// index expressions of params and the loop variable `batch_var` (broadcast batch dims give
// stride 0). `m`, `n`, `k`, `batch` are index expressions of constants and params (as the
// extent). `epilogue` is the statements that follow the k loop: they read the dot product
// from temp `acc_temp` and the loop variables batch_var / row_var / col_var, compute the
// fused elementwise chain (bias, activation, residual, ...) and end with the store of the
// group's output element; they are exactly the statements of the loop nest (shared), so
// a backend evaluates them once per output element with the accumulator in hand (e.g. on
// a register tile) instead of running the naive loops.
// A convolution's B operand, the im2col matrix of its input read in place (never
// materialised; see MatmulHint): for kk = (c * kh + i) * kw + j and col = y * ow + xo,
//   B[kk, col] = x[x_offset + (c * h + iy) * w + ix],  iy = y * stride[0] - pad[0] + i * dilation[0],
//                                                      ix = xo * stride[1] - pad[1] + j * dilation[1],
// and 0 where (iy, ix) falls outside [0, h) x [0, w) (zero padding). `x` is the input
// buffer (dense NCHW); `x_offset` (an index expression of params and the hint's batch_var)
// is the element offset of the batch entry's first input channel; h, w, kh, kw, ow are
// index expressions of constants and params. The naive nest loads x[x_offset] where a
// padded position's value is unused, so `x` must not be empty: the runtime never runs a
// kernel with a zero-size buffer (jit/exec/run_plan.cpp sends those groups to the interpreter).
struct Im2col {
    int x = -1;
    ExprRef x_offset;
    ExprRef h, w, kh, kw, ow;
    std::int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dilation[2] = {1, 1};
};

struct MatmulHint {
    int a = -1, b = -1;     // input buffers of the A and B operands (with im2col, b == im2col->x)
    int out = -1;           // the output buffer the epilogue stores to
    Type type = Type::f32;  // accumulator type: compute_type of A and B (f16/bf16 operands: f32)
    ExprRef m, n, k;        // rows of A and C, columns of B and C, the contracted dim
    ExprRef batch;          // product of C's batch dims (1 for 2-D)
    std::int64_t row_block = 1;
    std::int64_t col_block = 0;  // 0: every outer index covers all n columns (see below)
    int batch_var = -1, row_var = -1, col_var = -1, acc_temp = -1;
    ExprRef a_offset, b_offset;
    std::vector<StmtRef> epilogue;
    std::optional<Im2col> im2col;  // set: B is not a dense matrix but a convolution's input
    int a_packed = -1;             // A as Kernel::derived[a_packed] lays it out, or -1
    int b_packed = -1;             // B likewise (2-D B: panels of `lanes` columns), or -1
    int winograd = -1;             // a 3x3 conv's A as its Winograd transform (Derived::winograd), or -1
};

// A conv2d_nchwc group's kernel (src/kir/lower_conv_nchwc.cpp, blocks of 16 channels),
// described for a backend that computes the accumulators with src/cpu's blocked-layout
// kernel (src/cpu/conv_nchwc.h) instead of the k loop. Like MatmulHint, the loop nest alone
// is complete and correct. The nest it describes (f32 operands and output):
//
//   for outer in [0, batch * rblocks * cblocks)   rblocks = ceil(blocks / block_rows), cblocks = ceil(npix / col_block)
//     for v<batch_var> in [s, s + 1)                                     s = outer / (rblocks * cblocks)
//       for v<block_var> in [((outer / cblocks) % rblocks) * block_rows, min(... + block_rows, blocks))
//         for v<col_var> in [(outer % cblocks) * col_block, min(... + col_block, npix))
//           for v<lane_var> in [0, 16)
//             t<acc_temp> = the conv's sum for output channel block * 16 + lane at pixel col
//                           (cpu/conv_nchwc.h's formula, without the bias)
//             <epilogue>
//
// `x` is the conv's input buffer, at element offset `x_offset` (of batch_var) for the
// sample; `w` the weight [blocks, cin, kh, kw, 16]. h, w_in, oh, ow are the input's and
// output's spatial dims; `depth` = cin * kh * kw (depthwise: kh * kw), the multiply-adds per
// output element. `out` is the group's output buffer ([N, blocks, oh, ow, 16]) and `bias`
// the conv's bias buffer ([blocks, 16], read as b[block * 16 + lane]) or -1, for a backend
// that recognises an epilogue that only adds the bias and stores.
struct NchwcConv {
    int x = -1, w = -1, out = -1, bias = -1;
    ExprRef x_offset, batch, blocks, npix, depth;
    ExprRef h, w_in, oh, ow;
    std::int64_t cin = 1, kh = 1, kw = 1, stride[2] = {1, 1}, pad[2] = {0, 0}, dilation[2] = {1, 1};
    bool blocked_input = true, depthwise = false;
    // Dense: the real output channels (ops.def, conv2d_nchwc's `channels`); those at or past
    // it are 0 before the epilogue. Unset: every channel of the blocks.
    std::int64_t cout = std::numeric_limits<std::int64_t>::max();
    std::int64_t block_rows = 1, col_block = 1;
    int batch_var = -1, block_var = -1, col_var = -1, lane_var = -1, acc_temp = -1;
    std::vector<StmtRef> epilogue;
};

// A copy of a constant input buffer in another layout, which the runtime makes once per
// function for code that reads it (tiers::CompiledKernel::reads_derived; its source holds a
// graph constant, so it never changes) and passes after the kernel's outputs:
// buffers[buffers.size() + i] is derived[i]. A backend may read it instead
// of the source; the loop nest never does. The one layout: `source` read as `groups`
// matrices of `rows` x `cols` (row-major), each cut into tiles of `lanes` rows, each tile
// stored transposed (cols x lanes, zero past the last row):
//   derived[((g * tiles + t) * cols + c) * lanes + r] = source[(g * rows + t * lanes + r) * cols + c]
// with tiles = ceil(rows / lanes) (a conv's weights, packed for vectors along the output
// channels). `transposed`: the source holds each matrix transposed (cols x rows), so that
// source[(g * cols + c) * rows + r] is element (r, c) above (a matmul's 2-D B of k x n,
// read as n x k: panels of `lanes` columns of B, row after row of k). Of the source's dtype.
//
// `sub` (> 0, dividing `lanes`): each tile stored instead as lanes / sub slabs of cols x sub
// one after another, the rows r of slab r / sub:
//   derived[(((g * tiles + t) * (lanes / sub) + r / sub) * cols + c) * sub + r % sub]
// so that a vector of `sub` lanes walks one slab in order (a matmul's B at any vector width).
//
// `winograd`: the other layout, of a 3x3 conv's weights (rows = output channels, cols = 9 x
// input channels): per group, U of Winograd F(4x4, 3x3) as src/cpu/winograd.h's
// winograd_weights lays it out (36 points x tiles of `lanes` = 32 output channels x input
// channels x lanes), for a backend that convolves with it (MatmulHint::winograd).
struct Derived {
    int source = -1;
    std::int64_t groups = 1, rows = 0, cols = 0, lanes = 0;
    std::int64_t sub = 0;  // lanes per slab of a tile; 0: one slab of `lanes`
    bool transposed = false;
    bool winograd = false;
    std::int64_t elems() const {
        const std::int64_t tiles = (rows + lanes - 1) / lanes;
        return winograd ? groups * 36 * tiles * lanes * (cols / 9) : groups * tiles * lanes * cols;
    }
};
// Writes derived `d` of the source at src (of dtype dt) into dst (d.elems() values).
void fill_derived(const Derived& d, DType dt, const void* src, void* dst);

struct Kernel {
    std::string name;
    std::vector<Buffer> buffers;          // group inputs first, then outputs
    std::vector<std::string> params;      // names, for printing
    std::vector<ParamSource> param_sources;
    std::vector<Type> temps;              // scalar temporaries
    int num_vars = 0;                     // loop variables 0 .. num_vars-1
    ExprRef extent;                       // of the outer index, in params
    std::vector<StmtRef> body;            // run once per outer index
    std::optional<MatmulHint> matmul;     // matmul and conv groups: what the body computes (above)
    std::optional<NchwcConv> nchwc;       // conv2d_nchwc groups: likewise (above)
    std::vector<Derived> derived;         // buffers the runtime derives from constant inputs (above)
};

// Values bound to params (nullopt: left as a run-time argument).
struct Specialization {
    std::vector<std::optional<std::int64_t>> params;
};

// Evaluates an index expression made of constants, params and index arithmetic.
std::int64_t eval_index(const ExprRef& e, const std::int64_t* params);

// Checks a kernel's invariants (types, ids in range, loop variables bound where used);
// throws std::logic_error naming the problem.
void verify(const Kernel& k);

// The text form (KILN_DUMP=kir).
std::string print(const Kernel& k);

}  // namespace kiln::kir
