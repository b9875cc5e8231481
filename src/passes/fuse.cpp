// Fusion partitioning (see fuse.h). After marking the nodes the graph's outputs need
// (find_needed), four steps (Partitioner::run):
// 1. each row op reserves the elementwise producers of its first operand that have that
//    operand's shape and feed only the row op (decided from the last producer backwards);
// 2. one pass in topological order places every needed node: a row op, with its reserved
//    producers, continues the chain of a row group whose result they read over the same
//    rows (chain_target), else opens a group; matmul, conv and other ops open a group of
//    their own; an elementwise node extends a matmul or conv group's epilogue when it reads
//    the group and no node of it but the last will be needed outside it (extends_matmul),
//    else joins the group of a row op whose
//    result (or fused consumer) it reads, else merges with the elementwise groups of its
//    operands, else opens one.
//    Every join is checked for shape consistency and for cycles in the group graph;
// 3. views: a shape op whose consumers all lie in one elementwise or row_reduction group,
//    that is not a graph output and whose operand that group does not compute, moves into
//    the group (decided from the last node backwards, so chains of views move together);
//    a broadcast_to only when each symbolic dim it introduces is a dim of what it feeds;
// 4. groups are ordered topologically (smallest first node first) and their inputs and
//    outputs are collected.
#include "src/passes/fuse.h"

#include "src/support/check.h"

#include <algorithm>
#include <queue>
#include <sstream>

namespace kiln::passes {
namespace {

using ir::ValueId;
using Index = std::size_t;

Index ix(ValueId v) { return static_cast<Index>(v); }

// Row ops over the same rows chain into one row_reduction group (see fuse.h).
constexpr bool kChainRows = true;

struct Builder {
    GroupKind kind = GroupKind::opaque;
    std::vector<ValueId> nodes;
    std::vector<Dim> dims;    // elementwise: iteration shape; row: the row op's output shape
    ValueId row_op = -1;      // row_reduction: the last row op of the chain
    bool alive = true;
};

class Partitioner {
public:
    explicit Partitioner(const ir::Graph& g) : g_(g), n_(g.nodes.size()) {}

    Partition run() {
        find_needed();
        reserve_row_producers();
        for (Index v = 0; v < n_; ++v)
            if (needed_[v] && !is_source(v) && reserved_by_[v] < 0) place(static_cast<ValueId>(v));
        absorb_views();
        return finish();
    }

private:
    const ir::Graph& g_;
    Index n_;
    std::vector<bool> needed_, is_output_;
    std::vector<std::vector<ValueId>> consumers_;  // needed consumers, unique, ascending
    std::vector<ValueId> reserved_by_;             // the row op that absorbs this producer
    std::vector<int> group_of_;
    std::vector<Builder> groups_;
    mutable std::vector<char> inside_;  // epilogue_completes' scratch: all 0 between calls

    const ir::Node& node(ValueId v) const { return g_.nodes[ix(v)]; }
    bool is_source(Index v) const { return ir::op_kind(g_.nodes[v].op) == ir::OpKind::Source; }

    void find_needed() {
        needed_.assign(n_, false);
        is_output_.assign(n_, false);
        for (auto o : g_.outputs) needed_[ix(o)] = is_output_[ix(o)] = true;
        for (Index i = n_; i-- > 0;)
            if (needed_[i])
                for (auto in : g_.nodes[i].inputs) needed_[ix(in)] = true;
        consumers_.assign(n_, {});
        for (Index i = 0; i < n_; ++i) {
            if (!needed_[i]) continue;
            for (auto in : g_.nodes[i].inputs) {
                auto& c = consumers_[ix(in)];
                if (c.empty() || c.back() != static_cast<ValueId>(i)) c.push_back(static_cast<ValueId>(i));
            }
        }
        reserved_by_.assign(n_, -1);
        group_of_.assign(n_, -1);
    }

