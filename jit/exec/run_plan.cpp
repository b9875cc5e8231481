#include "jit/exec/run_plan.h"

#include "jit/exec/hazard.h"
#include "jit/exec/sample_runs.h"
#include "profiling/compile_activity.h"

#include "src/core/storage.h"
#include "src/core/strided.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <new>

namespace kiln::jit {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t ns_between(Clock::time_point t0, Clock::time_point t1) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

// The shape of buffer `b` of a group (inputs, then outputs).
const Shape& buffer_shape(const passes::Group& g, const ShapePlan& sp, std::size_t b) {
    ir::ValueId v = b < g.inputs.size() ? g.inputs[b] : g.outputs[b - g.inputs.size()];
    return sp.shapes[static_cast<std::size_t>(v)];
}

// The kind of code a compiled version is, for the profile.
profiling::CodeKind code_kind(const CompiledVersion& v) {
    return v.tier < 2 ? profiling::CodeKind::baseline : v.generic ? profiling::CodeKind::generic : profiling::CodeKind::specialised;
}

}  // namespace

void trace_guard_failure(profiling::ChromeTrace& tr, const GroupRuntime& gr, const Guard& guard, const std::int64_t* params,
                         int to, std::string_view extra) {
    const std::string fact = guard.first_failure(params, gr.kernel->params);
    const std::string group = "\"group\":\"" + profiling::ChromeTrace::escape(gr.group.name) + "\"" + std::string(extra);
    tr.instant("guard", "guard_failure", group + ",\"fact\":\"" + profiling::ChromeTrace::escape(fact) + "\"");
    tr.instant("guard", "deopt", group + ",\"to_tier\":" + std::to_string(to));
}

bool has_empty_buffer(const passes::Group& g, const ShapePlan& sp) {
    for (std::size_t b = 0; b < g.inputs.size() + g.outputs.size(); ++b)
        for (auto d : buffer_shape(g, sp, b))
            if (d == 0) return true;
    return false;
}

void group_params(const kir::Kernel& k, const passes::Group& g, const ShapePlan& sp, std::vector<std::int64_t>& out) {
    out.resize(k.param_sources.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        const auto& src = k.param_sources[i];
        if (src.from_symbol()) {  // narrow's start, say: its symbols are bound (the shape plan evaluated it)
            const std::optional<std::int64_t> v = sp.bindings.get(src.symbol);
            KILN_CHECK(v.has_value(),
                       "group " << g.name << ": param " << i << " is ?" << src.symbol << ", which the call has not bound");
            out[i] = *v;
            continue;
        }
        out[i] = buffer_shape(g, sp, static_cast<std::size_t>(src.buffer))[static_cast<std::size_t>(src.dim)];
    }
}

