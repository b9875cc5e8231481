#pragma once
// The engine's fixed sizes and block sizes as compile-time constants: kiln::limits::name, one
// per line of src/support/limits.def (with its documentation there).
#include <cstddef>
#include <cstdint>

namespace kiln::limits {

#define KILN_LIMIT(type, name, value, doc) inline constexpr type name = value;
#include "src/support/limits.def"

}  // namespace kiln::limits
