// The ONNX conformance runner: every backend node test of ONNX's test data (a directory
// per test: model.onnx, test_data_set_*/input_*.pb and output_*.pb) through the ONNX
// importer and each tier of Kiln, compared with the expected outputs at ONNX's usual
// tolerances (rtol 1e-3, atol 1e-7). Prints one summary line (passed, failed, unsupported
// per tier), the most frequent reasons, and a table per op.
//
//   onnx_conformance [--data DIR] [--expect FILE] [--write-expect FILE] [--filter TEXT]
//                    [--shard I/N] [--table] [--verbose] [--gpu] [--gpu-source]
//
// --gpu-source: instead of running the tests, print every group of every model that loads
// as CUDA C (generic: every dim a kernel parameter) and compile it with NVRTC for sm_80 and
// sm_90, and as HIP compiled with HIPRTC for gfx90a where HIPRTC is installed; exit 1 when
// one does not print or compile, 77 when neither compiler is installed. No GPU needed.
// --gpu: a runner "gpu" beside the host's: the inputs on cuda:0, three calls (the
// interpreter on host copies, the generic kernel, the specialised kernel), each compared.
// --expect FILE: lines "<test> <tier> [compiled]" that passed before (and ran compiled code
// at that tier); exit status 1 when one of them (in this shard) no longer passes, or no
// longer runs compiled code. Exit 77 (skip) when DIR does not exist.
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "jit/exec/pipeline.h"
#include "tiers/gpu/gpu_source.h"
#include "tiers/gpu/hiprtc.h"
#include "tiers/gpu/nvrtc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

// ---- the tiers: one line each ----
struct TierRun {
    const char* name;
    int level;  // the tier that must have run a group for the test to count as reaching it
    Options (*options)();
    bool gpu = false;  // inputs on cuda:0; three calls (tier 0, the generic kernel, the specialised one)
};
Options interp_options() {
    Options o;
    o.jit = false;
    o.num_threads = 1;
    return o;
}
[[maybe_unused]] Options tier1_options() {  // every group tier 1 covers compiles after its first call
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = 1000000;
    o.num_threads = 1;
    return o;
}
[[maybe_unused]] Options tier2_options() {  // every compilable group compiles on its first call
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier1_threshold = 1000000;
    o.tier2_threshold = 0;
    o.num_threads = 1;
    return o;
}
Options gpu_options() {  // every group compiles its generic kernel after one call, its specialisation after two
    Options o;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = 2;
    o.tierup = "count";
    o.num_threads = 1;
    return o;
}
std::vector<TierRun> kTiers = {
    {"interp", 0, interp_options},
#if defined(KILN_HAVE_ASMJIT)
    {"tier1", 1, tier1_options},
#endif
#if defined(KILN_HAVE_LLVM)
    {"tier2", 2, tier2_options},
#endif
};
std::size_t kNumRunners = kTiers.size();  // --gpu adds a runner
Device g_gpu = Device::cpu();             // the gpu runner's device (--gpu, when there is one)

// ---- what is in scope: the ONNX spellings of the inference ops of DESIGN.md section 1
// (float and integer), and the ONNX ops that are compositions of them ----
const std::set<std::string>& in_scope_ops() {
    static const std::set<std::string> ops{
        // arithmetic, comparisons, selection, casts
        "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Clip", "Cast", "CastLike",
        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Identity",
        // unary math and activations
        "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tan", "Tanh", "Sigmoid", "Relu", "Erf", "Floor",
        "Ceil", "Round", "Sign", "IsNaN", "IsInf", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "HardSigmoid",
        "HardSwish", "Softplus", "Softsign", "ThresholdedRelu", "Gelu", "Mish", "Shrink",
        // reductions
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
        // normalisation
        "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
        "LpNormalization", "MeanVarianceNormalization", "Hardmax",
        // linear algebra, convolution, pooling
        "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
        // shapes and data movement
        "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Slice", "Concat", "Split", "Gather",
        "Pad", "Tile", "DepthToSpace", "SpaceToDepth",
        // constants
        "Constant", "ConstantOfShape", "Shape", "Size", "Range", "EyeLike", "Dropout"};
    return ops;
}

enum class Outcome { pass, fail, unsupported };