    void reserve_row_producers() {
        for (Index r = 0; r < n_; ++r) {
            if (!needed_[r] || !is_row_op(g_.nodes[r])) continue;
            const ValueId x = g_.nodes[r].inputs[0];
            const auto& xdims = node(x).type.dims;
            // Candidates: elementwise ancestors of x through nodes of x's shape.
            std::vector<ValueId> cand, stack{x};
            std::vector<bool> seen(n_, false);
            while (!stack.empty()) {
                ValueId v = stack.back();
                stack.pop_back();
                if (seen[ix(v)]) continue;
                seen[ix(v)] = true;
                const ir::Node& nd = node(v);
                if (!ir::is_elementwise(nd.op) || is_output_[ix(v)] || reserved_by_[ix(v)] >= 0 || nd.type.dims != xdims)
                    continue;
                cand.push_back(v);
                for (auto in : nd.inputs) stack.push_back(in);
            }
            std::sort(cand.rbegin(), cand.rend());  // consumers are decided before producers
            std::vector<bool> in_set(n_, false);
            in_set[r] = true;
            for (ValueId v : cand) {
                const auto& cs = consumers_[ix(v)];
                if (std::all_of(cs.begin(), cs.end(), [&](ValueId c) { return in_set[ix(c)]; })) {
                    in_set[ix(v)] = true;
                    reserved_by_[ix(v)] = static_cast<ValueId>(r);
                }
            }
        }
    }

    int open(GroupKind kind, std::vector<ValueId> nodes, std::vector<Dim> dims) {
        Builder b;
        b.kind = kind;
        b.nodes = std::move(nodes);
        b.dims = std::move(dims);
        groups_.push_back(std::move(b));
        const int gid = static_cast<int>(groups_.size()) - 1;
        for (auto v : groups_.back().nodes) group_of_[ix(v)] = gid;
        return gid;
    }

    static GroupKind kind_of(const ir::Node& nd) {
        if (ir::is_elementwise(nd.op)) return GroupKind::elementwise;
        if (is_row_op(nd)) return GroupKind::row_reduction;
        if (nd.op == ir::Op::matmul) return GroupKind::matmul;
        if (nd.op == ir::Op::conv2d || nd.op == ir::Op::conv2d_nchwc) return GroupKind::conv;
        return GroupKind::opaque;
    }

    // Would merging the nodes `vs` with the groups in `members` close a cycle in the group graph?
    bool creates_cycle(const std::vector<ValueId>& vs, const std::vector<int>& members) const {
        std::vector<bool> in_t(groups_.size(), false), seen(groups_.size(), false);
        for (int m : members) in_t[static_cast<Index>(m)] = true;
        std::vector<int> stack;
        auto push_preds = [&](ValueId u, bool from_t) {
            for (auto in : node(u).inputs) {
                int gi = group_of_[ix(in)];
                if (gi < 0) continue;
                if (from_t && in_t[static_cast<Index>(gi)]) continue;
                stack.push_back(gi);
            }
        };
        for (ValueId v : vs) push_preds(v, true);
        for (int m : members)
            for (auto u : groups_[static_cast<Index>(m)].nodes) push_preds(u, true);
        while (!stack.empty()) {
            int gi = stack.back();
            stack.pop_back();
            if (in_t[static_cast<Index>(gi)]) return true;
            if (seen[static_cast<Index>(gi)]) continue;
            seen[static_cast<Index>(gi)] = true;
            for (auto u : groups_[static_cast<Index>(gi)].nodes) push_preds(u, false);
        }
        return false;
    }

    // The row group that row op `r` (with its reserved producers, `cluster` = those and r)
    // continues as a chain, or -1. The cluster must read a node of a row group whose last row
    // op keeps the shape (softmax, log_softmax, layer_norm, rms_norm: a reduction ends a
    // chain) over the same rows as r: r's operand has that group's shape, and r is a
    // softmax/norm or reduces exactly the last axis. Joining must not close a cycle.
    int chain_target(ValueId r, const std::vector<ValueId>& cluster) const {
        const ir::Node& nd = node(r);
        if (is_row_reduction(nd) && reduced_axes(nd) != 1) return -1;
        const auto& xdims = node(nd.inputs[0]).type.dims;
        for (ValueId u : cluster)
            for (auto in : node(u).inputs) {
                const int gi = group_of_[ix(in)];
                if (gi < 0) continue;
                const Builder& b = groups_[static_cast<Index>(gi)];
                if (!b.alive || b.kind != GroupKind::row_reduction || is_row_reduction(node(b.row_op)) || b.dims != xdims)
                    continue;
                if (!creates_cycle(cluster, {gi})) return gi;
            }
        return -1;
    }

