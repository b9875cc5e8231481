#pragma once
// kiln::Tensor: a strided view over shared storage. Copies share storage, like
// std::shared_ptr; views (permute, transpose, slice, ...) share it too.
//
// Sizes: a tensor's element count, its byte size (dense) or the bytes it spans (a view), and
// its row-major strides all fit in int64. Factories, wrap and views that would exceed that
// throw kiln::Error naming the shape (never a wrapped-around size); negative dims throw too.
//
// An undefined Tensor (default-constructed) answers the queries: defined() false, numel() 0,
// rank() 0, shape() and strides() empty, offset() 0, dtype() f32, device() cpu,
// is_contiguous() true, data() and data_as<T>() null, shares_storage() false,
// to_string() "Tensor(undefined)" (also operator<<). Every other method (dim, to_doubles,
// to_vector, item, to, contiguous, clone, astype, the views, reshape, copy_from in either
// direction) throws kiln::Error saying that the tensor is undefined.
#include <kiln/dtype.h>
#include <kiln/error.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

namespace kiln {

using Shape = std::vector<std::int64_t>;

namespace detail {
struct Storage;
[[noreturn]] void throw_dtype_mismatch(const char* what, DType expected, DType actual);
}  // namespace detail

class Tensor {
public:
    Tensor();  // undefined: defined() is false

    // Factories. Shapes are in elements; a zero in the shape gives an empty tensor. A shape
    // whose element count or byte size overflows int64 throws kiln::Error naming it. empty()
    // leaves the values unspecified, except that booleans are false (a boolean element is one
    // byte, 0 or 1; memory given to wrap must hold only those too).
    static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
    static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
    static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
    static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                       Device device = Device::cpu());
    // Standard normal values from a counter-based generator: the same seed gives the same
    // tensor on every platform.
    static Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32);
    // Uniform values in [lo, hi) (integers: lo..hi-1).
    static Tensor rand(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32,
                       double lo = 0.0, double hi = 1.0);
    // Copies the values.
    template <class T> static Tensor from(std::span<const T> values, const Shape& shape) {
        return from_bytes(values.data(), values.size(), dtype_of_v<T>, shape);
    }
    template <class T> static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
        if constexpr (std::is_same_v<T, bool>) {
            std::vector<std::uint8_t> bytes(values.begin(), values.end());
            return from_bytes(bytes.data(), bytes.size(), DType::boolean, shape);
        } else {
            return from_bytes(values.data(), values.size(), dtype_of_v<T>, shape);
        }
    }
    // Borrows caller memory without copying (contiguous, row-major). `deleter`, if given,
    // runs when the last tensor sharing the memory is gone.
    static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device = Device::cpu(),
                       std::function<void(void*)> deleter = {});
    // Borrows caller memory with explicit strides (in elements, >= 0; 0 repeats an element).
    // The element count and the bytes spanned must fit in int64.
    static Tensor wrap_strided(void* data, const Shape& shape, const std::vector<std::int64_t>& strides,
                               DType dtype, Device device = Device::cpu(),
                               std::function<void(void*)> deleter = {});

    bool defined() const { return static_cast<bool>(storage_); }
    const Shape& shape() const { return shape_; }
    std::int64_t dim(std::int64_t i) const;  // negative i counts from the back
    std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
    std::int64_t numel() const;
    DType dtype() const { return dtype_; }
    Device device() const;
    const std::vector<std::int64_t>& strides() const { return strides_; }  // in elements
    std::int64_t offset() const { return offset_; }                       // in elements
    bool is_contiguous() const;
    void* data() const;  // address of element [0, 0, ...]
    template <class T> T* data_as() const {  // null for an undefined tensor
        if (!storage_) return nullptr;
        if (dtype_of_v<T> != dtype_) detail::throw_dtype_mismatch("Tensor::data_as", dtype_of_v<T>, dtype_);
        return static_cast<T*>(data());
    }
    // Values in row-major order, converted to T (any dtype converts to any arithmetic T).
    // Integers to an integral T are exact (through int64, not double: 2^63 - 1 stays itself).
    template <class T> std::vector<T> to_vector() const {
        if constexpr (std::is_integral_v<T>) {
            if (is_integer(dtype_)) {
                std::vector<std::int64_t> v = to_int64s();
                return std::vector<T>(v.begin(), v.end());
            }
        }
        std::vector<double> v = to_doubles();
        return std::vector<T>(v.begin(), v.end());
    }
    std::vector<double> to_doubles() const;
    std::vector<std::int64_t> to_int64s() const;  // values converted as astype(i64) converts
    double item(const std::vector<std::int64_t>& index) const;  // one element, as double
    Tensor to(Device device) const;
    Tensor contiguous() const;  // itself when already contiguous, else a dense copy
    Tensor clone() const;       // always a dense copy
    Tensor astype(DType dtype) const;

    // Views: no copy.
    Tensor permute(const std::vector<std::int64_t>& perm) const;
    Tensor transpose(std::int64_t a, std::int64_t b) const;
    Tensor slice(std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
    Tensor broadcast_to(const Shape& shape) const;
    Tensor unsqueeze(std::int64_t axis) const;
    Tensor squeeze(std::int64_t axis) const;
    // A view when the strides allow it, else a copy.
    Tensor reshape(const Shape& shape) const;
    // Same storage, same elements? (not a value comparison; false when either is undefined)
    bool shares_storage(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
    // Copies the values of `src` (same shape; dtype converted) into this tensor's elements.
    void copy_from(const Tensor& src) const;

    // "Tensor(f32[2,3], [1, 2, ...])": the first max_elements values in row-major order (only
    // those are read, so a huge broadcast view prints too).
    std::string to_string(std::int64_t max_elements = 32) const;

    // Internal: the storage; used by Kiln's runtime.
    const std::shared_ptr<detail::Storage>& storage() const { return storage_; }
    Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, std::vector<std::int64_t> strides,
           std::int64_t offset, DType dtype);

private:
    static Tensor from_bytes(const void* data, std::size_t count, DType dtype, const Shape& shape);

    std::shared_ptr<detail::Storage> storage_;
    Shape shape_;
    std::vector<std::int64_t> strides_;
    std::int64_t offset_ = 0;
    DType dtype_ = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Row-major strides of a dense tensor of this shape (kiln::Error when one overflows int64).
std::vector<std::int64_t> contiguous_strides(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[2,3]"

}  // namespace kiln
