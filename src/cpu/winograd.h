#pragma once
// Winograd convolution F(4x4, 3x3) for f32: a 3x3 convolution of stride 1 and dilation 1
// (any zero padding) computed per 4x4 block of output pixels (a tile) from the tile's 6x6
// input patch d as
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A        ((.): elementwise over the 6x6 points)
// with the Toom-Cook matrices of the points 0, -1, 1, 1/2, -2 (and infinity): of the sets of
// small points, one of the most accurate in f32 (about 2.5 times less error than Lavin and
// Gray's 0, 1, -1, 2, -2 on random 64-channel convs; their transforms cost a few more adds
// and are as exact, every coefficient of B and A a short binary fraction). Summed over
// the input channels, the 36 elementwise products become 36 independent GEMMs
//   M[xi][oc][tile] = sum over ic of U[xi][oc][ic] * V[xi][ic][tile]
// of 36 multiply-adds per (output channel, input channel, tile) instead of 9 x 16 = 144:
// 4x fewer, plus the transforms of the input (B^T d B, per tile and input channel) and of
// the output (A^T M A, per tile and output channel), which grow with the channels, not
// with their product.
//
// U (the weights' transform) is a kir::Derived layout made once per function (winograd_weights).
// The kernel (per instruction set: simd_winograd.h) computes the raw convolution (no bias,
// no epilogue) of a block of output channels and output tile rows of one image into a
// buffer the caller then finishes.
//
// Accuracy: the transforms scale values by up to ~10 and cancel, so the result differs from
// the direct sum by a few units in the 6th significant digit of the largest outputs' magnitude
// (the weights' transform is computed in double).
#include "src/cpu/gemm.h"

#include <cstdint>

namespace kiln::cpu {

// Output channels per tile of U (two AVX-512 vectors of f32; AVX2 reads each tile in halves).
inline constexpr std::int64_t kWinoLanes = 32;
// Output tile edge and input patch edge.
inline constexpr std::int64_t kWinoTile = 4;
inline constexpr std::int64_t kWinoPatch = 6;
inline constexpr std::int64_t kWinoPoints = kWinoPatch * kWinoPatch;

// One image's geometry: cin input planes of h x w, zero padding ph, pw, output oh x ow.
struct WinoGeometry {
    std::int64_t cin = 0, h = 0, w = 0, oh = 0, ow = 0, ph = 0, pw = 0;
    std::int64_t tiles_x() const { return (ow + kWinoTile - 1) / kWinoTile; }
    std::int64_t tiles_y() const { return (oh + kWinoTile - 1) / kWinoTile; }
};

// Whether convolutions may run as Winograd: the KILN_WINOGRAD environment variable, "1"
// (the default) or "0" for the direct sums everywhere, read once per process like
// KILN_CPU_ISA (the lowering asks it: the kernel IR, so every cache key, differs). A malformed
// value leaves it on here; kiln::Options::from_env rejects it.
bool winograd_allowed();

// Elements of U for og output channels and cin input channels (one group).
std::int64_t winograd_weight_elems(std::int64_t og, std::int64_t cin);
// U from 3x3 weights w[oc][ic][3][3] (og x cin), as
//   u[((xi * tiles + oc / kWinoLanes) * cin + ic) * kWinoLanes + oc % kWinoLanes]
// (tiles = ceil(og / kWinoLanes); zeros for the channels past og), computed in double.
void winograd_weights(const float* w, std::int64_t og, std::int64_t cin, float* u);

// The block the kernel computes: output channels [oc0, oc0 + rows) (oc0 a multiple of
// kWinoLanes; u is the whole group's U, of og_tiles tiles of kWinoLanes channels) and output
// tile rows [ty0, ty1), written raw to out[(oc - oc0) * ldo + (y - 4 * ty0) * ow + x] for every
// output pixel (y, x) of those tile rows inside the image. x is the image (cin planes).
struct WinoBlock {
    std::int64_t oc0 = 0, rows = 0, og_tiles = 0, ty0 = 0, ty1 = 0, ldo = 0;
};

// Where the kernel keeps its work (element offsets into its scratch, each a multiple of 16),
// for blocks of up to ty_rows tile rows: chunks of chunk_rows tile rows (their input
// transforms V kept at once, sized for L2), a tile row's 6 half-transformed lines of lw
// values (tmp), 12 lines of abw values (the chunk's half-transformed columns, a tile every 4),
// V rows of ldv tiles, the GEMMs' sums (m).
struct WinoLayout {
    std::int64_t chunk_rows = 1, lw = 0, abw = 0, ldv = 0;
    std::int64_t tmp = 0, ab = 0, v = 0, m = 0, elems = 0;
};
WinoLayout winograd_layout(const WinoGeometry& g, std::int64_t ty_rows);

// Runs the kernel of isa (avx2 or avx512; false for portable: nothing written). scratch:
// layout.elems floats, 64-byte aligned.
bool winograd_f32(CpuIsa isa, const WinoGeometry& g, const float* x, const float* u, const WinoBlock& b, float* out,
                  float* scratch, const WinoLayout& layout);

// The per-instruction-set kernels (simd_avx2.cpp, simd_avx512.cpp).
using WinogradFn = void (*)(const WinoGeometry& g, const float* x, const float* u, const WinoBlock& b, float* out,
                            float* scratch, const WinoLayout& layout);
extern const WinogradFn kAvx2Winograd, kAvx512Winograd;

}  // namespace kiln::cpu
