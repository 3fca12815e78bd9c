#include "runtime/handle.h"

#include <cstdint>
#include <memory>

#include "kernels/fwd_config.h"

namespace fa3 {

namespace {

// Room for one more element, so that the push_back after a driver call cannot throw (and leak
// what the call made); growing geometrically as push_back would.
template <class T>
void reserve_one_more(std::vector<T>* v) {
  if (v->size() == v->capacity()) v->reserve(v->size() < 4 ? 4 : 2 * v->size());
}

Error query_device(fa3_handle* h, int ordinal) {
  Driver& d = h->driver;
  int count = 0;
  CUresult r = d.device_get_count(&count);
  if (r != CUDA_SUCCESS) return d.fail(r, "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    return make_error(count == 0 ? FA3_ERR_NO_DEVICE : FA3_ERR_INVALID_ARGUMENT,
                      "device " + std::to_string(ordinal) + " does not exist: the driver sees " +
                          std::to_string(count) + " CUDA device(s)");
  r = d.device_get(&h->device, ordinal);
  if (r != CUDA_SUCCESS) return d.fail(r, "cuDeviceGet");
  char name[256] = {};
  d.device_get_name(name, sizeof name - 1, h->device);
  h->device_name = name;
  int major = 0, minor = 0;
  d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, h->device);
  d.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, h->device);
  if (major != 9 || minor != 0)
    return make_error(FA3_ERR_ARCH, "device " + std::to_string(ordinal) + " (" + h->device_name +
                                        ") has compute capability " + std::to_string(major) +
                                        "." + std::to_string(minor) +
                                        "; fa3's kernels are built for sm_90a (Hopper: H100, H200) only");
  d.device_get_attribute(&h->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h->device);
  d.device_get_attribute(&h->max_smem_per_block,
                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, h->device);
  h->ordinal = ordinal;
  return Error::ok();
}

}  // namespace

Error create_handle(int device, const char* tuning_table_path, fa3_handle** out) {
  auto h = std::make_unique<fa3_handle>();
  // The table first: it needs no driver, and a bad table is the caller's error to fix.
  Error e = tuning_table_path ? TuningTable::load_file(tuning_table_path, compiled_forward_and_backward_kernels(), &h->table)
                              : TuningTable::load_builtin(&h->table);
  if (e.failed()) return e;
  e = Driver::load(&h->driver);
  if (e.failed()) return e;
  e = query_device(h.get(), device);
  if (e.failed()) return e;
  const CUresult r = h->driver.primary_ctx_retain(&h->primary, h->device);
  if (r != CUDA_SUCCESS) return h->driver.fail(r, "cuDevicePrimaryCtxRetain");
  *out = h.release();
  return Error::ok();
}

void destroy_handle(fa3_handle* h) {
  Driver& d = h->driver;
  // Modules, counters and workspaces of the primary context are released here; those of other
  // (caller-owned) contexts go away with their context, which may already be destroyed.
  // Only the primary context as it is now: what a reset took with it is gone, and its device
  // addresses may belong to new allocations.
  Context primary{h->primary, 0};
  const Driver::RelaxedCaptureMode relaxed(d);
  if (d.ctx_get_id(h->primary, &primary.id) == CUDA_SUCCESS &&
      d.ctx_push_current(h->primary) == CUDA_SUCCESS) {
    for (const fa3_handle::LoadedKernel& k : h->loaded)
      if (k.context == primary) d.module_unload(k.module);
    for (const fa3_handle::CounterChunk& c : h->counter_chunks)
      if (c.context == primary) d.mem_free(c.base);
    for (const auto& w : h->workspaces)
      if (w->context == primary) {
        if (w->base != 0) d.mem_free(w->base);
        d.event_destroy(w->last_use);
      }
    CUcontext popped;
    d.ctx_pop_current(&popped);
  }
  d.primary_ctx_release(h->device);
  // The driver library stays loaded: other users in the process (the CUDA runtime) share it.
  delete h;
}

