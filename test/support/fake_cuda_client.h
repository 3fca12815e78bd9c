// The CPU tests' handle on the fake CUDA driver (test/fake_cuda): its controls, resolved with
// dlsym from the same libfakecuda.so that libfa3 loads through $FA3_LIBCUDA. Header-only (it
// uses Catch's REQUIRE), for the test files that drive the runtime against the fake.
#pragma once

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "fa3/fa3.h"

struct FakeCuda {
  void (*reset)();
  void (*fail)(const char*, int);
  void (*set_device)(int, int, int);
  void (*make_current)(int);
  int (*current_is_primary)();
  void (*log)(char*, size_t);
  size_t (*allocated_bytes)(int);
  int (*last_launch)(unsigned*, unsigned*, unsigned*, void*, size_t);
  void (*set_driver_version)(int);
  void (*set_sm_count)(int);
  void (*launch_kinds_into)(char*, size_t);
  void (*launch_grids_into)(char*, size_t);
  void (*launch_names_into)(char*, size_t);
  void (*set_capturing)(void*);
  void (*renew_context)(int);
  void (*set_stream_busy)(void*, int);
  int (*live_events)();
  void (*set_foreign_capture)(int);
  int (*foreign_capture_invalidated)();
  int (*capture_mode)();

  // The driver calls so far, each "name;".
  std::string calls() const {
    std::vector<char> buf(1 << 16);
    log(buf.data(), buf.size());
    return buf.data();
  }
  // How often `call` appears in `log` (a calls() text), or in the calls so far.
  static size_t count(const std::string& log, const std::string& call) {
    size_t n = 0;
    for (size_t pos = log.find(call + ";"); pos != std::string::npos;
         pos = log.find(call + ";", pos + 1))
      ++n;
    return n;
  }
  size_t count(const std::string& call) const { return count(calls(), call); }
  // The launches since the last reset: 'P' a programmatic dependent launch, '-' an ordinary one.
  std::string launch_kinds() const {
    std::vector<char> buf(1 << 12);
    launch_kinds_into(buf.data(), buf.size());
    return buf.data();
  }
  // The launches' grid x since the last reset, each followed by a space ("4 132 4 ").
  std::string launch_grids() const {
    std::vector<char> buf(1 << 12);
    launch_grids_into(buf.data(), buf.size());
    return buf.data();
  }
  // The launched functions' names since the last reset, each followed by a space.
  std::string launch_names() const {
    std::vector<char> buf(1 << 14);
    launch_names_into(buf.data(), buf.size());
    return buf.data();
  }
};

// libfakecuda.so next to the test binary.
inline std::string fake_library_path() {
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string("build/x");
  return path.substr(0, path.rfind('/')) + "/libfakecuda.so";
}

inline FakeCuda& fake() {
  static FakeCuda f = [] {
    const std::string path = fake_library_path();
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO("dlopen " << path << ": " << (lib ? "" : dlerror()));
    REQUIRE(lib != nullptr);
    FakeCuda c;
    c.reset = reinterpret_cast<void (*)()>(dlsym(lib, "fake_cuda_reset"));
    c.fail = reinterpret_cast<void (*)(const char*, int)>(dlsym(lib, "fake_cuda_fail"));
    c.set_device = reinterpret_cast<void (*)(int, int, int)>(dlsym(lib, "fake_cuda_set_device"));
    c.make_current = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_make_current"));
    c.current_is_primary = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_current_is_primary"));
    c.log = reinterpret_cast<void (*)(char*, size_t)>(dlsym(lib, "fake_cuda_log"));
    c.allocated_bytes = reinterpret_cast<size_t (*)(int)>(dlsym(lib, "fake_cuda_allocated_bytes"));
    c.last_launch = reinterpret_cast<int (*)(unsigned*, unsigned*, unsigned*, void*, size_t)>(
        dlsym(lib, "fake_cuda_last_launch"));
    c.set_driver_version = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_set_driver_version"));
    c.launch_kinds_into =
        reinterpret_cast<void (*)(char*, size_t)>(dlsym(lib, "fake_cuda_launch_kinds"));
    REQUIRE(c.set_driver_version != nullptr);
    c.set_sm_count = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_set_sm_count"));
    REQUIRE(c.set_sm_count != nullptr);
    c.launch_grids_into =
        reinterpret_cast<void (*)(char*, size_t)>(dlsym(lib, "fake_cuda_launch_grids"));
    REQUIRE(c.launch_kinds_into != nullptr);
    REQUIRE(c.launch_grids_into != nullptr);
    c.launch_names_into =
        reinterpret_cast<void (*)(char*, size_t)>(dlsym(lib, "fake_cuda_launch_names"));
    REQUIRE(c.launch_names_into != nullptr);
    c.set_capturing = reinterpret_cast<void (*)(void*)>(dlsym(lib, "fake_cuda_set_capturing"));
    REQUIRE(c.set_capturing != nullptr);
    c.renew_context = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_renew_context"));
    REQUIRE(c.renew_context != nullptr);
    c.set_stream_busy = reinterpret_cast<void (*)(void*, int)>(dlsym(lib, "fake_cuda_set_stream_busy"));
    REQUIRE(c.set_stream_busy != nullptr);
    c.live_events = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_live_events"));
    REQUIRE(c.live_events != nullptr);
    c.set_foreign_capture = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_set_foreign_capture"));
    c.foreign_capture_invalidated =
        reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_foreign_capture_invalidated"));
    c.capture_mode = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_capture_mode"));
    REQUIRE(c.set_foreign_capture != nullptr);
    REQUIRE(c.foreign_capture_invalidated != nullptr);
    REQUIRE(c.capture_mode != nullptr);
    REQUIRE(c.allocated_bytes != nullptr);
    REQUIRE(c.last_launch != nullptr);
    return c;
  }();
  return f;
}

// A handle of libfa3 on the fake driver ($FA3_LIBCUDA set while it lives), its creation's calls
// cleared from the log.
struct FakeHandle {
  fa3_handle* h = nullptr;
  // `tuning_table`: a table file (NULL: the built-in table).
  explicit FakeHandle(const char* tuning_table = nullptr) {
    setenv("FA3_LIBCUDA", fake_library_path().c_str(), 1);
    fake().reset();
    const fa3_status s = fa3_create(&h, 0, tuning_table);
    INFO(fa3_last_error());
    REQUIRE(s == FA3_OK);
    fake().reset();
  }
  ~FakeHandle() {
    if (h) fa3_destroy(h);
    unsetenv("FA3_LIBCUDA");
  }
  FakeHandle(const FakeHandle&) = delete;
  FakeHandle& operator=(const FakeHandle&) = delete;
  // Destroys the handle now (to look at what fa3_destroy releases).
  void destroy() {
    fa3_destroy(h);
    h = nullptr;
  }
};
