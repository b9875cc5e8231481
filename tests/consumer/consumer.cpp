// The consumer of an installed Kiln (tests/consumer/CMakeLists.txt). It traces three small
// models with dynamic dims, runs each at several shapes, checks what it can on its own
// (shapes, finite values, softmax rows), and writes every weight, input and output as a
// raw little-endian f32 file, plus a manifest, into the directory given on the command
// line. compare_torch.py rebuilds the models in PyTorch from those files and compares.
//
// Manifest (manifest.txt), one tensor per line:   <name> <rank> <dim0> <dim1> ...
// Data: <name>.f32, row-major. Names: "<model>.<param>" for weights and
// "<model>.<case>.in" / "<model>.<case>.out" for calls, e.g. "mlp.b3.in".
#include <kiln/kiln.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

static_assert(std::endian::native == std::endian::little,
              "the f32 files are written in the host byte order, which must be little-endian");

namespace {

namespace fs = std::filesystem;

class Writer {
public:
    explicit Writer(fs::path dir) : dir_(std::move(dir)), manifest_(dir_ / "manifest.txt") {
        if (!manifest_) throw std::runtime_error("cannot write " + (dir_ / "manifest.txt").string());
    }

    void write(const std::string& name, const kiln::Tensor& t) {
        if (t.dtype() != kiln::DType::f32) throw std::runtime_error(name + ": not f32");
        kiln::Tensor c = t.contiguous();
        std::ofstream f(dir_ / (name + ".f32"), std::ios::binary);
        f.write(static_cast<const char*>(c.data()),
                static_cast<std::streamsize>(c.numel() * static_cast<std::int64_t>(sizeof(float))));
        if (!f) throw std::runtime_error("cannot write " + name + ".f32");
        manifest_ << name << ' ' << t.rank();
        for (std::int64_t d : t.shape()) manifest_ << ' ' << d;
        manifest_ << '\n';
        manifest_.flush();
        ++count_;
    }
    int count() const { return count_; }

private:
    fs::path dir_;
    std::ofstream manifest_;
    int count_ = 0;
};

int g_failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::cerr << "CHECK FAILED: " << what << "\n";
        ++g_failures;
    }
}

// randn(shape, seed) * scale (+ shift): weights with a sensible spread.
kiln::Tensor randn_scaled(const kiln::Shape& shape, std::uint64_t seed, float scale, float shift = 0.0f) {
    kiln::Tensor t = kiln::Tensor::randn(shape, seed).contiguous().clone();
    float* p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] * scale + shift;
    return t;
}

// "b3", "b3_s16": the name of one call in the manifest.
std::string case_tag(std::int64_t batch, std::int64_t seq = -1) {
    std::ostringstream os;
    os << 'b' << batch;
    if (seq >= 0) os << "_s" << seq;
    return os.str();
}

bool all_finite(const kiln::Tensor& t) {
    for (double v : t.to_doubles())
        if (!std::isfinite(v)) return false;
    return true;
}

// Runs f on x, checks the output's shape and values, and records input and output.
kiln::Tensor run_case(const kiln::Function& f, Writer& w, const std::string& model, const std::string& tag,
                      const kiln::Tensor& x, const kiln::Shape& expected) {
    std::vector<kiln::Tensor> y = f({x});
    const std::string where = model + " " + tag;
    check(y.size() == 1, where + ": one output");
    if (y.empty()) return {};
    check(y[0].shape() == expected,
          where + ": output shape " + kiln::shape_to_string(y[0].shape()) + ", expected " +
              kiln::shape_to_string(expected));
    check(y[0].dtype() == kiln::DType::f32, where + ": output dtype f32");
    check(all_finite(y[0]), where + ": finite outputs");
    std::vector<kiln::Shape> predicted = f.output_shapes({x.shape()});
    check(predicted.size() == 1 && predicted[0] == y[0].shape(), where + ": output_shapes() agrees with the call");
    w.write(model + "." + tag + ".in", x);
    w.write(model + "." + tag + ".out", y[0]);
    std::cout << "  " << where << ": in " << kiln::shape_to_string(x.shape()) << " -> out "
              << kiln::shape_to_string(y[0].shape()) << "\n";
    return y[0];
}

