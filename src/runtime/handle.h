// The fa3_handle behind the C API: the loaded driver, the device, the tuning table, and the
// kernels loaded so far (per CUDA context, lazily, once).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/driver.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

namespace fa3 {

// A CUDA context as the handle's caches know it. Its CUcontext alone cannot key them: the
// driver hands a destroyed context's address to a later context, and a reset primary context
// (cuDevicePrimaryCtxReset, cudaDeviceReset) keeps its address while its modules and memory
// are gone. cuCtxGetId's id is unique for the process's lifetime.
struct Context {
  CUcontext handle = nullptr;
  unsigned long long id = 0;
  bool operator==(const Context& other) const { return id == other.id; }
};

}  // namespace fa3

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
    fa3::Context context;
    const fa3::KernelInfo* kernel;
    CUmodule module;
    CUfunction function;
    CUfunction pre, post;  // a backward kernel's <name>_pre and <name>_post
    CUfunction last_first;  // and <name>_lf where it has one (BwdConfig::causal_last_first)
  };
  std::mutex loaded_mutex;  // guards `loaded` and module loading
  std::vector<LoadedKernel> loaded;

  // Tile counters of the dynamic (causal persistent) scheduler: one per (context, stream),
  // carved out of chunks of device memory allocated on first use. A launch leaves its
  // counter at 0 again, so launches in one stream (which run in order) can share it. Found by
  // hash (a process may see many streams): by (context, stream id); during a capture, where
  // the driver refuses cuStreamGetId, by (context, stream handle): the counter the handle got
  // last.
  struct CounterChunk {
    fa3::Context context;
    CUdeviceptr base;
    int used;
  };
  struct CounterKey {
    unsigned long long context_id;  // fa3::Context::id
    unsigned long long stream;      // cuStreamGetId, or the CUstream handle's bits
    bool operator==(const CounterKey& o) const {
      return context_id == o.context_id && stream == o.stream;
    }
  };
  struct CounterKeyHash {
    size_t operator()(const CounterKey& k) const {
      return std::hash<unsigned long long>()(k.context_id * 0x9e3779b97f4a7c15ull ^ k.stream);
    }
  };
  std::mutex counters_mutex;
  std::vector<CounterChunk> counter_chunks;
  std::unordered_map<CounterKey, CUdeviceptr, CounterKeyHash> counter_by_stream_id;
  std::unordered_map<CounterKey, CUdeviceptr, CounterKeyHash> counter_by_stream_handle;

  // The workspaces of fa3_backward calls that pass none, per context: a pool in which each
  // workspace belongs to the stream of its last use, and passes to another stream once that
  // use has run on the GPU (an event recorded after it tells). So the pool holds as many as
  // streams have calls in flight at once, however many streams a process makes and drops.
  // Grown on demand, never shrunk. An entry's mutex is held from its lookup to the end of the
  // launch that uses it and the event's record (fa3::with_stream_workspace).
  struct StreamWorkspace {
    fa3::Context context;
    unsigned long long stream_id;  // cuStreamGetId of the stream of its last use
    CUdeviceptr base = 0;
    size_t bytes = 0;
    CUevent last_use = nullptr;  // recorded on stream_id's stream after each use
    // false from a use's start until an event recorded after it (the record failed, or the
    // use threw and so did the record: it stays with its stream until one succeeds)
    bool shared = true;
    int waiters = 0;     // calls of stream_id's stream that found it and wait for its mutex
                         // (guarded by workspaces_mutex): it is not passed on meanwhile
    std::mutex mutex;
  };
  std::mutex workspaces_mutex;  // guards the list, stream_id and waiters
  std::vector<std::unique_ptr<StreamWorkspace>> workspaces;
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
  const Context& context() const { return context_; }

 private:
  void identify();  // context_.id, or error_

  fa3_handle* h_;
  Context context_;
  bool pushed_ = false;
  Error error_;
};

// The kernel's function in `context` (current), loading its cubin the first time.
Error get_function(fa3_handle* h, const Context& context, const KernelInfo& kernel, CUfunction* out);

// A backward kernel's functions (the main loop, <name>_pre, <name>_post, and <name>_lf where
// BwdConfig::causal_last_first) in `context`.
struct BackwardFunctions {
  CUfunction main = nullptr, pre = nullptr, post = nullptr;
  CUfunction last_first = nullptr;  // <name>_lf, where the kernel has one
};
Error get_backward_functions(fa3_handle* h, const Context& context, const KernelInfo& kernel,
                             BackwardFunctions* out);

// The zeroed 32-bit tile counter of `stream` in `context` (current); the first call for a
// stream may allocate (one chunk of counters per context at a time). While the stream is
// capturing a graph (where the driver refuses cuStreamGetId, cuMemAlloc and the zeroing): the
// counter its handle got last, else a spare one of the context's chunks; and
// FA3_ERR_INVALID_ARGUMENT when the context has no chunk with room yet, or for the NULL,
// legacy or per-thread stream's handle.
Error stream_tile_counter(fa3_handle* h, const Context& context, CUstream stream, CUdeviceptr* out);

// Sizes of the handle's workspaces are rounded up to this, so that calls of slowly growing
// problems do not synchronize and reallocate each time.
constexpr size_t kWorkspaceGranularity = size_t{2} << 20;

// Runs `use` with a workspace of the handle's for `stream` in `context` (current), at least
// `bytes` large: the stream's own (the one its last call used), else one whose last use has
// run on the GPU (taken over from another stream; a stream made and dropped per call leaves
// no workspace behind), else a new one. Growing the stream's own first synchronizes the
// stream (launches queued there may still use the old buffer), then frees the old buffer and
// allocates the new one (cuMemAlloc), so the peak is never both. Calls for one stream wait
// for each other from the lookup to the end of `use`: a growth in one thread must not free
// the buffer another thread is launching with. After `use`, an event recorded on the stream
// marks the end of its work. Refused (FA3_ERR_INVALID_ARGUMENT) on a stream that is capturing
// a graph.
Error with_stream_workspace(fa3_handle* h, const Context& context, CUstream stream, size_t bytes,
                            const std::function<Error(CUdeviceptr)>& use);

}  // namespace fa3
