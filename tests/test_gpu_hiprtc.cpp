// The GPU source printer's HIP dialect (tiers/gpu/gpu_source.h) and the HIPRTC loader
// (tiers/gpu/hiprtc.h), without an AMD GPU: every kernel of tests/gpu_corpus.h prints as HIP and
// compiles with HIPRTC for gfx90a (the models' groups for gfx1030 too). Skipped with the
// reason when HIPRTC (Debian's libamdhip64-dev) is not installed. hiprtc_api.def and
// comgr_api.def are checked against their headers at build time where those are installed
// (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include "gpu_corpus.h"
#include "skip.h"
#include "tiers/gpu/hiprtc.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace kiln;
namespace gpu = kiln::tiers::gpu;

namespace {

const std::string kArch = "gfx90a";

// Prints every item as HIP and compiles it for `arch` (gfx90a: CDNA2, 64-lane wavefronts;
// gfx1030: RDNA2, 32-lane); says how many compiled.
void compile_items(const std::string& what, const std::vector<gpu_test::Item>& items, const std::string& arch = kArch) {
    const gpu::HiprtcStatus& st = gpu::hiprtc_status();
    if (!st.available) {
        test::skip("HIPRTC is not available: " + st.why);
        return;
    }
    if (std::find(st.archs.begin(), st.archs.end(), arch) == st.archs.end()) {
        test::skip("the installed HIPRTC does not target " + arch);
        return;
    }
    gpu_test::check_compiled(what, arch, items, gpu_test::print_all(items, gpu::Dialect::hip), [&arch](const std::string& src) {
        const gpu::HiprtcOutput o = gpu::hiprtc_compile(src, "kiln.hip", arch);
        return gpu_test::Compiled{o.ok && !o.binary.empty(), o.error};
    });
}

}  // namespace

TEST_CASE("gpu hiprtc: HIPRTC loads, or says why not; an unknown architecture is refused, not compiled") {
    const gpu::HiprtcStatus& st = gpu::hiprtc_status();
    if (!st.available) {
        CHECK(!st.why.empty());
        test::skip("HIPRTC is not available: " + st.why);
        return;
    }
    MESSAGE("HIPRTC " << st.major << "." << st.minor << " from " << st.library << ", " << st.archs.size() << " architectures");
    CHECK(!st.archs.empty());
    const gpu::HiprtcOutput none = gpu::hiprtc_compile("extern \"C\" __global__ void k() {}", "none.hip", "gfx0");
    CHECK_FALSE(none.ok);
    CHECK(none.error.find("gfx0") != std::string::npos);
    if (std::find(st.archs.begin(), st.archs.end(), kArch) == st.archs.end()) return;
    const gpu::HiprtcOutput bad = gpu::hiprtc_compile("extern \"C\" __global__ void k() { undeclared(); }", "bad.hip", kArch);
    CHECK_FALSE(bad.ok);
    CHECK(bad.error.find("undeclared") != std::string::npos);
}

TEST_CASE("gpu hiprtc: the hand-built kernels and every op in every type compile for gfx90a") {
    compile_items("hand-built", gpu_test::hand_kernels());
}

TEST_CASE("gpu hiprtc: the benchmarks' models compile for gfx90a and gfx1030, row and tiled forms included") {
    const std::vector<gpu_test::Item> items = gpu_test::model_kernels();
    int rows = 0, tiles = 0;
    for (const auto& it : items) {
        const gpu::GpuSource s = gpu::print_source(it.kernel, it.spec, gpu::Dialect::hip);
        rows += s.code.find(", s, 32);") != std::string::npos;
        tiles += s.code.find("__shared__") != std::string::npos;
    }
    CHECK(rows > 0);
    CHECK(tiles > 0);
    compile_items("models", items);
    compile_items("models", items, "gfx1030");
}

TEST_CASE("gpu hiprtc: convolutions as implicit GEMMs (element and tiled forms) compile for gfx90a") {
    compile_items("convolutions", gpu_test::conv_kernels());
}

KILN_GPU_FAMILY_CASES("gpu hiprtc: the differential corpus compiles for gfx90a: ")

TEST_CASE("gpu hiprtc: hiprtc_api.def and comgr_api.def agree with their headers") {
#if defined(KILN_CHECKED_API_HIPRTC) && defined(KILN_CHECKED_API_COMGR)
    MESSAGE("hiprtc_api.def and comgr_api.def were checked against hip/hiprtc.h and amd_comgr.h at build time");
    CHECK(gpu::hiprtc_status().why.find("lack") == std::string::npos);
#else
    test::skip("hip/hiprtc.h or amd_comgr.h was not found when the build was configured: the tables are unchecked");
#endif
}
