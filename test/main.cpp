// Test runner: Catch2 with one addition. Tests tagged [gpu] need an NVIDIA driver and a
// Hopper GPU; without them they are excluded with the reason printed (never reported as
// passed), unless [gpu] was asked for explicitly, or the filter selects [gpu] tests only
// (such as "[backward]" or a GPU test's name), which then fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "gpu_env.h"
#include "test_filter.h"

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  Catch::ConfigData& config = session.configData();
  if (config.listTests || config.listTags || config.listTestNamesOnly || config.showHelp)
    return session.run();

  std::string reason;
  if (!fa3test::hopper_gpu_available(&reason)) {
    if (fa3test::mentions_gpu(config.testsOrTags)) {
      std::fprintf(stderr, "fa3_tests: [gpu] tests were requested but cannot run: %s\n",
                   reason.c_str());
      return 1;
    }
    std::printf("fa3_tests: skipping every [gpu] test: %s\n", reason.c_str());
    const Catch::Config asked(config);
    config.testsOrTags = fa3test::without_gpu(config.testsOrTags);
    session.useConfigData(config);
    // Catch2 v2 exits 0 when no test runs: a filter that selects [gpu] tests only would
    // otherwise pass having checked nothing.
    const auto selected = [](const Catch::Config& c) {
      return Catch::filterTests(Catch::getAllTestCasesSorted(c), c.testSpec(), c).size();
    };
    if (selected(asked) > 0 && selected(session.config()) == 0) {
      std::fprintf(stderr, "fa3_tests: every test the filter selects is a [gpu] test: %s\n",
                   reason.c_str());
      return 1;
    }
  }
  return session.run();
}
