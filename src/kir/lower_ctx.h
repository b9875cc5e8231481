#pragma once
// Private to the lowering (src/kir/lower*.cpp): the state of one group's lowering (Lowering),
// index arithmetic with constant folding, iteration spaces and the translation of graph
// nodes into KIR expressions. Its parts are defined in lower.cpp (set-up), lower_index.cpp
// (index arithmetic, dims, spaces, offsets), lower_view.cpp (views), lower_elementwise.cpp
// (node expressions, values, stores, the elementwise form); lower_row.cpp, lower_matmul.cpp
// and lower_conv.cpp lower the other group kinds with it.
#include "src/ir/ir.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::kir::detail {

// Thrown inside the lowering for a group it cannot express; lower() turns it into nullopt.
struct Unsupported {
    std::string why;
};

// Index arithmetic that folds constants and the identities x+0, x*1, x*0, x/1.
ExprRef iadd(const ExprRef& a, const ExprRef& b);
ExprRef imul(const ExprRef& a, const ExprRef& b);
ExprRef idiv(const ExprRef& a, const ExprRef& b);
ExprRef irem(const ExprRef& a, const ExprRef& b);  // a - (a / b) * b
ExprRef imin(const ExprRef& a, const ExprRef& b);
ExprRef isub(const ExprRef& a, const ExprRef& b);
// a + b, folding a + (p - a) to p: re-linearising indices that were split from one linear
// index, (i / n) * n + (i - (i / n) * n), gives i back instead of a div and a mul.
ExprRef iadd_fold(const ExprRef& a, const ExprRef& b);
ExprRef ceil_div(const ExprRef& a, std::int64_t b);  // (a + b - 1) / b, for a >= 0 and b > 0
bool const_value(const ExprRef& e, std::int64_t* v);
// The block size (rows or columns per outer index of a matmul or conv kernel) for `total`
// of them, at most `cap`: when `total` is static, blocks of equal size, a multiple of
// `unit`, in an even number where there are several, so that two (or four) threads get
// equal work (512 channels as 4 x 128, not 144 + 144 + 144 + 80; 784 pixels as 2 x 400, not
// 512 + 272); otherwise `cap`.
std::int64_t balanced_block(const ExprRef& total, std::int64_t cap, std::int64_t unit);
// `block` (balanced_block's choice for `total`), unless a static total of at least 64 would
// be one block of it: then half of it, rounded up to `unit`, so that the work is two outer
// indices two threads can share (one thread runs consecutive blocks as one).
std::int64_t two_blocks_if_one(const ExprRef& total, std::int64_t block, std::int64_t unit);
// A convolution's input coordinate: out * stride - pad + tap * dilation.
ExprRef conv_coord(const ExprRef& out, std::int64_t stride, std::int64_t pad, const ExprRef& tap, std::int64_t dilation);
// The load of x[idx] at input coordinates (iy, ix) of an h x w image padded by (pad_h, pad_w)
// zeros: the load where the coordinates lie inside the image, else 0 (the load then reads
// x[inside_idx] instead, an element of the image, its value unused); a plain load without padding.
ExprRef padded_load(int x, Type t, const ExprRef& idx, const ExprRef& inside_idx, const ExprRef& iy, const ExprRef& ix,
                    const ExprRef& h, const ExprRef& w, std::int64_t pad_h, std::int64_t pad_w);
// An integer constant of an integer or boolean type, exact for every int64 value.
ExprRef int_const(Type t, std::int64_t v);

// An iteration space: a shape whose dims are split into consecutive segments, each with
// a linear index expression (the outer index, or a loop variable).
struct Space {
    std::vector<Dim> dims;
    std::vector<ExprRef> extents;    // per dim
    std::vector<int> segment;        // per dim
    std::vector<ExprRef> seg_index;  // per segment
};

// One place where values are computed (one pass over a row, or the write): its space,
// the statements it emits (temporaries), and the values computed so far.
struct Phase {
    const Space* space = nullptr;
    std::vector<StmtRef>* out = nullptr;
    std::map<ir::ValueId, ExprRef> memo;
};

class Lowering {
public:
    Lowering(const ir::Graph& g, const passes::Group& group);

    const ir::Graph& g;
    const passes::Group& group;
    Kernel k;