ContextScope::ContextScope(fa3_handle* h) : h_(h) {
  Driver& d = h->driver;
  CUcontext current = nullptr;
  if (d.ctx_get_current(&current) == CUDA_SUCCESS && current != nullptr) {
    CUdevice dev;
    if (d.ctx_get_device(&dev) == CUDA_SUCCESS && dev == h->device) {
      context_.handle = current;
      identify();
      return;
    }
  }
  const CUresult r = d.ctx_push_current(h->primary);
  if (r != CUDA_SUCCESS) {
    error_ = d.fail(r, "making the primary context of device " + std::to_string(h->ordinal) +
                           " current (cuCtxPushCurrent)");
    return;
  }
  context_.handle = h->primary;
  pushed_ = true;
  identify();
}

void ContextScope::identify() {
  const CUresult r = h_->driver.ctx_get_id(context_.handle, &context_.id);
  if (r != CUDA_SUCCESS) error_ = h_->driver.fail(r, "identifying the current context (cuCtxGetId)");
}

ContextScope::~ContextScope() {
  if (pushed_) {
    CUcontext popped;
    h_->driver.ctx_pop_current(&popped);
  }
}

namespace {

// The entry of `kernel` loaded in `context`, loading its cubin (and, for a backward kernel,
// finding its _pre, _post and _lf) the first time. Called with loaded_mutex held.
Error load_kernel(fa3_handle* h, const Context& context, const KernelInfo& kernel,
                  const fa3_handle::LoadedKernel** out) {
  for (const fa3_handle::LoadedKernel& k : h->loaded)
    if (k.context == context && k.kernel == &kernel) {
      *out = &k;
      return Error::ok();
    }
  const Driver& d = h->driver;
  const bool backward = kernel.direction == Direction::Backward;
  const uint32_t smem = backward ? BwdSmemLayout::of(kernel.bwd).total_bytes
                                 : FwdSmemLayout::of(kernel.fwd).total_bytes;
  if (static_cast<int>(smem) > h->max_smem_per_block)
    return make_error(FA3_ERR_UNSUPPORTED, "kernel " + kernel.name + " needs " +
                                               std::to_string(smem) + " bytes of shared memory; " +
                                               h->device_name + " allows " +
                                               std::to_string(h->max_smem_per_block));
  CUmodule module = nullptr;
  const Driver::RelaxedCaptureMode relaxed(d);
  // Every host allocation before the load, so that nothing throws while the module is not yet
  // recorded (no module leaks); the failure sentences below come after its unload.
  reserve_one_more(&h->loaded);
  const std::string pre = kernel.name + "_pre", post = kernel.name + "_post",
                    last_first = kernel.name + "_lf";
  CUresult r = d.module_load_data(&module, kernel.cubin);
  if (r != CUDA_SUCCESS) return d.fail(r, "loading kernel " + kernel.name + " (cuModuleLoadData)");
  fa3_handle::LoadedKernel loaded{context, &kernel, module, nullptr, nullptr, nullptr, nullptr};
  r = d.module_get_function(&loaded.function, module, kernel.name.c_str());
  if (r == CUDA_SUCCESS)
    r = d.func_set_attribute(loaded.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(smem));
  if (r == CUDA_SUCCESS && backward)
    r = d.module_get_function(&loaded.pre, module, pre.c_str());
  if (r == CUDA_SUCCESS && backward)
    r = d.module_get_function(&loaded.post, module, post.c_str());
  if (r == CUDA_SUCCESS && backward && kernel.bwd.causal_last_first()) {
    r = d.module_get_function(&loaded.last_first, module, last_first.c_str());
    if (r == CUDA_SUCCESS)
      r = d.func_set_attribute(loaded.last_first, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(smem));
  }
  if (r != CUDA_SUCCESS) {
    d.module_unload(module);
    return d.fail(r, "preparing kernel " + kernel.name);
  }
  h->loaded.push_back(loaded);
  *out = &h->loaded.back();
  return Error::ok();
}

}  // namespace

Error get_function(fa3_handle* h, const Context& context, const KernelInfo& kernel, CUfunction* out) {
  std::lock_guard<std::mutex> lock(h->loaded_mutex);
  const fa3_handle::LoadedKernel* k = nullptr;
  Error e = load_kernel(h, context, kernel, &k);
  if (e.failed()) return e;
  *out = k->function;
  return Error::ok();
}

