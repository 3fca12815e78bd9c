// Errors inside the runtime: a status of the C API plus the sentence fa3_last_error() will
// return. Functions that can fail return Error; Error::ok() is the success value.
#pragma once

#include <string>
#include <utility>

#include "fa3/fa3.h"

namespace fa3 {

struct Error {
  fa3_status status = FA3_OK;
  std::string message;

  static Error ok() { return {}; }
  bool failed() const { return status != FA3_OK; }
};

inline Error make_error(fa3_status status, std::string message) {
  return Error{status, std::move(message)};
}

// Records the error for fa3_last_error() of the calling thread and returns its status.
fa3_status set_last_error(const Error& e);
// The same for the C boundary's exception handlers, which must not throw themselves: the
// sentence is `prefix` then `detail`; when even that cannot be stored (out of host memory),
// fa3_last_error() is empty.
fa3_status set_last_error_nothrow(fa3_status status, const char* prefix, const char* detail = "") noexcept;
void clear_last_error();
const char* last_error_text();

}  // namespace fa3
