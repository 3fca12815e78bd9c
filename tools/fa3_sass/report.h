// Reports of analyzed kernels: text for people, JSON for machines (schema "fa3-sass/1",
// documented in docs/fa3_sass.md), SVG strips of the mainloops.
#pragma once

#include <string>
#include <vector>

#include "analysis.h"

namespace fa3::sass {

// Where the kernels came from, for the report header.
struct ReportSource {
  std::string kind;  // "library", "cubin" or "sass"
  std::vector<std::string> paths;
  std::string disassembler;  // the program used, or "" for SASS text input
};

std::string text_report(const std::vector<KernelReport>& kernels, const ReportSource& source);
std::string text_kernel(const KernelReport& kernel);
std::string json_report(const std::vector<KernelReport>& kernels, const ReportSource& source);
std::string svg_report(const std::vector<KernelReport>& kernels);

}  // namespace fa3::sass
