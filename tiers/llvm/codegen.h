#pragma once
// Internal to tiers/llvm: the KIR -> LLVM IR generator (codegen.cpp, with the op emission of
// ops.h: ops.cpp and vmath.cpp).
//
// Requires: a KIR kernel (kir.h); ill-formed or unsupported input is reported, not assumed.
// Ensures: `module` gains one function `fn_name` with the KernelFn signature
//     void(ptr buffers, ptr params, i64 begin, i64 end)
// that runs the body for each outer index in [begin, end), with the interpreter's
// semantics for every op and type:
// - params bound by the Specialization are constants, the others are loaded once on entry;
// - buffer pointers get disjoint alias scopes (noalias), accesses are aligned to the element;
// - f16/bf16 are converted with integer bit operations (round to nearest even, exactly like
//   kiln::Half / kiln::BFloat16), so no conversion libcall is needed;
// - f32 exp/log/tanh/sigmoid/erf/sin/cos/gelu/silu are inline branch-free polynomials
//   (vectorisable); f64 transcendental functions call libm (exp, log, sin, cos, tanh, erf,
//   pow) like the interpreter does, so they give the interpreter's exact results;
//   f32 sin/cos reduce by pi/2 in f64: accurate to |x| ~ 1e12, only bounded in [-1, 1] past
//   ~1e14 (no Payne-Hanek reduction);
// - float ops carry the `contract` fast-math flag; an accumulator update `t = t + x` (float)
//   is also `reassoc`, and `t = max(t, x)` / `min` use llvm.maximum / llvm.minimum, so that
//   row reductions vectorise (no nnan/ninf: NaN and inf behave as in the interpreter).
#include "tiers/tier.h"

#include <string>

namespace llvm {
class Module;
class Value;
class Function;
class IRBuilderBase;
}  // namespace llvm