    // Every node of elementwise group `gi` is used only inside it or by `v`.
    bool internal_to(int gi, ValueId v) const {
        for (auto u : groups_[static_cast<Index>(gi)].nodes) {
            if (is_output_[ix(u)]) return false;
            for (auto c : consumers_[ix(u)])
                if (c != v && group_of_[ix(c)] != gi) return false;
        }
        return true;
    }

    // Can elementwise node `v` extend the epilogue of matmul or conv group `gi`? It must keep
    // the matmul's output shape (its other operands broadcast to it without growing it); its
    // operands are nodes of the group (any of them: x * sigmoid(x) reads the result twice) or
    // come from outside. And the group must keep one output, its last node: either v ends
    // the group now (no other node of it is a graph output or read outside it and v), or
    // the nodes that can still join after v complete it (epilogue_completes).
    bool extends_matmul(int gi, ValueId v) const {
        const Builder& b = groups_[static_cast<Index>(gi)];
        if ((b.kind != GroupKind::matmul && b.kind != GroupKind::conv) || node(v).type.dims != b.dims) return false;
        for (auto in : node(v).inputs)
            if (group_of_[ix(in)] != gi && node(in).type.rank() > node(v).type.rank()) return false;
        auto ends_here = [&] {
            for (auto u : b.nodes) {
                if (is_output_[ix(u)]) return false;
                for (auto c : consumers_[ix(u)])
                    if (c != v && group_of_[ix(c)] != gi) return false;
            }
            return true;
        };
        if (!ends_here() && !epilogue_completes(gi, v)) return false;
        return !creates_cycle({v}, {gi});
    }

    // With v joined, could the epilogue of group `gi` grow into a group with one output, its
    // last node? The nodes that can still join: elementwise nodes after v of the group's
    // shape, not reserved by a row op, whose operands are all in the group, v, or these
    // nodes, or are constants and inputs that broadcast to the shape (x * sigmoid(x): when
    // the sigmoid joins, the mul can too). Each of them, placed in turn, finds the same set
    // and joins, so the group becomes exactly this set; it is a valid group when at most one
    // of its nodes is a graph output or read outside it, and that one is the last.
    bool epilogue_completes(int gi, ValueId v) const {
        const Builder& b = groups_[static_cast<Index>(gi)];
        // `inside` is a member scratch of n_ flags, cleared again below (only the members'), so
        // that a call costs the size of the epilogue, not of the graph.
        std::vector<char>& inside = inside_;
        inside.resize(n_, 0);
        std::vector<ValueId> members = b.nodes;
        members.push_back(v);
        for (auto u : members) inside[ix(u)] = 1;
        std::priority_queue<ValueId, std::vector<ValueId>, std::greater<ValueId>> next;  // in topological order
        auto push_consumers = [&](ValueId u) {
            for (auto c : consumers_[ix(u)])
                if (!inside[ix(c)] && c > v) next.push(c);
        };
        for (auto u : members) push_consumers(u);
        while (!next.empty()) {
            const ValueId w = next.top();
            next.pop();
            if (inside[ix(w)]) continue;
            const ir::Node& nd = node(w);
            if (!ir::is_elementwise(nd.op) || reserved_by_[ix(w)] >= 0 || nd.type.dims != b.dims) continue;
            const bool joins = std::all_of(nd.inputs.begin(), nd.inputs.end(), [&](ValueId in) {
                return inside[ix(in)] || (is_source(ix(in)) && node(in).type.rank() <= nd.type.rank());
            });
            if (!joins) continue;
            inside[ix(w)] = 1;
            members.push_back(w);
            push_consumers(w);
        }
        ValueId last = v, exit = -1;
        int exits = 0;
        for (auto u : members) {
            last = std::max(last, u);
            bool read_outside = is_output_[ix(u)];
            for (auto c : consumers_[ix(u)]) read_outside = read_outside || !inside[ix(c)];
            if (read_outside) {
                ++exits;
                exit = u;
            }
        }
        for (auto u : members) inside[ix(u)] = 0;
        return exits == 0 || (exits == 1 && exit == last);
    }

    void join(int gi, ValueId v) {
        Builder& b = groups_[static_cast<Index>(gi)];
        b.nodes.push_back(v);
        group_of_[ix(v)] = gi;
    }

