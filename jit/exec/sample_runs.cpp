#include "jit/exec/sample_runs.h"

#include "jit/exec/run_plan.h"
#include "src/support/checked.h"

#include <algorithm>

namespace kiln::jit {
namespace {

// The images of group `i` at these shapes when it may be in a run, else 0.
std::int64_t run_batch(const Executable& x, const ShapePlan& sp, const std::vector<bool>& compilable, std::size_t i,
                       std::vector<std::int64_t>& params) {
    const GroupRuntime& gr = *x.groups[i];
    if (!compilable[i] || !gr.kernel || !gr.kernel->nchwc) return 0;
    const kir::Kernel& k = *gr.kernel;
    group_params(k, gr.group, sp, params);
    const std::int64_t batch = kir::eval_index(k.nchwc->batch, params.data());
    const std::int64_t extent = kir::eval_index(k.extent, params.data());
    if (batch < 2 || extent < batch || extent % batch != 0) return 0;
    for (auto o : gr.group.outputs) {
        const Shape& s = sp.shapes[static_cast<std::size_t>(o)];
        if (s.empty() || s[0] != batch) return 0;
    }
    // Its largest activation per image (limits::image_run_min_bytes).
    const ir::Graph& g = *x.graph;
    std::int64_t largest = 0;
    auto consider = [&](ir::ValueId v) {
        const ir::Node& n = g.nodes[static_cast<std::size_t>(v)];
        if (n.op == ir::Op::constant) return;
        const std::int64_t bytes = support::checked_bytes(sp.shapes[static_cast<std::size_t>(v)], dtype_size(n.type.dtype), "sample runs");
        largest = std::max(largest, bytes / batch);
    };
    for (auto v : gr.group.inputs) consider(v);
    for (auto v : gr.group.outputs) consider(v);
    return largest >= x.image_run_min_bytes ? batch : 0;
}

}  // namespace

std::vector<SampleRun> find_sample_runs(const Executable& x, const ShapePlan& sp, const std::vector<bool>& compilable) {
    std::vector<SampleRun> runs;
    if (!x.sample_runs) return runs;
    std::vector<std::int64_t> params;
    SampleRun cur;
    auto close = [&] {
        if (cur.batch > 1 && cur.last > cur.first) runs.push_back(cur);
        cur = SampleRun{};
    };
    for (std::size_t i = 0; i < x.groups.size(); ++i) {
        const std::int64_t b = run_batch(x, sp, compilable, i, params);
        if (b != cur.batch || b == 0) close();
        if (b == 0) continue;
        if (cur.batch == 0) cur = SampleRun{static_cast<std::int32_t>(i), static_cast<std::int32_t>(i), b};
        cur.last = static_cast<std::int32_t>(i);
    }
    close();
    return runs;
}

std::vector<std::int64_t> image_major_groups(const Executable& x, const ShapePlan& sp, const std::vector<bool>& compilable) {
    std::vector<std::int64_t> images(x.groups.size(), 0), params;
    for (std::size_t i = 0; i < x.groups.size(); ++i) {
        const GroupRuntime& gr = *x.groups[i];
        if (!compilable[i] || !gr.kernel || gr.group.outputs.size() != 1) continue;
        const kir::Kernel& k = *gr.kernel;
        const bool conv = k.matmul && k.matmul->im2col;
        if (!conv && !k.nchwc) continue;
        group_params(k, gr.group, sp, params);
        const std::int64_t batch = kir::eval_index(conv ? k.matmul->batch : k.nchwc->batch, params.data());
        const std::int64_t extent = kir::eval_index(k.extent, params.data());
        const Shape& s = sp.shapes[static_cast<std::size_t>(gr.group.outputs[0])];
        if (batch < 2 || s.empty() || s[0] != batch || extent < batch || extent % batch != 0) continue;
        images[i] = batch;
    }
    return images;
}

}  // namespace kiln::jit
