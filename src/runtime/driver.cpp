#include "runtime/driver.h"

#include <dlfcn.h>

#include <cstdlib>

namespace fa3 {

Error Driver::load(Driver* out) {
  Driver d;
  // secure_getenv: a setuid or setcap program does not load the library an environment names.
  const char* override_path = secure_getenv("FA3_LIBCUDA");
  const char* path = override_path && *override_path ? override_path : "libcuda.so.1";
  d.library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!d.library) {
    const char* why = dlerror();
    return make_error(FA3_ERR_NO_DRIVER,
                      std::string("the CUDA driver library ") + path +
                          " could not be loaded (" + (why ? why : "unknown reason") +
                          "); fa3 needs an NVIDIA driver and a Hopper GPU");
  }
  auto get_proc =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(d.library, "cuGetProcAddress_v2"));
  auto get_version =
      reinterpret_cast<PFN_cuDriverGetVersion_v2020>(dlsym(d.library, "cuDriverGetVersion"));
  if (!get_proc || !get_version) {
    dlclose(d.library);
    return make_error(FA3_ERR_NO_DRIVER,
                      std::string("the CUDA driver ") + path + " is too old: it lacks " +
                          (get_proc ? "cuDriverGetVersion" : "cuGetProcAddress_v2") +
                          " (fa3 needs a CUDA 12 or newer driver)");
  }
  if (const CUresult r = get_version(&d.version); r != CUDA_SUCCESS) {
    dlclose(d.library);
    return make_error(FA3_ERR_NO_DRIVER, std::string("the CUDA driver ") + path +
                                             " failed cuDriverGetVersion (CUresult " +
                                             std::to_string(static_cast<int>(r)) + ")");
  }
  std::string missing;
#define FA3_RESOLVE(symbol, member, version)                                            \
  {                                                                                     \
    void* fn = nullptr;                                                                 \
    CUdriverProcAddressQueryResult status{};                                            \
    if (get_proc(#symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=        \
            CUDA_SUCCESS ||                                                             \
        fn == nullptr)                                                                  \
      missing += std::string(missing.empty() ? "" : ", ") + #symbol;                    \
    d.member = reinterpret_cast<decltype(d.member)>(fn);                                \
  }
  FA3_DRIVER_FUNCTIONS(FA3_RESOLVE)
#undef FA3_RESOLVE
  if (!missing.empty()) {
    dlclose(d.library);
    return make_error(FA3_ERR_NO_DRIVER, std::string("the CUDA driver ") + path + " (version " +
                                             std::to_string(d.version) +
                                             ") lacks entry points fa3 needs: " + missing);
  }
  const CUresult init = d.init(0);
  if (init != CUDA_SUCCESS) {
    const fa3_status status =
        init == CUDA_ERROR_NO_DEVICE ? FA3_ERR_NO_DEVICE : FA3_ERR_NO_DRIVER;
    Error e = make_error(status, "the CUDA driver failed to initialize (cuInit: " +
                                     d.describe(init) + ")");
    dlclose(d.library);
    return e;
  }
  *out = d;
  return Error::ok();
}

std::string Driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name) get_error_name(r, &name);
  if (get_error_string) get_error_string(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

Error Driver::fail(CUresult r, const std::string& what) const {
  const fa3_status status = r == CUDA_ERROR_OUT_OF_MEMORY ? FA3_ERR_OUT_OF_MEMORY : FA3_ERR_CUDA;
  return make_error(status, what + " failed: " + describe(r));
}

}  // namespace fa3
