#include "device.h"

#include <dlfcn.h>

#include <cstdio>

#include "fa3/fa3.h"

namespace fa3bench {

namespace {

std::string version_text(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

bool driver_library_present() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  dlclose(lib);
  return true;
}

EnvironmentCheck failed(int exit_code, const std::string& sentence) {
  cudaGetLastError();
  return {exit_code, "fa3-bench: " + sentence};
}

EnvironmentCheck device_count_failure(cudaError_t e) {
  if (e == cudaErrorNoDevice)
    return failed(1, "no CUDA device found (the driver sees none); fa3 needs a Hopper GPU.");
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    return failed(1, "the NVIDIA driver (CUDA " + version_text(driver) +
                         ") is older than this build's CUDA runtime (" +
                         version_text(CUDART_VERSION) + "); update the driver.");
  }
  return failed(1, std::string("the CUDA driver could not start (cudaGetDeviceCount: ") +
                       cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
                       "); fa3 needs a working NVIDIA driver and a Hopper GPU.");
}

}  // namespace

EnvironmentCheck check_environment(int device) {
  // The static CUDA runtime loads the driver itself; loading it first lets the one sentence
  // say exactly what is missing.
  if (!driver_library_present())
    return failed(1, "no CUDA driver found (libcuda.so.1 could not be loaded); fa3 needs an "
                     "NVIDIA driver and a Hopper GPU.");
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return device_count_failure(e);
  if (count == 0) return failed(1, "no CUDA device found; fa3 needs a Hopper GPU.");
  if (device >= count)
    return failed(2, "--device " + std::to_string(device) + " does not exist; this machine has " +
                         std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
                         " (0.." + std::to_string(count - 1) + ").");
  cudaDeviceProp prop{};
  const cudaError_t pe = cudaGetDeviceProperties(&prop, device);
  if (pe != cudaSuccess)
    return failed(1, std::string("cannot query device ") + std::to_string(device) +
                         " (cudaGetDeviceProperties: " + cudaGetErrorString(pe) + ").");
  if (prop.major != 9 || prop.minor != 0)
    return failed(1, "device " + std::to_string(device) + " is " + prop.name + " (sm_" +
                         std::to_string(prop.major) + std::to_string(prop.minor) +
                         "); fa3 runs only on Hopper (sm_90).");
  return {};
}

Outcome query_device(int device, DeviceInfo* info) {
  cudaDeviceProp prop{};
  Outcome o = cuda_outcome(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (!o.ok) return o;
  info->ordinal = device;
  info->name = prop.name;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info->total_bytes = prop.totalGlobalMem;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess)
    info->max_sm_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
    info->max_memory_mhz = khz / 1000;
  cudaGetLastError();  // the clock attributes are informative; a failure is not an error
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess) info->pci_bus_id = bus_id;
  cudaGetLastError();
  o = cuda_outcome(cudaDriverGetVersion(&info->driver_version), "cudaDriverGetVersion");
  if (o.ok) o = cuda_outcome(cudaRuntimeGetVersion(&info->runtime_version), "cudaRuntimeGetVersion");
  return o;
}

// ---- NVML: the few entry points used, declared here (the toolkit has no nvml.h). Their
// ABI is stable: int status (0 = success), opaque device handle, clock type 1 = SM, 2 = memory.
struct LiveClocks::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*handle_by_pci_bus_id)(const char*, void**) = nullptr;
  int (*clock_info)(void*, int, unsigned*) = nullptr;
};

namespace {
constexpr int kNvmlClockSm = 1, kNvmlClockMemory = 2;
}

