#pragma once
// A naive double-precision reference for every op of the tracing API (kiln/trace.h), used by
// the tests/test_ops_*.cpp files. Everything here is written as plainly as possible, with no
// attempt at speed: a reference must be obviously right. Values live in row-major
// std::vector<double>; integer dtypes are modelled by wrapping results to the dtype's width.
// reference.cpp: helpers, elementwise, reductions, normalisation; reference_nn.cpp: linear
// algebra, convolution, pooling, shape ops; reference_setup.cpp: options, engines, inputs and
// comparisons without a test framework; reference_check.cpp: the doctest helpers.
#include <kiln/kiln.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ref {

using kiln::DType;
using kiln::Shape;

struct RTensor {
    Shape shape;
    std::vector<double> v;  // row-major
    std::int64_t numel() const { return static_cast<std::int64_t>(v.size()); }
    double at(const std::vector<std::int64_t>& index) const;
};

// ---- index helpers ----
std::int64_t numel_of(const Shape& s);
std::vector<std::int64_t> strides_of(const Shape& s);                    // row-major, in elements
std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& s);    // flat -> multi-index
std::int64_t ravel(const std::vector<std::int64_t>& idx, const Shape& s);
std::int64_t norm_axis(std::int64_t axis, std::int64_t rank);            // -1 -> rank-1
std::string shape_str(const Shape& s);
std::string dname(DType dt);  // "f32", "bool", ... (doctest prints enums as numbers)

// ---- conversion to and from kiln::Tensor ----
RTensor from_kiln(const kiln::Tensor& t);                  // uses Tensor::to_doubles()
kiln::Tensor to_kiln(const RTensor& r, DType dtype);       // builds a typed vector by hand
RTensor make(const Shape& shape, std::vector<double> values);
RTensor full(const Shape& shape, double value);

// Wraps an integer value to the width of an integer dtype (identity for floats; bool: != 0).
double wrap_to(DType dt, double v);
RTensor wrap_all(RTensor r, DType dt);

// ---- broadcasting ----
Shape broadcast_shape(const Shape& a, const Shape& b);     // throws std::runtime_error if impossible
RTensor broadcast_to(const RTensor& x, const Shape& shape);
RTensor map(const RTensor& x, const std::function<double(double)>& f);
RTensor zip(const RTensor& a, const RTensor& b, const std::function<double(double, double)>& f);

// ---- elementwise (dt is the operands' dtype; integer results wrap) ----
RTensor add(const RTensor& a, const RTensor& b, DType dt);
RTensor sub(const RTensor& a, const RTensor& b, DType dt);
RTensor mul(const RTensor& a, const RTensor& b, DType dt);
RTensor div(const RTensor& a, const RTensor& b, DType dt);  // ints: truncate; x/0 = 0
RTensor pow(const RTensor& a, const RTensor& b);
RTensor maximum(const RTensor& a, const RTensor& b);
RTensor minimum(const RTensor& a, const RTensor& b);
RTensor lt(const RTensor& a, const RTensor& b);
RTensor le(const RTensor& a, const RTensor& b);
RTensor gt(const RTensor& a, const RTensor& b);
RTensor ge(const RTensor& a, const RTensor& b);
RTensor eq(const RTensor& a, const RTensor& b);
RTensor ne(const RTensor& a, const RTensor& b);
RTensor where(const RTensor& c, const RTensor& a, const RTensor& b);
RTensor clamp(const RTensor& x, double lo, double hi);
RTensor cast(const RTensor& x, DType from, DType to);
double cast_value(double v, DType from, DType to);

RTensor abs(const RTensor& x, DType dt);
RTensor neg(const RTensor& x, DType dt);
RTensor exp(const RTensor& x);
RTensor log(const RTensor& x);
RTensor sqrt(const RTensor& x);
RTensor rsqrt(const RTensor& x);
RTensor reciprocal(const RTensor& x);
RTensor sin(const RTensor& x);
RTensor cos(const RTensor& x);
RTensor tanh(const RTensor& x);
RTensor sigmoid(const RTensor& x);
RTensor relu(const RTensor& x);
RTensor gelu(const RTensor& x, bool tanh_approx);
RTensor silu(const RTensor& x);
RTensor erf(const RTensor& x);
RTensor floor(const RTensor& x);
RTensor ceil(const RTensor& x);
RTensor round(const RTensor& x);  // half to even
RTensor sign(const RTensor& x);
RTensor logical_not(const RTensor& x);
double round_half_even(double x);

// ---- reductions: empty axes = all axes; negative axes allowed ----
RTensor sum(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim, DType dt);
RTensor mean(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim);
RTensor max(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim);
RTensor min(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim);
RTensor prod(const RTensor& x, std::vector<std::int64_t> axes, bool keepdim, DType dt);
RTensor argmax(const RTensor& x, std::int64_t axis, bool keepdim);  // first index; NaN is the max
RTensor argmin(const RTensor& x, std::int64_t axis, bool keepdim);  // first index; NaN is the min

// ---- normalisation ----
RTensor softmax(const RTensor& x, std::int64_t axis);
RTensor log_softmax(const RTensor& x, std::int64_t axis);
RTensor layer_norm(const RTensor& x, const RTensor& gamma, const RTensor& beta, double eps);
RTensor rms_norm(const RTensor& x, const RTensor& gamma, double eps);
RTensor batch_norm(const RTensor& x, const RTensor& mean, const RTensor& var, const RTensor& gamma,
                   const RTensor& beta, double eps);

