#include "src/core/cuda/driver.h"

#include "src/core/cuda/driver_api.h"
#include "src/support/check.h"
#include "src/support/dynlib.h"
#include "src/support/log.h"

#include <memory>
#include <vector>

namespace kiln::core::cuda {
namespace {

// The driver's name and message of an error code ("CUDA_ERROR_OUT_OF_MEMORY: out of memory").
std::string error_text(const DriverApi& a, CUresult r) {
    const char* name = nullptr;
    const char* msg = nullptr;
    if (a.cuGetErrorName) a.cuGetErrorName(r, &name);
    if (a.cuGetErrorString) a.cuGetErrorString(r, &msg);
    return std::string(name ? name : "CUDA error " + std::to_string(r)) + (msg ? std::string(": ") + msg : "");
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class Driver final : public gpu::Vendor {
public:
    DriverApi api;
    support::DynamicLibrary lib;
    std::vector<CUcontext> contexts;  // primary contexts, retained once

    void check(CUresult r, const char* call) const {
        if (r != kSuccess) KILN_USER_ERROR(call << " failed: " << error_text(api, r));
    }

    void bind(int ordinal) override {
        check(api.cuCtxSetCurrent(contexts[static_cast<std::size_t>(ordinal)]), "cuCtxSetCurrent");
    }
    gpu::Stream create_stream() override {
        CUstream s = nullptr;
        check(api.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        return s;
    }
    void synchronize(gpu::Stream s) override { check(api.cuStreamSynchronize(static_cast<CUstream>(s)), "cuStreamSynchronize"); }
    void* try_malloc(std::size_t bytes) override {
        CUdeviceptr p = 0;
        if (CUresult r = api.cuMemAlloc_v2(&p, bytes); r != kSuccess) {
            support::log().debug("cuMemAlloc of {} bytes failed: {}", bytes, error_text(api, r));
            return nullptr;
        }
        return reinterpret_cast<void*>(p);
    }
    void free(void* p) override { api.cuMemFree_v2(dptr(p)); }
    void copy(gpu::CopyKind kind, void* dst, const void* src, std::size_t bytes, gpu::Stream stream) override {
        auto s = static_cast<CUstream>(stream);
        switch (kind) {
        case gpu::CopyKind::host_to_device:
            return check(api.cuMemcpyHtoDAsync_v2(dptr(dst), src, bytes, s), "cuMemcpyHtoDAsync");
        case gpu::CopyKind::device_to_host:
            return check(api.cuMemcpyDtoHAsync_v2(dst, dptr(src), bytes, s), "cuMemcpyDtoHAsync");
        case gpu::CopyKind::device_to_device:
            return check(api.cuMemcpyDtoDAsync_v2(dptr(dst), dptr(src), bytes, s), "cuMemcpyDtoDAsync");
        }
    }
    void fill(void* dst, unsigned char value, std::size_t bytes, gpu::Stream s) override {
        check(api.cuMemsetD8Async(dptr(dst), value, bytes, static_cast<CUstream>(s)), "cuMemsetD8Async");
    }
    gpu::Module load_module(const std::string& image) override {
        CUmodule module = nullptr;
        check(api.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
        return module;
    }
    gpu::Function get_function(gpu::Module m, const char* entry) override {
        CUfunction f = nullptr;
        check(api.cuModuleGetFunction(&f, static_cast<CUmodule>(m), entry), "cuModuleGetFunction");
        return f;
    }
    void unload_module(gpu::Module m) noexcept override { api.cuModuleUnload(static_cast<CUmodule>(m)); }
    std::string launch(gpu::Function fn, unsigned grid, unsigned block, gpu::Stream s, void** params) override {
        const CUresult r = api.cuLaunchKernel(static_cast<CUfunction>(fn), grid, 1, 1, block, 1, 1, 0, static_cast<CUstream>(s),
                                              params, nullptr);
        return r == kSuccess ? std::string() : "cuLaunchKernel failed: " + error_text(api, r);
    }
};

}  // namespace

gpu::Loaded load() {
    gpu::Loaded out;
    auto d = std::make_unique<Driver>();
    gpu::Status& st = out.status;
    std::string why;
    if (!d->lib.open({"libcuda.so.1", "libcuda.so"}, &why)) {
        st.why = "the CUDA driver (libcuda.so.1) is not installed: " + why;
        return out;
    }
    st.library = d->lib.path();
    std::string missing;
#define KILN_API_FN(name, ret, params) d->lib.resolve(#name, &d->api.name, &missing);
#include "src/core/cuda/cuda_api.def"
    if (!missing.empty()) {
        st.why = "the CUDA driver " + d->lib.path() + " lacks " + missing;
        return out;
    }
    const DriverApi& a = d->api;
    if (CUresult r = a.cuInit(0); r != kSuccess) {
        st.why = "cuInit failed: " + error_text(a, r);
        return out;
    }
    a.cuDriverGetVersion(&st.driver_version);
    int n = 0;
    if (CUresult r = a.cuDeviceGetCount(&n); r != kSuccess || n <= 0) {
        st.why = n <= 0 && r == kSuccess ? "the CUDA driver sees no device" : "cuDeviceGetCount failed: " + error_text(a, r);
        return out;
    }
    for (int i = 0; i < n; ++i) {
        gpu::DeviceInfo info;
        info.ordinal = i;
        CUdevice dev = 0;
        a.cuDeviceGet(&dev, i);
        char name[256] = {};
        a.cuDeviceGetName(name, sizeof name, dev);
        info.name = name;
        auto attr = [&](int which) {
            int v = 0;
            a.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(which), dev);
            return v;
        };
        info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        info.arch = "sm_" + std::to_string(info.cc_major * 10 + info.cc_minor);
        info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
        a.cuDeviceTotalMem_v2(&info.total_memory, dev);
        CUcontext ctx = nullptr;
        if (CUresult r = a.cuDevicePrimaryCtxRetain(&ctx, dev); r != kSuccess) {
            st.why = "cuDevicePrimaryCtxRetain failed: " + error_text(a, r);
            return out;
        }
        out.devices.push_back(info);
        d->contexts.push_back(ctx);
    }
    st.device_count = n;
    st.available = true;
    out.vendor = std::move(d);
    return out;
}

}  // namespace kiln::core::cuda
