#pragma once
// The blocked channel layout (NCHWc) for chains of convolutions: a pure Graph -> Graph pass.
//
// A value of NCHW shape [N, C, H, W] in the layout is the 5-D tensor [N, Cb, H, W, B] with
// Cb = ceil(C / B), channel c at [n, c / B, y, x, c % B]; lanes past C hold values no
// consumer reads (0 from a convolution, then whatever the elementwise chain makes of them).
// The pass rewrites
// - each conv2d of floating dtype, constant weight and bias, dense (groups 1) or depthwise
//   (one input channel per output channel), into conv2d_nchwc (ops.def) with its weight and
//   bias re-laid once, here: its input stays NCHW where it is NCHW (a dense conv reads it as
//   it is), and is blocked where the producer gives it blocked;
// - elementwise nodes whose operands are all blocked values of the node's channels or
//   single elements (the epilogues: bias, activations, residual adds, squeeze-excite's
//   scaling by a [N, C, 1, 1] value) into the same node on the blocked values;
// - global_avg_pool2d of a blocked value into a mean over its two spatial axes (blocked);
// - concat along the channels of blocked values whose channels are whole blocks into a
//   concat of the blocks;
// and converts a blocked value back (permute, reshape, slice) before any other consumer
// and for the graph's outputs, once per value; a depthwise conv of an NCHW value blocks
// it first (pad, reshape, permute). Inputs, outputs and their order stay as they are.
//
// to_nchwc rewrites a graph with at least two such convs (else it returns it unchanged).
// Requires: a verified graph. Ensures: a verified graph that computes the same outputs
// (within the tolerance of a reordered sum).
//
// Where it pays (nchwc_applies with where_it_pays, KILN_NCHWC=auto): graphs of
// depthwise-separable chains (at least two depthwise convs), squeeze-excite or not; the
// engine also keeps NCHW where its calls may run on a GPU (jit/api/engine.cpp). Measured on
// the side-by-side harness and kiln-run (bench/README.md; 1 thread, AMD EPYC Zen 4):
// blocked, mobilenet_v2 runs 1.01-1.07x ONNX Runtime's speed at batch 1 (0.98x in NCHW);
// efficientnet_b0 (squeeze-excite) 7% faster than in NCHW at 256 bits and the same at 512
// (its SiLU in the conv kernel, its channel scaling in middle loops); resnet18 and
// squeezenet1_1 lose about 30% (their dense 3x3 convs: NCHW has Winograd and the
// phase-plane grid).
#include "src/ir/ir.h"

#include <cstdint>

namespace kiln::passes {

// The block of the pass's layout: 16 f32 lanes, one 512-bit vector or two 256-bit ones.
constexpr std::int64_t kNchwcBlock = 16;

enum class NchwcMode { off, where_it_pays, all };

// Would to_nchwc rewrite g under `mode` (off: never; all: whenever it has two convs to rewrite)?
bool nchwc_applies(const ir::Graph& g, NchwcMode mode);

ir::Graph to_nchwc(const ir::Graph& g, std::int64_t block = kNchwcBlock);

}  // namespace kiln::passes
