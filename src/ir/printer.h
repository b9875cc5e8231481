#pragma once
// The text form of the graph IR. One node per line, ids are node indices:
//
//   graph "mlp" {
//     %0 = input() {name="x"} : f32[?batch,784]
//     %1 = constant() {data=0x0000803f0000803f} : f32[2]
//     %2 = matmul(%0, %1) : f32[?batch]
//     %3 = sum(%2) {axes=[0], keepdim=0} : f32[]
//     return %3
//   }
//
// Attribute values: int `-3`, float `0.5` / `1.0000000000000001e-05` / `inf` / `-inf` / `nan`
// (always with a '.', an exponent or a name, so never mistaken for an int), ints `[1,2]`,
// dims `<?B*?S,64>`, dtype `f32`, string `"a\"b"`. A constant's bytes (storage order,
// little-endian on the hosts Kiln runs on) come first as `data=0x...`.
// parse() (parser.h) reads exactly this text back.
#include "src/ir/ir.h"

#include <cstdint>
#include <string>

namespace kiln::ir {

// The text of `g`. Constants with more than `max_constant_elements` elements print
// `data=<elided>` (shorter dumps, but parse() rejects them); -1 prints every constant.
// Never throws on a malformed graph (it is used to report them): an undefined constant
// value prints `data=<undefined>`, an out-of-range operand prints as written.
std::string print(const Graph& g, std::int64_t max_constant_elements = -1);

// One attribute value in the text syntax above (used by print and by error messages).
std::string print_attr_value(const AttrValue& v);

// "%5 = add": how error messages name node `id` of `g`.
std::string node_label(const Graph& g, ValueId id);

}  // namespace kiln::ir
