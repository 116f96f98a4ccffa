// llmcc::Error and the checks every front end uses.
//
// Misuse of the API (a wrong shape, a missing arena, a bad file) throws llmcc::Error whose
// message starts with the op or component in brackets and says what was expected and what was
// got: "[layernorm] w has 512 elements, expected 768 (last dim of x)". Broken internal
// invariants use LLMCC_ASSERT, which is always on and names file and line.
#pragma once

#include <stdexcept>
#include <string>

namespace llmcc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error("[where] message").
[[noreturn]] void fail(const std::string& where, const std::string& message);

// Called by LLMCC_ASSERT; prints file, line and the condition, then aborts.
[[noreturn]] void assert_failed(const char* condition, const char* file, int line, const char* hint);

}  // namespace llmcc

// Always on, also in Release builds: a failed internal invariant is a bug in llmcc.
#define LLMCC_ASSERT(cond, hint)                                            \
  do {                                                                      \
    if (!(cond)) ::llmcc::assert_failed(#cond, __FILE__, __LINE__, (hint)); \
  } while (0)