    const ir::Node& node(ir::ValueId v) const { return g.nodes[static_cast<std::size_t>(v)]; }
    bool in_group(ir::ValueId v) const;
    int output_buffer(ir::ValueId v) const;  // -1 if v is not a group output
    // The buffer of v, which must be a group input (else Unsupported: "<what> is not a group input").
    int input_buffer(ir::ValueId v, const char* what) const;

    // The run-time value of dim `axis` of value v: a constant, a param, or (for a fresh
    // symbol of a group node) the broadcast of its operands' dims. Null if unknown.
    ExprRef dim_of(ir::ValueId v, std::size_t axis);
    // dim_of, or Unsupported when unknown (e.g. a broadcast_to view's symbol that no
    // buffer of the group holds): the group then stays on the interpreter.
    ExprRef known_dim(ir::ValueId v, std::size_t axis);
    ExprRef product(ir::ValueId v, std::size_t begin, std::size_t end);
    Space make_space(ir::ValueId shape_of, const std::vector<std::size_t>& seg_starts,
                     const std::vector<ExprRef>& seg_index);

    // Element offset of `v` (a buffer: a group input or output) broadcast into `space`.
    // For any other value of known dims: its row-major linear index at the point.
    ExprRef offset(ir::ValueId v, const Space& space);
    // The value of v (compute type of its dtype) at the current point of `phase`.
    ExprRef value(ir::ValueId v, Phase& phase);
    int new_temp(Type t);
    int new_var() { return k.num_vars++; }
    // Stores every group output among `values` (in order) at the current point of `phase`.
    void store_outputs(const std::vector<ir::ValueId>& values, Phase& phase);

    // Values that `value` does not build from the node: a function of the phase that gives
    // the value at the phase's current point (the matmul's accumulator in its epilogue; a
    // row op's result in its write, or recomputed from its statistics in any later pass
    // over the same row). `value` calls it at most once per phase (memo).
    std::map<ir::ValueId, std::function<ExprRef(Phase&)>> special;

private:
    // A point of a value's shape: per-dim indices, or (`dims` empty) its row-major linear index.
    struct Point {
        std::vector<ExprRef> dims;
        ExprRef linear;
    };
    bool is_view(ir::ValueId v) const;
    ExprRef view_dim(ir::ValueId v, std::size_t axis);
    ExprRef slice_start(ir::ValueId x, std::size_t axis, std::int64_t start);
    std::vector<ExprRef> point_dims(ir::ValueId v, const Space& space);
    std::vector<ExprRef> dims_of(ir::ValueId v, Point p);
    ExprRef linear_of(ir::ValueId v, Point p);
    ExprRef view_offset(ir::ValueId v, Point p, ir::ValueId* root);
    ExprRef view_value(ir::ValueId v, const Space& space);

    std::map<ir::ValueId, int> input_buf_, output_buf_, uses_;
    std::vector<std::pair<Dim, int>> dim_params_;
    // The run-time value of symbolic dim d: a param for a dim of a buffer of the group, else a
    // sum of products of its symbols' params. With `symbols`, a symbol that no buffer holds
    // gets a param read from the call's bindings (kir::ParamSource::symbol); without, it is
    // unknown (null), so that dim_of derives it from operands.
    ExprRef param_for(const Dim& d, bool symbols = false);
    // The run-time value of a dims attribute's dim (narrow's start and length): a constant,
    // or param_for(d, true).
    ExprRef attr_dim(const Dim& d);
    ExprRef node_expr(const ir::Node& nd, const std::vector<ExprRef>& a);
};

void lower_elementwise(Lowering& L);  // lower_elementwise.cpp
void lower_row(Lowering& L);          // lower_row.cpp
void lower_matmul(Lowering& L);       // lower_matmul.cpp
void lower_conv(Lowering& L);         // lower_conv.cpp (conv2d_nchwc: lower_conv_nchwc)
void lower_conv_nchwc(Lowering& L, const ir::Node& conv);  // lower_conv_nchwc.cpp; conv: checked_conv(L)
// The node that starts a conv group (conv2d or conv2d_nchwc), with what both lowerings need
// checked: one group output, of the conv's shape; floating operands of one dtype. Else
// Unsupported. (lower_conv.cpp)
const ir::Node& checked_conv(Lowering& L);

}  // namespace kiln::kir::detail
