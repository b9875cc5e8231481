#pragma once
// Convolution cases shared by the tests of the compiled conv kernels (tier 1's GEMM driver,
// tier 2's blocked GEMM): a case's graph (conv2d, bias, an epilogue), its inputs, its
// tolerance against the interpreter, and a list that covers strides, padding, dilation,
// groups (depthwise too), 1x1, several pixel and row blocks, and depth blocks.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"
#include "src/cpu/winograd.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::test::conv_cases {

struct ConvCase {
    DType dt = DType::f32;
    std::int64_t n = 1, c = 3, h = 9, w = 9, o = 4, kh = 3, kw = 3;
    Pair stride{1, 1}, pad{0, 0}, dil{1, 1};
    std::int64_t groups = 1;
    bool bias = true;
    int epi = 0;  // 0 none, 1 relu, 2 per-channel scale/shift + relu, 3 residual + tanh, 4 y * sigmoid(y),
                  // 5 minimum(maximum(y, 0), 6) (relu6 as ONNX's Clip imports), 6 clamp(y, -0.5, 6)
};

inline std::string describe(const ConvCase& c) {
    return ref::dname(c.dt) + " x[" + std::to_string(c.n) + "," + std::to_string(c.c) + "," + std::to_string(c.h) + "," +
           std::to_string(c.w) + "] w[" + std::to_string(c.o) + "," + std::to_string(c.c / c.groups) + "," +
           std::to_string(c.kh) + "," + std::to_string(c.kw) + "] stride " + std::to_string(c.stride[0]) + "x" +
           std::to_string(c.stride[1]) + " pad " + std::to_string(c.pad[0]) + "x" + std::to_string(c.pad[1]) + " dil " +
           std::to_string(c.dil[0]) + "x" + std::to_string(c.dil[1]) + " groups " + std::to_string(c.groups) +
           " bias " + std::to_string(c.bias) + " epi " + std::to_string(c.epi);
}

inline std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The graph of case c; x's dims are `xdims` (static or symbolic); the weight, bias and
// epilogue constants are fixed tensors; a residual is a second input.
inline Graph make_graph(const ConvCase& c, std::vector<Dim> xdims) {
    Tensor W = Tensor::randn({c.o, c.c / c.groups, c.kh, c.kw}, 21, c.dt);
    Tensor B = Tensor::randn({c.o}, 22, c.dt);
    Tensor scale = Tensor::randn({c.o, 1, 1}, 23, c.dt), shift = Tensor::randn({c.o, 1, 1}, 24, c.dt);
    std::vector<ArgSpec> args{arg("x", c.dt, xdims)};
    if (c.epi == 3) {
        const bool fixed = xdims[2].is_static() && xdims[3].is_static();
        std::vector<Dim> rd{xdims[0], c.o, fixed ? Dim(out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0])) : dyn("OH"),
                            fixed ? Dim(out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1])) : dyn("OW")};
        args.push_back(arg("r", c.dt, rd));
    }
    return trace("conv", args, [&](const std::vector<Var>& in) -> std::vector<Var> {
        Var y = conv2d(in[0], W, c.bias ? Var(B) : Var(), c.stride, c.pad, c.dil, c.groups);
        switch (c.epi) {
        case 1: return {relu(y)};
        case 2: return {relu(y * scale + shift)};
        case 3: return {tanh(y) + in[1]};
        case 4: return {y * sigmoid(y)};  // SiLU as ONNX exports write it: y read twice
        case 5: return {minimum(maximum(y, 0.0), 6.0)};
        case 6: return {clamp(y, -0.5, 6.0)};
        default: return {y};
        }
    });
}

inline std::vector<Tensor> make_inputs(const ConvCase& c, std::uint64_t seed) {
    std::vector<Tensor> in{Tensor::randn({c.n, c.c, c.h, c.w}, seed, c.dt)};
    if (c.epi == 3)
        in.push_back(Tensor::randn({c.n, c.o, out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0]),
                                    out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1])},
                                   seed + 1, c.dt));
    return in;
}

