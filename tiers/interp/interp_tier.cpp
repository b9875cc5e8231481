#include "tiers/interp/interp_tier.h"

#include "src/support/check.h"
#include "tiers/interp/interp.h"

#include <memory>
#include <vector>

namespace kiln::interp {
namespace {

// Per-thread operand vectors, one per nesting level (a call can start on a thread that is
// inside another: TBB runs other tasks while a parallel kernel waits), so a steady-state
// interpreted group allocates no vector.
struct ArgsLease {
    ArgsLease() : args(push()) {}
    ~ArgsLease() {
        args.clear();
        --depth();
    }
    ArgsLease(const ArgsLease&) = delete;
    ArgsLease& operator=(const ArgsLease&) = delete;
    std::vector<Tensor>& args;

private:
    static std::size_t& depth() {
        thread_local std::size_t d = 0;
        return d;
    }
    static std::vector<Tensor>& push() {
        thread_local std::vector<std::unique_ptr<std::vector<Tensor>>> stack;
        std::size_t& d = depth();
        if (d == stack.size()) stack.push_back(std::make_unique<std::vector<Tensor>>());
        return *stack[d++];
    }
};

// A group's nodes, run in order on the interpreter.
class InterpretedGroup final : public tiers::CompiledKernel {
public:
    explicit InterpretedGroup(std::vector<ir::ValueId> nodes) : nodes_(std::move(nodes)) {}
    tiers::Place place() const override { return tiers::Place::host; }
    std::size_t code_bytes() const override { return 0; }

    void launch(const tiers::LaunchArgs& a) const override {
        KILN_CHECK(a.env != nullptr, "the interpreter runs on a call's values: LaunchArgs::env is null");
        tiers::ValueEnv& env = *a.env;
        ArgsLease lease;  // the operands of one node, reused from call to call on this thread
        std::vector<Tensor>& args = lease.args;
        for (ir::ValueId id : nodes_) {
            const ir::Node& node = env.node(id);
            args.clear();
            for (ir::ValueId in : node.inputs) args.push_back(env.value(in));
            Tensor out = run_node(node, args, env.shape(id));
            args.clear();  // drop the operands before define() frees what they hold
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