    void place(ValueId v) {
        const ir::Node& nd = node(v);
        const GroupKind kind = kind_of(nd);
        if (kind == GroupKind::row_reduction) {
            std::vector<ValueId> nodes;
            for (Index u = 0; u < ix(v); ++u)
                if (reserved_by_[u] == v) nodes.push_back(static_cast<ValueId>(u));
            nodes.push_back(v);
            int gi = kChainRows ? chain_target(v, nodes) : -1;
            if (gi >= 0) {
                for (ValueId u : nodes) join(gi, u);
                groups_[static_cast<Index>(gi)].dims = nd.type.dims;
            } else {
                gi = open(kind, std::move(nodes), nd.type.dims);
            }
            groups_[static_cast<Index>(gi)].row_op = v;
            return;
        }
        if (kind != GroupKind::elementwise) {
            open(kind, {v}, nd.type.dims);
            return;
        }
        // An elementwise node: a matmul/conv epilogue first, then a row group, then elementwise groups.
        std::vector<int> ops;
        for (auto in : nd.inputs) {
            int gi = group_of_[ix(in)];
            if (gi >= 0 && std::find(ops.begin(), ops.end(), gi) == ops.end()) ops.push_back(gi);
        }
        for (int gi : ops) {
            if (!extends_matmul(gi, v)) continue;
            join(gi, v);
            return;
        }
        for (int gi : ops) {
            const Builder& b = groups_[static_cast<Index>(gi)];
            if (b.kind != GroupKind::row_reduction || b.dims != nd.type.dims || creates_cycle({v}, {gi})) continue;
            join(gi, v);
            return;
        }
        std::vector<int> members;
        for (int gi : ops) {
            const Builder& b = groups_[static_cast<Index>(gi)];
            if (b.kind != GroupKind::elementwise) continue;
            if (b.dims != nd.type.dims && !internal_to(gi, v)) continue;
            std::vector<int> trial = members;
            trial.push_back(gi);
            if (!creates_cycle({v}, trial)) members = std::move(trial);
        }
        if (members.empty()) {
            open(GroupKind::elementwise, {v}, nd.type.dims);
            return;
        }
        const int target = members.front();
        for (std::size_t i = 1; i < members.size(); ++i) {
            Builder& src = groups_[static_cast<Index>(members[i])];
            for (auto u : src.nodes) {
                groups_[static_cast<Index>(target)].nodes.push_back(u);
                group_of_[ix(u)] = target;
            }
            src.nodes.clear();
            src.alive = false;
        }
        join(target, v);
        Builder& t = groups_[static_cast<Index>(target)];
        std::sort(t.nodes.begin(), t.nodes.end());
        t.dims = nd.type.dims;
    }

    // The group that view candidate `v` may join, or -1: every consumer of v is in that one
    // elementwise or row_reduction group, v is not a graph output, and its operand is
    // computed outside the group (a source, another group's value, or a view that is itself
    // in the group and so reads from outside in turn). Moving v there contracts the only
    // edge out of v's own group, so no cycle can appear.
    int view_target(ValueId v) const {
        const auto& cs = consumers_[ix(v)];
        if (is_output_[ix(v)] || cs.empty() || !is_view_op(node(v))) return -1;
        const int gi = group_of_[ix(cs.front())];
        if (gi < 0 || gi == group_of_[ix(v)]) return -1;
        for (ValueId c : cs)
            if (group_of_[ix(c)] != gi) return -1;
        const Builder& b = groups_[static_cast<Index>(gi)];
        if (b.kind != GroupKind::elementwise && b.kind != GroupKind::row_reduction) return -1;
        const ValueId x = node(v).inputs[0];
        if (group_of_[ix(x)] == gi && !is_view_op(node(x))) return -1;
        if (node(v).op == ir::Op::broadcast_to && !broadcast_dims_reach(v, gi)) return -1;
        return gi;
    }

    // A broadcast_to view reads its operand with the target's dims; a symbolic target dim that
    // is not the operand's must be a dim of what the view feeds (through views of the group),
    // so that a buffer of the group holds it; else the lowering cannot know it and the group
    // would stay on the interpreter (e.g. broadcast_to(x[1], [M]) + y[5], or a sum over M).
    bool broadcast_dims_reach(ValueId v, int gi) const {
        const auto& vd = node(v).type.dims;
        const auto& xd = node(node(v).inputs[0]).type.dims;
        const std::size_t lead = vd.size() - xd.size();
        for (std::size_t j = 0; j < vd.size(); ++j) {
            if (vd[j].is_static() || (j >= lead && xd[j - lead] == vd[j])) continue;
            for (ValueId c : consumers_[ix(v)])
                if (!dim_reaches(c, vd[j], gi)) return false;
        }
        return true;
    }

