// A fake CUDA driver (libfakecuda.so) for CPU tests of the runtime: libfa3 loads it through
// $FA3_LIBCUDA instead of libcuda.so.1. It records every call, lets a test choose the device
// (compute capability, count) and make any entry point fail, and keeps the last launch's
// configuration and parameter bytes. Nothing runs: launches only record.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/bwd_params.h"
#include "kernels/fwd_params.h"

namespace {

struct State {
  std::mutex mutex;
  std::string log;               // "cuModuleLoadData;cuLaunchKernelEx;..."
  std::string failing;           // entry point that returns `failure`
  CUresult failure = CUDA_SUCCESS;
  int major = 9, minor = 0, device_count = 1;
  int contexts[4] = {};          // contexts[0]: primary of device 0; [1]: a "user" context
  // cuCtxGetId of each context: renewed (fake_cuda_renew_context) as a context destroyed and
  // made again at its address, or a reset primary context, would be. Not reset: ids only grow.
  unsigned long long context_ids[4] = {1, 2, 3, 4};
  unsigned long long next_context_id = 5;
  int modules = 0, functions = 0, allocations = 0;
  std::vector<size_t> allocated_bytes;  // of each cuMemAlloc since the last reset
  std::vector<std::string> function_names;  // of function 0x2001, 0x2002, ...
  CUlaunchConfig last_config{};
  std::vector<unsigned char> last_params;  // the whole parameter block, as the kernel takes it
  std::string launch_kinds;  // per launch: 'P' programmatic dependent launch, '-' ordinary
  std::string launch_grids;  // per launch: "x " (gridDimX and a space)
  std::string launch_names;  // per launch: the function's name and a space
  CUstream capturing = nullptr;  // the stream cuStreamIsCapturing reports as capturing
  // A capture in global mode on another thread (fake_cuda_set_foreign_capture): the calls the
  // driver calls potentially unsafe fail then, unless the calling thread's mode is relaxed.
  bool foreign_capture = false;
  bool foreign_capture_invalidated = false;
  // Streams whose work never runs (fake_cuda_set_stream_busy) as if each call added more: an
  // event is complete unless the stream it was last recorded on is one of them.
  std::set<CUstream> busy_streams;
  std::map<CUevent, CUstream> events;  // each live event's last recorded stream
  uintptr_t next_event = 0xe0000;
};

// What cuDriverGetVersion reports (not reset: it is read when a handle is created).
int driver_version = 13000;
// The device's SMs (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT; not reset, as the version).
int sm_count = 132;

State& state() {
  static State s;
  return s;
}
thread_local CUcontext current = nullptr;
thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

// Records the call; returns the configured failure for this entry point, else success.
CUresult enter(const char* name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log += name;
  s.log += ';';
  return s.failing == name ? s.failure : CUDA_SUCCESS;
}

#define FAKE_ENTER(name)                  \
  if (CUresult r_ = enter(name)) return r_

// A call the driver forbids while a global-mode capture runs on another thread, unless this
// thread's capture mode is relaxed (cuThreadExchangeStreamCaptureMode); as the driver, the
// refusal invalidates that capture (fake_cuda_foreign_capture_invalidated).
bool forbidden_by_capture() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.foreign_capture || capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  s.foreign_capture_invalidated = true;
  return true;
}
#define FAKE_UNSAFE()                                             \
  if (forbidden_by_capture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED

CUresult get_error_name(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult get_error_string(CUresult, const char** s) {
  *s = "failure injected by the fake driver";
  return CUDA_SUCCESS;
}
CUresult init(unsigned) { FAKE_ENTER("cuInit"); return CUDA_SUCCESS; }
CUresult device_get_count(int* n) {
  FAKE_ENTER("cuDeviceGetCount");
  *n = state().device_count;
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* d, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* v, CUdevice_attribute a, CUdevice) {
  FAKE_ENTER("cuDeviceGetAttribute");
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = state().major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = state().minor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = sm_count; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult device_get_name(char* name, int len, CUdevice) {
  FAKE_ENTER("cuDeviceGetName");
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU sm_%d%d", state().major, state().minor);
  return CUDA_SUCCESS;
}
CUresult primary_ctx_retain(CUcontext* c, CUdevice) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  *c = reinterpret_cast<CUcontext>(&state().contexts[0]);
  return CUDA_SUCCESS;
}
CUresult primary_ctx_release(CUdevice) { FAKE_ENTER("cuDevicePrimaryCtxRelease"); return CUDA_SUCCESS; }
CUresult ctx_get_current(CUcontext* c) {
  FAKE_ENTER("cuCtxGetCurrent");
  *c = current;
  return CUDA_SUCCESS;
}
CUresult ctx_get_device(CUdevice* d) {
  FAKE_ENTER("cuCtxGetDevice");
  // The "user" context (contexts[1]) belongs to device 0, contexts[2] to device 1.
  *d = current == reinterpret_cast<CUcontext>(&state().contexts[2]) ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult ctx_get_id(CUcontext c, unsigned long long* id) {
  FAKE_ENTER("cuCtxGetId");
  std::lock_guard<std::mutex> lock(state().mutex);
  for (int i = 0; i < 4; ++i)
    if (c == reinterpret_cast<CUcontext>(&state().contexts[i])) {
      *id = state().context_ids[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_CONTEXT;
}
CUresult ctx_push_current(CUcontext c) {
  FAKE_ENTER("cuCtxPushCurrent");
  current = c;
  return CUDA_SUCCESS;
}
CUresult ctx_pop_current(CUcontext* c) {
  FAKE_ENTER("cuCtxPopCurrent");
  if (c) *c = current;
  current = nullptr;
  return CUDA_SUCCESS;
}
CUresult module_load_data(CUmodule* m, const void* image) {
  FAKE_ENTER("cuModuleLoadData");
  if (std::memcmp(image, "\x7f" "ELF", 4) != 0) return CUDA_ERROR_INVALID_IMAGE;
  std::lock_guard<std::mutex> lock(state().mutex);
  *m = reinterpret_cast<CUmodule>(static_cast<uintptr_t>(0x1000 + ++state().modules));
  return CUDA_SUCCESS;
}
CUresult module_unload(CUmodule) { FAKE_ENTER("cuModuleUnload"); return CUDA_SUCCESS; }
CUresult module_get_function(CUfunction* f, CUmodule, const char* name) {
  FAKE_ENTER("cuModuleGetFunction");
  std::lock_guard<std::mutex> lock(state().mutex);
  *f = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(0x2000 + ++state().functions));
  state().function_names.emplace_back(name);
  return CUDA_SUCCESS;
}

// The name a function handle of cuModuleGetFunction was got by ("?" for any other handle).
std::string function_name(CUfunction f) {
  const size_t i = reinterpret_cast<uintptr_t>(f) - 0x2001;
  return i < state().function_names.size() ? state().function_names[i] : std::string("?");
}

// Bytes of the one parameter a kernel takes, from its name (as the real driver knows it from
// the cubin): every fa3_bwd_* kernel (pre- and postprocess too) a BwdParams, fa3_fwd_* a
// FwdParams; 0 for a name of neither.
size_t param_bytes(CUfunction f) {
  const std::string name = function_name(f);
  if (name.rfind("fa3_bwd_", 0) == 0) return sizeof(fa3::BwdParams);
  if (name.rfind("fa3_fwd_", 0) == 0) return sizeof(fa3::FwdParams);
  return 0;
}
CUresult func_set_attribute(CUfunction, CUfunction_attribute, int) {
  FAKE_ENTER("cuFuncSetAttribute");
  return CUDA_SUCCESS;
}
CUresult mem_alloc(CUdeviceptr* p, size_t bytes) {
  FAKE_ENTER("cuMemAlloc");
  FAKE_UNSAFE();
  std::lock_guard<std::mutex> lock(state().mutex);
  *p = 0x10000000ull + 0x100000ull * static_cast<CUdeviceptr>(++state().allocations);
  state().allocated_bytes.push_back(bytes);
  return CUDA_SUCCESS;
}
CUresult mem_free(CUdeviceptr) {
  FAKE_ENTER("cuMemFree");
  FAKE_UNSAFE();
  return CUDA_SUCCESS;
}
CUresult memset_d32_async(CUdeviceptr, unsigned int, size_t, CUstream) {
  FAKE_ENTER("cuMemsetD32Async");
  return CUDA_SUCCESS;
}
CUresult stream_create(CUstream* s, unsigned int) {
  FAKE_ENTER("cuStreamCreate");
  *s = reinterpret_cast<CUstream>(uintptr_t{0x5eed});
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream) { FAKE_ENTER("cuStreamDestroy"); return CUDA_SUCCESS; }
CUresult stream_synchronize(CUstream) {
  FAKE_ENTER("cuStreamSynchronize");
  FAKE_UNSAFE();
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* e, unsigned) {
  FAKE_ENTER("cuEventCreate");
  std::lock_guard<std::mutex> lock(state().mutex);
  *e = reinterpret_cast<CUevent>(state().next_event++);
  state().events[*e] = nullptr;
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent e, CUstream s) {
  FAKE_ENTER("cuEventRecord");
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().events.find(e);
  if (it == state().events.end()) return CUDA_ERROR_INVALID_HANDLE;
  it->second = s;
  return CUDA_SUCCESS;
}
// Never recorded: complete, as the driver says.
CUresult event_query(CUevent e) {
  FAKE_ENTER("cuEventQuery");
  FAKE_UNSAFE();
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().events.find(e);
  if (it == state().events.end()) return CUDA_ERROR_INVALID_HANDLE;
  return it->second != nullptr && state().busy_streams.count(it->second) ? CUDA_ERROR_NOT_READY
                                                                        : CUDA_SUCCESS;
}
CUresult event_destroy(CUevent e) {
  FAKE_ENTER("cuEventDestroy");
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().events.erase(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
// Stream ids: the handle's value (a test's streams are distinct made-up pointers).
CUresult stream_get_id(CUstream s, unsigned long long* id) {
  FAKE_ENTER("cuStreamGetId");
  {
    // As the driver: refused during a capture (which it then invalidates).
    std::lock_guard<std::mutex> lock(state().mutex);
    if (s != nullptr && s == state().capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  *id = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(s));
  return CUDA_SUCCESS;
}
CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus* status) {
  FAKE_ENTER("cuStreamIsCapturing");
  std::lock_guard<std::mutex> lock(state().mutex);
  *status = s != nullptr && s == state().capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                   : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult thread_exchange_stream_capture_mode(CUstreamCaptureMode* mode) {
  FAKE_ENTER("cuThreadExchangeStreamCaptureMode");
  const CUstreamCaptureMode old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}
CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void**) {
  FAKE_ENTER("cuLaunchKernelEx");
  std::lock_guard<std::mutex> lock(state().mutex);
  state().last_config = *config;
  bool programmatic = false;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      programmatic = config->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  state().launch_kinds += programmatic ? 'P' : '-';
  state().launch_grids += std::to_string(config->gridDimX) + " ";
  state().launch_names += function_name(f) + " ";
  // Every kernel takes one parameter block; keep its bytes for the test to decode.
  const unsigned char* p = static_cast<const unsigned char*>(params[0]);
  state().last_params.assign(p, p + param_bytes(f));
  return CUDA_SUCCESS;
}
CUresult tensor_map_encode_tiled(CUtensorMap* map, CUtensorMapDataType, cuuint32_t rank, void* addr,
                                 const cuuint64_t* dims, const cuuint64_t* strides,
                                 const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill) {
  FAKE_ENTER("cuTensorMapEncodeTiled");
  // The map's words record what was asked for, so tests can read it back from the params.
  std::memset(map, 0, sizeof *map);
  uint64_t* w = reinterpret_cast<uint64_t*>(map);
  w[0] = reinterpret_cast<uint64_t>(addr);
  w[1] = rank;
  for (int i = 0; i < 4; ++i) w[2 + i] = dims[i];
  for (int i = 0; i < 3; ++i) w[6 + i] = strides[i];
  w[9] = box[0];
  w[10] = box[1];
  return CUDA_SUCCESS;
}

struct Entry {
  const char* name;
  void* fn;
};
const Entry kEntries[] = {
    {"cuGetErrorName", reinterpret_cast<void*>(get_error_name)},
    {"cuGetErrorString", reinterpret_cast<void*>(get_error_string)},
    {"cuInit", reinterpret_cast<void*>(init)},
    {"cuDeviceGetCount", reinterpret_cast<void*>(device_get_count)},
    {"cuDeviceGet", reinterpret_cast<void*>(device_get)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(device_get_attribute)},
    {"cuDeviceGetName", reinterpret_cast<void*>(device_get_name)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(primary_ctx_release)},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(ctx_get_current)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(ctx_get_device)},
    {"cuCtxGetId", reinterpret_cast<void*>(ctx_get_id)},
    {"cuCtxPushCurrent", reinterpret_cast<void*>(ctx_push_current)},
    {"cuCtxPopCurrent", reinterpret_cast<void*>(ctx_pop_current)},
    {"cuModuleLoadData", reinterpret_cast<void*>(module_load_data)},
    {"cuModuleUnload", reinterpret_cast<void*>(module_unload)},
    {"cuModuleGetFunction", reinterpret_cast<void*>(module_get_function)},
    {"cuFuncSetAttribute", reinterpret_cast<void*>(func_set_attribute)},
    {"cuLaunchKernelEx", reinterpret_cast<void*>(launch_kernel_ex)},
    {"cuMemAlloc", reinterpret_cast<void*>(mem_alloc)},
    {"cuMemFree", reinterpret_cast<void*>(mem_free)},
    {"cuMemsetD32Async", reinterpret_cast<void*>(memset_d32_async)},
    {"cuStreamCreate", reinterpret_cast<void*>(stream_create)},
    {"cuStreamDestroy", reinterpret_cast<void*>(stream_destroy)},
    {"cuStreamGetId", reinterpret_cast<void*>(stream_get_id)},
    {"cuStreamIsCapturing", reinterpret_cast<void*>(stream_is_capturing)},
    {"cuStreamSynchronize", reinterpret_cast<void*>(stream_synchronize)},
    {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(thread_exchange_stream_capture_mode)},
    {"cuEventCreate", reinterpret_cast<void*>(event_create)},
    {"cuEventRecord", reinterpret_cast<void*>(event_record)},
    {"cuEventQuery", reinterpret_cast<void*>(event_query)},
    {"cuEventDestroy", reinterpret_cast<void*>(event_destroy)},
    {"cuTensorMapEncodeTiled", reinterpret_cast<void*>(tensor_map_encode_tiled)},
};

}  // namespace

extern "C" {

// The two symbols libfa3 looks up with dlsym; everything else goes through cuGetProcAddress.
CUresult cuDriverGetVersion(int* v) {
  *v = driver_version;
  return CUDA_SUCCESS;
}
CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int, cuuint64_t,
                             CUdriverProcAddressQueryResult* status) {
  for (const Entry& e : kEntries)
    if (std::strcmp(e.name, symbol) == 0) {
      *fn = e.fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *fn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

// ---- controls for the tests (test/fake_cuda/fake_cuda.h) ----
void fake_cuda_reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log.clear();
  s.failing.clear();
  s.failure = CUDA_SUCCESS;
  s.major = 9;
  s.minor = 0;
  s.device_count = 1;
  s.last_params.clear();
  s.last_config = CUlaunchConfig{};
  s.launch_kinds.clear();
  s.launch_grids.clear();
  s.launch_names.clear();
  s.allocated_bytes.clear();
  s.capturing = nullptr;
  s.foreign_capture = s.foreign_capture_invalidated = false;
  s.busy_streams.clear();  // (live events stay: handles outlive a reset)
  current = nullptr;
}
// Marks `stream` as always having work that has not run (busy 1), until busy 0: events
// recorded on it are not complete meanwhile.
void fake_cuda_set_stream_busy(CUstream stream, int busy) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (busy)
    state().busy_streams.insert(stream);
  else
    state().busy_streams.erase(stream);
}
// The events created and not destroyed.
int fake_cuda_live_events() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int>(state().events.size());
}
// A global-mode capture on another thread (1) or none (0): cuMemAlloc, cuMemFree,
// cuStreamSynchronize and cuEventQuery fail unless the calling thread's mode is relaxed, and
// such a failure invalidates the capture.
void fake_cuda_set_foreign_capture(int on) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().foreign_capture = on != 0;
  state().foreign_capture_invalidated = false;
}
int fake_cuda_foreign_capture_invalidated() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().foreign_capture_invalidated ? 1 : 0;
}
// The calling thread's capture mode (CUstreamCaptureMode).
int fake_cuda_capture_mode() { return static_cast<int>(capture_mode); }
// Makes cuStreamIsCapturing report `stream` as capturing into a graph (NULL: none).
void fake_cuda_set_capturing(CUstream stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().capturing = stream;
}
void fake_cuda_fail(const char* entry_point, int result) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().failing = entry_point;
  state().failure = static_cast<CUresult>(result);
}
void fake_cuda_set_device(int major, int minor, int count) {
  state().major = major;
  state().minor = minor;
  state().device_count = count;
}
// Makes a context current on the calling thread: 0 none, 1 a user context of device 0,
// 2 a context of device 1.
void fake_cuda_make_current(int which) {
  current = which == 0 ? nullptr : reinterpret_cast<CUcontext>(&state().contexts[which]);
}
// Gives context `which` (0 the primary) a new id at the same address: the context destroyed
// and another made where it was, or the primary context reset.
void fake_cuda_renew_context(int which) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().context_ids[which] = state().next_context_id++;
}
int fake_cuda_current_is_primary() {
  return current == reinterpret_cast<CUcontext>(&state().contexts[0]);
}
// Copies the call log ("cuInit;cuDeviceGetCount;...").
void fake_cuda_log(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::snprintf(buf, size, "%s", state().log.c_str());
}
// The bytes the index-th cuMemAlloc since the last reset asked for; 0 when there was none.
size_t fake_cuda_allocated_bytes(int index) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const std::vector<size_t>& a = state().allocated_bytes;
  return index >= 0 && static_cast<size_t>(index) < a.size() ? a[static_cast<size_t>(index)] : 0;
}
// The version handles created from now on see (cuDriverGetVersion), e.g. 12020.
void fake_cuda_set_driver_version(int version) { driver_version = version; }
// The SM count handles created from now on see, e.g. 60 (a MIG slice); 132 by default.
void fake_cuda_set_sm_count(int count) { sm_count = count; }
// Copies the launches' kinds since the last reset, one character each: 'P' for a
// programmatic dependent launch, '-' for an ordinary one.
void fake_cuda_launch_kinds(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::snprintf(buf, size, "%s", state().launch_kinds.c_str());
}
// The launches' grid x since the last reset, each followed by a space.
void fake_cuda_launch_grids(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::snprintf(buf, size, "%s", state().launch_grids.c_str());
}
// The launched functions' names since the last reset, each followed by a space.
void fake_cuda_launch_names(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::snprintf(buf, size, "%s", state().launch_names.c_str());
}
// The last launch: grid x, block x, dynamic shared memory, and its parameter bytes. Returns 0
// when nothing launched since the last reset, -1 when `size` is not the launched kernel's
// parameter block's (a test decoding a forward block from a backward launch, or the reverse).
int fake_cuda_last_launch(unsigned* grid, unsigned* block, unsigned* smem, void* params, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().last_params.empty()) return 0;
  if (size != state().last_params.size()) return -1;
  *grid = state().last_config.gridDimX;
  *block = state().last_config.blockDimX;
  *smem = state().last_config.sharedMemBytes;
  std::memcpy(params, state().last_params.data(), size);
  return 1;
}

}  // extern "C"
