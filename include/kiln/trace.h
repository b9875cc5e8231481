#pragma once
// The tracing API: kiln::trace runs a body once on symbolic kiln::Vars and records a Graph.
// Every operator checks its operands at trace time and throws kiln::Error naming the op,
// the operands' shapes and the rule it broke. Broadcasting follows NumPy; negative axes
// count from the back. Binary ops need equal dtypes; a double adopts the other operand's.
#include <kiln/dim.h>
#include <kiln/dtype.h>
#include <kiln/graph.h>
#include <kiln/tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

namespace detail { class Tracer; }

// A declared graph input.
struct ArgSpec {
    std::string name;
    DType dtype = DType::f32;
    std::vector<Dim> dims;
};
inline ArgSpec arg(std::string name, DType dtype, std::vector<Dim> dims) {
    return {std::move(name), dtype, std::move(dims)};
}

// A value in the graph being traced. Only valid inside the body of kiln::trace.
class Var {
public:
    Var() = default;                 // "none": e.g. no bias for conv2d
    Var(const Tensor& constant);     // NOLINT: a tensor captured as a constant
    Var(double scalar);              // NOLINT: a scalar; takes the other operand's dtype
    Var(int scalar) : Var(static_cast<double>(scalar)) {}  // NOLINT

    bool defined() const { return tracer_ != nullptr || is_scalar_; }
    DType dtype() const;
    std::int64_t rank() const;
    Dim dim(std::int64_t i) const;   // negative i counts from the back
    std::vector<Dim> dims() const;

    // Internal.
    Var(detail::Tracer* tracer, std::int32_t id) : tracer_(tracer), id_(id) {}
    detail::Tracer* tracer() const { return tracer_; }
    std::int32_t id() const { return id_; }
    bool is_scalar() const { return is_scalar_; }
    double scalar() const { return scalar_; }

private:
    detail::Tracer* tracer_ = nullptr;
    std::int32_t id_ = -1;
    bool is_scalar_ = false;
    double scalar_ = 0.0;
};

using TraceBody = std::function<std::vector<Var>(const std::vector<Var>&)>;
Graph trace(const std::string& name, const std::vector<ArgSpec>& args, const TraceBody& body);
Graph trace(const std::string& name, const std::vector<ArgSpec>& args,
            const std::function<Var(const std::vector<Var>&)>& body);

// ---- arithmetic and comparisons (NumPy broadcasting) ----
Var operator+(const Var& a, const Var& b);
Var operator-(const Var& a, const Var& b);
Var operator*(const Var& a, const Var& b);
Var operator/(const Var& a, const Var& b);   // integer division truncates toward zero
Var operator-(const Var& a);
Var operator<(const Var& a, const Var& b);   // comparisons give DType::boolean
Var operator<=(const Var& a, const Var& b);
Var operator>(const Var& a, const Var& b);
Var operator>=(const Var& a, const Var& b);
Var operator==(const Var& a, const Var& b);
Var operator!=(const Var& a, const Var& b);
Var pow(const Var& a, const Var& b);
Var maximum(const Var& a, const Var& b);
Var minimum(const Var& a, const Var& b);
Var where(const Var& cond, const Var& a, const Var& b);  // cond is boolean
Var clamp(const Var& x, double lo, double hi);
Var cast(const Var& x, DType dtype);  // float->int truncates; ->boolean is x != 0

// ---- unary (floating dtypes unless noted) ----
Var abs(const Var& x);      // also integers
Var neg(const Var& x);      // also integers
Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var rsqrt(const Var& x);
Var reciprocal(const Var& x);
Var sin(const Var& x);
Var cos(const Var& x);
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var relu(const Var& x);     // also integers
Var gelu(const Var& x, bool tanh_approx = false);
Var silu(const Var& x);
Var erf(const Var& x);
Var floor(const Var& x);
Var ceil(const Var& x);
Var round(const Var& x);    // half to even, like NumPy
Var sign(const Var& x);     // also integers
Var logical_not(const Var& x);  // boolean only