Error get_backward_functions(fa3_handle* h, const Context& context, const KernelInfo& kernel,
                             BackwardFunctions* out) {
  std::lock_guard<std::mutex> lock(h->loaded_mutex);
  const fa3_handle::LoadedKernel* k = nullptr;
  Error e = load_kernel(h, context, kernel, &k);
  if (e.failed()) return e;
  *out = {k->function, k->pre, k->post, k->last_first};
  return Error::ok();
}

namespace {

constexpr int kCountersPerChunk = 1024;

// A counter no stream has had, from a chunk of `context` with room (zero since the chunk's
// zeroing, zero_counters); nullptr when none has room. Called with counters_mutex held.
fa3_handle::CounterChunk* chunk_with_room(fa3_handle* h, const Context& context) {
  for (fa3_handle::CounterChunk& c : h->counter_chunks)
    if (c.context == context && c.used < kCountersPerChunk) return &c;
  return nullptr;
}

fa3_handle::CounterKey by_handle(const Context& context, CUstream stream) {
  return {context.id, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(stream))};
}

CUdeviceptr take_counter(fa3_handle::CounterChunk* chunk) {
  return chunk->base + sizeof(uint32_t) * static_cast<unsigned>(chunk->used++);
}

// Asked before any call the driver refuses during a capture: a refused call invalidates it.
Error stream_capturing(Driver& d, CUstream stream, bool* capturing) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = d.stream_is_capturing(stream, &capture);
  if (r != CUDA_SUCCESS)
    return d.fail(r, "asking whether the stream is capturing (cuStreamIsCapturing)");
  *capturing = capture != CU_STREAM_CAPTURE_STATUS_NONE;
  return Error::ok();
}

// The id, not the handle, names a stream: a stream handle can be reused by a later stream,
// and the per-thread default stream has one handle for many streams.
Error stream_id(Driver& d, CUstream stream, unsigned long long* id) {
  CUresult r = d.stream_get_id(stream, id);
  if (r != CUDA_SUCCESS) return d.fail(r, "identifying the stream (cuStreamGetId)");
  return Error::ok();
}

// Zeroes a new block of tile counters before any kernel can read them, on any stream. Not by
// cuMemsetD32: it runs on the legacy default stream, asynchronously to the host, and a
// caller's stream created non-blocking (as PyTorch's side streams are) does not wait for it,
// so the first kernel could draw from the allocation's old contents (tiles skipped, or drawn
// out of range). A stream of the handle's own, waited for, orders the zeros before the call
// returns without waiting for any work of the caller's.
Error zero_counters(Driver& d, CUdeviceptr base) {
  CUstream own = nullptr;
  CUresult r = d.stream_create(&own, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) return d.fail(r, "creating a stream to zero tile counters (cuStreamCreate)");
  r = d.memset_d32_async(base, 0, kCountersPerChunk, own);
  const char* what = "zeroing tile counters (cuMemsetD32Async)";
  if (r == CUDA_SUCCESS) {
    r = d.stream_synchronize(own);
    what = "zeroing tile counters (cuStreamSynchronize)";
  }
  d.stream_destroy(own);
  if (r != CUDA_SUCCESS) return d.fail(r, what);
  return Error::ok();
}

}  // namespace

