// NVRTC loaded at run time (see nvrtc.h): the functions of nvrtc_api.def resolved from
// libnvrtc.so.13 (or .12), and one compile per call.
#include "tiers/gpu/nvrtc.h"

#include "src/support/dynlib.h"
#include "tiers/gpu/rtc_p.h"

#include <cstddef>
#include <string>

namespace kiln::tiers::gpu {
namespace {

// Our own declarations of the NVRTC types nvrtc_api.def names (checked against nvrtc.h
// where the toolkit is installed: sizes here, signatures in the test build).
enum nvrtcResult : int {};
struct NvrtcProgramTag;
using nvrtcProgram = NvrtcProgramTag*;
#define KILN_API_TYPE(name, ctype) static_assert(sizeof(name) == sizeof(ctype), #name " has the size of " #ctype);
#include "tiers/gpu/nvrtc_api.def"

struct Api {
#define KILN_API_FN(name, ret, params) ret(*name) params = nullptr;
#include "tiers/gpu/nvrtc_api.def"
};

struct Loaded {
    NvrtcStatus status;
    Api api;
    support::DynamicLibrary lib;
};

Loaded load() {
    Loaded l;
    std::string why;
    if (!l.lib.open({"libnvrtc.so.13", "libnvrtc.so.12"}, &why)) {
        l.status.why = "NVRTC not found: " + why;
        return l;
    }
    std::string missing;
#define KILN_API_FN(name, ret, params) l.lib.resolve(#name, &l.api.name, &missing);
#include "tiers/gpu/nvrtc_api.def"
    if (!missing.empty()) {
        l.status.why = l.lib.path() + " lacks " + missing;
        return l;
    }
    l.api.nvrtcVersion(&l.status.major, &l.status.minor);
    int n = 0;
    if (l.api.nvrtcGetNumSupportedArchs(&n) == 0 && n > 0) {
        l.status.archs.resize(static_cast<std::size_t>(n));
        if (l.api.nvrtcGetSupportedArchs(l.status.archs.data()) != 0) l.status.archs.clear();
    }
    l.status.library = l.lib.path();
    l.status.available = true;
    return l;
}

const Loaded& loaded() {
    static const Loaded l = load();  // once per process, thread-safe
    return l;
}

}  // namespace

const NvrtcStatus& nvrtc_status() { return loaded().status; }

NvrtcOutput nvrtc_compile(const std::string& source, const std::string& name, int arch, bool ptx) {
    const Loaded& l = loaded();
    if (!l.status.available) {
        NvrtcOutput out;
        out.error = l.status.why;
        return out;
    }
    const Api& a = l.api;
    detail::RtcFns<nvrtcResult, nvrtcProgram> f;
    f.error_string = a.nvrtcGetErrorString;
    f.create = a.nvrtcCreateProgram;
    f.destroy = a.nvrtcDestroyProgram;
    f.compile = a.nvrtcCompileProgram;
    f.log_size = a.nvrtcGetProgramLogSize;
    f.log = a.nvrtcGetProgramLog;
    f.code_size = ptx ? a.nvrtcGetPTXSize : a.nvrtcGetCUBINSize;
    f.code = ptx ? a.nvrtcGetPTX : a.nvrtcGetCUBIN;
    // A cubin for sm_<arch>, or PTX for compute_<arch>; FMA contraction on, IEEE division,
    // square root and denormals (no fast math).
    const std::string target = (ptx ? "--gpu-architecture=compute_" : "--gpu-architecture=sm_") + std::to_string(arch);
    NvrtcOutput out = detail::rtc_compile<NvrtcOutput>(
        f, source, name, {target, "-default-device", "--fmad=true", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"});
    if (out.ok && ptx)
        while (!out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
    return out;
}

}  // namespace kiln::tiers::gpu
