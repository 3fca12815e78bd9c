// libfa3 opened at run time (dlopen), for the cubins it embeds. fa3-sass does not link
// libfa3: it inspects whichever build it is pointed at.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fa3/fa3.h"  // declarations only: the function types of what dlsym returns

namespace fa3::sass {

class Fa3Library {
 public:
  // nullopt and a sentence in `error` when the file cannot be loaded or is not libfa3.
  static std::optional<Fa3Library> open(const std::string& path, std::string& error);
  Fa3Library(Fa3Library&& other) noexcept;
  Fa3Library& operator=(Fa3Library&&) = delete;
  Fa3Library(const Fa3Library&) = delete;
  ~Fa3Library();

  std::vector<std::string> kernel_names() const;
  // The kernel's cubin bytes (owned by the library), or false with `error` set.
  bool cubin(const std::string& kernel, const void** data, size_t* size, std::string& error) const;

 private:
  Fa3Library() = default;
  void* handle_ = nullptr;
  std::string path_;
  decltype(&::fa3_kernel_count) count_ = nullptr;
  decltype(&::fa3_kernel_name) name_ = nullptr;
  decltype(&::fa3_kernel_cubin) cubin_ = nullptr;
  decltype(&::fa3_last_error) last_error_ = nullptr;
};

// The libfa3.so next to this program (build/fa3-sass -> build/libfa3.so).
std::string default_library_path();

}  // namespace fa3::sass
