// A bounded mutation fuzzer of the ONNX importer. Seeds: the MLP and CNN of
// model_builder.h, when given some of ONNX's node-test models and tensors (--corpus), and
// the exported models with dynamic axes below --models (tests/onnx/dynamic/models: BERT,
// GPT-2, ... with shape subgraphs). Each iteration either mutates a seed's bytes (bit flips,
// byte sets, inserts, deletes, truncation, splices) or, for a model of --models, makes
// structured mutations aimed at its shape arithmetic (the values of Constants and small
// int64 initializers, integer attributes such as Gather's and Concat's axis, Cast's `to`,
// swapped or rewired inputs and changed op types of the nodes that consume shape values,
// dropped inputs and attributes, the inputs' symbolic dims, byte mutations of one node), and
// feeds the result to inspect_onnx_from_memory, load_onnx_from_memory (running loaded graphs
// once on the interpreter: symbolic dims named like a batch are 1, others 2) and
// onnx_tensor_from_memory. Every outcome must be a result or a kiln::Error: any other
// exception fails the run (its input is written to onnx_fuzz_failure_<iteration>.onnx), an
// iteration that runs longer than --hang-seconds ends it with a failure, and a crash (which
// prints its iteration first) fails the test that runs it. Each iteration has its own random
// stream, so `--only N` replays iteration N of a run with the same --seed and seeds.
//
//   onnx_fuzz [--iterations N] [--seed S] [--seconds T] [--corpus DIR] [--models DIR]
//             [--only N] [--hang-seconds T] [--verbose 1]
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "tests/onnx/model_builder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include <signal.h>
#include <unistd.h>

namespace fs = std::filesystem;
namespace pb = ::onnx;

namespace {

using Rng = std::mt19937_64;

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::size_t pick(Rng& rng, std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); }

std::string mutate(std::string s, const std::vector<std::string>& seeds, Rng& rng) {
    int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
        switch (rng() % 8) {
        case 0:  // flip a bit
            if (!s.empty()) s[pick(rng, s.size())] ^= static_cast<char>(1u << (rng() % 8));
            break;
        case 1: {  // an interesting byte (varint boundaries, wire types)
            static const unsigned char kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12, 0x3a, 0x42};
            if (!s.empty()) s[pick(rng, s.size())] = static_cast<char>(kBytes[rng() % sizeof(kBytes)]);
            break;
        }
        case 2:  // a random byte
            if (!s.empty()) s[pick(rng, s.size())] = static_cast<char>(rng());
            break;
        case 3: {  // insert random bytes
            std::string ins(1 + pick(rng, 8), '\0');
            for (auto& c : ins) c = static_cast<char>(rng());
            s.insert(pick(rng, s.size() + 1), ins);
            break;
        }
        case 4:  // delete a range
            if (!s.empty()) {
                std::size_t at = pick(rng, s.size());
                s.erase(at, 1 + pick(rng, std::min<std::size_t>(16, s.size() - at)));
            }
            break;
        case 5:  // truncate
            s.resize(pick(rng, s.size() + 1));
            break;
        case 6: {  // splice in a chunk of another seed
            if (seeds.empty()) break;
            const std::string& o = seeds[pick(rng, seeds.size())];
            if (o.empty()) break;
            std::size_t from = pick(rng, o.size()), len = 1 + pick(rng, std::min<std::size_t>(64, o.size() - from));
            s.insert(pick(rng, s.size() + 1), o.substr(from, len));
            break;
        }
        default: {  // duplicate a chunk of itself
            if (s.empty()) break;
            std::size_t from = pick(rng, s.size()), len = 1 + pick(rng, std::min<std::size_t>(32, s.size() - from));
            s.insert(pick(rng, s.size() + 1), s.substr(from, len));
            break;
        }
        }
    }
    return s;
}

// ---- structured mutations of a ModelProto, aimed at its shape arithmetic ----

// A dynamic model, parsed once, with what the mutations aim at.
struct DynamicSeed {
    std::string name;
    pb::ModelProto model;
    std::vector<int> consumers;     // nodes with an input computed from Shape/Size
    std::vector<int> constants;     // Constant nodes with a small integer tensor
    std::vector<std::string> small_inits;  // int64 initializers of at most 64 elements
};

