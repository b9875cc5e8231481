#include "reference_kir.h"

#include "src/kir/eval.h"

#include <doctest/doctest.h>

namespace ref {

std::vector<kiln::Tensor> evaluate_group(const kiln::kir::Kernel& k, const kiln::passes::Group& group,
                                         const kiln::ir::Graph& g, const kiln::jit::ShapePlan& sp,
                                         const std::vector<kiln::Tensor>& vals) {
    std::vector<kiln::Tensor> bufs;
    for (auto v : group.inputs) bufs.push_back(vals[static_cast<std::size_t>(v)].contiguous());
    for (auto v : group.outputs)
        bufs.push_back(kiln::Tensor::empty(sp.shapes[static_cast<std::size_t>(v)], g.nodes[static_cast<std::size_t>(v)].type.dtype));
    std::vector<void*> ptrs;
    for (kiln::Tensor& t : bufs) ptrs.push_back(t.data());
    std::vector<std::int64_t> params;
    for (const auto& src : k.param_sources)
        params.push_back(bufs[static_cast<std::size_t>(src.buffer)].shape()[static_cast<std::size_t>(src.dim)]);
    const std::int64_t extent = kiln::kir::eval_index(k.extent, params.data());
    REQUIRE(extent >= 0);
    const std::int64_t mid = extent / 3;
    kiln::kir::evaluate(k, ptrs.data(), params.data(), 0, mid);
    kiln::kir::evaluate(k, ptrs.data(), params.data(), mid, extent);
    return std::vector<kiln::Tensor>(bufs.begin() + static_cast<std::ptrdiff_t>(group.inputs.size()), bufs.end());
}

}  // namespace ref
