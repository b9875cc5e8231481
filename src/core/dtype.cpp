#include <kiln/dtype.h>

#include "src/support/check.h"

#include <bit>
#include <charconv>
#include <ostream>

namespace kiln {
namespace {
struct DTypeInfo {
    std::string_view name;
    std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {{"f32", 4}, {"f64", 8}, {"f16", 2},  {"bf16", 2},
                                 {"i8", 1},  {"u8", 1},  {"i32", 4}, {"i64", 8}, {"bool", 1}};
}  // namespace

std::size_t dtype_size(DType t) { return kDTypes[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
std::optional<DType> dtype_from_name(std::string_view name) {
    for (int i = 0; i < kNumDTypes; ++i)
        if (kDTypes[i].name == name) return static_cast<DType>(i);
    if (name == "boolean") return DType::boolean;
    return std::nullopt;
}
bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
bool is_integer(DType t) { return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64; }
std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::string Device::to_string() const {
    switch (kind) {
    case Kind::cpu: return "cpu";
    case Kind::cuda: return "cuda:" + std::to_string(index);
    case Kind::hip: return "hip:" + std::to_string(index);
    }
    return "?";
}

Device Device::parse(std::string_view text) {
    std::string_view kind = text.substr(0, text.find(':'));
    int index = 0;
    if (kind.size() < text.size()) {
        std::string_view num = text.substr(kind.size() + 1);
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
        KILN_USER_CHECK(ec == std::errc() && p == num.data() + num.size() && index >= 0,
                        "device: expected cpu, cuda:N or hip:N, got '" << text << "'");
    }
    if (kind == "cpu" && index == 0) return cpu();
    if (kind == "cuda") return cuda(index);
    if (kind == "hip") return hip(index);
    KILN_USER_ERROR("device: expected cpu, cuda:N or hip:N, got '" << text << "'");
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

}  // namespace kiln
