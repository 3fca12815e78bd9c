// What the build embeds into the library (written by the Makefile into build/gen/):
// every kernel cubin and the built-in tuning table.
#pragma once

#include <cstddef>

namespace fa3 {

struct EmbeddedBlob {
  const char* name;               // kernel name, or "tuning_table.json"
  const unsigned char* begin;
  const unsigned char* end;
};

extern const EmbeddedBlob kEmbeddedCubins[];
extern const size_t kEmbeddedCubinCount;
extern const EmbeddedBlob kEmbeddedTuningTable;

}  // namespace fa3