// ---- (a) MLP 784-256-10, dynamic batch ----
void mlp(kiln::Engine& engine, Writer& w) {
    kiln::Tensor W1 = randn_scaled({784, 256}, 101, 1.0f / 28.0f);  // 1/sqrt(784)
    kiln::Tensor b1 = randn_scaled({256}, 102, 0.1f);
    kiln::Tensor W2 = randn_scaled({256, 10}, 103, 1.0f / 16.0f);   // 1/sqrt(256)
    kiln::Tensor b2 = randn_scaled({10}, 104, 0.1f);
    w.write("mlp.W1", W1);
    w.write("mlp.b1", b1);
    w.write("mlp.W2", W2);
    w.write("mlp.b2", b2);

    kiln::Graph g = kiln::trace("mlp", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 784})},
                                [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
                                    kiln::Var h = kiln::relu(kiln::matmul(in[0], W1) + b1);
                                    return {kiln::softmax(kiln::matmul(h, W2) + b2, -1)};
                                });
    kiln::Function f = engine.load(g);
    std::uint64_t seed = 1000;
    for (std::int64_t batch : {1, 3, 8}) {
        kiln::Tensor y = run_case(f, w, "mlp", case_tag(batch),
                                  kiln::Tensor::randn({batch, 784}, seed++), {batch, 10});
        if (!y.defined()) continue;
        for (std::int64_t r = 0; r < batch; ++r) {
            double s = 0;
            for (std::int64_t c = 0; c < 10; ++c) s += y.item({r, c});
            check(std::abs(s - 1.0) < 1e-5, "mlp: softmax row sums to 1");
        }
    }
}

// ---- (b) pre-norm transformer block, d=64, 4 heads, ffn 128, dynamic batch and sequence ----
void transformer(kiln::Engine& engine, Writer& w) {
    constexpr std::int64_t D = 64, H = 4, Dh = D / H, F = 128;
    std::uint64_t seed = 200;
    auto param = [&](const std::string& name, const kiln::Shape& shape, float scale, float shift = 0.0f) {
        kiln::Tensor t = randn_scaled(shape, seed++, scale, shift);
        w.write("transformer." + name, t);
        return t;
    };
    const float sD = 1.0f / std::sqrt(static_cast<float>(D)), sF = 1.0f / std::sqrt(static_cast<float>(F));
    kiln::Tensor ln1_g = param("ln1_g", {D}, 0.1f, 1.0f), ln1_b = param("ln1_b", {D}, 0.1f);
    kiln::Tensor Wq = param("Wq", {D, D}, sD), bq = param("bq", {D}, 0.02f);  // linear: [out, in]
    kiln::Tensor Wk = param("Wk", {D, D}, sD), bk = param("bk", {D}, 0.02f);
    kiln::Tensor Wv = param("Wv", {D, D}, sD), bv = param("bv", {D}, 0.02f);
    kiln::Tensor Wo = param("Wo", {D, D}, sD), bo = param("bo", {D}, 0.02f);
    kiln::Tensor ln2_g = param("ln2_g", {D}, 0.1f, 1.0f), ln2_b = param("ln2_b", {D}, 0.1f);
    kiln::Tensor W1 = param("W1", {F, D}, sD), b1 = param("b1", {F}, 0.02f);
    kiln::Tensor W2 = param("W2", {D, F}, sF), b2 = param("b2", {D}, 0.02f);

    kiln::Graph g = kiln::trace(
        "transformer_block", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), kiln::dyn("seq"), D})},
        [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
            const kiln::Var& x = in[0];
            kiln::Dim B = x.dim(0), S = x.dim(1);
            // [B,S,D] -> [B,H,S,Dh]
            auto heads = [&](const kiln::Var& t) { return kiln::permute(kiln::reshape(t, {B, S, H, Dh}), {0, 2, 1, 3}); };
            kiln::Var h = kiln::layer_norm(x, ln1_g, ln1_b, 1e-5);
            kiln::Var q = heads(kiln::linear(h, Wq, bq));
            kiln::Var k = heads(kiln::linear(h, Wk, bk));
            kiln::Var v = heads(kiln::linear(h, Wv, bv));
            kiln::Var scores = kiln::matmul(q, kiln::transpose(k, -2, -1)) * (1.0 / std::sqrt(double(Dh)));
            kiln::Var attn = kiln::matmul(kiln::softmax(scores, -1), v);                 // [B,H,S,Dh]
            kiln::Var merged = kiln::reshape(kiln::permute(attn, {0, 2, 1, 3}), {B, S, D});  // [B,S,D]
            kiln::Var x1 = x + kiln::linear(merged, Wo, bo);
            kiln::Var h2 = kiln::layer_norm(x1, ln2_g, ln2_b, 1e-5);
            kiln::Var m = kiln::linear(kiln::gelu(kiln::linear(h2, W1, b1)), W2, b2);
            return {x1 + m};
        });
    kiln::Function f = engine.load(g);
    std::uint64_t xseed = 2000;
    for (std::int64_t batch : {1, 3, 8})
        for (std::int64_t seq : {5, 16})
            run_case(f, w, "transformer", case_tag(batch, seq),
                     kiln::Tensor::randn({batch, seq, D}, xseed++), {batch, seq, D});
}

