#include "src/core/hip/runtime.h"

#include "src/core/hip/hip_layout.h"
#include "src/support/check.h"
#include "src/support/dynlib.h"
#include "src/support/log.h"

#include <cstring>
#include <memory>
#include <vector>

namespace kiln::core::hip {
namespace {

// hip_runtime_api.h's types as Kiln declares them (sizes checked below and, where the header
// is installed, signatures in the test build).
enum hipError_t : int {};
enum hipDeviceAttribute_t : int {};
using hipDevice_t = int;
using hipDeviceptr_t = void*;
using hipStream_t = struct ihipStream_t*;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;

#define KILN_API_CONST(name, value) inline constexpr int name = value;
#define KILN_API_TYPE(name, ctype) static_assert(sizeof(name) == sizeof(ctype), #name " has the size of " #ctype);
#include "src/core/hip/hip_api.def"

struct Api {
#define KILN_API_FN(name, ret, params) ret(*name) params = nullptr;
#include "src/core/hip/hip_api.def"
    hipError_t (*get_props)(void*, int) = nullptr;  // hipGetDevicePropertiesR0600, else hipGetDeviceProperties
    std::size_t arch_offset = 0;                    // of the name in what get_props writes (hip_layout.h)
};

// "hipErrorNoDevice: no ROCm-capable device is detected".
std::string error_text(const Api& a, hipError_t r) {
    const char* name = a.hipGetErrorName ? a.hipGetErrorName(r) : nullptr;
    const char* msg = a.hipGetErrorString ? a.hipGetErrorString(r) : nullptr;
    std::string s = name ? name : "HIP error " + std::to_string(static_cast<int>(r));
    if (msg && (!name || std::strcmp(msg, name) != 0)) s += std::string(": ") + msg;
    return s;
}

void* host_ptr(const void* p) { return const_cast<void*>(p); }  // HIP's copies take non-const sources

class Runtime final : public gpu::Vendor {
public:
    Api api;
    support::DynamicLibrary lib;

    void check(hipError_t r, const char* call) const {
        if (r != hipSuccess) KILN_USER_ERROR(call << " failed: " << error_text(api, r));
    }

