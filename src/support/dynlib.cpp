#include "src/support/dynlib.h"

#include <dlfcn.h>

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
    return dirs;
}

bool DynamicLibrary::open(const std::vector<std::string>& names, std::string* why) {
    std::string errors;
    auto attempt = [&](const std::string& path) {
        dlerror();
        if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
            handle_ = h;
            path_ = path;
            return true;
        }
        const char* e = dlerror();
        if (!errors.empty()) errors += "; ";
        errors += e ? e : path + ": not loadable";
        return false;
    };
    for (const auto& n : names)
        if (attempt(n)) return true;
    for (const auto& dir : gpu_library_dirs())
        for (const auto& n : names)
            if (n.find('/') == std::string::npos && attempt(dir + "/" + n)) return true;
    if (why) *why = errors;
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
