// Test runner: Catch2 with one addition. Tests tagged [gpu] need an NVIDIA driver and a
// Hopper GPU; without them they are excluded with the reason printed (never reported as
// passed), unless [gpu] was asked for explicitly, which then fails.
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
    config.testsOrTags = fa3test::without_gpu(config.testsOrTags);
    session.useConfigData(config);
  }
  return session.run();
}
