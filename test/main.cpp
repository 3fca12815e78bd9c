// Test runner: Catch2 with one addition. Tests tagged [gpu] need an NVIDIA driver and a
// Hopper GPU; without them they are excluded with the reason printed (never reported as
// passed), unless [gpu] was asked for explicitly, which then fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_env.h"

namespace {

bool mentions_gpu(const std::vector<std::string>& specs) {
  for (const std::string& s : specs)
    if (s.find("[gpu]") != std::string::npos && s.find("~[gpu]") == std::string::npos) return true;
  return false;
}

// One alternative of a test spec with "~[gpu]" after it. Catch2 reads a bare name up to a
// '[' as one name, "~" included, so a name (or an excluded one, "~name") is quoted first.
std::string alternative_without_gpu(const std::string& part) {
  const size_t name_at = part[0] == '~' ? 1 : 0;
  const bool bare_name = part.size() > name_at && part.find_first_of("[\"") == std::string::npos;
  if (!bare_name) return part + "~[gpu]";
  return part.substr(0, name_at) + '"' + part.substr(name_at) + "\"~[gpu]";
}

// Appends "~[gpu]" to every alternative of every test spec (comma means "or").
std::vector<std::string> without_gpu(const std::vector<std::string>& specs) {
  if (specs.empty()) return {"~[gpu]"};
  std::vector<std::string> out;
  for (const std::string& s : specs) {
    std::string spec, part;
    for (char c : s + ",") {
      if (c == ',') {
        if (!part.empty()) spec += (spec.empty() ? "" : ",") + alternative_without_gpu(part);
        part.clear();
      } else {
        part += c;
      }
    }
    out.push_back(spec);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  Catch::ConfigData& config = session.configData();
  if (config.listTests || config.listTags || config.listTestNamesOnly || config.showHelp)
    return session.run();

  std::string reason;
  if (!fa3test::hopper_gpu_available(&reason)) {
    if (mentions_gpu(config.testsOrTags)) {
      std::fprintf(stderr, "fa3_tests: [gpu] tests were requested but cannot run: %s\n",
                   reason.c_str());
      return 1;
    }
    std::printf("fa3_tests: skipping every [gpu] test: %s\n", reason.c_str());
    config.testsOrTags = without_gpu(config.testsOrTags);
    session.useConfigData(config);
  }
  return session.run();
}