    bool dim_reaches(ValueId c, const Dim& d, int gi) const {
        if (!is_view_op(node(c)) || group_of_[ix(c)] != gi) {
            const auto& cd = node(c).type.dims;
            return std::find(cd.begin(), cd.end(), d) != cd.end();
        }
        for (ValueId u : consumers_[ix(c)])  // a view already in the group: what it feeds
            if (!dim_reaches(u, d, gi)) return false;
        return true;
    }

    void absorb_views() {
        for (Index v = n_; v-- > 0;) {
            if (!needed_[v] || group_of_[v] < 0) continue;
            const int gi = view_target(static_cast<ValueId>(v));
            if (gi < 0) continue;
            Builder& own = groups_[static_cast<Index>(group_of_[v])];
            KILN_CHECK(own.kind == GroupKind::opaque && own.nodes.size() == 1, "fuse: a view candidate in a fused group");
            own.nodes.clear();
            own.alive = false;
            join(gi, static_cast<ValueId>(v));
            Builder& t = groups_[static_cast<Index>(gi)];
            std::sort(t.nodes.begin(), t.nodes.end());
        }
    }

    std::string name_of(const Builder& b, std::size_t index) const {
        std::string name = "g" + std::to_string(index) + ".";
        if (b.kind == GroupKind::row_reduction) {
            std::string rows;
            for (auto v : b.nodes)
                if (is_row_op(node(v))) rows += (rows.empty() ? "" : "_") + std::string(ir::op_name(node(v).op));
            return name + rows;
        }
        std::vector<std::string_view> ops;
        for (auto v : b.nodes) {
            std::string_view op = ir::op_name(node(v).op);
            if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
        }
        for (std::size_t i = 0; i < ops.size() && i < 3; ++i) name += (i ? "_" : "") + std::string(ops[i]);
        if (ops.size() > 3) name += "_etc";
        return name;
    }