LiveClocks::LiveClocks(const std::string& pci_bus_id) {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    unavailable_reason_ = "libnvidia-ml.so.1 could not be loaded";
    return;
  }
  api_ = new Api;
  api_->init = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlInit_v2"));
  api_->shutdown = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlShutdown"));
  api_->handle_by_pci_bus_id = reinterpret_cast<int (*)(const char*, void**)>(
      dlsym(library_, "nvmlDeviceGetHandleByPciBusId_v2"));
  api_->clock_info =
      reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(library_, "nvmlDeviceGetClockInfo"));
  if (!api_->init || !api_->shutdown || !api_->handle_by_pci_bus_id || !api_->clock_info) {
    unavailable_reason_ = "libnvidia-ml.so.1 lacks the NVML entry points";
    return;
  }
  if (api_->init() != 0) {
    unavailable_reason_ = "nvmlInit failed";
    return;
  }
  initialized_ = true;
  // By PCI bus id, not ordinal: CUDA and NVML number devices differently
  // (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER).
  if (pci_bus_id.empty() || api_->handle_by_pci_bus_id(pci_bus_id.c_str(), &device_) != 0) {
    unavailable_reason_ = "NVML does not know PCI device '" + pci_bus_id + "'";
    device_ = nullptr;
  }
}

LiveClocks::~LiveClocks() {
  if (initialized_) api_->shutdown();
  delete api_;
  if (library_) dlclose(library_);
}

std::string LiveClocks::describe() const {
  if (!device_) return "unavailable (" + unavailable_reason_ + ")";
  unsigned sm = 0, memory = 0;
  if (api_->clock_info(device_, kNvmlClockSm, &sm) != 0 ||
      api_->clock_info(device_, kNvmlClockMemory, &memory) != 0)
    return "unavailable (nvmlDeviceGetClockInfo failed)";
  return "SM " + std::to_string(sm) + " MHz, memory " + std::to_string(memory) +
         " MHz (current, NVML)";
}

Header make_header(const DeviceInfo& info, const LiveClocks& clocks, const std::string& table,
                   int warmup, int iters, const std::string& command_line, int rounds,
                   double cooldown) {
  char l2[64];
  std::snprintf(l2, sizeof l2, "%zu (%.1f MiB)", info.l2_bytes, info.l2_bytes / 1048576.0);
  Header h;
  h.push_back({"gpu", info.name + " (device " + std::to_string(info.ordinal) + ", PCI " +
                          info.pci_bus_id + ")", std::nullopt});
  h.push_back({"compute_capability",
               "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor), std::nullopt});
  h.push_back({"sm_count", std::to_string(info.sm_count), static_cast<double>(info.sm_count)});
  h.push_back({"l2_bytes", l2, static_cast<double>(info.l2_bytes)});
  h.push_back({"memory", format_bytes(static_cast<double>(info.total_bytes)), std::nullopt});
  h.push_back({"clocks", clocks.describe(), std::nullopt});
  h.push_back({"max_clocks", "SM " + std::to_string(info.max_sm_mhz) + " MHz, memory " +
                                 std::to_string(info.max_memory_mhz) + " MHz", std::nullopt});
  h.push_back({"driver", "CUDA " + version_text(info.driver_version) + " (" +
                             std::to_string(info.driver_version) + ")", std::nullopt});
  h.push_back({"cuda_runtime", version_text(info.runtime_version), std::nullopt});
  h.push_back({"fa3", std::to_string(FA3_VERSION_MAJOR) + "." + std::to_string(FA3_VERSION_MINOR),
               std::nullopt});
  h.push_back({"tuning_table", table.empty() ? "built-in" : table, std::nullopt});
  std::string timing = "CUDA events around each launch; " + std::to_string(warmup) +
                       " warm-up + " + std::to_string(iters) + " timed launches per row";
  if (rounds > 1)
    timing += " in each of " + std::to_string(rounds) +
              " rounds interleaved over a problem's rows (a row's median: the median of its "
              "rounds' medians; p10, p90 over all its launches)";
  else
    timing += "; median, p10, p90";
  if (cooldown > 0) {
    char idle[96];
    std::snprintf(idle, sizeof idle, "; after each row's launches the GPU idles %g x their time",
                  cooldown);
    timing += idle;
  }
  timing += "; inputs rotated over 'sets' buffer sets (>= 3 x L2 when memory allows)";
  h.push_back({"timing", timing, std::nullopt});
  h.push_back({"command", command_line, std::nullopt});
  return h;
}

}  // namespace fa3bench
