// Clang-style diagnostics (`file:line:col: error: ...` with the source line and a caret),
// reported through the compiler instance's DiagnosticsEngine so they look like any compiler
// error. adgen never exits from here: main() turns "an error was reported" into exit code 1.
#pragma once

#include <string>

#include "clang/AST/ASTContext.h"
#include "clang/Basic/SourceLocation.h"

namespace adgen {

class Diagnostics {
 public:
  explicit Diagnostics(clang::ASTContext& ctx) : ctx_(ctx) {}
  void error(clang::SourceLocation loc, const std::string& message);
  void warning(clang::SourceLocation loc, const std::string& message);
  void note(clang::SourceLocation loc, const std::string& message);
  bool failed() const { return errors_ > 0; }
  int errors() const { return errors_; }

 private:
  void report(int level, clang::SourceLocation loc, const std::string& message);
  clang::ASTContext& ctx_;
  int errors_ = 0;
};

}  // namespace adgen