struct Result {
    Outcome outcome = Outcome::pass;
    std::string reason;   // for fail and unsupported
    bool reached = false; // a group ran at this tier
};

struct TestReport {
    std::string name;
    std::string op_key;
    bool in_scope = false;
    std::vector<Result> tiers;  // one per kTiers entry
};

// A short, groupable reason: the message without the node's name.
std::string reason_of(const std::string& msg) {
    std::string m = msg;
    auto node = m.find("ONNX node ");
    if (node != std::string::npos) {
        auto close = m.find("): ", node);
        auto open = m.find(" (", node);
        if (close != std::string::npos && open != std::string::npos && open < close)
            m = m.substr(open + 2, close - open - 2) + ": " + m.substr(close + 3);
    }
    // Drop the operands' details after the rule, to group alike failures.
    for (const char* cut : {" (operands:", ", got ", " for "}) {
        auto p = m.find(cut);
        if (p != std::string::npos && p > 10) m = m.substr(0, p);
    }
    if (m.size() > 110) m = m.substr(0, 107) + "...";
    return m;
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
    std::vector<std::pair<int, fs::path>> v;
    for (const auto& e : fs::directory_iterator(dir)) {
        std::string f = e.path().filename().string();
        if (f.rfind(prefix, 0) == 0 && f.size() > prefix.size() + 3 && f.substr(f.size() - 3) == ".pb")
            v.emplace_back(std::stoi(f.substr(prefix.size(), f.size() - prefix.size() - 3)), e.path());
    }
    std::sort(v.begin(), v.end());
    std::vector<fs::path> out;
    for (auto& p : v) out.push_back(p.second);
    return out;
}

std::vector<fs::path> data_sets(const fs::path& test) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(test))
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// ONNX's backend tests compare with numpy's assert_allclose(rtol=1e-3, atol=1e-7).
std::string compare(const Tensor& got, const Tensor& want, std::size_t index) {
    std::ostringstream os;
    if (got.dtype() != want.dtype()) {
        os << "output " << index << ": dtype " << dtype_name(got.dtype()) << ", expected " << dtype_name(want.dtype());
        return os.str();
    }
    if (got.shape() != want.shape()) {
        os << "output " << index << ": shape " << shape_to_string(got.shape()) << ", expected "
           << shape_to_string(want.shape());
        return os.str();
    }
    std::vector<double> a = got.to_doubles(), b = want.to_doubles();
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        if (a[i] == b[i]) continue;  // equal infinities too
        if (std::fabs(a[i] - b[i]) <= 1e-7 + 1e-3 * std::fabs(b[i])) continue;
        os << "output " << index << ": element " << i << " is " << a[i] << ", expected " << b[i];
        return os.str();
    }
    return {};
}

std::string op_key(const std::vector<std::string>& ops) {
    if (ops.empty()) return "(no nodes)";
    std::vector<std::string> s = ops;
    std::sort(s.begin(), s.end());
    if (s.size() == 1) return s[0];
    if (s.size() <= 3) {
        std::string k = s[0];
        for (std::size_t i = 1; i < s.size(); ++i) k += "+" + s[i];
        return k;
    }
    return "(" + std::to_string(s.size()) + "-op functions)";
}

