// The persistent code cache (KILN_CACHE_DIR, jit/tiering/disk_cache.h): a second engine, and a
// second process, reach tier 2 with zero compiles; truncated, corrupted and foreign entries
// are detected, recompiled and replaced; unsafe directories are refused.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/tiering/disk_cache.h"
#include "have_tier.h"
#include "reference.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <spawn.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A fresh private directory name under the system's temporary directory (not created).
std::string fresh_dir(const std::string& tag) {
    static int n = 0;
    fs::path p = fs::temp_directory_path() /
                 ("kiln-cache-test-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(++n));
    fs::remove_all(p);
    return p.string();
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

}  // namespace

TEST_CASE("persistent cache: a missing directory is created private; a directory others can write is refused") {
    const std::string dir = fresh_dir("perm");
    auto dc = jit::DiskCache::open(dir + "/nested/");
    struct stat st {};
    REQUIRE(::stat((dir + "/nested").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    ::chmod((dir + "/nested").c_str(), 0777);
    try {
        (void)jit::DiskCache::open(dir + "/nested");
        FAIL("a world-writable cache directory was accepted");
    } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("KILN_CACHE_DIR") != std::string::npos);
        CHECK(msg.find("0777") != std::string::npos);
        CHECK(msg.find("other users") != std::string::npos);
    }
    ::chmod((dir + "/nested").c_str(), 0770);
    CHECK_THROWS_WITH_AS((void)jit::DiskCache::open(dir + "/nested"), doctest::Contains("is writable by its group"), Error);
    // Through the engine, with a file where the directory should be.
    spit(dir + "/file", "x");
    Options o;
    o.cache_dir = dir + "/file";
    CHECK_THROWS_WITH_AS(Engine{o}, doctest::Contains("is not a directory"), Error);
    fs::remove_all(dir);
}

TEST_CASE("persistent cache: entries round-trip; truncated, corrupted and foreign entries are rejected") {
    const std::string dir = fresh_dir("entries");
    auto dc = jit::DiskCache::open(dir);
    dc->store("key one", {"object bytes \x01\x02", "sym_one"});
    auto e = dc->load("key one");
    REQUIRE(e.has_value());
    CHECK(e->object == "object bytes \x01\x02");
    CHECK(e->symbol == "sym_one");
    CHECK_FALSE(dc->load("key two").has_value());
    CHECK(dc->stats().hits == 1);
    CHECK(dc->stats().misses == 1);
    const fs::path p = dc->path_of("key one");
    const std::string good = slurp(p);
    // Every truncation and every single-byte flip is detected.
    std::uint64_t rejected = dc->stats().rejected;
    for (std::size_t cut = 0; cut < good.size(); cut += 7) {
        spit(p, good.substr(0, cut));
        CHECK_FALSE(dc->load("key one").has_value());
        CHECK(dc->stats().rejected == ++rejected);
        CHECK_FALSE(fs::exists(p));  // removed, so that the recompile replaces it
    }
    for (std::size_t i = 0; i < good.size(); ++i) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ 0x20);
        spit(p, bad);
        CHECK_FALSE(dc->load("key one").has_value());
        CHECK(dc->stats().rejected == ++rejected);
    }
    // A valid entry of another key under this key's name (a collision, or a copied file).
    dc->store("key two", {"other", "sym_two"});
    fs::copy_file(dc->path_of("key two"), p, fs::copy_options::overwrite_existing);
    CHECK_FALSE(dc->load("key one").has_value());
    CHECK(dc->stats().rejected == ++rejected);
    // No temporary files are left behind.
    for (const auto& f : fs::directory_iterator(dir)) CHECK(f.path().extension() == ".kobj");
    fs::remove_all(dir);
}


namespace {

using ref::kNever;

Graph model() {
    Tensor w = Tensor::randn({32, 16}, 7), g = Tensor::rand({16}, 8, DType::f32, 0.5, 1.5), b = Tensor::randn({16}, 9);
    return trace("cached", {arg("x", DType::f32, {dyn("B"), 32})}, [&](const std::vector<Var>& in) {
        Var h = gelu(matmul(in[0], w), true);
        return std::vector<Var>{softmax(layer_norm(h, g, b), -1), sum(h * sigmoid(h), -1)};
    });
}

Options cached(const std::string& dir) {
    Options o;
    o.async_compile = false;
    o.tier1_threshold = kNever;
    o.tier2_threshold = kNever;  // only warmup compiles
    o.cache_dir = dir;
    return o;
}

struct RunResult {
    FunctionStats fs;
    EngineStats es;
};

// Loads the model with KILN_CACHE_DIR=dir, warms it up for B=4, runs it and checks the
// answers against the interpreter.
RunResult run_once(const std::string& dir) {
    Engine engine(cached(dir));
    Function f = engine.load(model());
    f.warmup({{{4, 32}}});
    Options io;
    io.jit = false;
    Function ref = Engine(io).load(model());
    std::vector<Tensor> in = {Tensor::randn({4, 32}, 3)};
    auto a = f(in), r = ref(in);
    REQUIRE(a.size() == r.size());
    for (std::size_t k = 0; k < a.size(); ++k) CHECK(ref::max_rel_diff(a[k], r[k]) < 1e-4);
    return {f.stats(), engine.stats()};
}

std::vector<fs::path> entries(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".kobj") out.push_back(e.path());
    return out;
}

}  // namespace

