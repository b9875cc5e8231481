#include "jit/exec/run_device.h"

#include "jit/exec/run_plan.h"
#include "src/core/gpu/runtime.h"
#include "src/support/check.h"
#include "src/support/log.h"
#include "tiers/gpu/gpu_tier.h"

#include <algorithm>

namespace kiln::jit {

DeviceState::DeviceState(Device d, std::size_t n) : device(d) {
    for (std::size_t i = 0; i < n; ++i) groups.push_back(std::make_shared<DeviceGroupCode>());
}

namespace {

// One call on a device. Its ValueEnv serves tier 0, on host copies.
class DeviceCall final : public tiers::ValueEnv {
public:
    DeviceCall(const Executable& x, const ShapePlan& sp, DeviceState& st, DeviceObserver* obs,
               std::span<const Tensor> inputs, profiling::ChromeTrace* trace)
        : x_(x), g_(*x.graph), sp_(sp), st_(st), obs_(obs), trace_(trace), dev_(g_.nodes.size()), host_(g_.nodes.size()) {
        for (std::size_t i = 0; i < g_.inputs.size(); ++i) dev_[static_cast<std::size_t>(g_.inputs[i])] = inputs[i];
        stream_ = core::gpu::thread_stream(st.device);
    }

    int run();
    Tensor output(std::size_t id) { return device_value(id); }
    void finish() { core::gpu::synchronize(st_.device, stream_); }

    // tiers::ValueEnv
    const ir::Node& node(ir::ValueId v) override {
        const auto id = static_cast<std::size_t>(v);
        return sp_.nodes[id] ? *sp_.nodes[id] : g_.nodes[id];
    }
    const Shape& shape(ir::ValueId v) override { return sp_.shapes[static_cast<std::size_t>(v)]; }
    const std::vector<Tensor>& operands(ir::ValueId v) override {
        args_.clear();
        for (auto in : g_.nodes[static_cast<std::size_t>(v)].inputs) args_.push_back(host_value(static_cast<std::size_t>(in)));
        return args_;
    }
    void define(ir::ValueId v, Tensor t) override {
        args_.clear();
        host_[static_cast<std::size_t>(v)] = std::move(t);
    }

private:
    // Value `id` on the host (copied back from the device once).
    const Tensor& host_value(std::size_t id) {
        if (host_[id].defined()) return host_[id];
        if (g_.nodes[id].op == ir::Op::constant) return g_.nodes[id].value;
        KILN_CHECK(dev_[id].defined(), "run_groups_on_device: value %" << id << " is read before it is computed");
        host_[id] = dev_[id].to(Device::cpu());
        return host_[id];
    }
    // Value `id` on the device, dense (constants uploaded once per function and device).
    Tensor device_value(std::size_t id) {
        if (dev_[id].defined()) {
            if (!dev_[id].is_contiguous()) dev_[id] = dev_[id].contiguous();
            return dev_[id];
        }
        if (g_.nodes[id].op == ir::Op::constant) {
            std::lock_guard<std::mutex> lock(st_.constants_mu);
            if (st_.constants.size() < g_.nodes.size()) st_.constants.resize(g_.nodes.size());
            if (!st_.constants[id].defined()) st_.constants[id] = g_.nodes[id].value.to(st_.device);
            dev_[id] = st_.constants[id];
            return dev_[id];
        }
        KILN_CHECK(host_[id].defined(), "run_groups_on_device: value %" << id << " is read before it is computed");
        dev_[id] = host_[id].to(st_.device);
        return dev_[id];
    }
    bool run_compiled(GroupRuntime& gr, DeviceGroupCode& code, int* tier);