// The lowering's condition for a Winograd conv (src/kir/lower_conv.cpp; KILN_WINOGRAD=0: none).
inline bool winograd_eligible(const ConvCase& c) {
    if (!cpu::winograd_allowed()) return false;
    const std::int64_t oh = out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0]);
    const std::int64_t ow = out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1]);
    return c.dt == DType::f32 && c.groups == 1 && c.kh == 3 && c.kw == 3 && c.stride == Pair{1, 1} &&
           c.dil == Pair{1, 1} && c.c >= 16 && c.o >= 16 && oh >= 12 && ow >= 12;
}

inline double tol(const ConvCase& c) {
    // f16/bf16: the interpreter rounds after each epilogue op, the fused epilogue once.
    if (c.dt == DType::f16) return 2e-2;
    if (c.dt == DType::bf16) return 1e-1;
    const double eps = c.dt == DType::f32 ? 1.2e-7 : 2.3e-16;
    const double k = std::sqrt(static_cast<double>(std::max<std::int64_t>(1, c.c / c.groups * c.kh * c.kw)));
    // Winograd F(4x4, 3x3) (tier 2's 3x3 convs of stride 1, see cases()): its transforms
    // scale values by up to ~10 before the sum and cancel after it, so an output's error
    // follows the magnitude of the largest outputs, not its own.
    if (winograd_eligible(c)) return 128.0 * eps * k;
    return 32.0 * eps * k;
}

