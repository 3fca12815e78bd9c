#include "fa3_library.h"

#include <dlfcn.h>
#include <unistd.h>

namespace fa3::sass {

namespace {

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(handle, name));
}

}  // namespace

std::optional<Fa3Library> Fa3Library::open(const std::string& path, std::string& error) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    error = "cannot load " + path + ": " + (why ? why : "unknown dlopen error") +
            ". Build it with `make`, or point fa3-sass at a library with --lib, a cubin with --cubin, "
            "or SASS text with --sass.";
    return std::nullopt;
  }
  Fa3Library lib;
  lib.handle_ = handle;
  lib.path_ = path;
  // Typed by the public header: a changed signature there stops this compiling.
  lib.count_ = symbol<decltype(lib.count_)>(handle, "fa3_kernel_count");
  lib.name_ = symbol<decltype(lib.name_)>(handle, "fa3_kernel_name");
  lib.cubin_ = symbol<decltype(lib.cubin_)>(handle, "fa3_kernel_cubin");
  lib.last_error_ = symbol<decltype(lib.last_error_)>(handle, "fa3_last_error");
  if (!lib.count_ || !lib.name_ || !lib.cubin_) {
    error =
        path + " is not libfa3: it does not export fa3_kernel_count, fa3_kernel_name and fa3_kernel_cubin.";
    return std::nullopt;  // lib's destructor closes the handle
  }
  return std::optional<Fa3Library>(std::move(lib));
}

Fa3Library::Fa3Library(Fa3Library&& other) noexcept
    : handle_(other.handle_),
      path_(std::move(other.path_)),
      count_(other.count_),
      name_(other.name_),
      cubin_(other.cubin_),
      last_error_(other.last_error_) {
  other.handle_ = nullptr;
}

Fa3Library::~Fa3Library() {
  if (handle_) ::dlclose(handle_);
}

std::vector<std::string> Fa3Library::kernel_names() const {
  std::vector<std::string> names;
  const int n = count_();
  for (int i = 0; i < n; ++i)
    if (const char* name = name_(i)) names.push_back(name);
  return names;
}

bool Fa3Library::cubin(const std::string& kernel, const void** data, size_t* size, std::string& error) const {
  if (cubin_(kernel.c_str(), data, size) == FA3_OK && *data && *size > 0) return true;
  error = path_ + " gave no cubin for " + kernel;
  if (last_error_ && last_error_()[0]) error += std::string(": ") + last_error_();
  return false;
}

std::string default_library_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "libfa3.so";
  std::string exe(buf, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return (slash == std::string::npos ? std::string(".") : exe.substr(0, slash)) + "/libfa3.so";
}

}  // namespace fa3::sass
