#include "test_filter.h"

namespace fa3test {

namespace {

std::string alternative_without_gpu(const std::string& part) {
  const size_t name_at = part[0] == '~' ? 1 : 0;
  const bool bare_name = part.size() > name_at && part.find_first_of("[\"") == std::string::npos;
  if (!bare_name) return part + "~[gpu]";
  return part.substr(0, name_at) + '"' + part.substr(name_at) + "\"~[gpu]";
}

}  // namespace

bool mentions_gpu(const std::vector<std::string>& specs) {
  for (const std::string& s : specs)
    if (s.find("[gpu]") != std::string::npos && s.find("~[gpu]") == std::string::npos) return true;
  return false;
}

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

}  // namespace fa3test
