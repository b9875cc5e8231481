#include "src/support/dynlib.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

namespace kiln::support {

DynamicLibrary::~DynamicLibrary() = default;

std::vector<std::string> gpu_library_dirs() {
    std::vector<std::string> dirs;
    if (const char* c = std::getenv("CUDA_HOME"); c && *c) dirs.push_back(std::string(c) + "/lib64");
    if (const char* c = std::getenv("CUDA_PATH"); c && *c) dirs.push_back(std::string(c) + "/lib64");
    dirs.push_back("/usr/local/cuda/lib64");
    if (const char* r = std::getenv("ROCM_PATH"); r && *r) dirs.push_back(std::string(r) + "/lib");
    dirs.push_back("/opt/rocm/lib");
    std::vector<std::string> unique;
    for (auto& d : dirs)
        if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(std::move(d));
    return unique;
}

bool DynamicLibrary::open(const std::vector<std::string>& names, std::string* why) {
    // The loader's message for the first name (what a user would try), then where else it looked.
    std::string first_error, searched;
    auto attempt = [&](const std::string& path) {
        dlerror();
        if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
            handle_ = h;
            path_ = path;
            return true;
        }
        const char* e = dlerror();
        if (first_error.empty()) first_error = e ? e : path + ": not loadable";
        else searched += (searched.empty() ? "" : ", ") + path;
        return false;
    };
    for (const auto& n : names)
        if (attempt(n)) return true;
    for (const auto& dir : gpu_library_dirs())
        for (const auto& n : names)
            if (n.find('/') == std::string::npos && attempt(dir + "/" + n)) return true;
    if (why) *why = first_error + (searched.empty() ? "" : " (also tried " + searched + ")");
    return false;
}

void* DynamicLibrary::symbol(const char* name, std::string* why) const {
    if (!handle_) {
        if (why) *why = std::string("no library is loaded to find ") + name + " in";
        return nullptr;
    }
    dlerror();
    void* p = dlsym(handle_, name);
    if (!p && why) {
        const char* e = dlerror();
        *why = e ? e : std::string(name) + " not found in " + path_;
    }
    return p;
}

}  // namespace kiln::support
