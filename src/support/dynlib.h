#pragma once
// Loading shared libraries at run time (dlopen), for the GPU vendor libraries: nothing at
// build time needs their SDKs, and a machine without them runs the CPU tiers as before.
//
// A library is tried under each of its candidate names in turn (e.g. libnvrtc.so.13, then
// libnvrtc.so.12), first through the dynamic loader's search path, then in the folders
// that usually hold them (CUDA_HOME/lib64, /usr/local/cuda/lib64,
// ROCM_PATH/lib, /opt/rocm/lib). The handle stays loaded for the life of the process.
#include <string>
#include <vector>

namespace kiln::support {

class DynamicLibrary {
public:
    DynamicLibrary() = default;
    DynamicLibrary(const DynamicLibrary&) = delete;
    DynamicLibrary& operator=(const DynamicLibrary&) = delete;
    DynamicLibrary(DynamicLibrary&& o) noexcept : handle_(o.handle_), path_(std::move(o.path_)) { o.handle_ = nullptr; }
    ~DynamicLibrary();  // the library stays loaded (vendor libraries do not like dlclose)

    // Tries each name in turn; returns false and sets *why to every name's loader message
    // when none loads.
    bool open(const std::vector<std::string>& names, std::string* why);
    bool loaded() const { return handle_ != nullptr; }
    const std::string& path() const { return path_; }  // the name that loaded
    // The address of `symbol`, or null (then *why says so, when given).
    void* symbol(const char* name, std::string* why = nullptr) const;
    // Resolves `name` into the function pointer *slot (an entry of an API table such as
    // src/core/cuda/cuda_api.def); when it is missing, appends the name to *missing.
    template <class Fn> void resolve(const char* name, Fn* slot, std::string* missing) const {
        *slot = reinterpret_cast<Fn>(symbol(name));
        if (!*slot) *missing += (missing->empty() ? "" : ", ") + std::string(name);
    }

private:
    void* handle_ = nullptr;
    std::string path_;
};

// The folders searched after the loader's own path (see above), in order.
std::vector<std::string> gpu_library_dirs();

}  // namespace kiln::support