namespace {

// The caller's tensor for graph output value `v`, when it can be written directly: dense,
// and sharing no storage with an input (compiled kernels assume buffers do not alias).
const Tensor* caller_buffer(const ir::Graph& graph, std::span<const Tensor> inputs, std::span<const Tensor> caller_outputs,
                            ir::ValueId v) {
    if (caller_outputs.empty()) return nullptr;
    for (std::size_t i = 0; i < graph.outputs.size(); ++i) {
        if (graph.outputs[i] != v) continue;
        const Tensor& c = caller_outputs[i];
        if (!c.is_contiguous()) return nullptr;
        for (const Tensor& in : inputs)
            if (in.shares_storage(c)) return nullptr;
        return &c;
    }
    return nullptr;
}

// The working state of one call. Its vectors keep their capacity for the next call on the
// same thread, so a steady-state call allocates none of them.
struct CallScratch {
    std::vector<const Tensor*> val;  // per value id: its tensor in this call (null: not made, released, or arena only)
    std::vector<Tensor> owned;       // per value id: the tensor this call made for it, if any
    std::vector<std::byte*> addr;    // per value id: where a compiled group wrote it in the arena, if it did
    std::vector<Tensor> args, keep;  // a node's operands for tier 0; dense copies for compiled code
    std::vector<std::int64_t> params;
    std::vector<void*> buffers;
    ArenaPool::Lease arena;
    std::shared_ptr<detail::Storage> arena_storage;  // a non-owning Storage over the arena, once the interpreter reads it
    HazardSlot code_hazard;  // the code set of the group running now (jit/exec/hazard.h)
    // A run of groups image by image (jit/exec/sample_runs.h), per group of the run: its code
    // set (held for the whole run), chosen version and its entry, params, buffers, the buffers
    // of values in the image region (MemoryPlan::image_bytes), and its launch.
    struct ImageBuffer {
        std::size_t buffer;
        std::int64_t offset, bytes;  // in the image region; per image
    };
    struct RunGroup {
        std::shared_ptr<const CodeSet> code;
        const CompiledVersion* version = nullptr;
        tiers::KernelFn entry = nullptr;
        bool preferred = false;
        std::uint64_t weight = 0;
        std::vector<std::int64_t> params;
        std::vector<void*> buffers;
        std::vector<ImageBuffer> image;
        tiers::LaunchArgs launch;
    };
    std::vector<RunGroup> run;
    std::unique_ptr<std::atomic<std::uint64_t>[]> run_ns;  // per group of the run: its time (images may run at once)
    std::size_t run_ns_size = 0;
    // The image region's block of the image this level computes (MemoryPlan::image_bytes), and
    // its launches' buffers: kept, as large as the largest region needed, so that a
    // steady-state run allocates nothing. An image run as a task takes a level of its own.
    std::unique_ptr<std::byte[], void (*)(std::byte*)> image{nullptr, [](std::byte* q) { std::free(q); }};
    std::size_t image_capacity = 0;
    std::vector<void*> image_buffers;
    std::byte* image_block(std::size_t bytes) {
        if (image_capacity < bytes) {
            image.reset();
            image_capacity = 0;
            const std::size_t size = support::checked_round_up(bytes, kArenaAlign, "the image region");
            auto* q = static_cast<std::byte*>(std::aligned_alloc(kArenaAlign, size));
            if (!q) throw std::bad_alloc();
            image.reset(q);
            image_capacity = size;
        }
        return image.get();
    }

    void clear() {
        owned.clear();  // destroys the tensors, keeps the capacity
        args.clear();
        keep.clear();
        for (RunGroup& r : run) r.code.reset();
        arena_storage.reset();
        arena.reset();
    }
};

// One scratch per nesting level per thread: a call, or an image of a run (run_images), can
// start on a thread that is inside another call (TBB runs other tasks while a parallel kernel
// waits).
class ScratchStack {
public:
    CallScratch& push() {
        if (depth_ == stack_.size()) stack_.push_back(std::make_unique<CallScratch>());
        return *stack_[depth_++];
    }
    void pop() { stack_[--depth_]->clear(); }

private:
    std::vector<std::unique_ptr<CallScratch>> stack_;
    std::size_t depth_ = 0;
};

thread_local ScratchStack t_scratch;

struct ScratchLease {
    CallScratch& s = t_scratch.push();
    ScratchLease() = default;
    ScratchLease(const ScratchLease&) = delete;
    ScratchLease& operator=(const ScratchLease&) = delete;
    ~ScratchLease() { t_scratch.pop(); }
};

// One call. It is the ValueEnv through which tier 0's code reads and defines values.
class CallRunner final : public tiers::ValueEnv {
public:
    CallRunner(const CallPlan& call, std::span<const Tensor> inputs, std::span<const Tensor> caller_outputs,
               CallScratch& s)
        : x_(call.exe), g_(*call.exe.graph), sp_(call.shapes), profile_(call.profile), observer_(call.observer),
          trace_(call.trace),
          inputs_(inputs), caller_outputs_(caller_outputs), s_(s), mp_(sp_.memory.get([&] { return make_memory_plan(); })) {}

    int run();
    // The tensor of value `id` (an arena value is wrapped, without copying, for the interpreter).
    const Tensor& tensor(std::size_t id);
    // The tensor of graph output `id`, moved out when this call made it and `last` (no later
    // output lists the same value).
    Tensor take(std::size_t id, bool last);

