// adgen: reads a C++ translation unit, finds the functions marked LLMCC_ADGEN_ENTRY and writes
// their reverse-mode derivatives (split reversal) as C++.
//
//   adgen <source> --out-header <file.grad.h> --out-source <file.grad.cpp> [--root <dir>]
//         [--header-include <name>] -- <compiler flags (-I, -D, -std ...)>
//
// Exit code 0 on success; 1 when anything outside the supported subset was reported (as
// `file:line:col: error: ...`); 2 on a usage error. Outputs are written only on success.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "clang/AST/ASTConsumer.h"
#include "clang/AST/Attr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Format/Format.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/Core/Replacement.h"
#include "clang/Tooling/Tooling.h"
#include "diagnostics.h"
#include "emitter.h"
#include "planner.h"

namespace {

struct Options {
  std::string source, out_header, out_source, root, header_include, depfile;
  std::vector<std::string> flags;
  std::vector<std::string> include_dirs;
};

// Generated code goes through clang-format's library (the one linked into adgen, so the output
// does not depend on which clang-format binary is installed): Google style, 100 columns.
std::string format_code(const std::string& code, const std::string& name) {
  clang::format::FormatStyle style = clang::format::getGoogleStyle(clang::format::FormatStyle::LK_Cpp);
  style.ColumnLimit = 100;
  style.SortIncludes = clang::format::FormatStyle::SI_Never;
  const std::vector<clang::tooling::Range> ranges{clang::tooling::Range(0, static_cast<unsigned>(code.size()))};
  const clang::tooling::Replacements reps = clang::format::reformat(style, code, ranges, name);
  llvm::Expected<std::string> out = clang::tooling::applyAllReplacements(code, reps);
  if (!out) {
    llvm::consumeError(out.takeError());
    return code;
  }
  return *out;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

// The shortest spelling of `file` relative to an include directory.
std::string include_spelling(const Options& o, const std::string& file) {
  namespace fs = std::filesystem;
  std::string best;
  const std::string abs = fs::weakly_canonical(fs::absolute(file)).string();
  for (const auto& dir : o.include_dirs) {
    std::string d = fs::weakly_canonical(fs::absolute(dir)).string();
    if (!d.empty() && d.back() != '/') d += '/';
    if (abs.rfind(d, 0) == 0) {
      std::string rel = abs.substr(d.size());
      if (best.empty() || rel.size() < best.size()) best = rel;
    }
  }
  if (best.empty()) {
    const fs::path out_dir = fs::absolute(o.out_header).parent_path();
    best = fs::relative(abs, out_dir).string();
  }
  return best;
}

class Consumer : public clang::ASTConsumer {
 public:
  explicit Consumer(const Options& o) : o_(o) {}

  void HandleTranslationUnit(clang::ASTContext& ctx) override {
    if (ctx.getDiagnostics().hasErrorOccurred()) return;  // the compiler already complained
    adgen::Diagnostics diag(ctx);
    adgen::Planner planner(ctx, diag);
    struct Finder : clang::RecursiveASTVisitor<Finder> {
      std::vector<const clang::FunctionDecl*> entries;
      std::vector<const clang::FunctionDecl*> jvps;  // LLMCC_ADGEN_JVP declarations (adgen defines them)
      clang::SourceManager* sm = nullptr;
      bool VisitFunctionDecl(clang::FunctionDecl* f) {
        if (sm->isInSystemHeader(sm->getExpansionLoc(f->getLocation()))) return true;
        if (!adgen::Planner::jvp_target(f).empty()) {
          for (const auto* j : jvps)
            if (j->getCanonicalDecl() == f->getCanonicalDecl()) return true;
          jvps.push_back(f);
          return true;
        }
        if (!f->isThisDeclarationADefinition() && f->getDefinition() != nullptr) return true;  // seen there
        for (const auto* e : entries)
          if (e->getCanonicalDecl() == f->getCanonicalDecl()) return true;
        for (const clang::Decl* r : f->redecls())
          for (const auto* a : r->specific_attrs<clang::AnnotateAttr>())
            if (a->getAnnotation() == "llmcc.adgen.entry") {
              entries.push_back(f);
              return true;
            }
        return true;
      }
    } finder;
    finder.sm = &ctx.getSourceManager();
    finder.TraverseDecl(ctx.getTranslationUnitDecl());
    if (finder.entries.empty() && finder.jvps.empty()) {
      diag.error(ctx.getSourceManager().getLocForStartOfFile(ctx.getSourceManager().getMainFileID()),
                 "no function is marked LLMCC_ADGEN_ENTRY or LLMCC_ADGEN_JVP (from llmcc/adgen.h) in this "
                 "translation unit");
      return;
    }
    for (const auto* e : finder.entries) planner.plan_entry(e);
    for (const auto* j : finder.jvps) planner.plan_jvp(j, j->getLocation());
    if (diag.failed()) return;
    planner.finish();

    adgen::Program& prog = planner.program();
    const clang::FunctionDecl* first = finder.entries.empty() ? finder.jvps.front() : finder.entries.front();
    const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(first->getDeclContext());
    prog.ns = ns ? ns->getQualifiedNameAsString() : "";
    const clang::SourceManager& sm = ctx.getSourceManager();
    const auto main = sm.getFileEntryRefForID(sm.getMainFileID());
    const std::string main_name = main ? main->getName().str() : o_.source;
    const bool main_is_header = main_name.size() > 2 && main_name.substr(main_name.size() - 2) == ".h";
    std::set<std::string> incs;
    for (const auto& f : planner.needed_files()) {
      if (f == main_name && !main_is_header) {
        diag.error(sm.getLocForStartOfFile(sm.getMainFileID()),
                   "modules, rules and entries must be declared in headers so that the generated code can "
                   "include them; '" +
                       main_name + "' is a source file");
        return;
      }
      incs.insert(include_spelling(o_, f));
    }
    prog.includes.assign(incs.begin(), incs.end());
    namespace fs = std::filesystem;
    prog.source_name = o_.root.empty() ? fs::path(o_.source).filename().string()
                                       : fs::relative(fs::absolute(o_.source), fs::absolute(o_.root)).string();
    const std::string header_name =
        o_.header_include.empty() ? fs::path(o_.out_header).filename().string() : o_.header_include;
    const adgen::Generated g = adgen::emit(prog, header_name);
    if (!write_file(o_.out_header, format_code(g.header, o_.out_header)) ||
        !write_file(o_.out_source, format_code(g.source, o_.out_source))) {
      diag.error(sm.getLocForStartOfFile(sm.getMainFileID()),
                 "cannot write the outputs '" + o_.out_header + "' / '" + o_.out_source + "'");
      return;
    }
    if (!o_.depfile.empty()) {
      // Every non-system file the translation unit read: the build reruns adgen when any changes.
      std::set<std::string> deps;
      for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end(); ++it) {
        const std::string f = it->first.getName().str();
        if (f.rfind("/usr/", 0) != 0 && !f.empty() && f[0] != '<')
          deps.insert(fs::absolute(f).lexically_normal().string());
      }
      std::string text = fs::absolute(o_.out_header).lexically_normal().string() + ":";
      for (const auto& d : deps) text += " \\\n  " + d;
      if (!write_file(o_.depfile, text + "\n"))
        diag.error(sm.getLocForStartOfFile(sm.getMainFileID()), "cannot write the depfile '" + o_.depfile + "'");
    }
  }

 private:
  const Options& o_;
};

class Action : public clang::ASTFrontendAction {
 public:
  explicit Action(const Options& o) : o_(o) {}
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance&, llvm::StringRef) override {
    return std::make_unique<Consumer>(o_);
  }