    const Executable& x_;
    const ir::Graph& g_;
    const ShapePlan& sp_;
    DeviceState& st_;
    DeviceObserver* obs_;
    profiling::ChromeTrace* trace_;
    void* stream_ = nullptr;
    // Per value id: on the device, and on the host (tier 0's copies and results). Every
    // device value lives until the call ends: kernels queued on the stream may still read it.
    std::vector<Tensor> dev_, host_;
    std::vector<Tensor> args_;
    std::vector<std::int64_t> params_;
    std::vector<void*> buffers_;
};

bool DeviceCall::run_compiled(GroupRuntime& gr, DeviceGroupCode& code, int* tier) {
    const passes::Group& g = gr.group;
    const std::shared_ptr<const DeviceCodeSet> set = code.code.load(std::memory_order_acquire);
    if (set->versions.empty()) return false;
    const DeviceVersion* v = nullptr;
    for (const auto& cand : set->versions)
        if (cand.guard.check(params_.data())) {
            v = &cand;
            break;
        }
    auto guard_failed = [&](int to) {
        code.guard_failures.fetch_add(1, std::memory_order_relaxed);
        code.deopts.fetch_add(1, std::memory_order_relaxed);
        if (trace_)
            trace_guard_failure(*trace_, gr, set->versions.front().guard, params_.data(), to,
                                ",\"device\":\"" + st_.device.to_string() + "\"");
    };
    if (!v) {
        guard_failed(0);
        return false;
    }
    if (v->tier < set->versions.front().tier) guard_failed(v->tier);  // a specialisation existed, but its guard failed
    if (v->entry) v->entry->touch();  // recency for the code cache's bound
    buffers_.clear();
    for (auto in : g.inputs) buffers_.push_back(device_value(static_cast<std::size_t>(in)).data());
    // The outputs, written by the kernel (after a refused launch, tier 0 replaces them).
    for (auto out : g.outputs) {
        const auto id = static_cast<std::size_t>(out);
        dev_[id] = Tensor::empty(sp_.shapes[id], g_.nodes[id].type.dtype, st_.device);
        buffers_.push_back(dev_[id].data());
    }
    tiers::LaunchArgs a;
    a.buffers = buffers_.data();
    a.params = params_.data();
    a.extent = kir::eval_index(gr.kernel->extent, a.params);
    a.queue = stream_;
    try {
        v->code->launch(a);
    } catch (const tiers::gpu::LaunchError& e) {
        const auto n = code.launch_failures.fetch_add(1, std::memory_order_relaxed) + 1;
        if (n >= kMaxLaunchFailures) code.blacklisted.store(true, std::memory_order_relaxed);
        support::log().warn("group {} on {}: {}; it runs on the interpreter{}", g.name, st_.device.to_string(), e.what(),
                            n >= kMaxLaunchFailures ? " from now on" : "");
        if (trace_)
            trace_->instant("gpu", "launch_failure", "\"group\":\"" + profiling::ChromeTrace::escape(g.name) + "\",\"device\":\"" +
                                                         st_.device.to_string() + "\"");
        return false;
    }
    st_.launches.fetch_add(1, std::memory_order_relaxed);
    *tier = v->tier;
    return true;
}

int DeviceCall::run() {
    int top = 0;
    for (auto& grp : x_.groups) {
        GroupRuntime& gr = *grp;
        DeviceGroupCode& code = *st_.groups[gr.index];
        code.calls.fetch_add(1, std::memory_order_relaxed);
        int ran = 0;
        bool planned = false;
        const auto t0 = trace_ ? profiling::ChromeTrace::Clock::now() : profiling::ChromeTrace::Clock::time_point{};
        if (gr.kernel && !has_empty_buffer(gr.group, sp_) && !code.blacklisted.load(std::memory_order_relaxed)) {
            group_params(*gr.kernel, gr.group, sp_, params_);
            planned = true;
            if (run_compiled(gr, code, &ran)) code.compiled_calls.fetch_add(1, std::memory_order_relaxed);
        }
        if (ran == 0) {  // tier 0: the interpreter on host copies, its outputs copied to the device
            tiers::LaunchArgs a;
            a.env = this;
            gr.interpreted->launch(a);
            for (auto out : gr.group.outputs) {
                const auto id = static_cast<std::size_t>(out);
                dev_[id] = host_[id].to(st_.device);
            }
        }
        top = std::max(top, ran);
        // A group's time here is the host's: launches are asynchronous (tier 0 includes its copies).
        if (trace_)
            trace_->complete("group", gr.group.name, t0, profiling::ChromeTrace::Clock::now(),
                             "\"tier\":" + std::to_string(ran) + ",\"device\":\"" + st_.device.to_string() + "\"");
        if (planned && obs_) obs_->group_ran(gr.index, params_, ran);
    }
    return top;
}

}  // namespace

std::vector<Tensor> run_groups_on_device(const Executable& exe, const ShapePlan& sp, DeviceState& state,
                                         DeviceObserver* observer, std::span<const Tensor> inputs, int* max_tier,
                                         profiling::ChromeTrace* trace) {
    DeviceCall call(exe, sp, state, observer, inputs, trace);
    *max_tier = call.run();
    std::vector<Tensor> outs;
    for (auto o : exe.graph->outputs) outs.push_back(call.output(static_cast<std::size_t>(o)));
    call.finish();  // outputs ready; a kernel's error surfaces here as kiln::Error
    return outs;
}

}  // namespace kiln::jit