bool small_int_tensor(const pb::TensorProto& t) {
    std::int64_t n = 1;
    for (auto d : t.dims()) n *= std::max<std::int64_t>(d, 0);
    return (t.data_type() == pb::TensorProto::INT64 || t.data_type() == pb::TensorProto::INT32) && n <= 64 &&
           t.data_location() != pb::TensorProto::EXTERNAL;
}

DynamicSeed analyse(std::string name, pb::ModelProto model) {
    DynamicSeed s{std::move(name), std::move(model), {}, {}, {}};
    const pb::GraphProto& g = s.model.graph();
    // Values computed from sizes: outputs of Shape and Size, and of the ops the importer folds
    // on shape values, computed from such values and constants.
    static const std::set<std::string> kArith{"Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast",
                                              "Neg", "Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Where",
                                              "ReduceProd", "ReduceSum", "Identity", "ConstantOfShape", "Range"};
    std::set<std::string> shape_values, constant_values;
    for (const auto& i : g.initializer()) constant_values.insert(i.name());
    for (int k = 0; k < g.node_size(); ++k) {
        const pb::NodeProto& n = g.node(k);
        bool any_shape = false, rest_constant = true;
        for (const auto& in : n.input()) {
            if (in.empty()) continue;
            if (shape_values.count(in)) any_shape = true;
            else if (!constant_values.count(in)) rest_constant = false;
        }
        if (any_shape) s.consumers.push_back(k);
        if (n.op_type() == "Shape" || n.op_type() == "Size" || (any_shape && rest_constant && kArith.count(n.op_type())))
            for (const auto& o : n.output()) shape_values.insert(o);
        if (n.op_type() == "Constant") {
            for (const auto& o : n.output()) constant_values.insert(o);
            if (n.attribute_size() == 1 && n.attribute(0).has_t() && small_int_tensor(n.attribute(0).t())) s.constants.push_back(k);
        }
    }
    for (const auto& i : g.initializer())
        if (small_int_tensor(i)) s.small_inits.push_back(i.name());
    return s;
}

std::int64_t interesting(Rng& rng, std::int64_t old) {
    static const std::int64_t kValues[] = {0, 1, -1, 2, -2, 3, 4, 8, 16, 64, -8,
                                           std::numeric_limits<std::int64_t>::max(),
                                           std::numeric_limits<std::int64_t>::min(),
                                           std::numeric_limits<std::int64_t>::max() - 1,
                                           std::int64_t{1} << 31, std::int64_t{1} << 40, -(std::int64_t{1} << 40)};
    switch (rng() % 4) {
    case 0: return kValues[pick(rng, sizeof(kValues) / sizeof(kValues[0]))];
    case 1: {  // old +- 1..3, wrapping (unsigned: no overflow here)
        const std::uint64_t delta = 1 + rng() % 3;
        const auto u = static_cast<std::uint64_t>(old);
        return static_cast<std::int64_t>(rng() % 2 ? u + delta : u - delta);
    }
    case 2: return static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(old));
    default: return static_cast<std::int64_t>(rng() % 21) - 10;
    }
}

// The integer values of a tensor (kiln's decoder; empty when it rejects the tensor).
std::vector<std::int64_t> int_values(const pb::TensorProto& t) {
    try {
        return kiln::onnx_tensor_from_memory(t.SerializeAsString()).to_vector<std::int64_t>();
    } catch (const kiln::Error&) {
        return {};
    }
}