TestReport run_one(const fs::path& dir, bool verbose) {
    TestReport r;
    r.name = dir.filename().string();
    r.tiers.assign(kNumRunners, Result{});
    auto all = [&](Outcome o, const std::string& why) {
        for (auto& t : r.tiers) {
            t.outcome = o;
            t.reason = why;
        }
    };
    OnnxModelInfo info;
    std::string model = (dir / "model.onnx").string();
    try {
        info = inspect_onnx(model);
    } catch (const Error& e) {
        r.op_key = "(unreadable)";
        all(Outcome::unsupported, reason_of(e.what()));
        return r;
    }
    r.op_key = op_key(info.op_types);
    // Inference only: the tests of training behaviour are out of scope.
    r.in_scope = r.name.find("training") == std::string::npos;
    for (const auto& op : info.op_types) r.in_scope &= in_scope_ops().count(op) > 0;
    std::vector<fs::path> sets = data_sets(dir);
    if (sets.empty()) {
        all(Outcome::unsupported, "no test data");
        return r;
    }
    for (const fs::path& set : sets) {
        std::vector<fs::path> in_files = sorted_files(set, "input_"), out_files = sorted_files(set, "output_");
        OnnxOptions opts;
        std::vector<Tensor> args, expected;
        Graph g;
        try {
            if (in_files.size() != info.inputs.size()) {
                all(Outcome::unsupported, "the test data has " + std::to_string(in_files.size()) + " inputs for " +
                                              std::to_string(info.inputs.size()) + " graph inputs");
                return r;
            }
            for (std::size_t i = 0; i < in_files.size(); ++i) {
                Tensor t = load_onnx_tensor(in_files[i].string());
                const std::string& name = info.inputs[i].name;
                if (std::find(info.load_time_inputs.begin(), info.load_time_inputs.end(), name) != info.load_time_inputs.end())
                    opts.input_values[name] = t;
                else
                    args.push_back(t);
            }
            for (const auto& f : out_files) expected.push_back(load_onnx_tensor(f.string()));
            g = load_onnx(model, opts);
        } catch (const Error& e) {
            all(Outcome::unsupported, reason_of(e.what()));
            // Data of an element type Kiln does not have (u16, u32, u64, strings) is out of scope.
            std::string m = e.what();
            if (m.find("element type") != std::string::npos && m.find("not supported") != std::string::npos)
                r.in_scope = false;
            return r;
        }
        for (std::size_t t = 0; t < kNumRunners; ++t) {
            Result& res = r.tiers[t];
            if (res.outcome != Outcome::pass) continue;  // an earlier data set failed
            try {
                Engine engine(kTiers[t].options());
                Function f = engine.load(g);
                if (kTiers[t].gpu) {
                    std::vector<Tensor> dev;
                    for (const auto& a : args) dev.push_back(a.to(g_gpu));
                    std::string diff;
                    for (int rep = 0; rep < 3 && diff.empty(); ++rep) {
                        std::vector<Tensor> got = f(dev);
                        if (got.size() != expected.size())
                            diff = std::to_string(got.size()) + " outputs, expected " + std::to_string(expected.size());
                        for (std::size_t k = 0; diff.empty() && k < got.size(); ++k)
                            diff = compare(got[k].to(Device::cpu()), expected[k], k);
                    }
                    for (const auto& gs : f.stats().groups) res.reached |= gs.gpu_tier >= 1 && gs.gpu_compiled_calls > 0;
                    if (!diff.empty()) {
                        res.outcome = Outcome::fail;
                        res.reason = "wrong values";
                        if (verbose) std::cout << r.name << " [" << kTiers[t].name << "]: " << diff << "\n";
                    }
                    continue;
                }
                if (kTiers[t].level == 1) {  // a first (interpreted) call compiles tier 1
                    f(args);
                } else if (kTiers[t].level > 1) {  // compile every compilable group before the call
                    std::vector<Shape> shapes;
                    for (const auto& a : args) shapes.push_back(a.shape());
                    f.warmup({shapes});
                }
                std::vector<Tensor> got = f(args);
                if (kTiers[t].level > 0) {
                    for (const auto& gs : f.stats().groups) res.reached |= gs.tier >= kTiers[t].level && gs.compiled_calls > 0;
                } else {
                    res.reached = true;
                }
                std::string diff;
                if (got.size() != expected.size())
                    diff = std::to_string(got.size()) + " outputs, expected " + std::to_string(expected.size());
                for (std::size_t k = 0; diff.empty() && k < got.size(); ++k) diff = compare(got[k], expected[k], k);
                if (!diff.empty()) {
                    res.outcome = Outcome::fail;
                    res.reason = "wrong values";
                    if (verbose) std::cout << r.name << " [" << kTiers[t].name << "]: " << diff << "\n";
                }
            } catch (const std::exception& e) {
                res.outcome = Outcome::fail;
                res.reason = "run: " + reason_of(e.what());
                if (verbose) std::cout << r.name << " [" << kTiers[t].name << "]: " << e.what() << "\n";
            }
        }
    }
    return r;
}

