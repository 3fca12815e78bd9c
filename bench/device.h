// The GPU the bench runs on: whether there is a usable one (driver, Hopper), what it is,
// and its clocks (live ones through NVML, loaded at run time when present).
#pragma once

#include <optional>
#include <string>

#include "cuda_util.h"
#include "report.h"

namespace fa3bench {

// exit_code 0: device `device` is a Hopper (sm_90) GPU with a working driver. Otherwise
// `sentence` says what is missing, for stderr, and exit_code is the status to exit with
// (1: no driver / no device / not Hopper; 2: --device names no device).
struct EnvironmentCheck {
  int exit_code = 0;
  std::string sentence;
};
EnvironmentCheck check_environment(int device);

struct DeviceInfo {
  int ordinal = 0;
  std::string name, pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t l2_bytes = 0, total_bytes = 0;
  int max_sm_mhz = 0, max_memory_mhz = 0;  // cudaDevAttrClockRate / MemoryClockRate
  int driver_version = 0, runtime_version = 0;
};
Outcome query_device(int device, DeviceInfo* info);

// Current SM and memory clocks from NVML (libnvidia-ml.so.1 through dlopen), when present.
class LiveClocks {
 public:
  explicit LiveClocks(const std::string& pci_bus_id);
  ~LiveClocks();
  LiveClocks(const LiveClocks&) = delete;
  LiveClocks& operator=(const LiveClocks&) = delete;

  // "SM 1980 MHz, memory 2619 MHz (current, NVML)" or "unavailable (why)".
  std::string describe() const;

 private:
  struct Api;
  void* library_ = nullptr;
  Api* api_ = nullptr;
  bool initialized_ = false;  // nvmlInit succeeded: nvmlShutdown is owed
  void* device_ = nullptr;    // nvmlDevice_t
  std::string unavailable_reason_;
};

// The "# key: value" lines and JSON header of a run.
// rounds > 1 and cooldown > 0 (fa3-tune, fa3-bench --rounds/--cooldown) are described too.
Header make_header(const DeviceInfo& info, const LiveClocks& clocks, const std::string& table,
                   int warmup, int iters, const std::string& command_line, int rounds = 1,
                   double cooldown = 0);

}  // namespace fa3bench