// Rewrites a tensor's values (as raw_data of `type`) and dims.
void set_values(pb::TensorProto* t, const std::vector<std::int64_t>& v, const std::vector<std::int64_t>& dims, int type) {
    t->clear_int64_data();
    t->clear_int32_data();
    t->clear_float_data();
    t->clear_double_data();
    t->clear_dims();
    for (auto d : dims) t->add_dims(d);
    t->set_data_type(type);
    std::string raw;
    auto put = [&raw](const auto& x) { raw.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    for (std::int64_t x : v) {
        switch (type) {
        case pb::TensorProto::INT32: put(static_cast<std::int32_t>(x)); break;
        case pb::TensorProto::FLOAT: put(static_cast<float>(x)); break;
        case pb::TensorProto::DOUBLE: put(static_cast<double>(x)); break;
        case pb::TensorProto::BOOL: put(static_cast<std::uint8_t>(x != 0)); break;
        default: put(x); break;
        }
    }
    t->set_raw_data(raw);
}

void mutate_tensor(pb::TensorProto* t, Rng& rng, std::vector<std::string>& log) {
    std::vector<std::int64_t> v = int_values(*t);
    std::vector<std::int64_t> dims(t->dims().begin(), t->dims().end());
    int type = t->data_type();
    switch (rng() % 6) {
    case 0:
    case 1:
    case 2:  // one value
        if (!v.empty()) {
            std::size_t i = pick(rng, v.size());
            v[i] = interesting(rng, v[i]);
        }
        break;
    case 3:  // one more or one fewer value
        if (!v.empty() && rng() % 2) v.pop_back();
        else v.push_back(interesting(rng, v.empty() ? 0 : v.back()));
        dims = {static_cast<std::int64_t>(v.size())};
        break;
    case 4:  // a scalar <-> a 1-D tensor, or 2-D
        if (dims.empty()) dims = {static_cast<std::int64_t>(v.size())};
        else if (v.size() == 1 && rng() % 2) dims = {};
        else dims = {1, static_cast<std::int64_t>(v.size())};
        break;
    default: {  // another element type
        static const int kTypes[] = {pb::TensorProto::INT64, pb::TensorProto::INT32, pb::TensorProto::FLOAT,
                                     pb::TensorProto::DOUBLE, pb::TensorProto::BOOL};
        type = kTypes[pick(rng, 5)];
        break;
    }
    }
    std::ostringstream os;
    os << "tensor " << t->name() << " := [";
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) os << (i ? "," : "") << v[i];
    os << "] dims " << dims.size() << " type " << type;
    log.push_back(os.str());
    set_values(t, v, dims, type);
}

// Names defined before node k: graph inputs, initializers and outputs of earlier nodes.
std::vector<std::string> defined_before(const pb::GraphProto& g, int k) {
    std::vector<std::string> names;
    for (const auto& i : g.input()) names.push_back(i.name());
    for (const auto& i : g.initializer())
        if (i.raw_data().size() <= 512) names.push_back(i.name());
    for (int j = 0; j < k && j < g.node_size(); ++j)
        for (const auto& o : g.node(j).output())
            if (!o.empty()) names.push_back(o);
    return names;
}