Error stream_tile_counter(fa3_handle* h, const Context& context, CUstream stream, CUdeviceptr* out) {
  Driver& d = h->driver;
  // During a capture the driver refuses cuStreamGetId, cuMemAlloc and the zeroing: find the
  // counter by the handle then.
  bool capturing = false;
  Error e = stream_capturing(d, stream, &capturing);
  if (e.failed()) return e;
  if (capturing) {
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
      return make_error(FA3_ERR_INVALID_ARGUMENT,
                        "stream is a default stream capturing a CUDA graph: a kernel with a "
                        "dynamic tile scheduler is captured only on a stream created by the caller");
    std::lock_guard<std::mutex> lock(h->counters_mutex);
    // The last counter made for the handle: a handle reused by a later stream gets a new one.
    const fa3_handle::CounterKey key = by_handle(context, stream);
    auto found = h->counter_by_stream_handle.find(key);
    if (found != h->counter_by_stream_handle.end()) {
      *out = found->second;
      return Error::ok();
    }
    // A stream first used in a capture (PyTorch captures on a stream of its own): a spare
    // counter, so nothing is allocated. Found by its handle only (its id is unknown).
    if (fa3_handle::CounterChunk* chunk = chunk_with_room(h, context)) {
      *out = take_counter(chunk);
      h->counter_by_stream_handle[key] = *out;
      return Error::ok();
    }
    return make_error(FA3_ERR_INVALID_ARGUMENT,
                      "stream is capturing a CUDA graph and the handle has no tile counter to "
                      "give it (the first call of a kernel with a dynamic tile scheduler in a "
                      "context allocates them): make one such fa3_forward call outside a capture "
                      "first");
  }
  unsigned long long id = 0;
  e = stream_id(d, stream, &id);
  if (e.failed()) return e;
  std::lock_guard<std::mutex> lock(h->counters_mutex);
  const fa3_handle::CounterKey key{context.id, id};
  auto found = h->counter_by_stream_id.find(key);
  if (found != h->counter_by_stream_id.end()) {
    *out = found->second;
    return Error::ok();
  }
  fa3_handle::CounterChunk* chunk = chunk_with_room(h, context);
  if (chunk == nullptr) {
    const Driver::RelaxedCaptureMode relaxed(d);
    reserve_one_more(&h->counter_chunks);  // the push_back below cannot throw
    CUdeviceptr base = 0;
    CUresult r = d.mem_alloc(&base, kCountersPerChunk * sizeof(uint32_t));
    if (r != CUDA_SUCCESS) return d.fail(r, "allocating tile counters (cuMemAlloc)");
    try {
      e = zero_counters(d, base);  // (its failure sentence allocates)
    } catch (...) {
      d.mem_free(base);
      throw;
    }
    if (e.failed()) {
      d.mem_free(base);
      return e;
    }
    h->counter_chunks.push_back({context, base, 0});
    chunk = &h->counter_chunks.back();
  }
  *out = take_counter(chunk);
  h->counter_by_stream_id[key] = *out;
  h->counter_by_stream_handle[by_handle(context, stream)] = *out;
  return Error::ok();
}

namespace {

// Whether the work before `w`'s last recorded use has run (a never recorded event has).
bool has_run(Driver& d, const fa3_handle::StreamWorkspace& w) {
  return w.shared && d.event_query(w.last_use) == CUDA_SUCCESS;
}

// Under workspaces_mutex: a workspace of `context` that no call holds or waits for and whose
// last use has run, locked in `*lock`: the first at least `bytes` large, else the largest.
// nullptr when there is none.
fa3_handle::StreamWorkspace* idle_workspace(fa3_handle* h, const Context& context, size_t bytes,
                                            std::unique_lock<std::mutex>* lock) {
  fa3_handle::StreamWorkspace* best = nullptr;
  for (const auto& w : h->workspaces) {
    if (!(w->context == context) || w->waiters > 0) continue;
    std::unique_lock<std::mutex> candidate(w->mutex, std::try_to_lock);
    if (!candidate.owns_lock() || !has_run(h->driver, *w)) continue;
    if (best == nullptr || (best->bytes < bytes && w->bytes > best->bytes)) {
      best = w.get();
      *lock = std::move(candidate);  // and the previous best's unlocked
      if (best->bytes >= bytes) break;
    }
  }
  return best;
}

}  // namespace

