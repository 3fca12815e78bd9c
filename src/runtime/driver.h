// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and cuGetProcAddress, so
// libfa3 builds and its CPU paths run on machines without a driver. Only types come from
// cuda.h and cudaTypedefs.h; nothing links against libcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "runtime/error.h"

namespace fa3 {

// X(symbol, member, version): the driver entry points fa3 uses, each pinned to one ABI
// version. cuGetProcAddress resolves a plain name to its newest variant as of the CUDA
// version asked for: asked as of 13.0, "cuCtxGetDevice" is cuCtxGetDevice_v2(CUdevice*,
// CUcontext). Asking each symbol at the version of the prototype we call (the
// PFN_<symbol>_v<version> types of cudaTypedefs.h) keeps caller and callee in agreement on
// every driver from 12.0 on.
#define FA3_DRIVER_FUNCTIONS(X)                               \
  X(cuGetErrorName, get_error_name, 6000)                     \
  X(cuGetErrorString, get_error_string, 6000)                 \
  X(cuInit, init, 2000)                                       \
  X(cuDeviceGetCount, device_get_count, 2000)                 \
  X(cuDeviceGet, device_get, 2000)                            \
  X(cuDeviceGetAttribute, device_get_attribute, 2000)         \
  X(cuDeviceGetName, device_get_name, 2000)                   \
  X(cuDevicePrimaryCtxRetain, primary_ctx_retain, 7000)       \
  X(cuDevicePrimaryCtxRelease, primary_ctx_release, 11000)    \
  X(cuCtxGetCurrent, ctx_get_current, 4000)                   \
  X(cuCtxGetDevice, ctx_get_device, 2000)                     \
  X(cuCtxGetId, ctx_get_id, 12000)                            \
  X(cuCtxPushCurrent, ctx_push_current, 4000)                 \
  X(cuCtxPopCurrent, ctx_pop_current, 4000)                   \
  X(cuModuleLoadData, module_load_data, 2000)                 \
  X(cuModuleUnload, module_unload, 2000)                      \
  X(cuModuleGetFunction, module_get_function, 2000)           \
  X(cuFuncSetAttribute, func_set_attribute, 9000)             \
  X(cuMemAlloc, mem_alloc, 3020)                              \
  X(cuMemFree, mem_free, 3020)                                \
  X(cuMemsetD32Async, memset_d32_async, 3020)                 \
  X(cuStreamGetId, stream_get_id, 12000)                      \
  X(cuStreamIsCapturing, stream_is_capturing, 10000)          \
  X(cuThreadExchangeStreamCaptureMode, thread_exchange_stream_capture_mode, 10010) \
  X(cuStreamCreate, stream_create, 2000)                      \
  X(cuStreamDestroy, stream_destroy, 4000)                    \
  X(cuStreamSynchronize, stream_synchronize, 2000)            \
  X(cuEventCreate, event_create, 2000)                        \
  X(cuEventRecord, event_record, 2000)                        \
  X(cuEventQuery, event_query, 2000)                          \
  X(cuEventDestroy, event_destroy, 4000)                      \
  X(cuLaunchKernelEx, launch_kernel_ex, 11060)                \
  X(cuTensorMapEncodeTiled, tensor_map_encode_tiled, 12000)

struct Driver {
#define FA3_DECLARE_MEMBER(symbol, member, version) PFN_##symbol##_v##version member = nullptr;
  FA3_DRIVER_FUNCTIONS(FA3_DECLARE_MEMBER)
#undef FA3_DECLARE_MEMBER
  void* library = nullptr;
  int version = 0;  // cuDriverGetVersion, e.g. 13000

  // Loads the driver named by $FA3_LIBCUDA (tests use it to simulate a missing driver) or
  // libcuda.so.1, resolves every entry point and calls cuInit. FA3_ERR_NO_DRIVER when the
  // library or an entry point is missing, FA3_ERR_NO_DEVICE when cuInit finds no device.
  static Error load(Driver* out);

  // Allows the calling thread, while it lives, the driver calls that a CUDA graph capture
  // elsewhere forbids it (cuMemAlloc, cuMemFree, cuStreamSynchronize, cuEventQuery, module
  // loads): in the default global mode a capture on any thread (PyTorch's) makes them fail and
  // invalidates that capture, though the handle's such calls touch no capturing stream (the
  // caller's stream is asked first). The thread's mode is restored after.
  class RelaxedCaptureMode {
   public:
    explicit RelaxedCaptureMode(const Driver& d)
        : d_(d), exchanged_(d.thread_exchange_stream_capture_mode(&mode_) == CUDA_SUCCESS) {}
    ~RelaxedCaptureMode() {
      if (exchanged_) d_.thread_exchange_stream_capture_mode(&mode_);
    }
    RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
    RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

   private:
    const Driver& d_;
    CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    bool exchanged_;
  };

  // "CUDA_ERROR_INVALID_VALUE (invalid argument)" for messages.
  std::string describe(CUresult r) const;
  // An Error for a failed driver call: FA3_ERR_OUT_OF_MEMORY or FA3_ERR_CUDA.
  Error fail(CUresult r, const std::string& what) const;
};

}  // namespace fa3