void structured_mutation(const DynamicSeed& seed, pb::ModelProto& m, Rng& rng, const std::vector<std::string>& byte_seeds,
                         std::vector<std::string>& log) {
    pb::GraphProto* g = m.mutable_graph();
    if (g->node_size() == 0) return;
    // Mostly a node that consumes a shape value, else any node.
    auto any_node = [&]() -> int {
        if (!seed.consumers.empty() && rng() % 4 != 0) return seed.consumers[pick(rng, seed.consumers.size())];
        return static_cast<int>(pick(rng, static_cast<std::size_t>(g->node_size())));
    };
    switch (rng() % 11) {
    case 0:
    case 1: {  // the values of a Constant or a small initializer
        if (!seed.constants.empty() && (seed.small_inits.empty() || rng() % 3 != 0)) {
            int k = seed.constants[pick(rng, seed.constants.size())];
            if (g->node(k).attribute_size() == 0) break;  // an earlier mutation changed the node
            log.push_back("node " + std::to_string(k) + " (" + g->node(k).op_type() + ")");
            mutate_tensor(g->mutable_node(k)->mutable_attribute(0)->mutable_t(), rng, log);
        } else if (!seed.small_inits.empty()) {
            const std::string& name = seed.small_inits[pick(rng, seed.small_inits.size())];
            for (auto& t : *g->mutable_initializer())
                if (t.name() == name) {
                    mutate_tensor(&t, rng, log);
                    break;
                }
        }
        break;
    }
    case 2: {  // an integer attribute (axis, keepdims, to, ...) or one value of an INTS attribute
        pb::NodeProto* n = g->mutable_node(any_node());
        if (n->attribute_size() == 0) break;
        pb::AttributeProto* a = n->mutable_attribute(static_cast<int>(pick(rng, static_cast<std::size_t>(n->attribute_size()))));
        if (a->type() == pb::AttributeProto::INT) {
            std::int64_t v = a->name() == "to" ? static_cast<std::int64_t>(1 + rng() % 16)
                             : rng() % 2   ? static_cast<std::int64_t>(rng() % 7) - 3
                                           : interesting(rng, a->i());
            a->set_i(v);
            log.push_back(n->name() + " (" + n->op_type() + "): " + a->name() + " := " + std::to_string(v));
        } else if (a->type() == pb::AttributeProto::INTS && a->ints_size() > 0) {
            int i = static_cast<int>(pick(rng, static_cast<std::size_t>(a->ints_size())));
            a->set_ints(i, interesting(rng, a->ints(i)));
            log.push_back(n->name() + " (" + n->op_type() + "): " + a->name() + "[" + std::to_string(i) + "] changed");
        } else if (a->type() == pb::AttributeProto::TENSOR && small_int_tensor(a->t())) {
            mutate_tensor(a->mutable_t(), rng, log);
        }
        break;
    }
    case 3: {  // swap two inputs
        pb::NodeProto* n = g->mutable_node(any_node());
        if (n->input_size() < 2) break;
        int i = static_cast<int>(pick(rng, static_cast<std::size_t>(n->input_size())));
        int j = static_cast<int>(pick(rng, static_cast<std::size_t>(n->input_size())));
        std::string t = n->input(i);
        n->set_input(i, n->input(j));
        n->set_input(j, t);
        log.push_back(n->name() + " (" + n->op_type() + "): swapped inputs " + std::to_string(i) + ", " + std::to_string(j));
        break;
    }
    case 4: {  // an input rewired to another value defined before the node
        int k = any_node();
        pb::NodeProto* n = g->mutable_node(k);
        std::vector<std::string> names = defined_before(*g, k);
        if (n->input_size() == 0 || names.empty()) break;
        int i = static_cast<int>(pick(rng, static_cast<std::size_t>(n->input_size())));
        n->set_input(i, names[pick(rng, names.size())]);
        log.push_back(n->name() + " (" + n->op_type() + "): input " + std::to_string(i) + " := " + n->input(i));
        break;
    }
    case 5: {  // another op type of the same arity family
        static const std::vector<std::vector<std::string>> kFamilies{
            {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Concat", "Expand", "Reshape", "Tile", "Range"},
            {"Squeeze", "Unsqueeze", "ReduceProd", "ReduceSum", "Gather", "Reshape", "Expand", "Split", "Pad", "TopK"},
            {"Neg", "Identity", "Shape", "Size", "Cast", "ConstantOfShape", "Squeeze", "Relu", "Abs"},
            {"Slice", "Where", "Range", "Concat"}};
        pb::NodeProto* n = g->mutable_node(any_node());
        const auto& fam = kFamilies[pick(rng, kFamilies.size())];
        std::string op = fam[pick(rng, fam.size())];
        log.push_back(n->name() + " (" + n->op_type() + "): op := " + op);
        n->set_op_type(op);
        break;
    }
    case 6: {  // drop an input or an attribute
        pb::NodeProto* n = g->mutable_node(any_node());
        if (rng() % 2 && n->input_size() > 0) {
            int i = static_cast<int>(pick(rng, static_cast<std::size_t>(n->input_size())));
            if (rng() % 2) n->set_input(i, "");
            else n->mutable_input()->RemoveLast();
            log.push_back(n->name() + " (" + n->op_type() + "): input " + std::to_string(i) + " dropped");
        } else if (n->attribute_size() > 0) {
            log.push_back(n->name() + " (" + n->op_type() + "): attribute " + n->attribute(n->attribute_size() - 1).name() + " dropped");
            n->mutable_attribute()->RemoveLast();
        }
        break;
    }
    case 7: {  // a graph input's dim: another symbol (merging two), a fresh one, or a size
        if (g->input_size() == 0) break;
        pb::ValueInfoProto* in = g->mutable_input(static_cast<int>(pick(rng, static_cast<std::size_t>(g->input_size()))));
        auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (shape->dim_size() == 0) break;
        auto* d = shape->mutable_dim(static_cast<int>(pick(rng, static_cast<std::size_t>(shape->dim_size()))));
        static const char* const kSyms[] = {"batch", "sequence", "past_sequence", "fresh", "height"};
        switch (rng() % 3) {
        case 0: d->set_dim_param(kSyms[pick(rng, 5)]); break;
        case 1: d->set_dim_value(static_cast<std::int64_t>(rng() % 4)); break;
        default: d->clear_value(); break;  // neither: a fresh symbol
        }
        log.push_back("input " + in->name() + ": a dim changed");
        break;
    }
    case 8: {  // a node's bytes mutated
        int k = any_node();
        std::string bytes = mutate(g->node(k).SerializeAsString(), byte_seeds, rng);
        pb::NodeProto n;
        if (n.ParseFromString(bytes)) {
            *g->mutable_node(k) = n;
            log.push_back("node " + std::to_string(k) + ": bytes mutated");
        }
        break;
    }
    case 9: {  // a node moved (the order may no longer be topological) or duplicated
        int k = any_node();
        int to = static_cast<int>(pick(rng, static_cast<std::size_t>(g->node_size())));
        if (rng() % 4 == 0) {
            *g->add_node() = g->node(k);
            log.push_back("node " + std::to_string(k) + " duplicated");
        } else {
            pb::NodeProto n = g->node(k);
            for (int j = k; j != to; j += (to > k ? 1 : -1)) g->mutable_node(j)->Swap(g->mutable_node(j + (to > k ? 1 : -1)));
            *g->mutable_node(to) = n;
            log.push_back("node " + std::to_string(k) + " moved to " + std::to_string(to));
        }
        break;
    }
    default: {  // a graph output replaced by another value
        if (g->output_size() == 0) break;
        std::vector<std::string> names = defined_before(*g, g->node_size());
        auto* o = g->mutable_output(static_cast<int>(pick(rng, static_cast<std::size_t>(g->output_size()))));
        o->set_name(names[pick(rng, names.size())]);
        if (rng() % 2) o->mutable_type()->mutable_tensor_type()->clear_shape();
        if (rng() % 2) o->mutable_type()->mutable_tensor_type()->set_elem_type(0);
        log.push_back("output := " + o->name());
        break;
    }
    }
}

// Runs a loaded graph once on the interpreter when its inputs and outputs are small: a
// symbolic dim named like a batch is 1, any other 2.
void try_run(const kiln::Graph& g) {
    std::vector<kiln::Tensor> args;
    std::int64_t total = 0;
    auto value = [](const kiln::Dim& d) -> std::int64_t {
        if (d.is_static()) return d.value();
        std::string name = d.to_string();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return name.find("batch") != std::string::npos || name == "?n" ? 1 : 2;
    };
    for (const auto& in : g.inputs()) {
        kiln::Shape s;
        for (const kiln::Dim& d : in.dims) s.push_back(value(d));
        std::int64_t n = 1;
        for (auto d : s) n = d > 0 && n > (std::int64_t{1} << 40) / d ? (std::int64_t{1} << 40) : n * d;
        total += n;
        if (total > 100000) return;
        args.push_back(kiln::is_floating(in.dtype) ? kiln::Tensor::randn(s, 1, in.dtype) : kiln::Tensor::ones(s, in.dtype));
    }
    kiln::Options o;
    o.jit = false;
    o.num_threads = 1;
    kiln::Engine engine(o);
    kiln::Function f = engine.load(g);
    std::int64_t out_total = 0;
    for (const auto& s : f.output_shapes([&] {
             std::vector<kiln::Shape> v;
             for (const auto& a : args) v.push_back(a.shape());
             return v;
         }())) {
        std::int64_t n = 1;
        for (auto d : s) n = d > 0 && n > (std::int64_t{1} << 40) / d ? (std::int64_t{1} << 40) : n * d;
        out_total += n;
    }
    if (out_total > 1000000) return;
    f(args);
}

// On a crash (SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT), says which iteration crashed (replay
// it with --only N), then lets the previous handler (the default, or a sanitizer's) run.
char g_crash_note[4096];
std::size_t g_crash_note_len = 0;
struct sigaction g_old_actions[32];
const int kCrashSignals[] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};

