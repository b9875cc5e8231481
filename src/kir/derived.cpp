// The layouts of kir::Derived (kir.h): copies of constant buffers that a backend reads in
// place of the original, made once per function by the runtime.
#include "src/kir/kir.h"

#include "src/cpu/winograd.h"
#include "src/support/check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::kir {
namespace {

template <class T> void transpose_tiles(const Derived& d, const T* src, T* dst) {
    const std::int64_t tiles = (d.rows + d.lanes - 1) / d.lanes;
    const std::int64_t sub = d.sub > 0 ? d.sub : d.lanes;  // each slab: cols x sub
    for (std::int64_t g = 0; g < d.groups; ++g)
        for (std::int64_t t = 0; t < tiles; ++t) {
            T* tile = dst + (g * tiles + t) * d.cols * d.lanes;
            const std::int64_t r0 = t * d.lanes, n = r0 + d.lanes <= d.rows ? d.lanes : d.rows - r0;
            if (n < d.lanes) std::memset(static_cast<void*>(tile), 0, sizeof(T) * static_cast<std::size_t>(d.cols * d.lanes));
            for (std::int64_t s0 = 0; s0 < n; s0 += sub) {  // the slab of rows [s0, s0 + sub)
                T* out = tile + s0 * d.cols;
                const std::int64_t m = std::min(sub, n - s0);
                if (d.transposed) {  // a run of m values of each source row to each slab row
                    for (std::int64_t c = 0; c < d.cols; ++c)
                        std::memcpy(static_cast<void*>(out + c * sub), src + (g * d.cols + c) * d.rows + r0 + s0,
                                    sizeof(T) * static_cast<std::size_t>(m));
                    continue;
                }
                // Row by row: each source row is read in order, its values scattered to one lane.
                for (std::int64_t r = 0; r < m; ++r) {
                    const T* row = src + (g * d.rows + r0 + s0 + r) * d.cols;
                    for (std::int64_t c = 0; c < d.cols; ++c) out[c * sub + r] = row[c];
                }
            }
        }
}

}  // namespace

void fill_derived(const Derived& d, DType dt, const void* src, void* dst) {
    if (d.winograd) {
        KILN_CHECK(dt == DType::f32 && d.lanes == cpu::kWinoLanes && d.cols % 9 == 0, "fill_derived: a Winograd layout");
        const std::int64_t cin = d.cols / 9, per_group = cpu::winograd_weight_elems(d.rows, cin);
        for (std::int64_t g = 0; g < d.groups; ++g)
            cpu::winograd_weights(static_cast<const float*>(src) + g * d.rows * d.cols, d.rows, cin,
                                  static_cast<float*>(dst) + g * per_group);
        return;
    }
    switch (dtype_size(dt)) {
    case 8: return transpose_tiles(d, static_cast<const std::uint64_t*>(src), static_cast<std::uint64_t*>(dst));
    case 4: return transpose_tiles(d, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst));
    case 2: return transpose_tiles(d, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst));
    case 1: return transpose_tiles(d, static_cast<const std::uint8_t*>(src), static_cast<std::uint8_t*>(dst));
    default: KILN_UNREACHABLE("fill_derived: element size");
    }
}

}  // namespace kiln::kir
