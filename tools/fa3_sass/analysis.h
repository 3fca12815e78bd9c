// One kernel's SASS -> its facts and its verdicts. The whole analyzer behind the CLI; the
// tests call it on fixtures.
#pragma once

#include <string>
#include <vector>

#include "kernel_config.h"
#include "sass_text.h"
#include "structure.h"

namespace fa3::sass {

struct CheckResult {
  CheckId id;
  bool pass = false;
  std::string detail;  // one sentence: the evidence, and for a failure what it means
};

struct KernelReport {
  std::string name;
  KernelTraits traits;
  ResourceUsage resources;
  InstructionMix mix;
  Serialization serialization;           // whole function
  Serialization mainloop_serialization;  // the mainloop alone (empty when there is none)
  std::optional<Mainloop> mainloop;
  std::vector<WgmmaGroup> groups;        // every wgmma group of the function, in order
  std::vector<CheckResult> checks;

  bool pass() const;
  const CheckResult* check(CheckId id) const;  // nullptr when not applied to this kernel
};

// Runs the checks that `traits` selects (checks_for).
KernelReport analyze_kernel(const SassFunction& function, const KernelTraits& traits);
// Same, with the traits read from the function's name.
KernelReport analyze_kernel(const SassFunction& function);

CheckResult run_check(CheckId id, const KernelReport& facts);

}  // namespace fa3::sass