void on_crash(int sig) {
    if (g_crash_note_len > 0) {
        const ssize_t n = ::write(2, g_crash_note, g_crash_note_len);
        (void)n;
    }
    // The previous handler takes the repeated fault (abort() raises SIGABRT again itself).
    sigaction(sig, &g_old_actions[sig], nullptr);
}

void install_crash_note() {
    for (int sig : kCrashSignals) {
        struct sigaction sa {};
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, &g_old_actions[sig]);
    }
}

void set_crash_note(long iteration, std::uint64_t seed, const std::string& what) {
    const std::string note = "onnx_fuzz: crashed in iteration " + std::to_string(iteration) + " (seed " + std::to_string(seed) +
                             ", replay with --only " + std::to_string(iteration) + "): " + what + "\n";
    g_crash_note_len = std::min(note.size(), sizeof(g_crash_note));
    std::memcpy(g_crash_note, note.data(), g_crash_note_len);
}

// Aborts the process when one iteration runs longer than its bound (a hang).
class Watchdog {
public:
    explicit Watchdog(long seconds) : seconds_(seconds), thread_([this] { loop(); }) {}
    ~Watchdog() {
        stop_ = true;
        thread_.join();
    }
    void start(long iteration, std::string what) {
        std::lock_guard<std::mutex> lock(mu_);
        iteration_ = iteration;
        what_ = std::move(what);
        since_ = std::chrono::steady_clock::now();
        busy_ = true;
    }
    void done() {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
    }

private:
    void loop() {
        while (!stop_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            std::lock_guard<std::mutex> lock(mu_);
            if (busy_ && std::chrono::steady_clock::now() - since_ > std::chrono::seconds(seconds_)) {
                std::cout << "FAIL: iteration " << iteration_ << " ran longer than " << seconds_ << " s (a hang): " << what_
                          << std::endl;
                std::_Exit(1);
            }
        }
    }
    long seconds_;
    std::mutex mu_;
    long iteration_ = 0;
    std::string what_;
    std::chrono::steady_clock::time_point since_;
    bool busy_ = false;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
    long iterations = 20000, seconds = 60, only = -1, hang_seconds = 60;
    bool verbose = false;
    std::uint64_t seed = 1;
    std::string corpus, models_dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--iterations") iterations = std::stol(v);
        else if (k == "--seed") seed = std::stoull(v);
        else if (k == "--seconds") seconds = std::stol(v);
        else if (k == "--corpus") corpus = v;
        else if (k == "--models") models_dir = v;
        else if (k == "--only") only = std::stol(v);
        else if (k == "--hang-seconds") hang_seconds = std::stol(v);
        else if (k == "--verbose") verbose = v != "0";
        else {
            std::cerr << "usage: onnx_fuzz [--iterations N] [--seed S] [--seconds T] [--corpus DIR] [--models DIR] [--only N] "
                         "[--hang-seconds T] [--verbose 1]\n";
            return 2;
        }
    }
    if (!kiln::onnx_available()) {
        std::cout << "SKIP: Kiln was built without ONNX\n";
        return 77;
    }
    std::vector<std::string> models{onnx_test::bytes(onnx_test::Mlp().onnx()), onnx_test::bytes(onnx_test::Cnn().onnx())};
    std::vector<std::string> tensors;
    if (!corpus.empty() && fs::is_directory(corpus)) {
        std::vector<fs::path> dirs;
        for (const auto& e : fs::directory_iterator(corpus))
            if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        for (std::size_t i = 0; i < dirs.size(); i += 23) {  // a spread of ops, deterministic
            models.push_back(read(dirs[i] / "model.onnx"));
            fs::path t = dirs[i] / "test_data_set_0" / "input_0.pb";
            if (fs::exists(t)) tensors.push_back(read(t));
        }
    }
    // The exported dynamic models: every model.onnx below the folder.
    std::vector<DynamicSeed> dynamic;
    std::vector<std::string> dynamic_bytes;
    if (!models_dir.empty()) {
        if (!fs::is_directory(models_dir)) {
            std::cout << "onnx_fuzz: --models " << models_dir << " is not a folder\n";
            return 2;
        }
        std::vector<fs::path> files;
        for (const auto& e : fs::recursive_directory_iterator(models_dir))
            if (e.is_regular_file() && e.path().filename() == "model.onnx") files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const fs::path& f : files) {
            pb::ModelProto m;
            std::string bytes = read(f);
            if (!m.ParseFromString(bytes)) {
                std::cout << "onnx_fuzz: " << f << " is not a ModelProto\n";
                return 2;
            }
            dynamic.push_back(analyse(f.parent_path().filename().string(), std::move(m)));
            dynamic_bytes.push_back(std::move(bytes));
            const fs::path t = f.parent_path() / "test_data_set_0" / "input_0.pb";
            if (fs::exists(t)) tensors.push_back(read(t));
        }
    }
    std::cout << "onnx_fuzz: " << models.size() << " model seeds, " << dynamic.size() << " dynamic models";
    for (const DynamicSeed& d : dynamic)
        std::cout << (&d == &dynamic.front() ? " (" : ", ") << d.name << ": " << d.consumers.size() << " nodes on shape values, "
                  << d.constants.size() << " constants" << (&d == &dynamic.back() ? ")" : "");
    std::cout << ", " << tensors.size() << " tensor seeds, seed " << seed << ", up to " << iterations << " iterations or "
              << seconds << " s\n";

    std::vector<std::string> byte_seeds = models;
    install_crash_note();
    Watchdog watchdog(hang_seconds);
    auto t0 = std::chrono::steady_clock::now();
    long done = 0, loaded = 0, ran = 0, rejected = 0, failures = 0, structured = 0, structured_loaded = 0, structured_ran = 0;
    std::map<std::string, long> reasons;  // kiln::Error messages of the structured cases, by their start
    double slowest = 0;
    long slowest_iteration = -1;
    for (long it = only >= 0 ? only : 0; it < (only >= 0 ? only + 1 : iterations); ++it) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(seconds)) break;
        ++done;
        Rng rng(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(it));
        const auto r = rng() % 16;
        // Half of the iterations on the dynamic models (when given): mostly structured.
        const bool dyn_case = !dynamic.empty() && r < 8;
        const bool tensor_case = !dyn_case && !tensors.empty() && r % 8 == 0;
        std::string input, what;
        std::vector<std::string> log;
        if (dyn_case) {
            const std::size_t k = pick(rng, dynamic.size());
            what = dynamic[k].name;
            if (rng() % 8 == 0) {
                input = mutate(dynamic_bytes[k], byte_seeds, rng);  // bytes of the whole file
                log.push_back("bytes mutated");
            } else {
                pb::ModelProto m = dynamic[k].model;
                const int rounds = 1 + static_cast<int>(rng() % 3);
                for (int i = 0; i < rounds; ++i) structured_mutation(dynamic[k], m, rng, byte_seeds, log);
                input = m.SerializeAsString();
                ++structured;
            }
        } else {
            const auto& pool = tensor_case ? tensors : models;
            input = mutate(pool[pick(rng, pool.size())], pool, rng);
            what = tensor_case ? "a tensor" : "a model";
        }
        for (const std::string& l : log) what += "; " + l;
        if (verbose) std::cout << "iteration " << it << ": " << what << std::endl;
        set_crash_note(it, seed, what);
        watchdog.start(it, what);
        const auto i0 = std::chrono::steady_clock::now();
        bool loaded_now = false;
        try {
            if (tensor_case) {
                kiln::onnx_tensor_from_memory(input);
            } else {
                kiln::OnnxModelInfo info = kiln::inspect_onnx_from_memory(input);
                kiln::Graph g = kiln::load_onnx_from_memory(input);
                loaded_now = true;
                ++loaded;
                structured_loaded += dyn_case && !log.empty() && log[0] != "bytes mutated";
                try_run(g);
                ++ran;
                structured_ran += dyn_case && !log.empty() && log[0] != "bytes mutated";
            }
        } catch (const kiln::Error& e) {
            ++rejected;
            if (dyn_case) {
                std::string msg = e.what();
                // "ONNX node 'x' (Op): what..." -> "(Op): what" up to 60 characters, for the summary.
                const auto p = msg.find("' (");
                std::string key = (loaded_now ? "run: " : "load: ") + (p == std::string::npos ? msg : msg.substr(p + 2));
                reasons[key.substr(0, 60)]++;
            }
        } catch (const std::exception& e) {
            ++failures;
            std::cout << "FAIL: iteration " << it << " (seed " << seed << "): " << typeid(e).name() << ": " << e.what() << "\n  "
                      << what << "\n";
            std::ofstream(fs::path("onnx_fuzz_failure_" + std::to_string(it) + ".onnx"), std::ios::binary) << input;
            if (failures >= 10) break;
        }
        watchdog.done();
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - i0).count();
        if (secs > slowest) {
            slowest = secs;
            slowest_iteration = it;
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "onnx_fuzz: " << done << " inputs in " << secs << " s: " << loaded << " loaded, " << ran << " ran, " << rejected
              << " rejected with kiln::Error, " << failures << " failed otherwise; " << structured
              << " structured mutations of the dynamic models: " << structured_loaded << " loaded, " << structured_ran
              << " ran; slowest iteration " << slowest_iteration << " (" << slowest << " s)\n";
    if (verbose || only >= 0) {
        std::vector<std::pair<long, std::string>> top;
        for (const auto& [k, n] : reasons) top.emplace_back(n, k);
        std::sort(top.rbegin(), top.rend());
        for (std::size_t i = 0; i < top.size() && i < 40; ++i) std::cout << "  " << top[i].first << "x " << top[i].second << "\n";
    }
    return failures == 0 ? 0 : 1;
}
