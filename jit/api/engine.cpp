#include <kiln/engine.h>

#include "jit/exec/bind.h"
#include "jit/exec/run_plan.h"
#include "jit/tiering/tier_registry.h"
#include "jit/api/function_impl.h"
#include "src/core/gpu/runtime.h"
#include "src/core/device.h"
#include "src/support/check.h"
#include "src/support/log.h"

#include <tbb/global_control.h>

#include <filesystem>
#include <string_view>

namespace kiln {
namespace detail {

namespace {
void add_to(std::uint64_t& total, std::uint64_t v) { total += v; }
void add_to(double& total, double v) { total += v; }
void add_to(Tiers& total, const Tiers& v) {
    for (std::size_t t = 0; t < kNumTiers; ++t) total[t] += v[t];
}
}  // namespace

// Adds a function's counters to engine totals (<kiln/stats_fields.def>): the FE ones always,
// the FL ones (what a function holds now) when it is `live`.
void accumulate(EngineStats& e, const FunctionStats& s, bool live) {
    // The counters of both structs (FE and FL); FL ones only while the function lives.
#define KILN_STAT(scope, type, field, doc)        \
    KILN_STAT_IN_ENGINE_##scope(KILN_STAT_IN_FUNCTION_##scope( \
        if (live || std::string_view(#scope) != "FL") add_to(e.field, s.field);))
#include <kiln/stats_fields.def>
}

void RetiredTotals::add(const FunctionStats& s) {
    std::lock_guard<std::mutex> lock(mu);
    accumulate(totals, s, false);
}

FunctionImpl::FunctionImpl(std::shared_ptr<const jit::Executable> x, const jit::Tunables& tn,
                           std::shared_ptr<RetiredTotals> r, jit::EngineResources res)
    : graph(x->graph), exe(x), profile(*x->graph, x->groups.size()), what("call of '" + x->graph->name + "'"),
      tiers(x, profile, tn, res), retired(std::move(r)), tunables(tn), resources(res) {}

FunctionImpl::~FunctionImpl() {
    tiers.cancel_compiles();  // compiles that finish now still reach the retired totals
    for (auto* d : devices_used()) d->cancel_compiles();
    if (retired) retired->add(stats());
}

jit::ShapePlanRef FunctionImpl::shape_plan(const std::vector<Shape>& shapes) {
    if (const jit::ShapePlan* sp = shape_plans.find(shapes)) return jit::ShapePlanRef(sp);
    std::unique_ptr<jit::ShapePlan> sp = jit::make_shape_plan(*exe, shapes, what);
    sp->signature = profile.signature(sp->input_shapes, sp->bindings);  // calls count there, lock-free
    return shape_plans.insert(std::move(sp));
}

jit::ShapePlanRef FunctionImpl::shape_plan(std::span<const Tensor> inputs) {
    if (const jit::ShapePlan* sp = shape_plans.find(inputs)) return jit::ShapePlanRef(sp);
    std::vector<Shape> shapes;
    shapes.reserve(inputs.size());
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    return shape_plan(shapes);
}

std::vector<Tensor> FunctionImpl::call(std::span<const Tensor> inputs) {
    try {
        jit::check_inputs(*exe->graph, inputs, what);
        if (!inputs.empty() && inputs[0].device().kind != Device::Kind::cpu)
            return call_on_device(inputs, *shape_plan(inputs));
        return call_planned(inputs, *shape_plan(inputs));
    } catch (const Error&) {
        failed_calls.fetch_add(1, std::memory_order_relaxed);
        throw;
    }
}

std::vector<Tensor> FunctionImpl::call_planned(std::span<const Tensor> inputs, const jit::ShapePlan& sp,
                                               std::span<const Tensor> caller_outputs) {
    int tier = 0;
    const auto t0 = tiers.trace() ? profiling::ChromeTrace::Clock::now() : profiling::ChromeTrace::Clock::time_point{};
    std::vector<Tensor> out = jit::run_groups({*exe, sp, profile, &tiers, tiers.trace()}, inputs, &tier, caller_outputs);
    trace_call(t0, tier);
    profile.record_call(sp.signature, sp.bindings);
    calls_by_tier[static_cast<std::size_t>(tier)].fetch_add(1, std::memory_order_relaxed);
    return out;
}

void FunctionImpl::call_planned_into(std::span<const Tensor> inputs, const jit::ShapePlan& sp,
                                     std::span<const Tensor> outputs) {
    int tier = 0;
    const auto t0 = tiers.trace() ? profiling::ChromeTrace::Clock::now() : profiling::ChromeTrace::Clock::time_point{};
    jit::run_groups_into({*exe, sp, profile, &tiers, tiers.trace()}, inputs, &tier, outputs);
    trace_call(t0, tier);
    profile.record_call(sp.signature, sp.bindings);
    calls_by_tier[static_cast<std::size_t>(tier)].fetch_add(1, std::memory_order_relaxed);
}

jit::DeviceTierManager& FunctionImpl::on_device(Device d) {
    KILN_USER_CHECK(resources.gpu != nullptr, what << ": the inputs are on " << d.to_string()
                                                   << " but this engine runs on the CPU only (KILN_DEVICE=cpu)");
    core::require_device(d, what.c_str());
    std::lock_guard<std::mutex> lock(device_mu);
    const auto i = static_cast<std::size_t>(d.index);
    if (devices.size() <= i) devices.resize(i + 1);
    if (!devices[i])
        devices[i] = std::make_unique<jit::DeviceTierManager>(exe, d, resources.gpu->get(d), tunables, resources.queue,
                                                              resources.disk, resources.trace, resources.gpu->cache(d));
    return *devices[i];
}

std::vector<jit::DeviceTierManager*> FunctionImpl::devices_used() const {
    std::lock_guard<std::mutex> lock(device_mu);
    std::vector<jit::DeviceTierManager*> out;
    for (const auto& d : devices)
        if (d) out.push_back(d.get());
    return out;
}

std::vector<Tensor> FunctionImpl::call_on_device(std::span<const Tensor> inputs, const jit::ShapePlan& sp) {
    jit::DeviceTierManager& dm = on_device(inputs[0].device());
    int tier = 0;
    const auto t0 = tiers.trace() ? profiling::ChromeTrace::Clock::now() : profiling::ChromeTrace::Clock::time_point{};
    std::vector<Tensor> out = jit::run_groups_on_device(*exe, sp, dm.state(), &dm, inputs, &tier, tiers.trace());
    trace_call(t0, tier);
    profile.record_call(sp.signature, sp.bindings);
    calls_by_tier[static_cast<std::size_t>(tier)].fetch_add(1, std::memory_order_relaxed);
    return out;
}

void FunctionImpl::trace_call(profiling::ChromeTrace::Clock::time_point t0, int tier) {
    if (auto* tr = tiers.trace()) tr->complete("call", exe->graph->name, t0, profiling::ChromeTrace::Clock::now(),
                                               "\"tier\":" + std::to_string(tier));
}

FunctionStats FunctionImpl::stats() const {
    FunctionStats s;
    s.name = exe->graph->name;
    for (std::size_t t = 0; t < kNumTiers; ++t) {
        s.calls_by_tier[t] = calls_by_tier[t].load(std::memory_order_relaxed);
        s.calls += s.calls_by_tier[t];
    }
    s.failed_calls = failed_calls.load(std::memory_order_relaxed);
    for (const auto& gp : exe->groups) {
        const jit::GroupRuntime& gr = *gp;
        GroupStats g;
        g.name = gr.group.name;
        g.kind = std::string(passes::group_kind_name(gr.group.kind));
        auto code = gr.code();
        for (const auto& v : code->versions) g.tier = std::max(g.tier, v.tier);
        g.versions = code->versions.size();
        const profiling::GroupProfile& prof = profile.group(gr.index);
        g.calls = prof.calls.load(std::memory_order_relaxed);
        g.compiled_calls = prof.compiled_calls.load(std::memory_order_relaxed);
        g.total_ms = static_cast<double>(prof.ns.load(std::memory_order_relaxed)) * 1e-6;
        g.timed_calls = prof.timed_calls();
        for (std::size_t t = 0; t < kNumTiers; ++t) {
            g.compiles_by_tier[t] = gr.compiles_by_tier[t].load(std::memory_order_relaxed);
            g.compile_ms_by_tier[t] = static_cast<double>(gr.compile_us_by_tier[t].load(std::memory_order_relaxed)) * 1e-3;
            g.compile_cpu_ms_by_tier[t] =
                static_cast<double>(gr.compile_cpu_us_by_tier[t].load(std::memory_order_relaxed)) * 1e-3;
        }
        if (!gr.kernel) g.note = gr.lower_failure;
        else if (!tiers.compiles()) g.note = "no compiling tier (KILN_JIT=0, or built without asmjit and LLVM)";
        // The policy's view: time per call by tier, its last estimate and decision.
        using profiling::CodeKind;
        g.us_per_call_by_tier[0] = prof.mean_ns(CodeKind::interpreted) * 1e-3;
        g.us_per_call_by_tier[1] = prof.mean_ns(CodeKind::baseline) * 1e-3;
        const double tg = static_cast<double>(prof.timed_calls(CodeKind::generic));
        const double ts = static_cast<double>(prof.timed_calls(CodeKind::specialised));
        if (tg + ts > 0)
            g.us_per_call_by_tier[2] =
                (prof.mean_ns(CodeKind::generic) * tg + prof.mean_ns(CodeKind::specialised) * ts) / (tg + ts) * 1e-3;
        g.signatures = prof.distinct_signatures();
        if (gr.kernel) {
            g.specializations = static_cast<std::uint64_t>(gr.tierup->specializations.load());
            const jit::TierUpDecision d = tiers.decision(gr);
            g.expected_saving_ms = d.est.saving_us * 1e-3;
            g.compile_cost_ms = d.est.cost_us * 1e-3;
            g.tierup = tiers.describe(gr);
        }
        s.guard_failures += prof.guard_failures.load(std::memory_order_relaxed);
        s.deopts += prof.deopts.load(std::memory_order_relaxed);
        s.image_by_image_calls += prof.image_calls.load(std::memory_order_relaxed);
        s.evictions += gr.evictions.load(std::memory_order_relaxed);
        s.specializations =
            std::max<std::uint64_t>(s.specializations, static_cast<std::uint64_t>(gr.tierup->specializations.load()));
        s.groups.push_back(std::move(g));
    }
    const jit::TierCounters& c = tiers.counters();
    s.compiles = c.compiles.load(std::memory_order_relaxed);
    s.compile_failures = c.compile_failures.load(std::memory_order_relaxed);
    s.compile_ms = static_cast<double>(c.compile_us.load(std::memory_order_relaxed)) * 1e-3;
    s.code_cache_hits = c.cache_hits.load(std::memory_order_relaxed);
    s.persistent_cache_hits = c.disk_hits.load(std::memory_order_relaxed);
    for (std::size_t b = 1; b < c.bailouts.size(); ++b)
        if (auto n = c.bailouts[b].load(std::memory_order_relaxed))
            s.bailouts[std::string(tiers::bailout_name(static_cast<tiers::Bailout>(b)))] = n;
    for (const auto* d : devices_used()) {
        const jit::DeviceTierCounters& dc = d->counters();
        s.gpu_launches += d->state().launches.load(std::memory_order_relaxed);
        s.gpu_compiles += dc.compiles.load(std::memory_order_relaxed);
        s.gpu_compile_failures += dc.compile_failures.load(std::memory_order_relaxed);
        s.gpu_compile_ms += static_cast<double>(dc.compile_us.load(std::memory_order_relaxed)) * 1e-3;
        s.persistent_cache_hits += dc.disk_hits.load(std::memory_order_relaxed);
        for (std::size_t g = 0; g < s.groups.size(); ++g) {
            const jit::DeviceGroupCode& gc = *d->state().groups[g];
            s.guard_failures += gc.guard_failures.load(std::memory_order_relaxed);
            s.deopts += gc.deopts.load(std::memory_order_relaxed);
            for (const auto& v : gc.code.load()->versions) s.groups[g].gpu_tier = std::max(s.groups[g].gpu_tier, v.tier);
            s.groups[g].gpu_compiled_calls += gc.compiled_calls.load(std::memory_order_relaxed);
            s.gpu_launch_failures += gc.launch_failures.load(std::memory_order_relaxed);
            s.evictions += gc.evictions.load(std::memory_order_relaxed);
        }
        for (std::size_t b = 1; b < dc.bailouts.size(); ++b)
            if (auto n = dc.bailouts[b].load(std::memory_order_relaxed))
                s.bailouts["gpu_" + std::string(tiers::bailout_name(static_cast<tiers::Bailout>(b)))] += n;
    }
    for (auto& sig : profile.signatures()) s.signatures.push_back({sig.shapes, sig.calls});
    s.dim_histograms = profile.dim_histograms();
    return s;
}

namespace {
// What the engine works with, from the options the caller gave.
jit::EngineSettings engine_settings(const Options& o) {
    jit::EngineSettings s;
    s.jit = o.jit;
    s.tunables.tier1_threshold = o.tier1_threshold;
    s.tunables.tier2_threshold = o.tier2_threshold;
    s.tunables.max_specializations = o.max_specializations;
    s.tunables.by_time = o.tierup == "time";
    s.tunables.async_compile = o.async_compile;
    s.compile_threads = static_cast<std::size_t>(o.compile_threads);
    s.code_cache_bytes = static_cast<std::size_t>(o.code_cache_bytes);
    s.cache_dir = o.cache_dir;
    s.pipeline.nchwc = o.nchwc == "1" ? passes::NchwcMode::all : o.nchwc == "0" ? passes::NchwcMode::off : passes::NchwcMode::where_it_pays;
    s.pipeline.sample_runs = o.sample_runs != "0";
    if (o.sample_runs == "1") s.pipeline.image_run_min_bytes = 0;
    s.pipeline.dump_graph = o.dumps("graph");
    s.pipeline.dump_groups = o.dumps("groups");
    s.pipeline.dump_kir = o.dumps("kir");
    s.pipeline.dump_cuda = o.dumps("cuda");
    s.pipeline.dump_hip = o.dumps("hip");
    s.pipeline.dump_dir = o.dump_dir;
    s.dump_llvm = o.dumps("llvm");
    s.dump_asm = o.dumps("asm");
    s.dump_perf = o.dumps("perf");
    s.dump_dir = o.dump_dir;
    s.trace_file = o.trace_file;
    return s;
}
}  // namespace

EngineImpl::EngineImpl(const Options& o) : options(o) {
    options.validate();
    settings = engine_settings(options);
    support::set_log_level(options.log_level);
    if (options.num_threads > 0)
        threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                        static_cast<std::size_t>(options.num_threads));
    // KILN_DEVICE: which backends this engine may use (cpu: device tensors are rejected;
    // cuda, hip: that backend must be available).
    if (options.device == "cuda" || options.device == "hip") {
        const Device d = options.device == "cuda" ? Device::cuda(0) : Device::hip(0);
        std::string why;
        KILN_USER_CHECK(core::device_available(d, &why),
                        "KILN_DEVICE='" << options.device << "': the " << options.device << " backend is not available: " << why);
    }
    // KILN_NCHWC=auto: the blocked layout's kernels are CPU kernels (the GPU tier would run its
    // convs as plain loop nests), so an engine whose calls may run on a GPU keeps NCHW.
    if (settings.pipeline.nchwc == passes::NchwcMode::where_it_pays && options.device != "cpu" &&
        (core::device_available(Device::cuda(0), nullptr) || core::device_available(Device::hip(0), nullptr)))
        settings.pipeline.nchwc = passes::NchwcMode::off;
    if (options.gpu_memory_bytes > 0) core::gpu::set_memory_limit(static_cast<std::size_t>(options.gpu_memory_bytes));
    if (!options.dump.empty()) {  // dump files of every kind go here; create it once
        std::error_code ec;
        std::filesystem::create_directories(options.dump_dir, ec);
        if (ec) support::log().warn("KILN_DUMP_DIR={}: cannot create it: {}", options.dump_dir, ec.message());
    }
    if (!settings.trace_file.empty()) resources.trace = std::make_shared<profiling::ChromeTrace>(settings.trace_file);
    resources.tier1 = jit::make_tier1(settings);
    resources.tier2 = jit::make_tier2(settings);
    resources.cache = std::make_shared<jit::CodeCache>(settings.code_cache_bytes);
    resources.costs = std::make_shared<jit::CostModel>();
    if (options.device != "cpu") resources.gpu = std::make_shared<jit::GpuTiers>(settings.jit, settings.code_cache_bytes);
    // KILN_CACHE_DIR serves the tiers that can persist code (tier 2 on the CPU); the directory
    // is checked (and created) whenever it is set, so an unsafe one is reported in any build.
    if (!settings.cache_dir.empty()) resources.disk = jit::DiskCache::open(settings.cache_dir);
    if ((resources.tier1 || resources.tier2 || resources.gpu) && settings.tunables.async_compile)
        resources.queue = std::make_shared<jit::CompileQueue>(settings.compile_threads);
    support::log().debug("engine created: {}", options.to_string());
}
EngineImpl::~EngineImpl() = default;

}  // namespace detail

// ---- Function ----
namespace {
detail::FunctionImpl& impl_of(const std::shared_ptr<detail::FunctionImpl>& p) {
    KILN_USER_CHECK(p != nullptr, "Function: not loaded (default-constructed); use Engine::load");
    return *p;
}
}  // namespace

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& inputs) const {
    return impl_of(impl_).call(inputs);
}

void Function::run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
    detail::FunctionImpl& f = impl_of(impl_);
    const auto& outs = f.exe->graph->outputs;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        KILN_USER_CHECK(inputs[i].device().kind == Device::Kind::cpu,
                        f.what << ": Function::run takes host tensors; input " << i << " is on " << inputs[i].device().to_string()
                               << " (call the function with operator() for device tensors)");
    KILN_USER_CHECK(outputs.size() == outs.size(),
                    f.what << ": expected " << outs.size() << " output tensors, got " << outputs.size());
    // Check the caller's buffers before running, so a bad call has no effect.
    jit::ShapePlanRef sp;
    try {
        jit::check_inputs(*f.exe->graph, inputs, f.what);
        sp = f.shape_plan(inputs);
    } catch (const Error&) {
        f.failed_calls.fetch_add(1, std::memory_order_relaxed);
        throw;
    }
    const std::vector<Shape>& expect = sp->output_shapes;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const ir::Node& n = f.exe->graph->nodes[static_cast<std::size_t>(outs[i])];
        const Tensor& o = outputs[i];
        KILN_USER_CHECK(o.defined(), f.what << ": output " << i << " is an undefined Tensor");
        KILN_USER_CHECK(o.dtype() == n.type.dtype, f.what << ": output " << i << " expected dtype " << dtype_name(n.type.dtype)
                                                         << ", got " << dtype_name(o.dtype()));
        KILN_USER_CHECK(o.device().kind == Device::Kind::cpu,
                        f.what << ": output " << i << " expected device cpu, got " << o.device().to_string());
        KILN_USER_CHECK(o.shape() == expect[i], f.what << ": output " << i << " expected shape " << shape_to_string(expect[i])
                                                       << ", got " << shape_to_string(o.shape()));
    }
    // Compiled groups write outputs in place where they can; the others are copied.
    try {
        f.call_planned_into(inputs, *sp, std::span<const Tensor>(outputs.data(), outputs.size()));
    } catch (const Error&) {
        f.failed_calls.fetch_add(1, std::memory_order_relaxed);
        throw;
    }
}