namespace kiln::tiers::llvm_tier {

// What the generator could not handle (an op on a type the interpreter does not define,
// a load whose type is not its buffer's compute type, an ill-formed kernel).
struct CodegenError {
    Bailout bailout = Bailout::unsupported_op;
    std::string message;
};

struct CodegenTarget {
    std::string cpu, features;  // function attributes "target-cpu" / "target-features"
    bool prefer_512 = false;    // "prefer-vector-width"="512" (hosts with AVX-512 that KILN_CPU_ISA does not cap)
};

// What the blocked GEMM emitter (gemm.cpp) needs from the KIR generator (codegen.cpp),
// which implements it: the builder and function being generated, buffer pointers, index
// expressions, and the epilogue statements of a MatmulHint.
class KernelEmitter {
public:
    virtual llvm::IRBuilderBase& builder() = 0;
    virtual llvm::Function* function() = 0;
    virtual llvm::Value* buffer_ptr(int id) = 0;
    // An index expression of constants, params and the loop variables bound by bind_var,
    // emitted at the current insertion point (nothing is reused across calls).
    virtual llvm::Value* index(const kir::ExprRef& e) = 0;
    virtual void bind_var(int var, llvm::Value* v) = 0;
    // The hint's epilogue for one output element at the bound batch/row/col variables, with
    // `acc` (the dot product, of the hint's type) as the accumulator temp.
    virtual void epilogue(llvm::Value* acc) = 0;
    // Can epilogue_lanes emit the hint's epilogue across vector lanes of loop variable `var`
    // (the column of a GEMM, the channel lane of a blocked conv)? Yes where its statements
    // are assignments and stores whose varying loads and stores are consecutive in `var`
    // (unit stride) and whose varying values need no libm call (f64 transcendentals).
    virtual bool lanes_ok(int var) = 0;
    // The epilogue for the consecutive values [first, first + lanes) of `var` (the other
    // variables bound by bind_var), with `acc` a vector of their accumulators; with `mask`
    // (an <lanes x i1>; null: every lane) only the masked lanes are loaded and stored.
    // Only where lanes_ok(var).
    virtual void epilogue_lanes(llvm::Value* acc, int var, llvm::Value* first, llvm::Value* mask) = 0;
    // Records that the code relies on the loop vectoriser (loops with vectorize hints), so
    // that the pass pipeline runs it (emit_kernel's EmitResult::loop_vectoriser).
    virtual void need_loop_vectoriser() = 0;

protected:
    ~KernelEmitter() = default;
};

// bf16 bits (an i16, or a vector of i16) widened to f32 (or a vector of f32): they are the
// top half of the f32, so the widening is exact. Defined in ops.cpp beside the other f16/bf16
// conversions; used by codegen.cpp and gemm.cpp.
llvm::Value* bf16_to_float(llvm::IRBuilderBase& b, llvm::Value* raw);

// gemm.cpp: does the blocked GEMM handle this kernel (it has a MatmulHint and the blocked
// path is switched on, see set_blocked_gemm)?
bool gemm_applies(const kir::Kernel& kernel);
// Emits, at the builder's insertion point (the entry block, after the setup of buffers,
// params and temps), the loop over outer indices [begin, end) as a cache-blocked,
// register-tiled GEMM with packing and the fused epilogue (see gemm.cpp), instead of the
// kernel's naive loop nest. Throws CodegenError.
void emit_gemm(const kir::Kernel& kernel, const CodegenTarget& target, KernelEmitter& em, llvm::Value* begin,
               llvm::Value* end);
// conv_nchwc.cpp: does the blocked-layout convolution's code handle this kernel (it has a
// kir::NchwcConv and the blocked path is switched on)? emit_nchwc emits it, like emit_gemm.
bool nchwc_applies(const kir::Kernel& kernel);
void emit_nchwc(const kir::Kernel& kernel, const CodegenTarget& target, KernelEmitter& em, llvm::Value* begin,
                llvm::Value* end);
// Process-wide switch (tests and benchmarks compare both): false makes matmul and
// conv2d_nchwc kernels use their naive KIR loop nest. On by default.
void set_blocked_gemm(bool on);
bool blocked_gemm_on();
// Test hook: the micro-kernel's vector width in bytes (16, 32 or 64; 0: from the host).
void set_gemm_vector_bytes(int bytes);
// The settings above as text ("blocked_gemm=1;gemm_vector_bytes=0"): generated code depends on them.
std::string gemm_settings();

// The version of the calls below, which compiled code makes by symbol: part of the tier's
// fingerprint, so that code persisted by a build whose calls differed (KILN_CACHE_DIR) is
// compiled anew rather than loaded. Bump it with any change to their parameters or meaning.
inline constexpr int kRuntimeCallsVersion = 3;  // 2: conv_nchwc_f32's residual; 3: its geometry's cout

// The ahead-of-time kernel that GEMM code calls for blocks of fewer rows than a register
// tile (bound in every kernel's JITDylib): c[r * ldc + x] += sum_k a[r * lda + k] *
// b[k * ldb + x] for r < rows, x < n, k < kc, with src/cpu's rows kernels of the kernels'
// instruction set (cpu::kernel_cpu_isa()).
inline constexpr const char* kRowsF32Symbol = "kiln_rt_gemm_rows_f32";
inline constexpr const char* kRowsF64Symbol = "kiln_rt_gemm_rows_f64";
void gemm_rows_f32(std::int64_t rows, std::int64_t n, std::int64_t kc, const float* a, std::int64_t lda, const float* b,
                   std::int64_t ldb, float* c, std::int64_t ldc) noexcept;
void gemm_rows_f64(std::int64_t rows, std::int64_t n, std::int64_t kc, const double* a, std::int64_t lda,
                   const double* b, std::int64_t ldb, double* c, std::int64_t ldc) noexcept;

// The ahead-of-time depthwise kernel that conv code calls when each output channel reads one
// input channel (bound in every kernel's JITDylib): for k < nch, out[k * ld + p - p0] for
// the output pixels [p0, p1) of the plane xs[k] with the filter ws[k], from inits[k] (0 when
// inits is null), clamped to [lo, hi] (cpu::DwPlan; -inf and inf: not at all), then with
// `silu` != 0 put through SiLU (cpu::DwPlan::silu), by src/cpu/depthwise.h with the
// kernels' instruction set (the plan made once for all nch).
// `geo` holds a cpu::Im2colShape as 12 int64 (c, h, w, ow, kh, kw, sh, sw, ph, pw, dh, dw).
// Its scratch is the thread's kernel scratch (tier.h); without it, it calls kernel_failed().
inline constexpr const char* kDepthwiseF32Symbol = "kiln_rt_depthwise_f32";
inline constexpr const char* kDepthwiseF64Symbol = "kiln_rt_depthwise_f64";
void depthwise_f32(const std::int64_t* geo, std::int64_t nch, const float* const* xs, const float* const* ws,
                   const float* inits, float* out, std::int64_t ld, std::int64_t p0, std::int64_t p1, double lo,
                   double hi, std::int64_t silu) noexcept;
void depthwise_f64(const std::int64_t* geo, std::int64_t nch, const double* const* xs, const double* const* ws,
                   const double* inits, double* out, std::int64_t ld, std::int64_t p0, std::int64_t p1, double lo,
                   double hi, std::int64_t silu) noexcept;

// The ahead-of-time Winograd F(4x4, 3x3) kernel (src/cpu/winograd.h) that 3x3 conv code with
// a MatmulHint::winograd calls (bound in every kernel's JITDylib): the raw convolution of
// output channels [oc0, oc0 + rows) and output tile rows [ty0, ty1) of the image x (cin planes;
// geo: the depthwise kernel's 12 int64, of which h, w, ow, ph, pw are read; oh output rows)
// with the transformed weights u (og_tiles tiles of 32 channels), written to the thread's
// kernel scratch as rows of ldo values, pixel (y, x) at (y - 4 ty0) * ow + x; returns that
// buffer, or null (after kernel_failed()) when the scratch cannot be had.
inline constexpr const char* kWinogradF32Symbol = "kiln_rt_winograd_f32";
float* winograd_f32(const std::int64_t* geo, std::int64_t cin, std::int64_t oh, const float* x, const float* u,
                    std::int64_t oc0, std::int64_t rows, std::int64_t og_tiles, std::int64_t ty0, std::int64_t ty1,
                    std::int64_t ldo) noexcept;

// The ahead-of-time blocked-layout convolution (src/cpu/conv_nchwc.h) that conv2d_nchwc code
// calls (bound in every kernel's JITDylib): the convolution of channel blocks
// [ob0, ob1) and pixels [p0, p1) of the sample at x into out (block ob's pixel p at
// out + (ob - ob0) * ldb + (p - p0) * 16), from the bias (null: 0), plus the residual laid
// out as out (null: none), clamped to [lo, hi] (-inf, inf: not at all), with the kernels'
// instruction set. `geo` holds 15 int64: cin, h,
// w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, flags (1: blocked input, 2: depthwise,
// 4: SiLU of the clamped results), and the real output channels (cpu::NchwcGeometry::cout).
inline constexpr const char* kConvNchwcF32Symbol = "kiln_rt_conv_nchwc_f32";
void conv_nchwc_f32(const std::int64_t* geo, const float* x, const float* w, const float* bias, const float* residual,
                    float* out, std::int64_t ldb, std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1, double lo,
                    double hi) noexcept;

// What emit_kernel generated: whether the code reads the kernel's derived buffers
// (kir::Derived), and whether it needs the loop vectoriser (every kernel but the blocked
// GEMM and conv ones, whose vectors are emitted as such, or not where an epilogue could
// not be: then as loops hinted for the vectoriser).
struct EmitResult {
    bool reads_derived = false;
    bool loop_vectoriser = true;
};
// Throws CodegenError (only from Kiln's own code: no LLVM callback is involved).
EmitResult emit_kernel(const kir::Kernel& kernel, const kir::Specialization& spec, const CodegenTarget& target,
                 const std::string& fn_name, llvm::Module& module);

}  // namespace kiln::tiers::llvm_tier
