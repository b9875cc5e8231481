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
