#include "runtime/error.h"

namespace fa3 {

namespace {
thread_local std::string last_error;
}

fa3_status set_last_error(const Error& e) {
  last_error = e.message;
  return e.status;
}

void clear_last_error() { last_error.clear(); }

const char* last_error_text() { return last_error.c_str(); }

}  // namespace fa3