    void bind(int ordinal) override { check(api.hipSetDevice(ordinal), "hipSetDevice"); }
    gpu::Stream create_stream() override {
        hipStream_t s = nullptr;
        check(api.hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreateWithFlags");
        return s;
    }
    void synchronize(gpu::Stream s) override { check(api.hipStreamSynchronize(static_cast<hipStream_t>(s)), "hipStreamSynchronize"); }
    void* try_malloc(std::size_t bytes) override {
        void* p = nullptr;
        if (hipError_t r = api.hipMalloc(&p, bytes); r != hipSuccess) {
            support::log().debug("hipMalloc of {} bytes failed: {}", bytes, error_text(api, r));
            return nullptr;
        }
        return p;
    }
    void free(void* p) override { api.hipFree(p); }
    void copy(gpu::CopyKind kind, void* dst, const void* src, std::size_t bytes, gpu::Stream stream) override {
        auto s = static_cast<hipStream_t>(stream);
        switch (kind) {
        case gpu::CopyKind::host_to_device:
            return check(api.hipMemcpyHtoDAsync(dst, host_ptr(src), bytes, s), "hipMemcpyHtoDAsync");
        case gpu::CopyKind::device_to_host:
            return check(api.hipMemcpyDtoHAsync(dst, host_ptr(src), bytes, s), "hipMemcpyDtoHAsync");
        case gpu::CopyKind::device_to_device:
            return check(api.hipMemcpyDtoDAsync(dst, host_ptr(src), bytes, s), "hipMemcpyDtoDAsync");
        }
    }
    void fill(void* dst, unsigned char value, std::size_t bytes, gpu::Stream s) override {
        check(api.hipMemsetD8Async(dst, value, bytes, static_cast<hipStream_t>(s)), "hipMemsetD8Async");
    }
    gpu::Module load_module(const std::string& image) override {
        hipModule_t module = nullptr;
        check(api.hipModuleLoadData(&module, image.data()), "hipModuleLoadData");
        return module;
    }
    gpu::Function get_function(gpu::Module m, const char* entry) override {
        hipFunction_t f = nullptr;
        check(api.hipModuleGetFunction(&f, static_cast<hipModule_t>(m), entry), "hipModuleGetFunction");
        return f;
    }
    void unload_module(gpu::Module m) noexcept override { api.hipModuleUnload(static_cast<hipModule_t>(m)); }
    std::string launch(gpu::Function fn, unsigned grid, unsigned block, gpu::Stream s, void** params) override {
        const hipError_t r = api.hipModuleLaunchKernel(static_cast<hipFunction_t>(fn), grid, 1, 1, block, 1, 1, 0,
                                                       static_cast<hipStream_t>(s), params, nullptr);
        return r == hipSuccess ? std::string() : "hipModuleLaunchKernel failed: " + error_text(api, r);
    }
};

// The device's architecture as HIPRTC's --offload-arch takes it ("gfx90a"), or "" when the
// properties cannot be read.
std::string arch_name(const Api& a, int ordinal) {
    std::vector<char> props(kPropsBufferBytes, 0);
    if (a.get_props(props.data(), ordinal) != hipSuccess) return {};
    std::string name(props.data() + a.arch_offset, strnlen(props.data() + a.arch_offset, kArchNameBytes));
    name = name.substr(0, name.find(':'));  // "gfx90a:sramecc+:xnack-" -> "gfx90a"
    return name.rfind("gfx", 0) == 0 ? name : std::string();
}

}  // namespace

gpu::Loaded load() {
    gpu::Loaded out;
    auto rt = std::make_unique<Runtime>();
    gpu::Status& st = out.status;
    std::string why;
    if (!rt->lib.open({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}, &why)) {
        st.why = "the HIP runtime (libamdhip64.so) is not installed: " + why;
        return out;
    }
    st.library = rt->lib.path();
    Api& a = rt->api;
    std::string missing;
#define KILN_API_FN(name, ret, params) rt->lib.resolve(#name, &a.name, &missing);
#include "src/core/hip/hip_api.def"
    using PropsFn = hipError_t (*)(void*, int);
    if (void* f = rt->lib.symbol("hipGetDevicePropertiesR0600")) {
        a.get_props = reinterpret_cast<PropsFn>(f);
        a.arch_offset = kArchNameOffsetR0600;
    } else if (void* g = rt->lib.symbol("hipGetDeviceProperties")) {
        a.get_props = reinterpret_cast<PropsFn>(g);
        a.arch_offset = kArchNameOffsetR0000;
    } else {
        missing += std::string(missing.empty() ? "" : ", ") + "hipGetDeviceProperties";
    }
    if (!missing.empty()) {
        st.why = "the HIP runtime " + rt->lib.path() + " lacks " + missing;
        return out;
    }
    a.hipRuntimeGetVersion(&st.driver_version);
    if (hipError_t r = a.hipInit(0); r != hipSuccess) {
        st.why = "hipInit failed: " + error_text(a, r);
        return out;
    }
    int n = 0;
    if (hipError_t r = a.hipGetDeviceCount(&n); r != hipSuccess || n <= 0) {
        st.why = r == hipSuccess ? std::string("the HIP runtime sees no device") : "hipGetDeviceCount: " + error_text(a, r);
        return out;
    }
    for (int i = 0; i < n; ++i) {
        gpu::DeviceInfo info;
        info.ordinal = i;
        hipDevice_t dev = 0;
        a.hipDeviceGet(&dev, i);
        char name[256] = {};
        a.hipDeviceGetName(name, sizeof name, dev);
        info.name = name;
        info.arch = arch_name(a, i);
        if (info.arch.empty()) {
            st.why = "cannot read the architecture of HIP device " + std::to_string(i) + " (" + info.name +
                     ") from its properties (HIP runtime version " + std::to_string(st.driver_version) + ")";
            return out;
        }
        auto attr = [&](int which) {
            int v = 0;
            a.hipDeviceGetAttribute(&v, static_cast<hipDeviceAttribute_t>(which), i);
            return v;
        };
        info.sm_count = attr(hipDeviceAttributeMultiprocessorCount);
        info.max_threads_per_block = attr(hipDeviceAttributeMaxThreadsPerBlock);
        a.hipDeviceTotalMem(&info.total_memory, dev);
        out.devices.push_back(info);
    }
    st.device_count = n;
    st.available = true;
    out.vendor = std::move(rt);
    return out;
}

}  // namespace kiln::core::hip