void Function::warmup(const std::vector<std::vector<Shape>>& shape_sets) const {
    detail::FunctionImpl& f = impl_of(impl_);
    // Plan the shapes (checking them), then compile each group for them now.
    for (const auto& shapes : shape_sets) f.tiers.warmup(*f.shape_plan(shapes));
}

std::size_t Function::warmup() const { return impl_of(impl_).tiers.warmup_recorded(); }

void Function::wait_for_compiles() const {
    detail::FunctionImpl& f = impl_of(impl_);
    f.tiers.wait_for_compiles();
    for (auto* d : f.devices_used()) d->wait_for_compiles();
}

FunctionStats Function::stats() const { return impl_of(impl_).stats(); }

std::vector<Shape> Function::output_shapes(const std::vector<Shape>& input_shapes) const {
    return impl_of(impl_).shape_plan(input_shapes)->output_shapes;
}

const Graph& Function::graph() const { return impl_of(impl_).graph; }

// ---- Engine ----
Engine::Engine() : Engine(Options::from_env()) {}
Engine::Engine(const Options& options) : impl_(std::make_shared<detail::EngineImpl>(options)) {}
Engine::~Engine() = default;

Function Engine::load(const Graph& graph) {
    KILN_USER_CHECK(graph.impl() != nullptr, "Engine::load: the graph is empty (default-constructed)");
    // Graph -> groups -> kernel IR -> executable plan (and the KILN_DUMP files).
    std::shared_ptr<const jit::Executable> exe = jit::lower_function(graph.impl(), impl_->settings.pipeline);
    // The function's tier-up policy, on the engine's tiers, queue and caches.
    auto f = std::make_shared<detail::FunctionImpl>(std::move(exe), impl_->settings.tunables, impl_->retired,
                                                    impl_->resources);
    std::lock_guard<std::mutex> lock(impl_->mu);
    // Drop entries of functions that no longer exist, so the list stays bounded.
    std::erase_if(impl_->functions, [](const auto& w) { return w.expired(); });
    impl_->functions.push_back(f);
    return Function(std::move(f));
}