TEST_CASE("persistent cache: a second engine reaches tier 2 with zero compiles; corrupted entries are recompiled") {
    if (test::lacks_tier(2)) return;
    const std::string dir = fresh_dir("engine");
    RunResult first = run_once(dir);
    CHECK(first.fs.compiles > 0);
    CHECK(first.fs.persistent_cache_hits == 0);
    CHECK(first.es.persistent_cache_writes == first.fs.compiles);
    CHECK(first.fs.calls_by_tier[2] == 1);
    const std::size_t n = entries(dir).size();
    CHECK(n == first.fs.compiles);

    RunResult second = run_once(dir);
    CHECK(second.fs.compiles == 0);
    CHECK(second.fs.persistent_cache_hits == first.fs.compiles);
    CHECK(second.es.persistent_cache_rejected == 0);
    CHECK(second.fs.calls_by_tier[2] == 1);

    // Corrupt one entry in the middle, truncate another: both are detected and recompiled.
    auto files = entries(dir);
    REQUIRE(files.size() >= 2);
    std::string s = slurp(files[0]);
    s[s.size() / 2] = static_cast<char>(s[s.size() / 2] ^ 0x5a);
    spit(files[0], s);
    std::string t = slurp(files[1]);
    spit(files[1], t.substr(0, t.size() / 3));
    RunResult third = run_once(dir);
    CHECK(third.es.persistent_cache_rejected == 2);
    CHECK(third.fs.compiles == 2);
    CHECK(third.fs.persistent_cache_hits == first.fs.compiles - 2);
    CHECK(third.fs.calls_by_tier[2] == 1);
    // ... and replaced: the next engine loads everything again.
    RunResult fourth = run_once(dir);
    CHECK(fourth.fs.compiles == 0);
    CHECK(fourth.es.persistent_cache_rejected == 0);
    CHECK(entries(dir).size() == n);
    fs::remove_all(dir);
}

// Run as its own test (a first process on a fresh directory), and as the child of the test
// below, which sets KILN_TEST_CACHE_CHILD to "<dir>|<file for the stats>".
TEST_CASE("persistent cache: one process run") {
    if (test::lacks_tier(2)) return;
    std::string dir, out;
    if (const char* v = std::getenv("KILN_TEST_CACHE_CHILD")) {
        const std::string s = v;
        dir = s.substr(0, s.find('|'));
        out = s.substr(s.find('|') + 1);
    } else {
        dir = fresh_dir("single");
    }
    RunResult r = run_once(dir);
    CHECK(r.fs.calls_by_tier[2] == 1);
    if (!out.empty()) std::ofstream(out) << r.fs.compiles << " " << r.fs.persistent_cache_hits << " " << r.fs.calls_by_tier[2];
    else fs::remove_all(dir);
}

TEST_CASE("persistent cache: a second process reaches tier 2 with zero compiles") {
    if (test::lacks_tier(2)) return;
    const std::string dir = fresh_dir("process");
    auto child = [&](int i) {
        const std::string out = dir + "-out" + std::to_string(i);
        const std::string env = "KILN_TEST_CACHE_CHILD=" + dir + "|" + out;
        std::vector<std::string> envs = {env};
        for (char** e = environ; *e; ++e)
            if (std::string(*e).rfind("KILN_", 0) != 0) envs.emplace_back(*e);
        std::vector<char*> envp;
        for (auto& e : envs) envp.push_back(e.data());
        envp.push_back(nullptr);
        std::string self = fs::read_symlink("/proc/self/exe").string();
        std::string tc = "--test-case=persistent cache: one process run";
        std::vector<char*> argv = {self.data(), tc.data(), nullptr};
        pid_t pid = 0;
        REQUIRE(::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) == 0);
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        std::ifstream in(out);
        std::uint64_t compiles = 99, hits = 99, tier2 = 0;
        in >> compiles >> hits >> tier2;
        fs::remove(out);
        return std::array<std::uint64_t, 3>{compiles, hits, tier2};
    };
    auto a = child(1);
    auto b = child(2);
    MESSAGE("first process: " << a[0] << " compiles, " << a[1] << " loads; second: " << b[0] << " compiles, " << b[1]
                              << " loads");
    CHECK(a[0] > 0);
    CHECK(a[1] == 0);
    CHECK(a[2] == 1);
    CHECK(b[0] == 0);
    CHECK(b[1] == a[0]);
    CHECK(b[2] == 1);
    fs::remove_all(dir);
}

