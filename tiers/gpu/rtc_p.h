#pragma once
// What the NVRTC and HIPRTC loaders (nvrtc.cpp, hiprtc.cpp) share: one compile of a source
// with a runtime compiler whose functions have the same shape in both libraries (create, compile, log,
// code, destroy). Private to tiers/gpu.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::tiers::gpu::detail {

// One runtime compiler's entry points, under the names the loaders give them. Strings: how
// the library passes arrays of strings (HIPRTC without the inner const).
template <class Result, class Program, class Strings = const char* const*> struct RtcFns {
    const char* (*error_string)(Result) = nullptr;
    Result (*create)(Program*, const char*, const char*, int, Strings, Strings) = nullptr;
    Result (*destroy)(Program*) = nullptr;
    Result (*compile)(Program, int, Strings) = nullptr;
    Result (*log_size)(Program, std::size_t*) = nullptr;
    Result (*log)(Program, char*) = nullptr;
    Result (*code_size)(Program, std::size_t*) = nullptr;
    Result (*code)(Program, char*) = nullptr;
};

// Compiles `source` with `options`; fills out.ok, binary, log, error and ms. Result 0 is
// success in both libraries.
template <class Out, class Result, class Program, class Strings>
Out rtc_compile(const RtcFns<Result, Program, Strings>& f, const std::string& source, const std::string& name,
                const std::vector<std::string>& options) {
    Out out;
    const auto t0 = std::chrono::steady_clock::now();
    auto failed = [&](const char* step, Result r) {
        out.error = std::string(step) + ": " + (f.error_string ? f.error_string(r) : "error") + " (" +
                    std::to_string(static_cast<int>(r)) + ")";
        if (!out.log.empty()) out.error += "\n" + out.log;
    };
    Program prog{};
    Result r = f.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
    if (static_cast<int>(r) != 0) {
        failed("create program", r);
        return out;
    }
    std::vector<const char*> opts;
    for (const std::string& o : options) opts.push_back(o.c_str());
    const Result cr = f.compile(prog, static_cast<int>(opts.size()), opts.data());
    std::size_t n = 0;
    if (static_cast<int>(f.log_size(prog, &n)) == 0 && n > 1) {
        out.log.assign(n, '\0');
        if (static_cast<int>(f.log(prog, out.log.data())) != 0) out.log.clear();
        while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
    }
    if (static_cast<int>(cr) != 0) {
        failed("compile", cr);
    } else if (static_cast<int>(r = f.code_size(prog, &n)) != 0) {
        failed("code size", r);
    } else {
        out.binary.assign(n, '\0');
        if (static_cast<int>(r = f.code(prog, out.binary.data())) != 0) failed("code", r);
        else out.ok = true;
    }
    f.destroy(&prog);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace kiln::tiers::gpu::detail
