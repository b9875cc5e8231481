// The Winograd F(4x4, 3x3) kernel (src/cpu/winograd.h), for every vector kernel set this CPU
// runs (AVX2 + FMA, AVX-512F; the others are skipped with the reason), against plain
// double-precision loops: images from one output pixel to rows of more than 16 tiles,
// paddings 0-2, channel counts off the 32-channel tiles, blocks of some channels and some
// tile rows, chunks of one tile row (deep inputs), and nothing written outside the block.
#include <doctest/doctest.h>

#include "skip.h"
#include "src/cpu/winograd.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using I64 = std::int64_t;
using kiln::cpu::CpuIsa;

constexpr float kGuard = 12345.0f;

std::vector<float> random_values(I64 n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> d(0.0, 1.0);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = static_cast<float>(d(rng));
    return v;
}

struct Case {
    I64 cin, og, h, w, ph, pw;
};

// Runs the kernel on blocks of channels [oc0, oc0 + rows) and tile rows [ty0, ty1) and checks
// every output against the double sum (bound: 3e-5 of the sum of |w x| over the filter, a few
// hundred units in the last place of f32: the transforms' cancellation) and that nothing
// else in the output buffer changed. Returns false on the first bad value.
bool check(CpuIsa isa, const Case& c, I64 oc0, I64 rows, I64 ty0, I64 ty1, std::uint64_t seed) {
    kiln::cpu::WinoGeometry g{c.cin, c.h, c.w, c.h + 2 * c.ph - 2, c.w + 2 * c.pw - 2, c.ph, c.pw};
    const std::vector<float> x = random_values(c.cin * c.h * c.w, seed);
    const std::vector<float> w = random_values(c.og * c.cin * 9, seed + 1);
    std::vector<float> u(static_cast<std::size_t>(kiln::cpu::winograd_weight_elems(c.og, c.cin)));
    kiln::cpu::winograd_weights(w.data(), c.og, c.cin, u.data());
    const I64 band = 4 * (ty1 - ty0) * g.ow, ldo = band + 7;
    std::vector<float> out(static_cast<std::size_t>(rows * ldo), kGuard);
    const kiln::cpu::WinoLayout layout = kiln::cpu::winograd_layout(g, ty1 - ty0);
    std::vector<float> scratch(static_cast<std::size_t>(layout.elems + 16));
    float* ws = scratch.data();
    while (reinterpret_cast<std::uintptr_t>(ws) % 64 != 0) ++ws;
    const kiln::cpu::WinoBlock b{oc0, rows, (c.og + kiln::cpu::kWinoLanes - 1) / kiln::cpu::kWinoLanes, ty0, ty1, ldo};
    REQUIRE(kiln::cpu::winograd_f32(isa, g, x.data(), u.data(), b, out.data(), ws, layout));
    for (I64 r = 0; r < rows; ++r)
        for (I64 p = 0; p < ldo; ++p) {
            const float got = out[static_cast<std::size_t>(r * ldo + p)];
            const I64 y = 4 * ty0 + p / g.ow, xo = p % g.ow;
            if (p >= band || y >= g.oh) {
                if (got != kGuard) {
                    FAIL_CHECK("wrote outside the block: row " << r << " element " << p);
                    return false;
                }
                continue;
            }
            const I64 oc = oc0 + r;
            double ref = 0, mag = 0;
            for (I64 ic = 0; ic < c.cin; ++ic)
                for (I64 i = 0; i < 3; ++i)
                    for (I64 j = 0; j < 3; ++j) {
                        const I64 iy = y - c.ph + i, ix = xo - c.pw + j;
                        if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                        const double t = static_cast<double>(w[static_cast<std::size_t>(((oc * c.cin + ic) * 3 + i) * 3 + j)]) *
                                         x[static_cast<std::size_t>((ic * c.h + iy) * c.w + ix)];
                        ref += t;
                        mag += std::fabs(t);
                    }
            if (!(std::fabs(got - ref) <= 3e-5 * mag + 1e-30)) {
                FAIL_CHECK(std::string(kiln::cpu::cpu_isa_name(isa)) << " cin " << c.cin << " og " << c.og << " " << c.h << "x" << c.w
                                                        << " pad " << c.ph << "," << c.pw << ": channel " << oc << " pixel (" << y
                                                        << ", " << xo << ") got " << got << " want " << ref);
                return false;
            }
        }
    return true;
}

std::vector<CpuIsa> vector_isas() {
    std::vector<CpuIsa> out;
    for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512}) {
        if (kiln::cpu::cap_cpu_isa(isa) == isa) out.push_back(isa);
        else kiln::test::skip(std::string("this CPU does not run the ") + kiln::cpu::cpu_isa_name(isa) + " kernels");
    }
    return out;
}

}  // namespace

TEST_CASE("cpu winograd: F(4x4, 3x3) against double loops, whole images (pads 0-2, odd sizes, channels off the tiles)") {
    const Case cases[] = {
        {1, 1, 3, 3, 0, 0},     // one output pixel
        {3, 5, 5, 7, 1, 1},     // a stem-like conv, tiles cut at both edges
        {16, 32, 8, 8, 1, 1},   // whole tiles
        {33, 40, 13, 11, 1, 0}, // channels past a tile of 32
        {8, 64, 9, 70, 2, 2},   // rows of 18 tiles: two vectors of tiles
        {17, 33, 6, 66, 0, 1},  // 16 tiles a row plus one
    };
    std::uint64_t seed = 1;
    for (CpuIsa isa : vector_isas())
        for (const Case& c : cases) {
            const I64 oh = c.h + 2 * c.ph - 2;
            CHECK(check(isa, c, 0, c.og, 0, (oh + 3) / 4, seed += 3));
        }
}

TEST_CASE("cpu winograd: blocks of channels and tile rows, and chunks of one tile row") {
    std::uint64_t seed = 100;
    for (CpuIsa isa : vector_isas()) {
        // channels 32..69 of 70, tile rows 1..3 of 5
        CHECK(check(isa, {12, 70, 18, 21, 1, 1}, 32, 38, 1, 3, seed += 3));
        // channels 64..95 of 96, the last tile row only
        CHECK(check(isa, {5, 96, 15, 15, 1, 1}, 64, 32, 3, 4, seed += 3));
        // 2700 input channels: the layout's chunks hold one tile row
        const kiln::cpu::WinoGeometry deep{2700, 10, 10, 10, 10, 1, 1};
        CHECK(kiln::cpu::winograd_layout(deep, 3).chunk_rows == 1);
        CHECK(check(isa, {2700, 3, 10, 10, 1, 1}, 0, 3, 0, 3, seed += 3));
    }
}

TEST_CASE("cpu winograd: no kernel for the portable set") {
    const kiln::cpu::WinoGeometry g{1, 3, 3, 1, 1, 0, 0};
    const kiln::cpu::WinoLayout layout = kiln::cpu::winograd_layout(g, 1);
    std::vector<float> x(9, 1.0f), u(static_cast<std::size_t>(kiln::cpu::winograd_weight_elems(1, 1)), 0.0f);
    std::vector<float> out(1, kGuard), scratch(static_cast<std::size_t>(layout.elems));
    CHECK_FALSE(kiln::cpu::winograd_f32(CpuIsa::portable, g, x.data(), u.data(), {0, 1, 1, 0, 1, 1}, out.data(),
                                        scratch.data(), layout));
    CHECK(out[0] == kGuard);
}