TestReport run_test(const fs::path& dir, bool verbose) {
    TestReport r = run_one(dir, verbose);
    if (verbose)
        for (std::size_t t = 0; t < kNumRunners; ++t)
            if (r.tiers[t].outcome == Outcome::unsupported)
                std::cout << r.name << " [" << kTiers[t].name << "]: unsupported: " << r.tiers[t].reason << "\n";
    return r;
}

struct Args {
    std::string data = "/usr/share/libonnx-testdata/data/node";
    std::string expect, write_expect, filter;
    int shard = 0, shards = 1;
    bool table = false, verbose = false, gpu = false, gpu_source = false;
};

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "onnx_conformance: " << s << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (s == "--data") a.data = next();
        else if (s == "--expect") a.expect = next();
        else if (s == "--write-expect") a.write_expect = next();
        else if (s == "--filter") a.filter = next();
        else if (s == "--shard") {
            std::string v = next();
            if (std::sscanf(v.c_str(), "%d/%d", &a.shard, &a.shards) != 2 || a.shards < 1 || a.shard < 0 ||
                a.shard >= a.shards) {
                std::cerr << "onnx_conformance: --shard expects I/N with 0 <= I < N, got " << v << "\n";
                std::exit(2);
            }
        } else if (s == "--table") a.table = true;
        else if (s == "--gpu") a.gpu = true;
        else if (s == "--gpu-source") a.gpu_source = true;
        else if (s == "--verbose") a.verbose = true;
        else {
            std::cerr << "usage: onnx_conformance [--data DIR] [--expect FILE] [--write-expect FILE] [--filter TEXT] "
                         "[--shard I/N] [--table] [--verbose] [--gpu] [--gpu-source]\n";
            std::exit(s == "--help" ? 0 : 2);
        }
    }
    return a;
}

}  // namespace

