#include "diagnostics.h"

#include "clang/Basic/Diagnostic.h"

namespace adgen {

void Diagnostics::report(int level, clang::SourceLocation loc, const std::string& message) {
  clang::DiagnosticsEngine& de = ctx_.getDiagnostics();
  const auto lvl = level == 0   ? clang::DiagnosticsEngine::Error
                   : level == 1 ? clang::DiagnosticsEngine::Warning
                                : clang::DiagnosticsEngine::Note;
  const unsigned id = de.getCustomDiagID(lvl, "%0");
  de.Report(loc, id) << message;
}

void Diagnostics::error(clang::SourceLocation loc, const std::string& message) {
  ++errors_;
  report(0, loc, message);
}
void Diagnostics::warning(clang::SourceLocation loc, const std::string& message) { report(1, loc, message); }
void Diagnostics::note(clang::SourceLocation loc, const std::string& message) { report(2, loc, message); }

}  // namespace adgen