 private:
  const Options& o_;
};

class Factory : public clang::tooling::FrontendActionFactory {
 public:
  explicit Factory(const Options& o) : o_(o) {}
  std::unique_ptr<clang::FrontendAction> create() override { return std::make_unique<Action>(o_); }

 private:
  const Options& o_;
};

int usage(const char* why) {
  std::cerr << "adgen: " << why << "\n"
            << "usage: adgen <source> --out-header <file.grad.h> --out-source <file.grad.cpp> [--root <dir>] "
               "[--header-include <name>] [--depfile <file.d>] -- <compiler flags>\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= argc) return false;
      dst = argv[++i];
      return true;
    };
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--out-header") {
      if (!value(o.out_header)) return usage("--out-header needs a value");
    } else if (a == "--out-source") {
      if (!value(o.out_source)) return usage("--out-source needs a value");
    } else if (a == "--root") {
      if (!value(o.root)) return usage("--root needs a value");
    } else if (a == "--depfile") {
      if (!value(o.depfile)) return usage("--depfile needs a value");
    } else if (a == "--header-include") {
      if (!value(o.header_include)) return usage("--header-include needs a value");
    } else if (a == "--version") {
      std::cout << "adgen " << adgen::kVersion << "\n";
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else if (o.source.empty()) {
      o.source = a;
    } else {
      return usage("one source file at a time");
    }
  }
  for (; i < argc; ++i) {
    std::string f = argv[i];
    // The target's flags, minus what only matters for code generation or would turn our
    // warnings into errors.
    if (f == "-Werror" || f == "-fopenmp" || f.rfind("-march=", 0) == 0 || f.rfind("-O", 0) == 0) continue;
    if (f.rfind("-I", 0) == 0) {
      std::string dir = f.size() > 2 ? f.substr(2) : (i + 1 < argc ? argv[i + 1] : "");
      o.include_dirs.push_back(dir);
    }
    if (f.rfind("-isystem", 0) == 0 && f.size() > 8) o.include_dirs.push_back(f.substr(8));
    o.flags.push_back(f);
  }
  if (o.source.empty()) return usage("no source file");
  if (o.out_header.empty() || o.out_source.empty()) return usage("--out-header and --out-source are required");
  // C++20 unless the target's flags name a standard: Clang takes the last -std it is given.
  std::vector<std::string> flags = {"-xc++", "-std=c++20", "-w", "-fsyntax-only", "-resource-dir=" ADGEN_RESOURCE_DIR};
  flags.insert(flags.end(), o.flags.begin(), o.flags.end());
  clang::tooling::FixedCompilationDatabase db(".", flags);
  clang::tooling::ClangTool tool(db, {o.source});
  Factory factory(o);
  const int rc = tool.run(&factory);
  return rc == 0 ? 0 : 1;
}
