// The fa3_handle behind the C API: the loaded driver, the device, the tuning table, and the
// kernels loaded so far (per CUDA context, lazily, once).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "runtime/driver.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

struct fa3_handle {
  fa3::Driver driver;
  int ordinal = 0;
  CUdevice device = 0;
  CUcontext primary = nullptr;  // retained for the handle's lifetime
  int sm_count = 0;
  int max_smem_per_block = 0;   // opt-in limit for dynamic shared memory
  std::string device_name;
  fa3::TuningTable table;

  struct LoadedKernel {
    CUcontext context;
    const fa3::KernelInfo* kernel;
    CUmodule module;
    CUfunction function;
  };
  std::mutex loaded_mutex;  // guards `loaded` and module loading
  std::vector<LoadedKernel> loaded;

  // Tile counters of the dynamic (causal persistent) scheduler: one per (context, stream),
  // carved out of chunks of device memory allocated on first use. A launch leaves its
  // counter at 0 again, so launches in one stream (which run in order) can share it.
  struct CounterChunk {
    CUcontext context;
    CUdeviceptr base;
    int used;
  };
  struct StreamCounter {
    CUcontext context;
    unsigned long long stream_id;  // cuStreamGetId: unique for the process's lifetime
    CUdeviceptr counter;
  };
  std::mutex counters_mutex;
  std::vector<CounterChunk> counter_chunks;
  std::vector<StreamCounter> counters;
};

namespace fa3 {

Error create_handle(int device, const char* tuning_table_path, fa3_handle** out);
void destroy_handle(fa3_handle* h);

// Makes a context of the handle's device current for one API call: the calling thread's
// current context if it belongs to the device, else the device's primary context (pushed
// here, popped by the destructor).
class ContextScope {
 public:
  explicit ContextScope(fa3_handle* h);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  const Error& error() const { return error_; }
  CUcontext context() const { return context_; }

 private:
  fa3_handle* h_;
  CUcontext context_ = nullptr;
  bool pushed_ = false;
  Error error_;
};

// The kernel's function in `context` (current), loading its cubin the first time.
Error get_function(fa3_handle* h, CUcontext context, const KernelInfo& kernel, CUfunction* out);

// The zeroed 32-bit tile counter of `stream` in `context` (current); the first call for a
// stream may allocate (one chunk of counters per context at a time).
Error stream_tile_counter(fa3_handle* h, CUcontext context, CUstream stream, CUdeviceptr* out);

}  // namespace fa3
