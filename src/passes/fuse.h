#pragma once
// Fusion partitioning: splits a graph into groups, the units that tier up on their own.
//
// Requires: a verified graph (nodes in topological order, types inferred, axes normalised).
// Ensures:
// - every node that a graph output depends on, other than inputs and constants, is in
//   exactly one group; nodes no output needs are in none (group_of -1), and so are input
//   and constant nodes;
// - groups are listed in an order that respects dependencies (a group comes after every
//   group that defines one of its inputs), and the group graph is acyclic;
// - a group's `nodes` are in topological order, its `inputs` are the values it reads that
//   are defined outside it (first-use order, no repeats), its `outputs` are the values it
//   defines that a later group reads or that are graph outputs (node order, no repeats);
//   a value needed by two groups is an output of the group defining it (materialised);
// - elementwise groups: every output has the same shape (the group's iteration shape);
//   a node whose shape differs from it is used only inside the group; besides elementwise
//   nodes they may hold views (below);
// - row_reduction groups: one row op (softmax/log_softmax over the last axis, layer_norm,
//   rms_norm, sum/mean/max/min over trailing axes) or a CHAIN of them over the same rows:
//   every row op's first operand has the shape of the first one's, and all run over its
//   last axis (a row op of the chain other than the first is a softmax, log_softmax,
//   layer_norm, rms_norm, or a sum/mean/max/min over the last axis only, which ends the
//   chain); a later row op reads earlier ones through elementwise nodes of the row's
//   shape. Elementwise producers of a row op's first operand that have that operand's
//   shape and are used only by it (possibly through each other) come before it,
//   elementwise consumers with the (last) row op's output shape after it. A value of the
//   chain needed outside the group (a graph output, another group's input) is one of the
//   group's outputs like any other;
// - matmul groups: the matmul node first, then its epilogue: elementwise nodes that each
//   read the matmul result or epilogue nodes before them (any of them: x * sigmoid(x)
//   reads the result twice), have the matmul's output shape, and whose other operands
//   (bias [N] or [1, N], scalars, a residual of the output's shape, ...) are defined
//   outside the group and broadcast to that shape. Every node but the last is read only
//   inside the group and is not a graph output, so a matmul group has exactly one output,
//   its last node. A matmul result or epilogue value also read by anything else ends the
//   epilogue where it stands (it is materialised as usual); an elementwise producer reserved
//   by a row op (softmax(x @ W + b)) stays with the row op;
// - conv groups: the conv2d node first, then its epilogue, exactly as for matmul groups
//   (bias [O, 1, 1], batch-norm style scale and shift, activation, SiLU, residual);
// - views: a shape op of is_view_op() may be a node of an elementwise or row_reduction
//   group; its operand is then not computed by the group (it is one of the group's inputs,
//   or another view of the group, down a chain that ends at an input), it is not a graph
//   output and only its group reads it. The group reads the operand's buffer through
//   index arithmetic; the view's shape may differ from its operand's (and from the
//   group's shape, into which it broadcasts like any operand of its consumers). A
//   broadcast_to joins only if each symbolic dim it introduces is a dim of a node it feeds
//   (through views of the group), so that the group's buffers hold it (a narrow's symbolic
//   start and length need not be: kernels read symbols that no buffer holds from the call,
//   kir::ParamSource::symbol). Every other shape op, and a view that is a graph output or
//   read by two groups, stays opaque;
// - opaque groups hold one node each;
// - the result depends only on the graph (deterministic).
// Tests: tests/test_fuse.cpp.
#include "src/ir/ir.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::passes {

enum class GroupKind : std::uint8_t { elementwise, row_reduction, matmul, conv, opaque };
std::string_view group_kind_name(GroupKind k);

struct Group {
    GroupKind kind = GroupKind::opaque;
    std::string name;                  // "g2.softmax", "g0.add_relu"
    std::vector<ir::ValueId> nodes;    // topological
    std::vector<ir::ValueId> inputs;   // defined outside: graph inputs, constants, other groups' outputs
    std::vector<ir::ValueId> outputs;  // used by a later group or listed as graph outputs
};

struct Partition {
    std::vector<Group> groups;  // in an order that respects dependencies
    std::vector<int> group_of;  // per node id: index into groups; -1 for inputs, constants, unneeded nodes
};

// Is `node` a row op (see above)? Exposed for the lowering and tests.
bool is_row_op(const ir::Node& node);
// Is `node` a reduction row op: sum, mean, max, min over trailing axes, or
// global_avg_pool2d (the mean over the two spatial axes of [N, C, H, W], kept as size 1).
bool is_row_reduction(const ir::Node& node);
// How many trailing axes reduction row op `node` reduces.
std::size_t reduced_axes(const ir::Node& node);
// Does reduction row op `node` divide its sum by the count (mean, global_avg_pool2d)?
bool is_mean_like(const ir::Node& node);
// Is `node` a shape op that may join a group as a view (see above): reshape, permute,
// squeeze, unsqueeze, broadcast_to, slice with step > 0, narrow.
bool is_view_op(const ir::Node& node);

Partition partition(const ir::Graph& g);

// A readable summary, one line per group (KILN_DUMP=groups).
std::string to_string(const Partition& p, const ir::Graph& g);

}  // namespace kiln::passes
