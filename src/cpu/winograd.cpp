// Winograd F(4x4, 3x3) (winograd.h): the weights' transform, the kernel's scratch layout,
// the choice of kernel.
#include "src/cpu/winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kiln::cpu {
namespace {

using I64 = std::int64_t;

// G of F(4, 3) for the points 0, -1, 1, 1/2, -2 (and infinity): U = G g G^T.
constexpr double kG[6][3] = {{1, 0, 0},
                             {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                             {1.0 / 3, 1.0 / 3, 1.0 / 3},
                             {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                             {1.0 / 15, -2.0 / 15, 4.0 / 15},
                             {0, 0, 1}};

// The input transforms of a chunk's tiles kept at once: at most this many bytes, and at
// least one tile row. U is read once per chunk: resnet18's 256-channel 14 x 14 image (16
// tiles, 590 KB of V) is one chunk.
constexpr I64 kChunkBytes = 768 * 1024;

I64 round16(I64 n) { return (n + 15) / 16 * 16; }

}  // namespace

bool winograd_allowed() {
    static const bool allowed = [] {
        const char* v = std::getenv("KILN_WINOGRAD");
        return v == nullptr || std::strcmp(v, "0") != 0;
    }();
    return allowed;
}

std::int64_t winograd_weight_elems(std::int64_t og, std::int64_t cin) {
    return kWinoPoints * ((og + kWinoLanes - 1) / kWinoLanes) * kWinoLanes * cin;
}

void winograd_weights(const float* w, std::int64_t og, std::int64_t cin, float* u) {
    const I64 tiles = (og + kWinoLanes - 1) / kWinoLanes;
    // Channel tile, input channel, then the tile's output channels into a row of 32 per point
    // (zeros past og), each point's row then written whole, rather than 36 values 128 bytes or
    // more apart per weight and a fill before (256 -> 256 into fresh memory, AMD EPYC Zen 4:
    // 13.9 -> 7.0 ms; 128 -> 128: 3.1 -> 1.6 ms). It runs once per function, at the first
    // call of code that reads it (kir::Derived).
    for (I64 t = 0; t < tiles; ++t)
        for (I64 ic = 0; ic < cin; ++ic) {
            float row[kWinoPoints][kWinoLanes] = {};
            for (I64 lane = 0; lane < kWinoLanes && t * kWinoLanes + lane < og; ++lane) {
                const I64 oc = t * kWinoLanes + lane;
                const float* g = w + (oc * cin + ic) * 9;
                double gt[6][3];  // G g
                for (int k = 0; k < 6; ++k)
                    for (int j = 0; j < 3; ++j)
                        gt[k][j] = kG[k][0] * g[j] + kG[k][1] * g[3 + j] + kG[k][2] * g[6 + j];
                for (int k = 0; k < 6; ++k)
                    for (int l = 0; l < 6; ++l) {
                        const double v = gt[k][0] * kG[l][0] + gt[k][1] * kG[l][1] + gt[k][2] * kG[l][2];
                        row[k * 6 + l][lane] = static_cast<float>(v);
                    }
            }
            for (I64 xi = 0; xi < kWinoPoints; ++xi)
                std::copy(row[xi], row[xi] + kWinoLanes, u + ((xi * tiles + t) * cin + ic) * kWinoLanes);
        }
}

WinoLayout winograd_layout(const WinoGeometry& g, std::int64_t ty_rows) {
    WinoLayout L;
    const I64 ntx = std::max<I64>(g.tiles_x(), 1);
    const I64 per_tile = kWinoPoints * std::max<I64>(g.cin, 1) * static_cast<I64>(sizeof(float));
    L.chunk_rows = std::clamp<I64>(kChunkBytes / per_tile / ntx, 1, std::max<I64>(ty_rows, 1));
    const I64 nt = L.chunk_rows * ntx;
    // Lines: the deinterleaving loads read 4 values per tile of whole vectors of up to 16
    // tiles, plus 4 (the last tile's columns 4 and 5); V's rows: W lanes past the last tile.
    L.lw = 4 * ((ntx + 15) / 16 * 16) + 16;
    L.ldv = round16(nt + 16);
    // a / b lines: 4 values per tile of the chunk, and the last vector's spill (16 tiles).
    L.abw = round16(4 * nt + 64);
    L.tmp = 0;
    L.ab = L.tmp + round16(6 * L.lw);
    L.v = L.ab + 12 * L.abw;
    L.m = L.v + kWinoPoints * g.cin * L.ldv;
    L.elems = L.m + nt * kWinoPoints * kWinoLanes;
    return L;
}

bool winograd_f32(CpuIsa isa, const WinoGeometry& g, const float* x, const float* u, const WinoBlock& b, float* out,
                  float* scratch, const WinoLayout& layout) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (cap_cpu_isa(isa)) {
    case CpuIsa::avx512: kAvx512Winograd(g, x, u, b, out, scratch, layout); return true;
    case CpuIsa::avx2: kAvx2Winograd(g, x, u, b, out, scratch, layout); return true;
    case CpuIsa::portable: return false;
    }
#endif
    (void)isa, (void)g, (void)x, (void)u, (void)b, (void)out, (void)scratch, (void)layout;
    return false;
}

}  // namespace kiln::cpu
