// HIPRTC loaded at run time (see hiprtc.h): the functions of hiprtc_api.def and
// comgr_api.def resolved by name, and one compile per call.
#include "tiers/gpu/hiprtc.h"

#include "src/support/dynlib.h"
#include "tiers/gpu/rtc_p.h"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>

namespace kiln::tiers::gpu {
namespace {

// Our own declarations of the types the tables name (checked against the headers where
// they are installed: sizes here, signatures in the test build).
enum hiprtcResult : int {};
struct HiprtcProgramTag;
using hiprtcProgram = HiprtcProgramTag*;
enum amd_comgr_status_t : int {};
#define KILN_API_TYPE(name, ctype) static_assert(sizeof(name) == sizeof(ctype), #name " has the size of " #ctype);
#include "tiers/gpu/hiprtc_api.def"
#define KILN_API_TYPE(name, ctype) static_assert(sizeof(name) == sizeof(ctype), #name " has the size of " #ctype);
#include "tiers/gpu/comgr_api.def"

struct Api {
#define KILN_API_FN(name, ret, params) ret(*name) params = nullptr;
#include "tiers/gpu/hiprtc_api.def"
#define KILN_API_FN(name, ret, params) ret(*name) params = nullptr;
#include "tiers/gpu/comgr_api.def"
};

struct Loaded {
    HiprtcStatus status;
    Api api;
    support::DynamicLibrary hiprtc, comgr;
};

// "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string arch_of_isa(const std::string& isa) {
    std::size_t at = isa.rfind("--");
    std::string a = at == std::string::npos ? isa : isa.substr(at + 2);
    return a.substr(0, a.find(':'));
}

Loaded load() {
    Loaded l;
    std::string why;
    if (!l.hiprtc.open({"libhiprtc.so.6", "libamdhip64.so.5"}, &why)) {
        l.status.why = "HIPRTC not found: " + why;
        return l;
    }
    if (!l.comgr.open({"libamd_comgr.so.3", "libamd_comgr.so.2"}, &why)) {
        l.status.why = "comgr (the list of architectures HIPRTC compiles for) not found: " + why;
        return l;
    }
    std::string missing;
#define KILN_API_FN(name, ret, params) l.hiprtc.resolve(#name, &l.api.name, &missing);
#include "tiers/gpu/hiprtc_api.def"
#define KILN_API_FN(name, ret, params) l.comgr.resolve(#name, &l.api.name, &missing);
#include "tiers/gpu/comgr_api.def"
    if (!missing.empty()) {
        l.status.why = l.hiprtc.path() + " / " + l.comgr.path() + " lack " + missing;
        return l;
    }
    l.api.hiprtcVersion(&l.status.major, &l.status.minor);
    std::size_t n = 0;
    if (l.api.amd_comgr_get_isa_count(&n) == 0)
        for (std::size_t i = 0; i < n; ++i) {
            const char* name = nullptr;
            if (l.api.amd_comgr_get_isa_name(i, &name) != 0 || !name) continue;
            const std::string a = arch_of_isa(name);
            if (std::find(l.status.archs.begin(), l.status.archs.end(), a) == l.status.archs.end()) l.status.archs.push_back(a);
        }
    l.status.library = l.hiprtc.path();
    l.status.available = true;
    return l;
}

const Loaded& loaded() {
    static const Loaded l = load();  // once per process, thread-safe
    return l;
}

}  // namespace

const HiprtcStatus& hiprtc_status() { return loaded().status; }

HiprtcOutput hiprtc_compile(const std::string& source, const std::string& name, const std::string& arch) {
    const Loaded& l = loaded();
    HiprtcOutput out;
    if (!l.status.available) {
        out.error = l.status.why;
        return out;
    }
    if (std::find(l.status.archs.begin(), l.status.archs.end(), arch) == l.status.archs.end()) {
        out.error = "HIPRTC's comgr does not know the architecture " + arch;
        return out;
    }
    const Api& a = l.api;
    detail::RtcFns<hiprtcResult, hiprtcProgram, const char**> f;
    f.error_string = a.hiprtcGetErrorString;
    f.create = a.hiprtcCreateProgram;
    f.destroy = a.hiprtcDestroyProgram;
    f.compile = a.hiprtcCompileProgram;
    f.log_size = a.hiprtcGetProgramLogSize;
    f.log = a.hiprtcGetProgramLog;
    f.code_size = a.hiprtcGetCodeSize;
    f.code = a.hiprtcGetCode;
    // One compile at a time: two at once crash ROCm 5.2's HIPRTC.
    static std::mutex one_at_a_time;
    std::lock_guard<std::mutex> lock(one_at_a_time);
    return detail::rtc_compile<HiprtcOutput>(f, source, name, {"--offload-arch=" + arch, "-ffp-contract=fast"});
}

}  // namespace kiln::tiers::gpu
