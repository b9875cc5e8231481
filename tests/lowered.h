#pragma once
// The kernel of a function of one group as the pipeline lowers it (jit::lower_function), for
// the tests that look at what the lowering declared (a kernel's derived buffers).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/pipeline.h"

#include <memory>

namespace kiln::test {

struct Lowered {
    std::shared_ptr<const jit::Executable> plan;
    const kir::Kernel* kernel = nullptr;
    // The graph constant that kernel buffer `buffer` reads (the source of a kir::Derived).
    const Tensor& constant(const Graph& g, int buffer) const {
        const auto v = plan->partition.groups[0].inputs[static_cast<std::size_t>(buffer)];
        return g.impl()->nodes[static_cast<std::size_t>(v)].value;
    }
};

inline Lowered lower_one_group(const Graph& g) {
    Lowered l{jit::lower_function(g.impl())};
    REQUIRE(l.plan->groups.size() == 1);
    const auto& k = l.plan->groups[0]->kernel;
    REQUIRE(k.has_value());
    l.kernel = &*k;
    return l;
}

}  // namespace kiln::test
