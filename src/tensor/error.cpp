#include "llmcc/error.h"

#include <cstdio>
#include <cstdlib>

namespace llmcc {

void fail(const std::string& where, const std::string& message) { throw Error("[" + where + "] " + message); }

void assert_failed(const char* condition, const char* file, int line, const char* hint) {
  std::fprintf(stderr, "%s:%d: llmcc internal error: assertion `%s` failed: %s\n", file, line, condition, hint);
  std::abort();
}

}  // namespace llmcc