// ---- reductions: empty `axes` means all axes ----
Var sum(const Var& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Var mean(const Var& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Var max(const Var& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Var min(const Var& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Var prod(const Var& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Var sum(const Var& x, std::int64_t axis, bool keepdim = false);
Var mean(const Var& x, std::int64_t axis, bool keepdim = false);
Var max(const Var& x, std::int64_t axis, bool keepdim = false);
Var min(const Var& x, std::int64_t axis, bool keepdim = false);
Var prod(const Var& x, std::int64_t axis, bool keepdim = false);
// Index (i64) of the first maximum / minimum along one axis.
Var argmax(const Var& x, std::int64_t axis, bool keepdim = false);
Var argmin(const Var& x, std::int64_t axis, bool keepdim = false);

// ---- normalisation ----
Var softmax(const Var& x, std::int64_t axis = -1);
Var log_softmax(const Var& x, std::int64_t axis = -1);
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps = 1e-5);  // last axis
Var rms_norm(const Var& x, const Var& gamma, double eps = 1e-6);                      // last axis
Var batch_norm(const Var& x, const Var& mean, const Var& var, const Var& gamma, const Var& beta,
               double eps = 1e-5);  // inference form, per channel of axis 1

// ---- linear algebra and convolution ----
Var matmul(const Var& a, const Var& b);  // NumPy semantics: batched, broadcast, 1-D promoted
// x @ w^T + b with w of shape [out, in] (PyTorch's convention); b may be none.
Var linear(const Var& x, const Var& w, const Var& b = Var());
using Pair = std::array<std::int64_t, 2>;
// NCHW input, OIHW weight (I = C / groups), optional bias [O].
Var conv2d(const Var& x, const Var& w, const Var& b = Var(), Pair stride = {1, 1},
           Pair padding = {0, 0}, Pair dilation = {1, 1}, std::int64_t groups = 1);
Var max_pool2d(const Var& x, Pair kernel, Pair stride, Pair padding = {0, 0});
// Padded positions do not count in the average (count_include_pad = false).
Var avg_pool2d(const Var& x, Pair kernel, Pair stride, Pair padding = {0, 0});
Var global_avg_pool2d(const Var& x);  // [N,C,H,W] -> [N,C,1,1]

// ---- shape ops ----
// A dim of -1 is inferred; dims may be symbolic (x.dim(0), x.dim(1) * x.dim(2), ...).
Var reshape(const Var& x, const std::vector<Dim>& dims);
Var permute(const Var& x, const std::vector<std::int64_t>& perm);
Var transpose(const Var& x, std::int64_t a, std::int64_t b);
Var flatten(const Var& x, std::int64_t start_axis = 1, std::int64_t end_axis = -1);
Var squeeze(const Var& x, std::vector<std::int64_t> axes = {});  // empty: every static 1
Var unsqueeze(const Var& x, std::vector<std::int64_t> axes);
Var unsqueeze(const Var& x, std::int64_t axis);
Var broadcast_to(const Var& x, const std::vector<Dim>& dims);
// Python slicing semantics on one axis: negative start/end count from the back and are
// clamped to the dim; step >= 1. end defaults to "to the end".
Var slice(const Var& x, std::int64_t axis, std::int64_t start,
          std::int64_t end = INT64_MAX, std::int64_t step = 1);
Var concat(const std::vector<Var>& xs, std::int64_t axis);
std::vector<Var> split(const Var& x, const std::vector<std::int64_t>& sizes, std::int64_t axis);
std::vector<Var> split(const Var& x, std::int64_t sections, std::int64_t axis);  // equal parts
// NumPy `take`: out.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:]; integer
// indices, negative ones count from the back; an index out of range is an error at run time.
Var gather(const Var& x, const Var& indices, std::int64_t axis);
// Constant padding: `pads` holds (before, after) for each axis from axis 0, so
// 2 * rank values; an amount may be 0.
Var pad(const Var& x, const std::vector<std::int64_t>& pads, double value = 0.0);
// `length` elements of x along `axis` from `start`: out[..., i, ...] = x[..., start + i, ...].
// start and length may be symbolic (x.dim(2) - q.dim(2), ...; their symbols must be dims of
// values of the trace). No clamping: 0 <= start and start + length <= x.dim(axis) must hold,
// checked at trace time where the dims allow and on every call (kiln::Error). A view.
Var narrow(const Var& x, std::int64_t axis, const Dim& start, const Dim& length);

// ---- generated values ----
// [start, start + step, ..., start + (length - 1) * step] of `dtype` (numeric; computed in
// int64 and converted as cast converts), e.g. position ids arange(past.dim(2), x.dim(1)).
// start and length may be symbolic (symbols of dims of the trace's values); step != 0.
Var arange(const Dim& start, const Dim& length, std::int64_t step = 1, DType dtype = DType::i64);

}  // namespace kiln
