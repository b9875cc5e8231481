#include "tiers/interp/interp_tier.h"

#include "src/support/check.h"
#include "tiers/interp/interp.h"

#include <memory>
#include <vector>

namespace kiln::interp {
namespace {

// A group's nodes, run in order on the interpreter.
class InterpretedGroup final : public tiers::CompiledKernel {
public:
    explicit InterpretedGroup(std::vector<ir::ValueId> nodes) : nodes_(std::move(nodes)) {}
    tiers::Place place() const override { return tiers::Place::host; }
    std::size_t code_bytes() const override { return 0; }

    void launch(const tiers::LaunchArgs& a) const override {
        KILN_CHECK(a.env != nullptr, "the interpreter runs on a call's values: LaunchArgs::env is null");
        tiers::ValueEnv& env = *a.env;
        for (ir::ValueId id : nodes_) {
            Tensor out = run_node(env.node(id), env.operands(id), env.shape(id));
            env.define(id, std::move(out));
        }
    }

private:
    std::vector<ir::ValueId> nodes_;
};

class InterpTier final : public tiers::Tier {
public:
    int level() const override { return 0; }
    std::string_view name() const override { return "interp"; }
    std::string fingerprint() const override { return "interp"; }
    tiers::CompileResult compile(const kir::Kernel&, const kir::Specialization&) override {
        tiers::CompileResult r;
        r.bailout = tiers::Bailout::unsupported_op;
        r.detail = "the interpreter runs a group's graph nodes, not kernel IR (compile_group)";
        return r;
    }
    tiers::CompileResult compile_group(const tiers::GroupSource& source, const kir::Specialization&) override {
        tiers::CompileResult r;
        r.kernel = std::make_shared<InterpretedGroup>(source.group.nodes);
        return r;
    }
};

}  // namespace

std::shared_ptr<tiers::Tier> interp_tier() {
    static const std::shared_ptr<tiers::Tier> tier = std::make_shared<InterpTier>();
    return tier;
}

}  // namespace kiln::interp
