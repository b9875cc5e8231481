#include "tiers/gpu/gpu_tier.h"

#include "src/core/gpu/runtime.h"
#include "src/support/hash.h"
#include "src/support/log.h"
#include "tiers/gpu/gpu_source.h"
#include "tiers/gpu/hiprtc.h"
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
constexpr int kPrinterRevision = 4;  // 3: convolutions as implicit GEMMs, HIP rows and tiles; 4: one operand builder

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
    GpuKernel(Device device, core::gpu::Module module, core::gpu::Function fn, const GpuSource& src, std::size_t bytes,
              int sm_count)
        : device_(device), module_(module), fn_(fn), work_(src.work), block_(src.block), per_thread_(std::max(src.per_thread, 1)),
          num_buffers_(src.num_buffers), num_params_(src.num_params), bytes_(bytes), sm_count_(sm_count) {}
    ~GpuKernel() override { core::gpu::unload_module(device_, module_); }
    Place place() const override { return Place::device; }
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
        const std::string err = core::gpu::launch(device_, fn_, static_cast<unsigned>(blocks), static_cast<unsigned>(block_),
                                                  a.queue, params);
        if (!err.empty()) throw LaunchError(err);
    }

private:
    Device device_;
    core::gpu::Module module_;
    core::gpu::Function fn_;
    kir::ExprRef work_;
    int block_, per_thread_, num_buffers_, num_params_;
    std::size_t bytes_;
    int sm_count_;
};

// The compiler of one device: NVRTC for sm_<arch> (PTX for compute_<arch> when `ptx`), or
// HIPRTC for a gfx architecture.
struct Target {
    Dialect dialect = Dialect::cuda;
    int sm = 0;        // NVIDIA: 90 for sm_90
    bool ptx = false;  // NVIDIA: PTX instead of a cubin
    std::string gfx;   // AMD: "gfx90a"
};

RtcOutput compile_for(const Target& t, const std::string& code, const std::string& name) {
    if (t.dialect == Dialect::cuda) return nvrtc_compile(code, name + ".cu", t.sm, t.ptx);
    return hiprtc_compile(code, name + ".hip", t.gfx);
}

class GpuTier final : public Tier {
public:
    GpuTier(Device device, Target target) : device_(device), target_(std::move(target)) {
        const auto& info = core::gpu::device_info(device);
        sm_count_ = info.sm_count;
        const bool cuda = target_.dialect == Dialect::cuda;
        // The compiler's build banner: what it makes of an empty program (two builds of a
        // compiler with one version string may differ), hashed.
        const RtcOutput empty = compile_for(target_, "extern \"C\" __global__ void kiln_empty() {}\n", "empty");
        support::Hasher h;
        h.str(empty.binary);
        std::string compiler, arch;
        if (cuda) {
            const auto& nv = nvrtc_status();
            compiler = "nvrtc " + std::to_string(nv.major) + "." + std::to_string(nv.minor);
            arch = (target_.ptx ? "compute_" : "sm_") + std::to_string(target_.sm);
        } else {
            const auto& hr = hiprtc_status();
            compiler = "hiprtc " + std::to_string(hr.major) + "." + std::to_string(hr.minor);
            arch = target_.gfx;
        }
        fingerprint_ = compiler + ";banner " + support::hex64(h.digest()) + ";" + arch + ";driver " +
                       std::to_string(core::gpu::status(device.kind).driver_version) + ";" + info.name + ";printer " +
                       std::to_string(kPrinterRevision);
    }
    int level() const override { return 2; }
    std::string_view name() const override { return target_.dialect == Dialect::cuda ? "cuda" : "hip"; }
    std::string fingerprint() const override { return fingerprint_; }
    Dialect dialect() const { return target_.dialect; }

    CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) override {
        CompileResult r;
        const auto t0 = std::chrono::steady_clock::now();
        auto done = [&](Bailout b, std::string detail) {
            r.bailout = b;
            r.detail = std::move(detail);
            r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            return r;
        };
        GpuSource src = print_source(kernel, spec, target_.dialect);
        if (!src.ok) return done(Bailout::unsupported_op, src.why);
        RtcOutput out = compile_for(target_, src.code, kernel.name);
        if (!out.ok) {
            support::log().debug("{} failed on {}: {}\n{}", target_.dialect == Dialect::cuda ? "NVRTC" : "HIPRTC", kernel.name,
                                 out.error, numbered(src.code));
            return done(Bailout::backend_error, out.error);
        }
        r.object = out.binary;
        r.symbol = src.entry;
        if (!load_module(r, src, out.binary)) return done(r.bailout, r.detail);
        return done(Bailout::none, {});
    }
    bool persists_code() const override { return true; }

    // Loads `binary` (code of this tier) for the kernel `src` describes into r.kernel.
    bool load_module(CompileResult& r, const GpuSource& src, const std::string& binary) const {
        try {
            core::gpu::Function fn = nullptr;
            core::gpu::Module module = core::gpu::load_module(device_, binary, src.entry.c_str(), &fn);
            r.kernel = std::make_shared<GpuKernel>(device_, module, fn, src, binary.size(), sm_count_);
        } catch (const std::exception& e) {
            r.bailout = Bailout::backend_error;
            r.detail = e.what();
            return false;
        }
        return true;
    }

private:
    Device device_;
    Target target_;
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
    GpuSource src = print_source(kernel, spec, gpu->dialect());
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

bool gpu_tier_available(Device d, std::string* why) {
    if (d.kind == Device::Kind::cpu) {
        if (why) *why = "not a GPU device";
        return false;
    }
    if (!core::gpu::available(d, why)) return false;
    if (d.kind == Device::Kind::cuda) {
        const auto& nv = nvrtc_status();
        if (!nv.available && why) *why = nv.why;
        return nv.available;
    }
    const auto& hr = hiprtc_status();
    if (!hr.available) {
        if (why) *why = hr.why;
        return false;
    }
    const std::string& arch = core::gpu::device_info(d).arch;
    if (std::find(hr.archs.begin(), hr.archs.end(), arch) == hr.archs.end()) {
        if (why) *why = "HIPRTC (" + hr.library + ") does not know the device's architecture " + arch;
        return false;
    }
    return true;
}

std::shared_ptr<Tier> make_gpu_tier(Device d, std::string* why) {
    if (!gpu_tier_available(d, why)) return nullptr;
    const auto& info = core::gpu::device_info(d);
    Target t;
    if (d.kind == Device::Kind::hip) {
        t.dialect = Dialect::hip;
        t.gfx = info.arch;
        return std::make_shared<GpuTier>(d, t);
    }
    const int arch = info.cc_major * 10 + info.cc_minor;
    const auto& archs = nvrtc_status().archs;
    // A cubin for the device's own architecture when NVRTC knows it; else PTX for the newest
    // one it knows that the device can run (the driver compiles PTX for its device).
    t.sm = arch;
    if (archs.empty() || std::find(archs.begin(), archs.end(), arch) != archs.end()) return std::make_shared<GpuTier>(d, t);
    int best = 0;
    for (int a : archs)
        if (a <= arch) best = std::max(best, a);
    if (best == 0) {
        if (why) *why = "NVRTC supports no architecture at or below sm_" + std::to_string(arch);
        return nullptr;
    }
    t.sm = best;
    t.ptx = true;
    return std::make_shared<GpuTier>(d, t);
}

}  // namespace kiln::tiers::gpu
