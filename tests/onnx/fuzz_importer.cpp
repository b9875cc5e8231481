// A bounded mutation fuzzer of the ONNX importer. Seeds: the MLP and CNN of
// model_builder.h and, when present, some of ONNX's node-test models and tensors. Each
// iteration mutates a seed's bytes (bit flips, byte sets, inserts, deletes, truncation,
// splices; fixed seed) and feeds the result to inspect_onnx_from_memory, load_onnx_from_memory
// (running small loaded graphs once on the interpreter) and onnx_tensor_from_memory. Every
// outcome must be a result or a kiln::Error: any other exception fails the run, and a crash
// fails the test that runs it.
//
//   onnx_fuzz [--iterations N] [--seed S] [--seconds T] [--corpus DIR]
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "tests/onnx/model_builder.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string mutate(std::string s, const std::vector<std::string>& seeds, std::mt19937_64& rng) {
    auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
    int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
        switch (rng() % 8) {
        case 0:  // flip a bit
            if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
            break;
        case 1: {  // an interesting byte (varint boundaries, wire types)
            static const unsigned char kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12, 0x3a, 0x42};
            if (!s.empty()) s[pick(s.size())] = static_cast<char>(kBytes[rng() % sizeof(kBytes)]);
            break;
        }
        case 2:  // a random byte
            if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
            break;
        case 3: {  // insert random bytes
            std::string ins(1 + pick(8), '\0');
            for (auto& c : ins) c = static_cast<char>(rng());
            s.insert(pick(s.size() + 1), ins);
            break;
        }
        case 4:  // delete a range
            if (!s.empty()) {
                std::size_t at = pick(s.size());
                s.erase(at, 1 + pick(std::min<std::size_t>(16, s.size() - at)));
            }
            break;
        case 5:  // truncate
            s.resize(pick(s.size() + 1));
            break;
        case 6: {  // splice in a chunk of another seed
            const std::string& o = seeds[pick(seeds.size())];
            if (o.empty()) break;
            std::size_t from = pick(o.size()), len = 1 + pick(std::min<std::size_t>(64, o.size() - from));
            s.insert(pick(s.size() + 1), o.substr(from, len));
            break;
        }
        default: {  // duplicate a chunk of itself
            if (s.empty()) break;
            std::size_t from = pick(s.size()), len = 1 + pick(std::min<std::size_t>(32, s.size() - from));
            s.insert(pick(s.size() + 1), s.substr(from, len));
            break;
        }
        }
    }
    return s;
}

// Runs a loaded graph once on the interpreter when its inputs are small.
void try_run(const kiln::Graph& g) {
    std::vector<kiln::Tensor> args;
    std::int64_t total = 0;
    for (const auto& in : g.inputs()) {
        kiln::Shape s;
        for (const kiln::Dim& d : in.dims) s.push_back(d.is_static() ? d.value() : 2);
        std::int64_t n = 1;
        for (auto d : s) n = d > 0 && n > (std::int64_t{1} << 40) / d ? (std::int64_t{1} << 40) : n * d;
        total += n;
        if (total > 100000) return;
        args.push_back(kiln::is_floating(in.dtype) ? kiln::Tensor::randn(s, 1, in.dtype) : kiln::Tensor::zeros(s, in.dtype));
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

}  // namespace

int main(int argc, char** argv) {
    long iterations = 20000, seconds = 60;
    std::uint64_t seed = 1;
    std::string corpus;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--iterations") iterations = std::stol(v);
        else if (k == "--seed") seed = std::stoull(v);
        else if (k == "--seconds") seconds = std::stol(v);
        else if (k == "--corpus") corpus = v;
        else {
            std::cerr << "usage: onnx_fuzz [--iterations N] [--seed S] [--seconds T] [--corpus DIR]\n";
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
    std::cout << "onnx_fuzz: " << models.size() << " model seeds, " << tensors.size() << " tensor seeds, seed " << seed
              << ", up to " << iterations << " iterations or " << seconds << " s\n";

    std::mt19937_64 rng(seed);
    auto t0 = std::chrono::steady_clock::now();
    long done = 0, loaded = 0, ran = 0, rejected = 0, failures = 0;
    for (; done < iterations; ++done) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(seconds)) break;
        bool tensor_case = !tensors.empty() && rng() % 8 == 0;
        const auto& pool = tensor_case ? tensors : models;
        std::string input = mutate(pool[rng() % pool.size()], pool, rng);
        try {
            if (tensor_case) {
                kiln::onnx_tensor_from_memory(input);
                continue;
            }
            kiln::OnnxModelInfo info = kiln::inspect_onnx_from_memory(input);
            kiln::Graph g = kiln::load_onnx_from_memory(input);
            ++loaded;
            try_run(g);
            ++ran;
        } catch (const kiln::Error&) {
            ++rejected;
        } catch (const std::exception& e) {
            ++failures;
            std::cout << "FAIL: iteration " << done << " (seed " << seed << "): " << typeid(e).name() << ": " << e.what()
                      << "\n";
            if (failures >= 10) break;
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "onnx_fuzz: " << done << " inputs in " << secs << " s: " << loaded << " loaded, " << ran << " ran, " << rejected
              << " rejected with kiln::Error, " << failures << " failed otherwise\n";
    return failures == 0 ? 0 : 1;
}
