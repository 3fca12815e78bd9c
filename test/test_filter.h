// How fa3_tests narrows the command line's test specs on a machine without a Hopper GPU
// (test/main.cpp): every [gpu] test is left out, the rest of the filter keeps its meaning.
#pragma once

#include <string>
#include <vector>

namespace fa3test {

// True when a spec asks for [gpu] tests (a "[gpu]" that is not "~[gpu]").
bool mentions_gpu(const std::vector<std::string>& specs);

// The specs with "~[gpu]" added to every alternative (comma means "or"); no spec at all
// becomes "~[gpu]". Catch2 reads a bare name up to a '[' as one name, "~" included, so a
// name (or an excluded one, "~name") is quoted before "~[gpu]" follows it.
std::vector<std::string> without_gpu(const std::vector<std::string>& specs);

}  // namespace fa3test