// ---- linear algebra, convolution, pooling ----
RTensor matmul(const RTensor& a, const RTensor& b);
RTensor linear(const RTensor& x, const RTensor& w, const std::optional<RTensor>& b);
RTensor conv2d(const RTensor& x, const RTensor& w, const std::optional<RTensor>& b,
               kiln::Pair stride, kiln::Pair padding, kiln::Pair dilation, std::int64_t groups);
RTensor max_pool2d(const RTensor& x, kiln::Pair kernel, kiln::Pair stride, kiln::Pair padding);
RTensor avg_pool2d(const RTensor& x, kiln::Pair kernel, kiln::Pair stride, kiln::Pair padding);
RTensor global_avg_pool2d(const RTensor& x);

// ---- shape ops ----
RTensor reshape(const RTensor& x, const Shape& shape);  // one -1 allowed
RTensor permute(const RTensor& x, const std::vector<std::int64_t>& perm);
RTensor transpose(const RTensor& x, std::int64_t a, std::int64_t b);
RTensor flatten(const RTensor& x, std::int64_t start_axis, std::int64_t end_axis);
RTensor squeeze(const RTensor& x, std::vector<std::int64_t> axes);  // empty: every 1
RTensor unsqueeze(const RTensor& x, std::vector<std::int64_t> axes);  // positions in the output
RTensor slice(const RTensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step);
RTensor concat(const std::vector<RTensor>& xs, std::int64_t axis);
std::vector<RTensor> split(const RTensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis);
std::vector<RTensor> split_sections(const RTensor& x, std::int64_t sections, std::int64_t axis);
RTensor gather(const RTensor& x, const RTensor& indices, std::int64_t axis);
RTensor pad(const RTensor& x, const std::vector<std::int64_t>& pads, double value);
// x[..., start : start + length, ...] along `axis`; throws std::runtime_error when out of range.
RTensor narrow(const RTensor& x, std::int64_t axis, std::int64_t start, std::int64_t length);
// [start, start + step, ...] (length values), wrapped to dtype `dt` (floats: the nearest value of dt).
RTensor arange(std::int64_t start, std::int64_t length, std::int64_t step, DType dt);

// ================= test helpers (used by the doctest files) =================

struct Tol {
    double rtol = 0.0;
    double atol = 0.0;
};
// The default tolerance for results of `dt`, multiplied by `scale` (for exp/log/tanh/erf or
// long reductions). Integers and booleans compare exactly.
Tol tol_for(DType dt, double scale = 1.0);

// Compares `got` against `want` element by element: equal shape, expected dtype, and
// |got - want| <= atol + rtol * |want| (NaN matches NaN; infinities must match exactly).
// Reports the first mismatches through doctest. Returns true when all match.
bool check_close(const kiln::Tensor& got, const RTensor& want, DType want_dtype, Tol tol,
                 const std::string& what = "");
// Bitwise-or-close comparison of two kiln tensors (for thread tests).
bool same_values(const kiln::Tensor& a, const kiln::Tensor& b, double tol);
// max |a-b| / (1 + |b|) over all elements; NaN where both are NaN counts as equal, an
// infinity must match exactly (else the result is infinite). Shapes and dtypes must match.
double max_rel_diff(const kiln::Tensor& a, const kiln::Tensor& b);

// The tier-0 engine shared by the op tests (Options with jit = false).
kiln::Engine& interp_engine();
kiln::Options interp_options();
// A tier threshold that is never reached.
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
// The JIT on with these tier thresholds (kNever: that tier never) deciding alone
// (KILN_TIERUP=count, so counts are exact), compiles on the calling thread unless `async`.
kiln::Options jit_options(std::int64_t tier1_threshold, std::int64_t tier2_threshold, bool async = false);
// Options for tests of tier-2 kernels: jit_options(kNever, 2): tier 2 after 2 calls of a
// shape, never tier 1 (so that tier 2, not tier 1, runs the kernels under test).
kiln::Options tier2_options();
// Options for tests of tier-1 kernels: jit_options(1, kNever): tier 1 after the first call,
// never tier 2.
kiln::Options tier1_options();
// The stats of the group of `kind` in s (the first such group; a failed check when none).
kiln::GroupStats group_of_kind(const kiln::FunctionStats& s, const std::string& kind);
// Checks that the group of `kind` is at tier 2 and ran compiled calls, and that no compile
// of the function failed.
void check_tier2(const kiln::FunctionStats& s, const std::string& kind);
// The same at tier `level`.
void check_tier(const kiln::FunctionStats& s, const std::string& kind, int level);
// Loads `g` into a fresh tier-0 Function and calls it.
std::vector<kiln::Tensor> run_graph(const kiln::Graph& g, const std::vector<kiln::Tensor>& inputs);
// An ArgSpec with the static shape and dtype of `t`.
kiln::ArgSpec arg_like(const std::string& name, const kiln::Tensor& t);

// Random input of a dtype suited to an op: floats normal(0,1) scaled, ints uniform in [lo,hi).
kiln::Tensor random_input(const Shape& shape, std::uint64_t seed, DType dt, double lo = -3.0, double hi = 3.0);

// Every dtype by kind.
const std::vector<DType>& float_dtypes();   // f32, f64, f16, bf16
const std::vector<DType>& int_dtypes();     // i8, u8, i32, i64
const std::vector<DType>& all_dtypes();     // the 9 dtypes

// A random shape of `rank` with dims drawn from `sizes`.
Shape random_shape(std::mt19937_64& rng, int rank, const std::vector<std::int64_t>& sizes = {1, 2, 3, 5, 7});

}  // namespace ref