    // tiers::ValueEnv
    const std::vector<Tensor>& operands(ir::ValueId v) override {
        s_.args.clear();
        for (auto in : g_.nodes[static_cast<std::size_t>(v)].inputs) s_.args.push_back(tensor(static_cast<std::size_t>(in)));
        return s_.args;
    }
    const ir::Node& node(ir::ValueId v) override {
        const auto id = static_cast<std::size_t>(v);
        return sp_.nodes[id] ? *sp_.nodes[id] : g_.nodes[id];
    }
    const Shape& shape(ir::ValueId v) override { return sp_.shapes[static_cast<std::size_t>(v)]; }
    void define(ir::ValueId v, Tensor t) override {
        const auto id = static_cast<std::size_t>(v);
        s_.args.clear();  // the operands go before release_inputs frees what they hold
        s_.owned[id] = std::move(t);
        s_.val[id] = &s_.owned[id];
        release_inputs(id, x_.step_of[id]);
    }

private:
    MemoryPlan make_memory_plan() const;
    std::byte* arena();
    // Returns true when this call made the group's derived buffers (GroupRuntime::add_derived).
    bool run_compiled(const CompiledVersion& v, const GroupRuntime& gr);
    // The group's input `id` for compiled code: its place in the arena, or its tensor's data
    // (a dense copy in `keep` for a strided one).
    void* input_buffer(std::size_t id);
    // The group's output `id` for compiled code: the caller's tensor, its place in the arena,
    // or a tensor of its own (a value of the image region, MemoryPlan::image_bytes, when its
    // run goes group by group).
    void* output_buffer(std::size_t id);
    // The launch of kernel `k` of group `gr` over its whole outer range (buffers unset).
    tiers::LaunchArgs launch_args(const GroupRuntime& gr, const std::int64_t* params) const;
    // Runs sample run `r` image by image; false (nothing done) when some group of it has no
    // host code whose guard passes at this call.
    bool run_images(const SampleRun& r, int& top);
    // Runs group `gr` alone (compiled if it can, else on tier 0) and tells the policy.
    void run_group(GroupRuntime& gr, bool jit, int& top);
    // Counts a guard failure and a deopt of `gr` (to tier `to`), and traces the failing fact.
    void guard_failed(GroupRuntime& gr, const CodeSet& code, int to, const std::int64_t* params) {
        profiling::GroupProfile& prof = profile_.group(gr.index);
        prof.guard_failures.fetch_add(1, std::memory_order_relaxed);
        prof.deopts.fetch_add(1, std::memory_order_relaxed);
        if (trace_) trace_guard_failure(*trace_, gr, code.versions.front().guard, params, to);
    }
    // After a group ran: frees what it read for the last time, records its time, tells the policy.
    void finish_group(GroupRuntime& gr, bool planned, int ran, profiling::CodeKind kind, std::uint64_t weight,
                      std::uint64_t ns, const profiling::CompileActivity::Mark& compiles,
                      const std::vector<std::int64_t>& params);
    void release_inputs(std::size_t id, std::int32_t upto);
    // A joined concat (MemoryPlan::joined_into) whose operands were all computed in their
    // places inside it: its output is that memory, and there is nothing to copy. (An operand
    // of the interpreter's, during warm-up, makes it copy as any concat.)
    bool joined_in_place(const passes::Group& group) {
        if (group.kind != passes::GroupKind::opaque || group.nodes.size() != 1) return false;
        const auto v = static_cast<std::size_t>(group.nodes.front());
        if (g_.nodes[v].op != ir::Op::concat || mp_.offset[v] < 0) return false;
        for (auto in : g_.nodes[v].inputs) {
            const auto id = static_cast<std::size_t>(in);
            if (mp_.joined_into[id] != static_cast<std::int64_t>(v) || s_.val[id] || s_.addr[id] != arena() + mp_.offset[id])
                return false;
        }
        s_.addr[v] = arena() + mp_.offset[v];
        s_.val[v] = nullptr;
        return true;
    }