EngineStats Engine::stats() const {
    EngineStats e;
    {
        std::lock_guard<std::mutex> lock(impl_->retired->mu);
        e = impl_->retired->totals;  // functions already gone
    }
    std::vector<std::shared_ptr<detail::FunctionImpl>> live;
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        for (const auto& w : impl_->functions)
            if (auto p = w.lock()) live.push_back(std::move(p));
    }
    for (const auto& f : live) {
        FunctionStats s = f->stats();
        ++e.functions;
        detail::accumulate(e, s, true);
    }
    const jit::CodeCacheStats cs = impl_->resources.cache->stats();
    const jit::CodeCacheStats gs = impl_->resources.gpu ? impl_->resources.gpu->cache_stats() : jit::CodeCacheStats{};
    e.code_cache_bytes = cs.bytes + gs.bytes;  // the CPU tiers' code and every device's
    e.code_cache_limit_bytes = cs.limit_bytes;
    e.code_cache_entries = cs.entries + gs.entries;
    e.code_cache_hits = cs.hits + gs.hits;
    e.code_cache_misses = cs.misses + gs.misses;
    e.code_cache_evictions = cs.evictions + gs.evictions;
    e.gpu_code_cache_bytes = gs.bytes;
    const core::DevicePoolStats ps = core::gpu::all_pool_stats();  // the caching allocators are process-wide
    e.gpu_memory_in_use_bytes = ps.bytes_in_use;
    e.gpu_memory_cached_bytes = ps.bytes_cached;
    e.gpu_memory_peak_bytes = ps.peak_bytes;
    e.gpu_allocations = ps.allocations;
    e.gpu_frees = ps.frees;
    e.gpu_oom_retries = ps.oom_retries;
    if (impl_->resources.trace) e.trace_write_failures = impl_->resources.trace->write_failures();
    if (impl_->resources.disk) {
        const jit::DiskCacheStats ds = impl_->resources.disk->stats();
        e.persistent_cache_hits = ds.hits;
        e.persistent_cache_misses = ds.misses;
        e.persistent_cache_writes = ds.writes;
        e.persistent_cache_rejected = ds.rejected;
    }
    return e;
}

const Options& Engine::options() const { return impl_->options; }

}  // namespace kiln
