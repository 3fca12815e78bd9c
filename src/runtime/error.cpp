#include "runtime/error.h"

namespace fa3 {

namespace {
thread_local std::string last_error;
}

fa3_status set_last_error(const Error& e) {
  last_error = e.message;
  return e.status;
}

fa3_status set_last_error_nothrow(fa3_status status, const char* prefix, const char* detail) noexcept {
  try {
    last_error.assign(prefix);
    last_error.append(detail);
  } catch (...) {
    last_error.clear();
  }
  return status;
}

void clear_last_error() { last_error.clear(); }

const char* last_error_text() { return last_error.c_str(); }

}  // namespace fa3