// ---- (c) small CNN on [N,3,16,16], dynamic batch ----
void cnn(kiln::Engine& engine, Writer& w) {
    std::uint64_t seed = 300;
    auto param = [&](const std::string& name, const kiln::Shape& shape, float scale, float shift = 0.0f) {
        kiln::Tensor t = randn_scaled(shape, seed++, scale, shift);
        w.write("cnn." + name, t);
        return t;
    };
    kiln::Tensor c1_w = param("c1_w", {8, 3, 3, 3}, 1.0f / std::sqrt(27.0f)), c1_b = param("c1_b", {8}, 0.1f);
    kiln::Tensor bn_mean = param("bn_mean", {8}, 0.1f);
    kiln::Tensor bn_var = kiln::Tensor::rand({8}, seed++, kiln::DType::f32, 0.5, 1.5);
    w.write("cnn.bn_var", bn_var);
    kiln::Tensor bn_g = param("bn_g", {8}, 0.1f, 1.0f), bn_b = param("bn_b", {8}, 0.1f);
    kiln::Tensor c2_w = param("c2_w", {16, 8, 3, 3}, 1.0f / std::sqrt(72.0f)), c2_b = param("c2_b", {16}, 0.1f);
    kiln::Tensor fc_w = param("fc_w", {10, 16}, 0.25f), fc_b = param("fc_b", {10}, 0.1f);

    kiln::Graph g = kiln::trace(
        "cnn", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 3, 16, 16})},
        [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
            kiln::Var h = kiln::conv2d(in[0], c1_w, c1_b, {1, 1}, {1, 1});           // [N,8,16,16]
            h = kiln::relu(kiln::batch_norm(h, bn_mean, bn_var, bn_g, bn_b, 1e-5));
            h = kiln::max_pool2d(h, {2, 2}, {2, 2});                                 // [N,8,8,8]
            h = kiln::relu(kiln::conv2d(h, c2_w, c2_b, {2, 2}, {1, 1}));            // [N,16,4,4]
            h = kiln::flatten(kiln::global_avg_pool2d(h));                           // [N,16]
            return {kiln::linear(h, fc_w, fc_b)};                                    // [N,10]
        });
    kiln::Function f = engine.load(g);
    std::uint64_t xseed = 3000;
    for (std::int64_t batch : {1, 3, 8})
        run_case(f, w, "cnn", case_tag(batch), kiln::Tensor::randn({batch, 3, 16, 16}, xseed++),
                 {batch, 10});
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: " << argv[0] << " OUTPUT_DIR\n";
        return 2;
    }
    try {
        fs::create_directories(argv[1]);
        Writer w(argv[1]);
        kiln::Engine engine;  // Options::from_env()
        std::cout << "kiln " << kiln::version_string() << " (" << engine.options().to_string() << ")\n";
        mlp(engine, w);
        transformer(engine, w);
        cnn(engine, w);
        std::cout << "wrote " << w.count() << " tensors to " << argv[1] << "\n";
        std::cout << engine.stats().to_json() << "\n";
    } catch (const kiln::Error& e) {
        std::cerr << "kiln::Error: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    if (g_failures != 0) {
        std::cerr << g_failures << " check(s) failed\n";
        return 1;
    }
    std::cout << "consumer: all checks passed\n";
    return 0;
}