Error with_stream_workspace(fa3_handle* h, const Context& context, CUstream stream, size_t bytes,
                            const std::function<Error(CUdeviceptr)>& use) {
  Driver& d = h->driver;
  // A graph would keep the workspace's address, which a later call on the stream may free (to
  // grow it) or use while the graph replays.
  bool capturing = false;
  Error e = stream_capturing(d, stream, &capturing);
  if (e.failed()) return e;
  if (capturing)
    return make_error(FA3_ERR_INVALID_ARGUMENT,
                      "workspace is NULL but stream is capturing a CUDA graph: the handle's "
                      "workspace may be freed or shared after the capture; pass a workspace of "
                      "fa3_backward_workspace_size bytes that lives as long as the graph");
  // (Event queries, allocations, frees and a stream wait follow.)
  const Driver::RelaxedCaptureMode relaxed(d);
  unsigned long long id = 0;
  e = stream_id(d, stream, &id);
  if (e.failed()) return e;
  fa3_handle::StreamWorkspace* entry = nullptr;
  std::unique_lock<std::mutex> lock;
  bool idle = false;  // its last use has run: it can be freed without waiting
  {
    std::lock_guard<std::mutex> list(h->workspaces_mutex);
    for (const auto& w : h->workspaces)
      if (w->context == context && w->stream_id == id) entry = w.get();
    if (entry != nullptr) {
      // Waited for below, outside the list's lock; meanwhile no other stream takes it.
      ++entry->waiters;
    } else if ((entry = idle_workspace(h, context, bytes, &lock)) != nullptr) {
      entry->stream_id = id;
      idle = true;
    } else {
      // The host's allocations first: the event is not leaked when one of them throws.
      auto created = std::make_unique<fa3_handle::StreamWorkspace>();
      reserve_one_more(&h->workspaces);
      CUevent event = nullptr;
      const CUresult r = d.event_create(&event, CU_EVENT_DISABLE_TIMING);
      if (r != CUDA_SUCCESS)
        return d.fail(r, "creating an event for the handle's workspace (cuEventCreate)");
      h->workspaces.push_back(std::move(created));
      entry = h->workspaces.back().get();
      entry->context = context;
      entry->stream_id = id;
      entry->last_use = event;
      lock = std::unique_lock<std::mutex>(entry->mutex);
      idle = true;
    }
  }
  if (!lock.owns_lock()) {
    lock = std::unique_lock<std::mutex>(entry->mutex);
    std::lock_guard<std::mutex> list(h->workspaces_mutex);
    --entry->waiters;
  }
  if (entry->bytes < bytes) {
    CUresult r = CUDA_SUCCESS;
    if (entry->base != 0) {
      if (!idle) {
        r = d.stream_synchronize(stream);
        if (r != CUDA_SUCCESS)
          return d.fail(r, "waiting for the stream before growing the handle's workspace "
                           "(cuStreamSynchronize)");
      }
      r = d.mem_free(entry->base);
      entry->base = 0;
      entry->bytes = 0;
      if (r != CUDA_SUCCESS) return d.fail(r, "freeing the handle's old workspace (cuMemFree)");
    }
    const size_t size =
        (bytes + kWorkspaceGranularity - 1) / kWorkspaceGranularity * kWorkspaceGranularity;
    CUdeviceptr base = 0;
    r = d.mem_alloc(&base, size);
    if (r != CUDA_SUCCESS)
      return d.fail(r, "allocating the handle's workspace of " + std::to_string(size) +
                           " bytes (cuMemAlloc; pass a workspace to fa3_backward to manage it yourself)");
    entry->base = base;
    entry->bytes = size;
  }
  // Not passed on to another stream until an event recorded after this use marks its end:
  // the last recorded one may mark an earlier use, which has run while this one's kernels
  // still use the buffer. Recorded also after a failed or throwing `use`: it may have
  // launched part of its work. A later successful record on this stream shares it again.
  entry->shared = false;
  const auto record_end = [&] {
    const CUresult recorded = d.event_record(entry->last_use, stream);
    entry->shared = recorded == CUDA_SUCCESS;
    return recorded;
  };
  try {
    e = use(entry->base);
  } catch (...) {
    record_end();
    throw;
  }
  const CUresult r = record_end();
  if (r != CUDA_SUCCESS && !e.failed())
    e = d.fail(r, "recording the end of the handle's workspace use (cuEventRecord; the "
                  "kernels were launched)");
  return e;
}

}  // namespace fa3