    const Executable& x_;
    const ir::Graph& g_;
    const ShapePlan& sp_;
    profiling::FunctionProfile& profile_;
    CallObserver* const observer_;
    profiling::ChromeTrace* const trace_;
    std::span<const Tensor> inputs_, caller_outputs_;
    CallScratch& s_;
    const MemoryPlan& mp_;
};

MemoryPlan CallRunner::make_memory_plan() const {
    std::vector<bool> compilable;
    const bool compiles = observer_ && observer_->compiles();
    for (const auto& gr : x_.groups)
        compilable.push_back(compiles && gr->kernel.has_value() && !has_empty_buffer(gr->group, sp_));
    return plan_memory(g_, x_.partition, compilable, sp_.shapes, find_sample_runs(x_, sp_, compilable),
                       image_major_groups(x_, sp_, compilable));
}

std::byte* CallRunner::arena() {
    if (!s_.arena.data()) s_.arena = x_.arenas->acquire(mp_.arena_bytes);
    return s_.arena.data();
}

const Tensor& CallRunner::tensor(std::size_t id) {
    if (const Tensor* t = s_.val[id]) return *t;
    std::byte* p = s_.addr[id];
    KILN_CHECK(p != nullptr, "run_groups: value %" << id << " is read before it is computed, or after its last use");
    if (!s_.arena_storage) {
        auto st = std::make_shared<detail::Storage>();  // borrowed: the pool owns the memory
        st->ptr = s_.arena.data();
        st->bytes = mp_.arena_bytes;
        s_.arena_storage = std::move(st);
    }
    const DType dt = g_.nodes[id].type.dtype;
    const Shape& shape = sp_.shapes[id];
    auto offset = static_cast<std::int64_t>(static_cast<std::size_t>(p - s_.arena.data()) / dtype_size(dt));
    std::vector<std::int64_t> strides = contiguous_strides(shape);
    // An operand of a concat joined across images: one piece per image, join_pitch apart.
    if (mp_.join_pitch[id] > 0) strides[0] = mp_.join_pitch[id] / static_cast<std::int64_t>(dtype_size(dt));
    s_.owned[id] = Tensor(s_.arena_storage, shape, std::move(strides), offset, dt);
    s_.val[id] = &s_.owned[id];
    return s_.owned[id];
}

Tensor CallRunner::take(std::size_t id, bool last) {
    const Tensor& t = tensor(id);
    if (!last || &t != &s_.owned[id]) return t;
    s_.val[id] = nullptr;
    return std::move(s_.owned[id]);
}

void CallRunner::release_inputs(std::size_t id, std::int32_t upto) {
    const auto& last_use = x_.last_use;
    for (auto in : g_.nodes[id].inputs) {
        auto v = static_cast<std::size_t>(in);
        if (last_use[v] > upto || g_.nodes[v].op == ir::Op::input) continue;
        if (s_.val[v] == &s_.owned[v]) s_.owned[v] = Tensor();
        s_.val[v] = nullptr;
        s_.addr[v] = nullptr;
    }
}

void* CallRunner::input_buffer(std::size_t id) {
    if (!s_.val[id] && s_.addr[id]) return s_.addr[id];
    const Tensor& t = tensor(id);
    if (t.is_contiguous()) return t.data();
    s_.keep.push_back(t.contiguous());  // lives until the kernel (or the run) returns
    return s_.keep.back().data();
}

void* CallRunner::output_buffer(std::size_t id) {
    const auto out = static_cast<ir::ValueId>(id);
    if (const Tensor* c = caller_buffer(g_, inputs_, caller_outputs_, out)) {
        s_.val[id] = c;
        return c->data();
    }
    if (mp_.offset[id] >= 0 && mp_.image_bytes[id] == 0) {
        std::byte* p = arena() + mp_.offset[id];
        s_.addr[id] = p;
        s_.val[id] = nullptr;
        return p;
    }
    s_.owned[id] = Tensor::empty(sp_.shapes[id], g_.nodes[id].type.dtype);
    s_.val[id] = &s_.owned[id];
    return s_.owned[id].data();
}

tiers::LaunchArgs CallRunner::launch_args(const GroupRuntime& gr, const std::int64_t* params) const {
    const kir::Kernel& k = *gr.kernel;
    tiers::LaunchArgs a;
    a.params = params;
    a.extent = kir::eval_index(k.extent, params);
    if (a.extent <= 0) return a;
    // The group's largest operand (ShapePlan::group_work); a matmul kernel does K
    // multiply-adds per output element (an estimate: it saturates).
    // (conv2d_nchwc: `depth` per output element, kir::NchwcConv.)
    const bool gemm = k.matmul || k.nchwc;
    const std::int64_t work = gemm ? support::checked_numel(sp_.shapes[static_cast<std::size_t>(gr.group.outputs[0])], "run_groups")
                                   : sp_.group_work[gr.index];
    a.work_per_outer = std::max<std::int64_t>(1, work / a.extent);
    if (gemm && !support::mul_fits(a.work_per_outer,
                                   std::max<std::int64_t>(1, kir::eval_index(k.matmul ? k.matmul->k : k.nchwc->depth, params)),
                                   &a.work_per_outer))
        a.work_per_outer = std::numeric_limits<std::int64_t>::max();
    a.may_fail = k.matmul.has_value();  // only GEMM kernels take scratch memory (tiers/tier.h)
    return a;
}

bool CallRunner::run_compiled(const CompiledVersion& v, const GroupRuntime& gr) {
    const kir::Kernel& k = *gr.kernel;
    const passes::Group& g = gr.group;
    // Every value lives on the host (Executable::place) and every tier's code is host code;
    // the GPU tier adds the copies a group needs where its code's place and its inputs' differ.
    s_.keep.clear();  // dense copies of strided inputs live until the kernel returns
    s_.buffers.clear();
    for (auto in : g.inputs) s_.buffers.push_back(input_buffer(static_cast<std::size_t>(in)));
    for (auto out : g.outputs) s_.buffers.push_back(output_buffer(static_cast<std::size_t>(out)));
    // After the outputs (kir::Derived).
    const bool made = !k.derived.empty() && v.code->reads_derived() && gr.add_derived(s_.buffers);
    tiers::LaunchArgs a = launch_args(gr, s_.params.data());
    a.buffers = s_.buffers.data();
    if (a.extent <= 0) return made;
    // An output that is an operand of a concat joined across images (MemoryPlan::join_pitch;
    // the group's only output): the code runs image by image (image_major_groups), image s
    // given the place of its piece less the s images before it that the code adds itself.
    const auto out = static_cast<std::size_t>(g.outputs.front());
    const std::size_t slot = g.inputs.size();
    const bool pieces = g.outputs.size() == 1 && mp_.join_pitch[out] > 0 && s_.addr[out];
    if (pieces && !tiers::host_entry(*v.code)) {
        // (Code that takes no first outer index: a dense tensor of its own, which the concat copies.)
        s_.owned[out] = Tensor::empty(sp_.shapes[out], g_.nodes[out].type.dtype);
        s_.val[out] = &s_.owned[out];
        s_.addr[out] = nullptr;
        s_.buffers[slot] = s_.owned[out].data();
    } else if (pieces) {
        const auto images = static_cast<std::int64_t>(sp_.shapes[out][0]);
        const auto own = static_cast<std::uintptr_t>(mp_.live[out].bytes), pitch = static_cast<std::uintptr_t>(mp_.join_pitch[out]);
        const auto base = reinterpret_cast<std::uintptr_t>(s_.buffers[slot]);
        const std::int64_t per_image = a.extent / images;
        for (std::int64_t img = 0; img < images; ++img) {
            s_.buffers[slot] = reinterpret_cast<void*>(base + static_cast<std::uintptr_t>(img) * (pitch - own));
            tiers::LaunchArgs ai = a;
            ai.begin = img * per_image;
            ai.extent = per_image;
            v.code->launch(ai);
        }
        s_.buffers[slot] = reinterpret_cast<void*>(base);
        return made;
    }
    v.code->launch(a);
    return made;
}

void CallRunner::finish_group(GroupRuntime& gr, bool planned, int ran, profiling::CodeKind kind, std::uint64_t weight,
                              std::uint64_t ns, const profiling::CompileActivity::Mark& compiles,
                              const std::vector<std::int64_t>& params) {
    const passes::Group& group = gr.group;
    // Free what this group read for the last time (compiled groups read all at once).
    std::int32_t last_step = x_.step_of[static_cast<std::size_t>(group.nodes.back())];
    for (auto nid : group.nodes) release_inputs(static_cast<std::size_t>(nid), last_step);
    profiling::GroupProfile& prof = profile_.group(gr.index);
    if (weight) prof.record_time(kind, ns, weight);
    // The policy hears of every call below tier 2 and of the timed calls of tier-2 code
    // (so steady-state calls of tier-2 code take no lock). A call timed while a compile
    // ran beside it counts in its signature's record untimed (profiling/compile_activity.h).
    if (planned && (ran < 2 || weight)) {
        const std::uint64_t calls = ran < 2 ? 1 : weight;
        const std::uint64_t quiet = weight && profiling::CompileActivity::quiet_since(compiles) ? weight : 0;
        observer_->group_ran(gr, params, kind, prof.record_signature(params, kind, ns, quiet, calls));
    }
}

void CallRunner::run_group(GroupRuntime& gr, bool jit, int& top) {
    const passes::Group& group = gr.group;
    profiling::ChromeTrace* const tr = trace_;
    // Timing is sampled (run_plan.h); a trace needs every call's times.
    profiling::GroupProfile& prof = profile_.group(gr.index);
    const std::uint64_t index = prof.calls.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t weight = tr ? 1 : timing_weight(index);
    const profiling::CompileActivity::Mark compiles = weight ? profiling::CompileActivity::mark()
                                                             : profiling::CompileActivity::Mark{};
    const Clock::time_point t0 = weight ? Clock::now() : Clock::time_point{};
    bool done = false, planned = false;
    int ran = 0;  // the tier the group ran on
    profiling::CodeKind kind = profiling::CodeKind::interpreted;
    // Zero-size buffers run on the interpreter: it raises the errors the op owes
    // (e.g. max over an empty row) and costs nothing.
    if (jit && gr.kernel && !has_empty_buffer(group, sp_)) {
        group_params(*gr.kernel, group, sp_, s_.params);
        planned = true;
        struct Unprotect {
            HazardSlot& h;
            ~Unprotect() { h.clear(); }
        } unprotect{s_.code_hazard};
        const CodeSet* code = s_.code_hazard.protect(gr.code_pointer());
        if (!code->versions.empty()) {
            bool preferred = false;  // the tier-1 version, chosen at this signature
            if (const CompiledVersion* v = select_version(*code, s_.params.data(), &preferred)) {
                // The call that packs the group's constants (kir::Derived) is no measure of
                // its code: untimed, so that the policy never compares tiers by it (a
                // 784 x 1024 linear's packing made its first tier-2 call several times
                // slower than tier 1's, which then kept the signature).
                if (run_compiled(*v, gr) && !tr) weight = 0;
                ran = v->tier;
                kind = code_kind(*v);
                top = std::max(top, v->tier);
                prof.compiled_calls.fetch_add(1, std::memory_order_relaxed);
                done = true;
                // Tier-2 code existed but its guards failed: the group deoptimised to tier 1.
                if (v->tier < code->versions.front().tier && !preferred) guard_failed(gr, *code, v->tier, s_.params.data());
            } else {
                guard_failed(gr, *code, 0, s_.params.data());
            }
        }
    }
    if (!done && joined_in_place(group)) done = true;
    if (!done) {  // tier 0
        tiers::LaunchArgs a;
        a.env = this;
        gr.interpreted->launch(a);
    }
    std::uint64_t ns = 0;
    if (weight) {
        const Clock::time_point t1 = Clock::now();
        ns = ns_between(t0, t1);
        if (tr) tr->complete("group", group.name, t0, t1, "\"tier\":" + std::to_string(ran));
    }
    finish_group(gr, planned, ran, kind, weight, ns, compiles, s_.params);
}

bool CallRunner::run_images(const SampleRun& r, int& top) {
    const auto first = static_cast<std::size_t>(r.first);
    const std::size_t count = static_cast<std::size_t>(r.last - r.first) + 1;
    if (s_.run.size() < count) s_.run.resize(count);
    if (s_.run_ns_size < count) {
        s_.run_ns = std::make_unique<std::atomic<std::uint64_t>[]>(count);
        s_.run_ns_size = count;
    }
    // Every group needs host code whose guard passes now; the code sets stay held until the
    // run ends (a publish may retire them meanwhile).
    for (std::size_t k = 0; k < count; ++k) {
        GroupRuntime& gr = *x_.groups[first + k];
        CallScratch::RunGroup& rg = s_.run[k];
        group_params(*gr.kernel, gr.group, sp_, rg.params);
        rg.code = gr.code();
        rg.version = rg.code->versions.empty() ? nullptr : select_version(*rg.code, rg.params.data(), &rg.preferred);
        rg.entry = rg.version ? tiers::host_entry(*rg.version->code) : nullptr;
        if (!rg.entry) {
            for (std::size_t j = 0; j <= k; ++j) s_.run[j].code.reset();
            return false;
        }
    }
    profiling::ChromeTrace* const tr = trace_;
    const profiling::CompileActivity::Mark compiles = profiling::CompileActivity::mark();
    s_.keep.clear();  // dense copies of strided inputs, for the whole run
    for (std::size_t k = 0; k < count; ++k) {
        GroupRuntime& gr = *x_.groups[first + k];
        CallScratch::RunGroup& rg = s_.run[k];
        const std::uint64_t index = profile_.group(gr.index).calls.fetch_add(1, std::memory_order_relaxed);
        rg.weight = tr ? 1 : timing_weight(index);
        s_.run_ns[k].store(0, std::memory_order_relaxed);
        rg.buffers.clear();
        rg.image.clear();
        auto image_value = [&](std::size_t id) {
            if (mp_.image_bytes[id] == 0) return false;
            rg.image.push_back({rg.buffers.size(), mp_.offset[id], mp_.image_bytes[id]});
            rg.buffers.push_back(nullptr);  // per image
            return true;
        };
        for (auto in : gr.group.inputs) {
            const auto id = static_cast<std::size_t>(in);
            if (!image_value(id)) rg.buffers.push_back(input_buffer(id));
        }
        for (auto out : gr.group.outputs) {
            const auto id = static_cast<std::size_t>(out);
            if (!image_value(id)) rg.buffers.push_back(output_buffer(id));
        }
        const kir::Kernel& kern = *gr.kernel;
        // As in run_group: the call that packs the constants is no measure of the code.
        if (!kern.derived.empty() && rg.version->code->reads_derived() && gr.add_derived(rg.buffers) && !tr) rg.weight = 0;
        rg.launch = launch_args(gr, rg.params.data());
        rg.launch.extent /= r.batch;  // find_sample_runs: a multiple of the batch
    }
    // Image s: every group's outer indices of image s, on one thread (`alone`: a task of its
    // own among the images) or split across the threads. A value in the image region is at
    // `block` + its offset there; its code gets that less s images, since it addresses image s
    // at s * image_bytes.
    auto image = [&](std::int64_t s, std::byte* block, std::vector<void*>& bufs, bool alone) {
        for (std::size_t k = 0; k < count; ++k) {
            const CallScratch::RunGroup& rg = s_.run[k];
            bufs.assign(rg.buffers.begin(), rg.buffers.end());
            for (const CallScratch::ImageBuffer& b : rg.image)
                bufs[b.buffer] = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(block) +
                                                         static_cast<std::uintptr_t>(b.offset) -
                                                         static_cast<std::uintptr_t>(s * b.bytes));
            tiers::LaunchArgs a = rg.launch;
            a.buffers = bufs.data();
            a.begin = s * a.extent;
            const Clock::time_point t0 = rg.weight ? Clock::now() : Clock::time_point{};
            if (alone) {
                rg.entry(a.buffers, a.params, a.begin, a.begin + a.extent);
                if (a.may_fail && tiers::take_kernel_failure()) throw std::bad_alloc();
            } else {
                rg.version->code->launch(a);
            }
            if (rg.weight) {
                const Clock::time_point t1 = Clock::now();
                s_.run_ns[k].fetch_add(ns_between(t0, t1), std::memory_order_relaxed);
                if (tr)
                    tr->complete("group", x_.groups[first + k]->group.name, t0, t1,
                                 "\"tier\":" + std::to_string(rg.version->tier) + ",\"image\":" + std::to_string(s));
            }
        }
    };
    // With more images than threads (a multiple of them, or at least four each), each image is
    // a task of its own; else the images go one after another, each group split as usual.
    const std::int64_t width = core::parallel_width();
    const bool tasks = width > 1 && (r.batch % width == 0 || r.batch >= 4 * width);
    if (tasks) {
        core::parallel_tasks(r.batch, [&](std::int64_t s) {
            ScratchLease level;
            image(s, level.s.image_block(mp_.image_region_bytes), level.s.image_buffers, true);
        });
    } else {
        std::byte* block = s_.image_block(mp_.image_region_bytes);
        for (std::int64_t s = 0; s < r.batch; ++s) image(s, block, s_.image_buffers, false);
    }
    for (std::size_t k = 0; k < count; ++k) {
        GroupRuntime& gr = *x_.groups[first + k];
        CallScratch::RunGroup& rg = s_.run[k];
        const CompiledVersion& v = *rg.version;
        profiling::GroupProfile& prof = profile_.group(gr.index);
        prof.compiled_calls.fetch_add(1, std::memory_order_relaxed);
        prof.image_calls.fetch_add(1, std::memory_order_relaxed);
        top = std::max(top, v.tier);
        if (v.tier < rg.code->versions.front().tier && !rg.preferred) guard_failed(gr, *rg.code, v.tier, rg.params.data());
        const profiling::CodeKind kind = code_kind(v);
        // Images as tasks: the time summed over the threads, shared out among them.
        const std::uint64_t ns = s_.run_ns[k].load(std::memory_order_relaxed) / static_cast<std::uint64_t>(tasks ? width : 1);
        finish_group(gr, true, v.tier, kind, rg.weight, ns, compiles, rg.params);
        rg.code.reset();
    }
    return true;
}

