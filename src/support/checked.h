#pragma once
// Checked arithmetic for element counts, byte sizes and strides. Every place that computes one
// from a shape it was given (the public API, the tracer, shape inference, the planners and the
// allocator) goes through these, so that overflow is a kiln::Error naming the shape, never a
// wrap-around. The bound is the largest int64 for counts, byte sizes, strides and offsets alike
// (kernels index with int64). Tests: tests/test_hostile_shapes.cpp.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::support {

using Dims = std::span<const std::int64_t>;

// "[2,3]"
std::string dims_string(Dims shape);

// a * b and a + b; false when the result does not fit in int64 (then *out is unspecified).
inline bool mul_fits(std::int64_t a, std::int64_t b, std::int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool add_fits(std::int64_t a, std::int64_t b, std::int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// a * b and a + b, or kiln::Error "<what>: <a> * <b> overflows int64".
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);
// The same for byte sizes held in size_t, bounded by the largest int64 as well.
std::size_t checked_add_bytes(std::size_t a, std::size_t b, std::string_view what);
// `bytes` rounded up to a multiple of `align` (> 0), within the same bound.
std::size_t checked_round_up(std::size_t bytes, std::size_t align, std::string_view what);

// The element count of `shape`: 1 for rank 0, 0 when a dim is 0 (whatever the other dims).
// kiln::Error "<what>: shape [..] has a negative dim ..." or "... is too large: its element
// count overflows int64".
std::int64_t checked_numel(Dims shape, std::string_view what);
// Whether checked_bytes(shape, elem_size, ...) would succeed (no dim negative, no overflow):
// for hot paths that build their message only when it fails.
bool bytes_fit(Dims shape, std::size_t elem_size);
// The byte size of a dense tensor of `shape` with elements of `elem_size` bytes; kiln::Error
// naming the shape when it (or the element count) overflows int64.
std::int64_t checked_bytes(Dims shape, std::size_t elem_size, std::string_view what);
// Row-major strides in elements (a zero dim counts as 1); kiln::Error naming the shape when
// one overflows int64.
std::vector<std::int64_t> checked_strides(Dims shape, std::string_view what);
// The bytes a strided view reaches from its first element: (1 + sum (shape[i]-1)*strides[i])
// * elem_size, or 0 when it has no elements; kiln::Error naming the shape on overflow.
// Strides must be >= 0.
std::int64_t checked_span_bytes(Dims shape, Dims strides, std::size_t elem_size, std::string_view what);

}  // namespace kiln::support