    Partition finish() {
        // Topological order of the live groups; ties broken by the first node id.
        const Index ng = groups_.size();
        std::vector<std::vector<int>> succ(ng);
        std::vector<int> indeg(ng, 0);
        for (Index gi = 0; gi < ng; ++gi) {
            Builder& b = groups_[gi];
            if (!b.alive) continue;
            std::sort(b.nodes.begin(), b.nodes.end());
            std::vector<int> preds;
            for (auto v : b.nodes)
                for (auto in : node(v).inputs) {
                    int p = group_of_[ix(in)];
                    if (p >= 0 && p != static_cast<int>(gi) && std::find(preds.begin(), preds.end(), p) == preds.end())
                        preds.push_back(p);
                }
            for (int p : preds) succ[static_cast<Index>(p)].push_back(static_cast<int>(gi));
            indeg[gi] = static_cast<int>(preds.size());
        }
        using Item = std::pair<ValueId, int>;  // (first node, group)
        std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
        for (Index gi = 0; gi < ng; ++gi)
            if (groups_[gi].alive && indeg[gi] == 0) ready.push({groups_[gi].nodes.front(), static_cast<int>(gi)});
        std::vector<int> new_index(ng, -1);
        Partition p;
        while (!ready.empty()) {
            const int gi = ready.top().second;
            ready.pop();
            new_index[static_cast<Index>(gi)] = static_cast<int>(p.groups.size());
            const Builder& b = groups_[static_cast<Index>(gi)];
            Group out;
            out.kind = b.kind;
            out.nodes = b.nodes;
            out.name = name_of(b, p.groups.size());
            p.groups.push_back(std::move(out));
            for (int s : succ[static_cast<Index>(gi)])
                if (--indeg[static_cast<Index>(s)] == 0) ready.push({groups_[static_cast<Index>(s)].nodes.front(), s});
        }
        p.group_of.assign(n_, -1);
        for (Index v = 0; v < n_; ++v)
            if (group_of_[v] >= 0) p.group_of[v] = new_index[static_cast<Index>(group_of_[v])];
        for (std::size_t gi = 0; gi < p.groups.size(); ++gi) {
            KILN_CHECK(!p.groups[gi].nodes.empty(), "fuse: empty group");
            Group& gr = p.groups[gi];
            const int self = static_cast<int>(gi);
            for (auto v : gr.nodes) {
                for (auto in : node(v).inputs)
                    if (p.group_of[ix(in)] != self && std::find(gr.inputs.begin(), gr.inputs.end(), in) == gr.inputs.end())
                        gr.inputs.push_back(in);
                bool out = is_output_[ix(v)];
                for (auto c : consumers_[ix(v)]) out = out || p.group_of[ix(c)] != self;
                if (out) gr.outputs.push_back(v);
            }
        }
        KILN_CHECK(static_cast<Index>(std::count(new_index.begin(), new_index.end(), -1)) ==
                       static_cast<Index>(std::count_if(groups_.begin(), groups_.end(), [](const Builder& b) { return !b.alive; })),
                   "fuse: the group graph has a cycle");
        return p;
    }
};

}  // namespace

std::string_view group_kind_name(GroupKind k) {
    switch (k) {
    case GroupKind::elementwise: return "elementwise";
    case GroupKind::row_reduction: return "row_reduction";
    case GroupKind::matmul: return "matmul";
    case GroupKind::conv: return "conv";
    case GroupKind::opaque: return "opaque";
    }
    return "?";
}

bool is_view_op(const ir::Node& node) {
    switch (node.op) {
    case ir::Op::reshape:
    case ir::Op::permute:
    case ir::Op::squeeze:
    case ir::Op::unsqueeze:
    case ir::Op::broadcast_to: return true;
    case ir::Op::slice: return node.attrs.i("step") > 0;
    case ir::Op::narrow: return true;
    default: return false;
    }
}

bool is_row_reduction(const ir::Node& node) {
    switch (node.op) {
    case ir::Op::sum: case ir::Op::mean: case ir::Op::max: case ir::Op::min: case ir::Op::global_avg_pool2d:
        return is_row_op(node);
    default: return false;
    }
}

std::size_t reduced_axes(const ir::Node& node) {
    return node.op == ir::Op::global_avg_pool2d ? 2 : node.attrs.ints("axes").size();
}

bool is_mean_like(const ir::Node& node) { return node.op == ir::Op::mean || node.op == ir::Op::global_avg_pool2d; }

bool is_row_op(const ir::Node& node) {
    const std::int64_t out_rank = node.type.rank();
    switch (node.op) {
    // The mean over H and W of [N, C, H, W]: rows of H * W, the result kept as [N, C, 1, 1].
    case ir::Op::global_avg_pool2d: return out_rank == 4;
    case ir::Op::layer_norm:
    case ir::Op::rms_norm: return true;
    case ir::Op::softmax:
    case ir::Op::log_softmax: return node.attrs.i("axis") == out_rank - 1;  // the shape is kept
    case ir::Op::sum:
    case ir::Op::mean:
    case ir::Op::max:
    case ir::Op::min: {
        const auto& axes = node.attrs.ints("axes");
        const auto k = static_cast<std::int64_t>(axes.size());
        const std::int64_t in_rank = node.attrs.i("keepdim") != 0 ? out_rank : out_rank + k;
        for (std::int64_t i = 0; i < k; ++i)
            if (axes[static_cast<std::size_t>(i)] != in_rank - k + i) return false;
        return k > 0;
    }
    default: return false;
    }
}

Partition partition(const ir::Graph& g) { return Partitioner(g).run(); }

std::string to_string(const Partition& p, const ir::Graph& g) {
    std::ostringstream os;
    auto list = [&](const std::vector<ValueId>& vs) {
        os << "(";
        for (std::size_t i = 0; i < vs.size(); ++i) os << (i ? ", " : "") << "%" << vs[i];
        os << ")";
    };
    for (const Group& gr : p.groups) {
        os << gr.name << " [" << group_kind_name(gr.kind) << "] nodes ";
        list(gr.nodes);
        os << " inputs ";
        list(gr.inputs);
        os << " outputs ";
        list(gr.outputs);
        os << " " << g.nodes[ix(gr.nodes.back())].type.to_string() << "\n";
    }
    return os.str();
}

}  // namespace kiln::passes