int CallRunner::run() {
    const std::size_t n = g_.nodes.size();
    s_.val.assign(n, nullptr);
    s_.addr.assign(n, nullptr);
    s_.owned.resize(n);
    for (std::size_t i = 0; i < g_.inputs.size(); ++i) s_.val[static_cast<std::size_t>(g_.inputs[i])] = &inputs_[i];
    for (std::size_t id : x_.order)
        if (g_.nodes[id].op == ir::Op::constant) s_.val[id] = &g_.nodes[id].value;
    int top = 0;
    const bool jit = observer_ && observer_->compiles();  // without a compiling tier, groups go straight to the interpreter
    std::size_t next_run = 0;  // of mp_.runs, in order
    for (std::size_t i = 0; i < x_.groups.size(); ++i) {
        if (jit && next_run < mp_.runs.size() && static_cast<std::size_t>(mp_.runs[next_run].first) == i) {
            const SampleRun& r = mp_.runs[next_run++];
            if (run_images(r, top)) {
                i = static_cast<std::size_t>(r.last);
                continue;
            }
        }
        run_group(*x_.groups[i], jit, top);
    }
    return top;
}

}  // namespace

std::vector<Tensor> run_groups(const CallPlan& call, std::span<const Tensor> inputs, int* max_tier,
                               std::span<const Tensor> caller_outputs) {
    ScratchLease lease;
    CallRunner runner(call, inputs, caller_outputs, lease.s);
    *max_tier = runner.run();
    const ir::Graph& g = *call.exe.graph;
    std::vector<Tensor> outs;
    outs.reserve(g.outputs.size());
    for (std::size_t i = 0; i < g.outputs.size(); ++i) {
        auto o = g.outputs[i];
        bool last = std::find(g.outputs.begin() + static_cast<std::ptrdiff_t>(i) + 1, g.outputs.end(), o) == g.outputs.end();
        outs.push_back(runner.take(static_cast<std::size_t>(o), last));
    }
    // Graph outputs never live in the arena, nor alias it (plan_memory); should one ever
    // do, it is copied out, since the arena goes back to the pool now.
    if (const auto& arena = lease.s.arena_storage)
        for (Tensor& t : outs)
            if (t.storage() == arena) t = t.clone();
    return outs;
}

void run_groups_into(const CallPlan& call, std::span<const Tensor> inputs, int* max_tier,
                     std::span<const Tensor> outputs) {
    ScratchLease lease;
    CallRunner runner(call, inputs, outputs, lease.s);
    *max_tier = runner.run();
    const ir::Graph& g = *call.exe.graph;
    // Compiled groups wrote some outputs in place; copy the others.
    for (std::size_t i = 0; i < g.outputs.size(); ++i) {
        const Tensor& t = runner.tensor(static_cast<std::size_t>(g.outputs[i]));
        if (&t != &outputs[i]) outputs[i].copy_from(t);
    }
}

}  // namespace kiln::jit
