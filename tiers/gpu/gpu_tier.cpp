#include "tiers/gpu/gpu_tier.h"

#include "src/core/cuda/driver.h"
#include "src/support/hash.h"
#include "src/support/log.h"
#include "tiers/gpu/gpu_source.h"
#include "tiers/gpu/nvrtc.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <sstream>
#include <vector>

namespace kiln::tiers::gpu {
namespace {

std::atomic<int> g_fail_launches{0};

// Part of the fingerprint: bump it when the printer's output changes for the same kernel IR,
// so that cubins persisted by an older printer are not loaded.
constexpr int kPrinterRevision = 2;

// The source with line numbers, for compile-error logs.
std::string numbered(const std::string& code) {
    std::istringstream in(code);
    std::ostringstream out;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) out << n << "\t" << line << "\n";
    return out.str();
}

class GpuKernel final : public CompiledKernel {
public:
    GpuKernel(int ordinal, core::cuda::CUmodule module, core::cuda::CUfunction fn, const GpuSource& src,
              std::size_t bytes, int sm_count)
        : ordinal_(ordinal), module_(module), fn_(fn), work_(src.work), block_(src.block), per_thread_(std::max(src.per_thread, 1)),
          num_buffers_(src.num_buffers), num_params_(src.num_params), bytes_(bytes), sm_count_(sm_count) {}
    ~GpuKernel() override {
        try {
            core::cuda::bind(ordinal_);
            core::cuda::api().cuModuleUnload(module_);
        } catch (...) {  // the driver is going away with the process
        }
    }
    Place place() const override { return Place::cuda; }
    std::size_t code_bytes() const override { return bytes_; }

    void launch(const LaunchArgs& a) const override {
        const std::int64_t work = kir::eval_index(work_, a.params);
        if (work <= 0) return;
        if (g_fail_launches.load(std::memory_order_relaxed) > 0 &&
            g_fail_launches.fetch_sub(1, std::memory_order_relaxed) > 0)
            throw LaunchError("an injected launch failure (test hook)");
        // KilnArgs (gpu_source.h): buffers, params, work; 8 bytes each.
        const std::size_t nb = static_cast<std::size_t>(std::max(num_buffers_, 1));
        const std::size_t np = static_cast<std::size_t>(std::max(num_params_, 1));
        std::uint64_t args[64];
        std::vector<std::uint64_t> big;
        std::uint64_t* p = args;
        if (nb + np + 1 > 64) {
            big.resize(nb + np + 1);
            p = big.data();
        }
        std::memset(p, 0, (nb + np + 1) * 8);
        for (int i = 0; i < num_buffers_; ++i) p[i] = reinterpret_cast<std::uintptr_t>(a.buffers[i]);
        for (int i = 0; i < num_params_; ++i) p[nb + static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(a.params[i]);
        p[nb + np] = static_cast<std::uint64_t>(work);
        // Enough blocks to fill every multiprocessor several times; the grid-stride loop covers the rest.
        const std::int64_t threads = (work + per_thread_ - 1) / per_thread_;
        const std::int64_t blocks = std::clamp<std::int64_t>((threads + block_ - 1) / block_, 1,
                                                             static_cast<std::int64_t>(sm_count_) * 32);
        void* params[] = {p};
        core::cuda::bind(ordinal_);
        const core::cuda::CUresult r = core::cuda::api().cuLaunchKernel(
            fn_, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(block_), 1, 1, 0,
            static_cast<core::cuda::CUstream>(a.queue), params, nullptr);
        if (r != core::cuda::kSuccess) throw LaunchError("cuLaunchKernel failed: " + core::cuda::error_text(r));
    }

private:
    int ordinal_;
    core::cuda::CUmodule module_;
    core::cuda::CUfunction fn_;
    kir::ExprRef work_;
    int block_, per_thread_, num_buffers_, num_params_;
    std::size_t bytes_;
    int sm_count_;
};

class GpuTier final : public Tier {
public:
    GpuTier(int ordinal, int arch, bool ptx) : ordinal_(ordinal), arch_(arch), ptx_(ptx) {
        const auto& info = core::cuda::device_info(ordinal);
        sm_count_ = info.sm_count;
        const auto& nv = nvrtc_status();
        // The compiler's build banner: what it makes of an empty program (two NVRTC builds
        // with one version string may differ), hashed.
        const NvrtcOutput empty = nvrtc_compile("extern \"C\" __global__ void kiln_empty() {}\n", "empty.cu", arch, ptx);
        support::Hasher h;
        h.str(empty.binary);
        fingerprint_ = "nvrtc " + std::to_string(nv.major) + "." + std::to_string(nv.minor) + ";banner " +
                       support::hex64(h.digest()) + ";" + (ptx ? "compute_" : "sm_") + std::to_string(arch) +
                       ";driver " + std::to_string(core::cuda::driver_status().driver_version) + ";" + info.name +
                       ";printer " + std::to_string(kPrinterRevision);
    }
    int level() const override { return 2; }
    std::string_view name() const override { return "cuda"; }
    std::string fingerprint() const override { return fingerprint_; }

    CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) override {
        CompileResult r;
        const auto t0 = std::chrono::steady_clock::now();
        auto done = [&](Bailout b, std::string detail) {
            r.bailout = b;
            r.detail = std::move(detail);
            r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            return r;
        };
        GpuSource src = print_source(kernel, spec, Dialect::cuda);
        if (!src.ok) return done(Bailout::unsupported_op, src.why);
        NvrtcOutput out = nvrtc_compile(src.code, kernel.name + ".cu", arch_, ptx_);
        if (!out.ok) {
            support::log().debug("NVRTC failed on {}: {}\n{}", kernel.name, out.error, numbered(src.code));
            return done(Bailout::backend_error, out.error);
        }
        r.object = out.binary;
        r.symbol = src.entry;
        if (!load_module(r, src, out.binary)) return done(r.bailout, r.detail);
        return done(Bailout::none, {});
    }
    bool persists_code() const override { return true; }

    // Loads `binary` (a cubin or PTX of this tier) for the kernel `src` describes into r.kernel.
    bool load_module(CompileResult& r, const GpuSource& src, const std::string& binary) const {
        try {
            core::cuda::bind(ordinal_);
            const auto& a = core::cuda::api();
            core::cuda::CUmodule module = nullptr;
            core::cuda::check(a.cuModuleLoadData(&module, binary.c_str()), "cuModuleLoadData");
            core::cuda::CUfunction fn = nullptr;
            if (auto e = a.cuModuleGetFunction(&fn, module, src.entry.c_str()); e != core::cuda::kSuccess) {
                a.cuModuleUnload(module);
                core::cuda::check(e, "cuModuleGetFunction");
            }
            r.kernel = std::make_shared<GpuKernel>(ordinal_, module, fn, src, binary.size(), sm_count_);
        } catch (const std::exception& e) {
            r.bailout = Bailout::backend_error;
            r.detail = e.what();
            return false;
        }
        return true;
    }

private:
    int ordinal_, arch_;
    bool ptx_;
    int sm_count_ = 1;
    std::string fingerprint_;
};

}  // namespace

CompileResult load_gpu_code(Tier& tier, const kir::Kernel& kernel, const kir::Specialization& spec,
                            const std::string& object, const std::string& symbol) {
    CompileResult r;
    auto* gpu = dynamic_cast<GpuTier*>(&tier);
    if (!gpu) {
        r.bailout = Bailout::unavailable;
        r.detail = "not a GPU tier";
        return r;
    }
    GpuSource src = print_source(kernel, spec, Dialect::cuda);
    src.entry = symbol;
    if (!src.ok) {
        r.bailout = Bailout::unsupported_op;
        r.detail = src.why;
        return r;
    }
    gpu->load_module(r, src, object);
    return r;
}

void fail_next_launches_for_testing(int n) noexcept { g_fail_launches.store(n, std::memory_order_relaxed); }

bool gpu_tier_available(int ordinal, std::string* why) {
    const auto& st = core::cuda::driver_status();
    if (!st.available) {
        if (why) *why = st.why;
        return false;
    }
    if (ordinal < 0 || ordinal >= st.device_count) {
        if (why) *why = "no device cuda:" + std::to_string(ordinal);
        return false;
    }
    const auto& nv = nvrtc_status();
    if (!nv.available) {
        if (why) *why = nv.why;
        return false;
    }
    return true;
}

std::shared_ptr<Tier> make_gpu_tier(int ordinal, std::string* why) {
    if (!gpu_tier_available(ordinal, why)) return nullptr;
    const auto& info = core::cuda::device_info(ordinal);
    const int arch = info.cc_major * 10 + info.cc_minor;
    const auto& archs = nvrtc_status().archs;
    // A cubin for the device's own architecture when NVRTC knows it; else PTX for the newest
    // one it knows that the device can run (the driver compiles PTX for its device).
    if (archs.empty() || std::find(archs.begin(), archs.end(), arch) != archs.end())
        return std::make_shared<GpuTier>(ordinal, arch, false);
    int best = 0;
    for (int a : archs)
        if (a <= arch) best = std::max(best, a);
    if (best == 0) {
        if (why) *why = "NVRTC supports no architecture at or below sm_" + std::to_string(arch);
        return nullptr;
    }
    return std::make_shared<GpuTier>(ordinal, best, true);
}

}  // namespace kiln::tiers::gpu
