#pragma once
// Guards: the facts a compiled version assumed, kept as data and checked before it runs.
// Dtypes and devices are fixed by the graph's types and checked once per call at the
// boundary (jit/exec/bind.h); contiguity is established by the runtime (inputs that are not
// dense are copied before a compiled kernel reads them); what is left per version is the
// params (dims) it bound to constants. A check is a few integer compares.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::jit {

struct Guard {
    std::vector<std::pair<int, std::int64_t>> bound;  // (param id, value)

    bool check(const std::int64_t* params) const {
        for (const auto& [id, v] : bound)
            if (params[id] != v) return false;
        return true;
    }
    // The first failing fact, for logs and traces ("in0.d0 == 32, got 7").
    std::string first_failure(const std::int64_t* params, const std::vector<std::string>& names) const {
        for (const auto& [id, v] : bound)
            if (params[id] != v)
                return names[static_cast<std::size_t>(id)] + " == " + std::to_string(v) + ", got " + std::to_string(params[id]);
        return {};
    }
};

}  // namespace kiln::jit
