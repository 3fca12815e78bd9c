// fa3_tests on a machine without a GPU: the command line's filter, narrowed to leave out every
// [gpu] test, must still select what it selected (read back through Catch2's own parser).
// Catch2 declares its test-spec parser only with this (the runner in main.cpp defines it).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_filter.h"

namespace {

// Whether the narrowed specs select a test case of this name and these tags.
bool selects(const std::vector<std::string>& specs, const std::string& name,
             const std::vector<std::string>& tags) {
  const Catch::TestCaseInfo test(name, "", "", tags, CATCH_INTERNAL_LINEINFO);
  for (const std::string& spec : fa3test::without_gpu(specs)) {
    const Catch::TestSpec parsed =
        Catch::TestSpecParser(Catch::ITagAliasRegistry::get()).parse(spec).testSpec();
    if (parsed.matches(test)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("without a GPU a test filter keeps its meaning less the [gpu] tests", "[cpu][runner]") {
  const std::string name = "fa3-sass: an _hb kernel's mainloop is its straight loop";
  const std::vector<std::string> cpu = {"cpu", "sass"}, gpu = {"gpu", "forward"};

  CHECK(fa3test::without_gpu({}) == std::vector<std::string>{"~[gpu]"});
  CHECK(selects({}, name, cpu));
  CHECK_FALSE(selects({}, name, gpu));

  // A name, with spaces and an apostrophe: before the quoting, Catch2 read "name~[gpu]" as
  // one name and ran nothing.
  CHECK(selects({name}, name, cpu));
  CHECK_FALSE(selects({name}, name, gpu));
  CHECK_FALSE(selects({name}, "another test", cpu));
  // Wildcards, an excluded name, tags, and alternatives.
  CHECK(selects({"*straight loop"}, name, cpu));
  CHECK_FALSE(selects({"*straight loop"}, "a bent loop", cpu));
  CHECK_FALSE(selects({"~*straight loop"}, name, cpu));
  CHECK(selects({"~*straight loop"}, "another test", cpu));
  CHECK_FALSE(selects({"~*straight loop"}, "another test", gpu));
  CHECK(selects({"[sass]"}, name, cpu));
  CHECK_FALSE(selects({"[sass]"}, name, {"gpu", "sass"}));
  CHECK(selects({"[forward],*straight loop"}, name, cpu));
  CHECK_FALSE(selects({"[forward],*straight loop"}, "fa3_forward runs", gpu));
  CHECK(selects({"\"" + name + "\""}, name, cpu));

  CHECK(fa3test::mentions_gpu({"[gpu]"}));
  CHECK(fa3test::mentions_gpu({"[forward][gpu]"}));
  CHECK_FALSE(fa3test::mentions_gpu({"~[gpu]"}));
  CHECK_FALSE(fa3test::mentions_gpu({name}));
}