// --gpu-source: every group of every model that loads, printed as CUDA C and compiled for
// sm_80 and sm_90, and as HIP for gfx90a (each compiler where it is installed).
int gpu_source_check(const Args& args) {
    namespace gpu = kiln::tiers::gpu;
    struct Target {
        std::string name;  // "sm_80", "gfx90a"
        gpu::Dialect dialect;
        std::function<gpu::RtcOutput(const std::string& code, const std::string& group)> compile;
        std::size_t failed = 0;
    };
    std::vector<Target> targets;
    if (gpu::nvrtc_status().available) {
        for (int arch : {80, 90})
            targets.push_back({"sm_" + std::to_string(arch), gpu::Dialect::cuda, [arch](const std::string& code, const std::string& group) {
                                   return gpu::nvrtc_compile(code, group + ".cu", arch);
                               }});
    } else {
        std::cout << "onnx_conformance --gpu-source: NVRTC skipped: " << gpu::nvrtc_status().why << "\n";
    }
    const auto& hs = gpu::hiprtc_status();
    if (hs.available && std::find(hs.archs.begin(), hs.archs.end(), "gfx90a") != hs.archs.end()) {
        targets.push_back({"gfx90a", gpu::Dialect::hip, [](const std::string& code, const std::string& group) {
                               return gpu::hiprtc_compile(code, group + ".hip", "gfx90a");
                           }});
    } else {
        std::cout << "onnx_conformance --gpu-source: HIPRTC skipped: " << (hs.available ? "it does not target gfx90a" : hs.why) << "\n";
    }
    if (targets.empty()) return 77;
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(args.data))
        if (e.is_directory() && (args.filter.empty() || e.path().filename().string().find(args.filter) != std::string::npos))
            tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    std::size_t models = 0, kernels = 0, unprintable = 0;
    for (const fs::path& dir : tests) {
        Graph g;
        try {
            OnnxOptions opts;
            const OnnxModelInfo info = inspect_onnx((dir / "model.onnx").string());
            const std::vector<fs::path> sets = data_sets(dir);
            if (!sets.empty()) {  // inputs that must be known at load time
                const std::vector<fs::path> in_files = sorted_files(sets[0], "input_");
                for (std::size_t i = 0; i < in_files.size() && i < info.inputs.size(); ++i)
                    if (std::find(info.load_time_inputs.begin(), info.load_time_inputs.end(), info.inputs[i].name) !=
                        info.load_time_inputs.end())
                        opts.input_values[info.inputs[i].name] = load_onnx_tensor(in_files[i].string());
            }
            g = load_onnx((dir / "model.onnx").string(), opts);
        } catch (const std::exception&) {
            continue;  // a model Kiln does not load has no groups to print
        }
        ++models;
        const auto exe = kiln::jit::lower_function(g.impl());  // alive while its groups are read
        for (const auto& gr : exe->groups) {
            if (!gr->kernel) continue;
            ++kernels;
            const gpu::GpuSource sources[] = {gpu::print_source(*gr->kernel, {}, gpu::Dialect::cuda),
                                              gpu::print_source(*gr->kernel, {}, gpu::Dialect::hip)};
            for (const gpu::GpuSource& src : sources)
                if (!src.ok) {
                    ++unprintable;
                    if (args.verbose) std::cout << dir.filename().string() << " " << gr->group.name << ": not printed: " << src.why << "\n";
                }
            for (Target& t : targets) {
                const gpu::GpuSource& src = sources[t.dialect == gpu::Dialect::cuda ? 0 : 1];
                if (!src.ok) continue;  // counted above
                const gpu::RtcOutput out = t.compile(src.code, gr->group.name);
                if (out.ok) continue;
                ++t.failed;
                std::cout << dir.filename().string() << " " << gr->group.name << " " << t.name << ": " << out.error << "\n"
                          << src.code << "\n";
            }
        }
    }
    std::size_t failed = 0;
    std::cout << "ONNX models' GPU source: " << models << " models loaded, " << kernels << " kernels, " << unprintable
              << " prints (CUDA or HIP) failed; compile failures:";
    for (const Target& t : targets) {
        std::cout << " " << t.name << " " << t.failed;
        failed += t.failed;
    }
    std::cout << "\n";
    return failed + unprintable == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    Args args = parse_args(argc, argv);
    if (args.gpu_source) return fs::exists(args.data) ? gpu_source_check(args) : 77;
    if (args.gpu) {  // a runner on cuda:0 (else hip:0) beside the host's, when there is one
        std::string why;
        for (Device d : {Device::cuda(0), Device::hip(0)}) {
            try {
                (void)Tensor::empty({1}, DType::f32, d);
                g_gpu = d;
                kTiers.push_back({"gpu", 1, gpu_options, true});
                kNumRunners = kTiers.size();
                break;
            } catch (const Error& e) {
                why += std::string(why.empty() ? "" : "; ") + e.what();
            }
        }
        if (kTiers.back().gpu) std::cout << "onnx_conformance: the gpu runner on " << g_gpu.to_string() << "\n";
        else std::cout << "onnx_conformance: skipped: the gpu runner: " << why << "\n";
    }
    if (!fs::is_directory(args.data)) {
        std::cout << "SKIP: " << args.data << " not found (apt-get install libonnx-testdata)\n";
        return 77;
    }
    if (!onnx_available()) {
        std::cout << "SKIP: this Kiln was built without ONNX support\n";
        return 77;
    }
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(args.data))
        if (e.is_directory() && fs::exists(e.path() / "model.onnx")) tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    std::size_t total_all = tests.size();
    std::vector<fs::path> mine;
    for (std::size_t i = 0; i < tests.size(); ++i)
        if (static_cast<int>(i % static_cast<std::size_t>(args.shards)) == args.shard &&
            tests[i].filename().string().find(args.filter) != std::string::npos)
            mine.push_back(tests[i]);

    auto t0 = std::chrono::steady_clock::now();
    std::vector<TestReport> reports;
    for (const auto& t : mine) reports.push_back(run_test(t, args.verbose));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- summary ----
    std::size_t in_scope = 0;
    for (const auto& r : reports) in_scope += r.in_scope;
    std::ostringstream line;
    line << "ONNX conformance: " << reports.size() << " node tests";
    if (reports.size() != total_all) line << " (of " << total_all << ")";
    line << ", " << in_scope << " in scope";
    std::map<std::string, int> reasons;
    for (std::size_t t = 0; t < kNumRunners; ++t) {
        int pass = 0, fail = 0, unsup = 0, pass_scope = 0, reached = 0;
        for (const auto& r : reports) {
            const Result& res = r.tiers[t];
            if (res.outcome == Outcome::pass) {
                ++pass;
                pass_scope += r.in_scope;
                reached += res.reached;
            } else if (res.outcome == Outcome::fail) {
                ++fail;
            } else {
                ++unsup;
            }
            if (t == 0 && res.outcome != Outcome::pass && r.in_scope) ++reasons[res.reason];
        }
        line << "; " << kTiers[t].name << ": " << pass << " passed (" << pass_scope << " in scope";
        if (kTiers[t].level > 0) line << ", " << reached << " ran compiled code";
        line << "), " << fail << " failed, " << unsup << " unsupported";
    }
    line << " [" << static_cast<int>(secs) << " s]";

    if (args.table) {
        std::map<std::string, std::vector<const TestReport*>> by_op;
        for (const auto& r : reports) by_op[r.op_key].push_back(&r);
        std::printf("%-40s %5s %5s", "op", "tests", "scope");
        for (const auto& t : kTiers) std::printf(" %8s", t.name);
        std::printf("  first reason (interp)\n");
        for (const auto& [op, rs] : by_op) {
            int scope = 0;
            std::vector<int> pass(kNumRunners, 0);
            std::string why;
            for (const auto* r : rs) {
                scope += r->in_scope;
                for (std::size_t t = 0; t < kNumRunners; ++t) pass[t] += r->tiers[t].outcome == Outcome::pass;
                if (why.empty() && r->tiers[0].outcome != Outcome::pass) why = r->tiers[0].reason;
            }
            std::printf("%-40s %5zu %5d", op.c_str(), rs.size(), scope);
            for (std::size_t t = 0; t < kNumRunners; ++t) std::printf(" %8d", pass[t]);
            std::printf("  %s\n", why.substr(0, 90).c_str());
        }
    }
    // Reasons of in-scope tests that do not pass on the interpreter, most frequent first.
    std::vector<std::pair<int, std::string>> top;
    for (const auto& [why, n] : reasons) top.emplace_back(n, why);
    std::sort(top.rbegin(), top.rend());
    if (!top.empty()) std::cout << "in-scope tests not passing on " << kTiers[0].name << ", by reason:\n";
    for (std::size_t i = 0; i < top.size() && i < 25; ++i) std::cout << "  " << top[i].first << "  " << top[i].second << "\n";

    int status = 0;
    if (!args.write_expect.empty()) {
        std::ofstream out(args.write_expect);
        out << "# Node tests of ONNX's test data that passed, per tier (onnx_conformance --write-expect).\n"
               "# The conformance test fails when one of them stops passing, or stops running compiled code (\"compiled\").\n";
        for (const auto& r : reports)
            for (std::size_t t = 0; t < kNumRunners; ++t)
                if (r.tiers[t].outcome == Outcome::pass)
                    out << r.name << " " << kTiers[t].name << (kTiers[t].level > 0 && r.tiers[t].reached ? " compiled" : "")
                        << "\n";
    }
    if (!args.expect.empty()) {
        std::ifstream in(args.expect);
        if (!in) {
            std::cerr << "onnx_conformance: cannot read " << args.expect << "\n";
            return 2;
        }
        std::map<std::string, const TestReport*> by_name;
        for (const auto& r : reports) by_name[r.name] = &r;
        int regressions = 0;
        for (std::string l; std::getline(in, l);) {
            if (l.empty() || l[0] == '#') continue;
            std::istringstream ls(l);
            std::string name, tier, compiled;
            ls >> name >> tier >> compiled;
            auto it = by_name.find(name);
            if (it == by_name.end()) continue;  // another shard's, or filtered out
            for (std::size_t t = 0; t < kNumRunners; ++t) {
                if (tier != kTiers[t].name) continue;
                const Result& res = it->second->tiers[t];
                if (res.outcome != Outcome::pass) {
                    std::cout << "REGRESSION: " << name << " [" << tier << "] passed before, now: " << res.reason << "\n";
                    ++regressions;
                } else if (compiled == "compiled" && !res.reached) {
                    // It still passes, but on the interpreter: the tier stopped compiling it.
                    std::cout << "REGRESSION: " << name << " [" << tier << "] ran compiled code before, now none\n";
                    ++regressions;
                }
            }
        }
        if (regressions > 0) status = 1;
    }
    std::cout << line.str() << std::endl;
    return status;
}
