// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and cuGetProcAddress, so
// libfa3 builds and its CPU paths run on machines without a driver. Only types come from
// cuda.h; nothing links against libcuda.
#pragma once

#include <cuda.h>

#include <string>

#include "runtime/error.h"

namespace fa3 {

// X(symbol, member): the driver entry points fa3 uses. The prototype is the one cuda.h maps
// the symbol to (e.g. cuCtxPushCurrent -> cuCtxPushCurrent_v2); cuGetProcAddress resolves
// the same version from the plain name.
#define FA3_DRIVER_FUNCTIONS(X)                                     \
  X(cuGetErrorName, get_error_name)                                 \
  X(cuGetErrorString, get_error_string)                             \
  X(cuInit, init)                                                   \
  X(cuDriverGetVersion, driver_get_version)                         \
  X(cuDeviceGetCount, device_get_count)                             \
  X(cuDeviceGet, device_get)                                        \
  X(cuDeviceGetAttribute, device_get_attribute)                     \
  X(cuDeviceGetName, device_get_name)                               \
  X(cuDevicePrimaryCtxRetain, primary_ctx_retain)                   \
  X(cuDevicePrimaryCtxRelease, primary_ctx_release)                 \
  X(cuCtxGetCurrent, ctx_get_current)                               \
  X(cuCtxGetDevice, ctx_get_device)                                 \
  X(cuCtxPushCurrent, ctx_push_current)                             \
  X(cuCtxPopCurrent, ctx_pop_current)                               \
  X(cuModuleLoadData, module_load_data)                             \
  X(cuModuleUnload, module_unload)                                  \
  X(cuModuleGetFunction, module_get_function)                       \
  X(cuFuncSetAttribute, func_set_attribute)                         \
  X(cuLaunchKernelEx, launch_kernel_ex)                             \
  X(cuTensorMapEncodeTiled, tensor_map_encode_tiled)

struct Driver {
#define FA3_DECLARE_MEMBER(symbol, member) decltype(&symbol) member = nullptr;
  FA3_DRIVER_FUNCTIONS(FA3_DECLARE_MEMBER)
#undef FA3_DECLARE_MEMBER
  void* library = nullptr;
  int version = 0;  // cuDriverGetVersion, e.g. 13000

  // Loads the driver named by $FA3_LIBCUDA (tests use it to simulate a missing driver) or
  // libcuda.so.1, resolves every entry point and calls cuInit. FA3_ERR_NO_DRIVER when the
  // library or an entry point is missing, FA3_ERR_NO_DEVICE when cuInit finds no device.
  static Error load(Driver* out);

  // "CUDA_ERROR_INVALID_VALUE (invalid argument)" for messages.
  std::string describe(CUresult r) const;
  // An Error for a failed driver call: FA3_ERR_OUT_OF_MEMORY or FA3_ERR_CUDA.
  Error fail(CUresult r, const std::string& what) const;
};

}  // namespace fa3