inline std::vector<ConvCase> cases() {
    std::vector<ConvCase> v;
    auto add = [&](auto f) {
        ConvCase c;
        f(c);
        v.push_back(c);
    };
    add([](ConvCase&) {});
    add([](ConvCase& c) { c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.stride = {2, 2}; c.pad = {1, 1}; c.h = 11; c.w = 8; c.epi = 2; });
    add([](ConvCase& c) { c.dil = {2, 1}; c.pad = {2, 0}; c.kh = 3; c.kw = 2; c.bias = false; });
    add([](ConvCase& c) { c.c = 8; c.o = 6; c.groups = 2; c.pad = {1, 1}; c.epi = 3; });
    add([](ConvCase& c) { c.c = 4; c.o = 4; c.groups = 4; c.pad = {1, 1}; c.n = 2; c.epi = 1; });  // depthwise
    add([](ConvCase& c) { c.kh = 1; c.kw = 1; c.h = 7; c.w = 5; c.o = 13; c.c = 17; c.dt = DType::f64; });
    add([](ConvCase& c) { c.h = 40; c.w = 33; c.pad = {1, 1}; c.o = 20; c.n = 2; c.epi = 2; });  // several pixel blocks
    add([](ConvCase& c) { c.h = 5; c.w = 6; c.kh = 5; c.kw = 1; c.pad = {3, 2}; c.stride = {3, 1}; c.dt = DType::f64; c.epi = 3; });
    add([](ConvCase& c) { c.o = 150; c.c = 2; c.h = 6; c.w = 6; c.pad = {1, 1}; });  // two row blocks
    add([](ConvCase& c) { c.c = 70; c.o = 9; c.h = 6; c.w = 7; c.pad = {1, 1}; c.epi = 1; });  // k = 630: depth blocks
    add([](ConvCase& c) { c.h = 3; c.w = 3; c.pad = {4, 4}; c.stride = {2, 3}; c.dil = {2, 2}; });  // mostly padding
    // Output rows wide enough for the LLVM tier's unpacked path at every vector width
    // (tiers/llvm/gemm.cpp, direct()): rows that fill most strips, pixel blocks that start
    // inside a row, channels beside the register tiles, stride 2, dilation, groups, f64,
    // and 1x1 convolutions (dense, and of stride 2).
    add([](ConvCase& c) { c.c = 5; c.o = 11; c.h = 12; c.w = 56; c.pad = {1, 1}; c.epi = 2; });
    add([](ConvCase& c) { c.c = 3; c.o = 10; c.h = 9; c.w = 100; c.kh = 7; c.kw = 7; c.stride = {2, 2}; c.pad = {3, 3}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 4; c.o = 9; c.h = 7; c.w = 50; c.dil = {2, 2}; c.pad = {2, 2}; c.epi = 3; });
    add([](ConvCase& c) { c.c = 6; c.o = 4; c.groups = 2; c.h = 5; c.w = 30; c.pad = {1, 1}; });
    add([](ConvCase& c) { c.c = 7; c.o = 17; c.h = 6; c.w = 30; c.pad = {0, 1}; c.n = 2; c.dt = DType::f64; c.epi = 1; });
    add([](ConvCase& c) { c.c = 19; c.o = 21; c.h = 9; c.w = 13; c.kh = 1; c.kw = 1; c.epi = 3; });
    add([](ConvCase& c) { c.c = 8; c.o = 16; c.h = 4; c.w = 60; c.kh = 1; c.kw = 1; c.stride = {2, 2}; c.bias = false; });
    // Dense 1x1 convolutions in chunks of strips (tiers/llvm/gemm_conv.cpp, kGridChunkBytes):
    // small depth (many strips per chunk, pixel blocks that end inside a strip, rows left
    // beside the register tiles, two samples) and large depth (one strip per chunk).
    add([](ConvCase& c) { c.c = 16; c.o = 21; c.h = 40; c.w = 40; c.kh = 1; c.kw = 1; c.n = 2; c.epi = 2; });
    add([](ConvCase& c) { c.c = 300; c.o = 10; c.h = 5; c.w = 13; c.kh = 1; c.kw = 1; c.epi = 1; });
    // Deep grids of phase planes in blocks of input channels at 256 bits (tiers/llvm/gemm_conv.cpp,
    // grid_depth_block()): a stride-2 3x3 conv of 64 channels (blocks of 28, 28 and 8, two
    // samples, rows beside the register tiles) and a small image of 150 channels (six blocks,
    // the last of 10; a residual epilogue).
    add([](ConvCase& c) { c.c = 64; c.o = 22; c.h = 40; c.w = 40; c.stride = {2, 2}; c.pad = {1, 1}; c.n = 2; c.epi = 1; });
    add([](ConvCase& c) { c.c = 150; c.o = 13; c.h = 7; c.w = 7; c.pad = {1, 1}; c.epi = 3; });
    // Depthwise convolutions as the LLVM tier batches them (tiers/llvm/gemm.cpp,
    // depthwise_planes()): whole planes of 16 channels per kernel call and a remainder, a
    // 5x5 stride-2 filter across two samples, planes of more than one column block (calls of
    // 2048 pixels), and a channel multiplier of 2 (two output channels per plane).
    add([](ConvCase& c) { c.c = 37; c.o = 37; c.groups = 37; c.h = 9; c.w = 11; c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 20; c.o = 20; c.groups = 20; c.h = 14; c.w = 14; c.kh = 5; c.kw = 5; c.stride = {2, 2}; c.pad = {2, 2}; c.n = 2; c.epi = 2; });
    add([](ConvCase& c) { c.c = 3; c.o = 3; c.groups = 3; c.h = 70; c.w = 70; c.pad = {1, 1}; c.epi = 3; });
    add([](ConvCase& c) { c.c = 5; c.o = 10; c.groups = 5; c.h = 8; c.w = 9; c.pad = {1, 1}; c.stride = {2, 1}; });
    // A bias alone (or nothing) after whole planes: the kernel starts each plane from its
    // bias and writes the output itself (gemm_conv.cpp, direct_dw()), 16 + 16 + 5 planes per
    // sample, two samples; f64 and stride 2 too.
    add([](ConvCase& c) { c.c = 37; c.o = 37; c.groups = 37; c.h = 9; c.w = 11; c.pad = {1, 1}; c.n = 2; });
    add([](ConvCase& c) { c.c = 21; c.o = 21; c.groups = 21; c.h = 15; c.w = 13; c.pad = {1, 1}; c.stride = {2, 2}; c.dt = DType::f64; });
    add([](ConvCase& c) { c.c = 19; c.o = 19; c.groups = 19; c.h = 8; c.w = 8; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.bias = false; });
    // Whole output rows per kernel call (dw_step): 17 rows of 30 per call, two calls a plane.
    add([](ConvCase& c) { c.c = 18; c.o = 18; c.groups = 18; c.h = 60; c.w = 60; c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 1; });
    // relu6 (mobilenet_v2): the depthwise kernel clamps as it stores (cpu::DwPlan::lo, hi), on
    // its direct rows at strides 1 and 2, across the lanes (small planes), and in bands (5 x 5).
    add([](ConvCase& c) { c.c = 3; c.o = 3; c.groups = 3; c.h = 40; c.w = 40; c.pad = {1, 1}; c.n = 2; c.epi = 5; });
    add([](ConvCase& c) { c.c = 5; c.o = 5; c.groups = 5; c.h = 60; c.w = 60; c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 5; });
    add([](ConvCase& c) { c.c = 37; c.o = 37; c.groups = 37; c.h = 7; c.w = 7; c.pad = {1, 1}; c.epi = 5; });
    add([](ConvCase& c) { c.c = 6; c.o = 6; c.groups = 6; c.h = 20; c.w = 21; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.dt = DType::f64; c.epi = 5; });
    add([](ConvCase& c) { c.c = 4; c.o = 4; c.groups = 4; c.h = 33; c.w = 33; c.pad = {1, 1}; c.epi = 6; });
    add([](ConvCase& c) { c.c = 40; c.o = 40; c.groups = 40; c.h = 10; c.w = 10; c.pad = {1, 1}; c.stride = {2, 2}; c.dt = DType::f64; c.epi = 6; });
    // SiLU (efficientnet): the epilogue reads the conv result twice (passes/fuse.h): a dense
    // 1x1, a depthwise 3x3 over whole planes, and a strided f64 conv.
    add([](ConvCase& c) { c.c = 24; c.o = 40; c.h = 14; c.w = 14; c.kh = 1; c.kw = 1; c.epi = 4; });
    add([](ConvCase& c) { c.c = 33; c.o = 33; c.groups = 33; c.h = 12; c.w = 12; c.pad = {1, 1}; c.n = 2; c.epi = 4; });
    add([](ConvCase& c) { c.c = 5; c.o = 7; c.h = 11; c.w = 9; c.stride = {2, 2}; c.pad = {1, 1}; c.dt = DType::f64; c.epi = 4; });
    // Large planes one at a time (gemm_conv.cpp, depthwise_planes()): two planes of 96 x 100
    // outputs, each in two calls of whole rows (81 rows, then 15), with SiLU.
    add([](ConvCase& c) { c.c = 2; c.o = 2; c.groups = 2; c.h = 96; c.w = 100; c.pad = {1, 1}; c.epi = 4; });
    // 5 x 5 depthwise of stride 1 and padding 2 on few channels (src/cpu's band kernel):
    // rows of 21 and 37, odd row counts, two samples.
    add([](ConvCase& c) { c.c = 6; c.o = 6; c.groups = 6; c.h = 9; c.w = 21; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 3; c.o = 3; c.groups = 3; c.h = 7; c.w = 37; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.n = 2; });
    // A 5x5 depthwise of stride 2 whose padded plane (43 x 43) has more than 1024 pixels: on
    // the channel lanes (depthwise.cpp, kChanPixelsWide), 16 + 4 channels, SiLU.
    add([](ConvCase& c) { c.c = 20; c.o = 20; c.groups = 20; c.h = 40; c.w = 40; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.stride = {2, 2}; c.epi = 4; });
    // SiLU in the depthwise kernel itself (tiers/llvm/gemm_conv.cpp): on channel lanes with
    // filters over 3 x 3 (enough channels per call for the lanes), in runs (5 columns, stride
    // 1) and in blocks (7 x 7); after the direct 3 x 3 rows (stride 1 and 2, planes of one
    // column block).
    add([](ConvCase& c) { c.c = 64; c.o = 64; c.groups = 64; c.h = 14; c.w = 14; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 67; c.o = 67; c.groups = 67; c.h = 9; c.w = 9; c.kh = 7; c.kw = 7; c.pad = {3, 3}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 24; c.o = 24; c.groups = 24; c.h = 40; c.w = 37; c.pad = {1, 1}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 16; c.o = 16; c.groups = 16; c.h = 64; c.w = 61; c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 4; });
    // One output pixel (squeeze-excite's 1x1 convs after a global pool; gemm.cpp, dots()):
    // depths of 37 (whole vectors and a tail) and 7 (a tail alone), rows left beside the
    // tiles, two samples, SiLU; f64.
    add([](ConvCase& c) { c.c = 37; c.o = 21; c.h = 1; c.w = 1; c.kh = 1; c.kw = 1; c.n = 2; c.epi = 4; });
    add([](ConvCase& c) { c.c = 7; c.o = 13; c.h = 1; c.w = 1; c.kh = 1; c.kw = 1; c.dt = DType::f64; c.epi = 2; });
    // An image of one row block and one column block is split into two column blocks
    // (src/kir/lower_conv.cpp), which two threads run apart: a 1x1 projection at 14 x 14
    // with a residual (blocks of 112 and 84 pixels) and a 3x3 over 10 x 10 (64 and 36).
    add([](ConvCase& c) { c.c = 48; c.o = 24; c.h = 14; c.w = 14; c.kh = 1; c.kw = 1; c.epi = 3; });
    add([](ConvCase& c) { c.c = 9; c.o = 12; c.h = 10; c.w = 10; c.pad = {1, 1}; c.epi = 1; });
    // Grids whose planes are laid out by filter column, each row ow pixels long (gemm_conv.cpp,
    // exact_planes()): a 3x3 at 13 x 13 (a pitch of 15 would waste a quarter of the lanes),
    // dilated 2 with padding 2, stride 2 with a 5 x 5 filter (two row phases, five column
    // planes), and a 1 x 3 filter on a non-square image over two samples with a residual.
    add([](ConvCase& c) { c.c = 16; c.o = 24; c.h = 13; c.w = 13; c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 8; c.o = 20; c.h = 11; c.w = 11; c.pad = {2, 2}; c.dil = {2, 2}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 5; c.o = 17; c.h = 15; c.w = 15; c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.stride = {2, 2}; });
    add([](ConvCase& c) { c.c = 6; c.o = 10; c.h = 9; c.w = 7; c.kh = 1; c.kw = 3; c.pad = {0, 1}; c.n = 2; c.epi = 3; });
    // Small images with at least 32 output channels per group: the weights packed for
    // channel lanes (kir::Derived) and, where its cost model picks it, tier 2's channel-lane
    // path (gemm_chan.cpp): a 3x3 at 7 x 7 (runs of one output row), a 1x1 at 7 x 7 whose
    // 112 channels leave half a tile, a stride-2 3x3 onto 7 x 7 with SiLU, two groups of 32
    // channels on two samples, a 13 x 13 image in two column blocks that split an output
    // row (runs of 13 shifted left), and 320 channels in four row blocks; and a 1x1 of few
    // input channels that stays on pixel lanes.
    add([](ConvCase& c) { c.c = 40; c.o = 64; c.h = 7; c.w = 7; c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 512; c.o = 112; c.h = 7; c.w = 7; c.kh = 1; c.kw = 1; c.epi = 3; });
    add([](ConvCase& c) { c.c = 64; c.o = 96; c.h = 14; c.w = 14; c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 64; c.o = 64; c.groups = 2; c.h = 6; c.w = 6; c.pad = {1, 1}; c.n = 2; c.epi = 2; });
    add([](ConvCase& c) { c.c = 64; c.o = 32; c.h = 13; c.w = 13; c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.c = 256; c.o = 320; c.h = 5; c.w = 5; c.kh = 1; c.kw = 1; });
    // Dense 1x1 convs on channel lanes (at 256 bits too), runs across output rows, the
    // epilogue over each tile's rows of the block (at both widths: gemm_chan.cpp): 40
    // channels (tiles of 16, 16 and 8, the last on one vector at 256 bits) at 14 x 14 in two
    // column blocks (112 and 84 pixels: each block's last run starts early) with a
    // residual, 7 x 7 with relu, and 7 x 7 with SiLU on two samples.
    add([](ConvCase& c) { c.c = 800; c.o = 40; c.h = 14; c.w = 14; c.kh = 1; c.kw = 1; c.epi = 3; });
    add([](ConvCase& c) { c.c = 200; c.o = 48; c.h = 7; c.w = 7; c.kh = 1; c.kw = 1; c.epi = 1; });
    add([](ConvCase& c) { c.c = 192; c.o = 96; c.h = 7; c.w = 7; c.kh = 1; c.kw = 1; c.n = 2; c.epi = 4; });
    // Their depth in blocks (gemm_chan.cpp, chan_depth_block()), as squeezenet1_1's classifier
    // (512 -> 1000 at 13 x 13): 520 input channels (blocks of 128 and a last one of 8 at 512
    // bits, 256 and 8 at 256), 80 output channels (at 512 bits the last tile on one vector), 169 pixels
    // (chunks of kChanBlockRuns runs and a shorter last one), two samples, relu.
    add([](ConvCase& c) { c.c = 520; c.o = 80; c.h = 13; c.w = 13; c.kh = 1; c.kw = 1; c.n = 2; c.epi = 1; });
    // A dense 1x1 over an image larger than the grid kept in L2, of depth 40: its tiles
    // prefetch the strips ahead (gemm_conv.cpp, kGridPrefetchStrips), the last strip of
    // each channel past the image; 19 output channels leave a partial row tile.
    add([](ConvCase& c) { c.c = 40; c.o = 19; c.h = 45; c.w = 43; c.kh = 1; c.kw = 1; c.n = 2; c.epi = 1; });
    add([](ConvCase& c) { c.c = 8; c.o = 320; c.h = 5; c.w = 5; c.kh = 1; c.kw = 1; });
    // A stem as efficientnet's (3x3, stride 2, SiLU) with output rows of 30: at 256 bits its
    // tiles are 3 vectors wide (gemm.cpp), and the runs of its strips, cut at the rows' ends,
    // vary in length (the epilogue's whole vectors, then scalars).
    add([](ConvCase& c) { c.c = 3; c.o = 12; c.h = 20; c.w = 60; c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 4; });
    // A stem of a shallow depth (27) whose grid is larger than kGridWholeBytes, in one chunk
    // all the same (gemm_conv.cpp, kGridShallowDepth): 3 -> 20 at stride 2 onto 60 x 60 (row
    // tiles of 8, 8 and 4 at 512 bits), relu, two samples.
    add([](ConvCase& c) { c.c = 3; c.o = 20; c.h = 120; c.w = 120; c.pad = {1, 1}; c.stride = {2, 2}; c.n = 2; c.epi = 1; });
    // 3x3 convs of stride 1 with at least 16 channels each way onto outputs of 12 pixels a
    // side or more: Winograd F(4x4, 3x3) at 256 and 512 bits (kir::MatmulHint::winograd):
    // 40 output channels (a tile and a part of one) on two samples in four bands per column
    // block; 33 channels on 15 x 15 outputs (tiles cut at the right and bottom edges) with
    // SiLU; resnet18's first block (64 -> 64 at 56 x 56) with a residual; 150 channels in
    // two row blocks of 96 and 54 over 14 x 14 (bands cut into two column blocks, K = 1170).
    add([](ConvCase& c) { c.c = 16; c.o = 40; c.h = 20; c.w = 30; c.pad = {1, 1}; c.n = 2; c.epi = 1; });
    add([](ConvCase& c) { c.c = 24; c.o = 33; c.h = 17; c.w = 15; c.pad = {0, 1}; c.epi = 4; });
    add([](ConvCase& c) { c.c = 64; c.o = 64; c.h = 56; c.w = 56; c.pad = {1, 1}; c.epi = 3; });
    add([](ConvCase& c) { c.c = 130; c.o = 150; c.h = 14; c.w = 14; c.pad = {1, 1}; c.epi = 2; });
    return v;
}


// A random case for round `round` (f64 in round 1, depthwise in round 2) from
// pick(lo, hi), a uniform integer in [lo, hi]; its input sizes are left to the caller.
template <class Pick> ConvCase random_case(Pick&& pick, int round) {
    ConvCase c;
    c.dt = round == 1 ? DType::f64 : DType::f32;
    c.c = pick(1, 6);
    c.groups = round == 2 ? c.c : 1;
    c.o = c.groups * pick(1, 9);
    c.kh = pick(1, 3);
    c.kw = pick(1, 3);
    c.pad = {pick(0, 2), pick(0, 2)};
    c.stride = {pick(1, 2), pick(1, 2)};
    c.dil = {pick(1, 2), 1};
    c.epi = static_cast<int>(pick(0, 4));
    return c;
}

}  // namespace kiln::test::conv_cases
