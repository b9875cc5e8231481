#include "src/support/checked.h"

#include "src/support/check.h"

#include <limits>

namespace kiln::support {
namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kMaxBytes = static_cast<std::size_t>(kMax);

[[noreturn]] void too_large(Dims shape, std::string_view what, std::string_view detail) {
    KILN_USER_ERROR(what << ": shape " << dims_string(shape) << " is too large: " << detail << " (the limit is " << kMax
                         << ")");
}
}  // namespace

std::string dims_string(Dims shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
    std::int64_t r = 0;
    KILN_USER_CHECK(mul_fits(a, b, &r), what << ": " << a << " * " << b << " overflows int64");
    return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
    std::int64_t r = 0;
    KILN_USER_CHECK(add_fits(a, b, &r), what << ": " << a << " + " << b << " overflows int64");
    return r;
}

std::size_t checked_add_bytes(std::size_t a, std::size_t b, std::string_view what) {
    KILN_USER_CHECK(a <= kMaxBytes && b <= kMaxBytes - a,
                    what << ": " << a << " + " << b << " bytes overflows int64 (at most " << kMax << ")");
    return a + b;
}

std::size_t checked_round_up(std::size_t bytes, std::size_t align, std::string_view what) {
    KILN_CHECK(align > 0, "checked_round_up: alignment 0");
    const std::size_t padded = checked_add_bytes(bytes, align - 1, what);
    return padded / align * align;
}

std::int64_t checked_numel(Dims shape, std::string_view what) {
    bool zero = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        KILN_USER_CHECK(shape[i] >= 0, what << ": shape " << dims_string(shape) << " has a negative dim " << shape[i]
                                            << " at axis " << i);
        zero = zero || shape[i] == 0;
    }
    if (zero) return 0;
    std::int64_t n = 1;
    for (std::int64_t d : shape)
        if (!mul_fits(n, d, &n)) too_large(shape, what, "its element count overflows int64");
    return n;
}

bool bytes_fit(Dims shape, std::size_t elem_size) {
    if (elem_size > kMaxBytes) return false;
    std::int64_t n = static_cast<std::int64_t>(elem_size);
    bool zero = false;
    for (std::int64_t d : shape) {
        if (d < 0) return false;
        zero = zero || d == 0;
    }
    if (zero) return true;
    for (std::int64_t d : shape)
        if (!mul_fits(n, d, &n)) return false;
    return true;
}

std::int64_t checked_bytes(Dims shape, std::size_t elem_size, std::string_view what) {
    const std::int64_t n = checked_numel(shape, what);
    std::int64_t bytes = 0;
    if (elem_size > kMaxBytes || !mul_fits(n, static_cast<std::int64_t>(elem_size), &bytes))
        too_large(shape, what, "its size in bytes (" + std::to_string(n) + " elements of " + std::to_string(elem_size) +
                                   " bytes) overflows int64");
    return bytes;
}

std::vector<std::int64_t> checked_strides(Dims shape, std::string_view what) {
    checked_numel(shape, what);  // negative dims
    std::vector<std::int64_t> s(shape.size());
    std::int64_t acc = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        s[i] = acc;
        if (i > 0 && !mul_fits(acc, shape[i] > 0 ? shape[i] : 1, &acc)) too_large(shape, what, "a row-major stride overflows int64");
    }
    return s;
}

std::int64_t checked_span_bytes(Dims shape, Dims strides, std::size_t elem_size, std::string_view what) {
    KILN_CHECK(shape.size() == strides.size(), "checked_span_bytes: " << shape.size() << " dims, " << strides.size()
                                                                      << " strides");
    if (checked_numel(shape, what) == 0) return 0;
    std::int64_t last = 0;  // offset of the last element reached, in elements
    for (std::size_t i = 0; i < shape.size(); ++i) {
        KILN_CHECK(strides[i] >= 0, "checked_span_bytes: negative stride " << strides[i]);
        std::int64_t step = 0;
        if (!mul_fits(shape[i] - 1, strides[i], &step) || !add_fits(last, step, &last))
            too_large(shape, what, "the offset of its last element (strides " + dims_string(strides) + ") overflows int64");
    }
    std::int64_t count = 0, bytes = 0;
    if (!add_fits(last, 1, &count) || elem_size > kMaxBytes || !mul_fits(count, static_cast<std::int64_t>(elem_size), &bytes))
        too_large(shape, what, "the bytes it spans (strides " + dims_string(strides) + ") overflow int64");
    return bytes;
}

}  // namespace kiln::support
