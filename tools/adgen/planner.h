// The planner: from the Clang AST of a translation unit to adgen's IR (ir.h).
//
// Starting at each LLMCC_ADGEN_ENTRY function it walks the call graph: a call to a rule is
// recorded as a rule call; a call to a function with a body (member of a module, or free) is
// planned recursively (callees before callers); anything outside the subset is reported at its
// source location (diagnostics.h). Module types reached get a Grad mirror.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "activity.h"
#include "diagnostics.h"
#include "ir.h"
#include "rules.h"

namespace adgen {

class Planner {
 public:
  Planner(clang::ASTContext& ctx, Diagnostics& diag);

  void plan_entry(const clang::FunctionDecl* entry);
  // A declaration marked LLMCC_ADGEN_JVP("f"): plans f and its tangent function (tangent.cpp).
  FuncPlan* plan_jvp(const clang::FunctionDecl* decl, clang::SourceLocation use);
  // After planning: calls of jvps with repeated arguments specialised, calls sharing a primal
  // stream merged, common subexpressions of the plans adgen made removed, plans ordered callees
  // first.
  void finish();
  // The function named by LLMCC_ADGEN_JVP on f, or "" when f is not a jvp declaration.
  static std::string jvp_target(const clang::FunctionDecl* f);
  Program& program() { return program_; }
  // Files whose declarations the generated code needs (modules, rules, entries).
  const std::set<std::string>& needed_files() const { return files_; }

 private:
  struct Scope;  // per-function lowering state (planner.cpp)
  friend class TangentBuilder;
  // Dual: the value and its tangent along every tangent argument; Slope: a scalar function's
  // derivative (the tangent along 1), as a function of its argument; Taylor: the tangent of a
  // Dual plan along its own direction (its primal values' tangents are the ones it computes, so
  // only its tangent statements get tangents: the second derivative along that direction).
  enum class TangentMode { Dual, Slope, Taylor };
  FuncPlan* tangent_plan(const FuncPlan& f, const std::vector<bool>& mask, TangentMode mode, const std::string& id,
                         clang::SourceLocation loc, bool top);
  const clang::FunctionDecl* library_function(const std::string& name, std::size_t params);
  FuncPlan* plan_jvp_uncached(const clang::FunctionDecl* decl);
  FuncPlan* specialized(const FuncPlan& g, const std::vector<int>& alias);
  void specialize_calls(FuncPlan& f);
  FuncPlan* taylor_for(const FuncPlan& g, const std::vector<Operand>& args);
  // merge.cpp: calls of plans of one function on the same arguments become one call.
  const FuncPlan* merged(const FuncPlan& a, const FuncPlan& b);
  void merge_calls(FuncPlan& f);

  FuncPlan* plan_function(const clang::FunctionDecl* f, clang::SourceLocation use);
  std::string ensure_module(const clang::CXXRecordDecl* rd);
  void need_file(const clang::Decl* d);

  // statements
  void lower_stmt(Scope& sc, const clang::Stmt* s, std::vector<Stmt>& out);
  void lower_decl(Scope& sc, const clang::DeclStmt* ds, std::vector<Stmt>& out);
  void lower_assign(Scope& sc, const clang::Expr* whole, const clang::Expr* lhs, const clang::Expr* rhs, char compound,
                    std::vector<Stmt>& out);
  void lower_if(Scope& sc, const clang::IfStmt* s, std::vector<Stmt>& out);
  void lower_for(Scope& sc, const clang::ForStmt* s, std::vector<Stmt>& out);
  void lower_range_for(Scope& sc, const clang::CXXForRangeStmt* s, std::vector<Stmt>& out);

  // expressions
  Operand lower_expr(Scope& sc, const clang::Expr* e, std::vector<Stmt>& out);
  Operand lower_call(Scope& sc, const clang::CallExpr* ce, std::vector<Stmt>& out, bool checkpoint);
  Operand push_call(Scope& sc, Call call, std::vector<Stmt>& out);
  Operand lower_map_unary(Scope& sc, const clang::CallExpr* ce, const clang::FunctionDecl* callee,
                          std::vector<adgen::Stmt>& out);
  Operand inactive(Scope& sc, const clang::Expr* e);
  Operand lower_jvp_call(Scope& sc, const clang::CallExpr* ce, const clang::FunctionDecl* callee,
                         std::vector<adgen::Stmt>& out);
  // The results of a Dual or Dual2 expression (2 or 4): a local bound to one, a jvp call (lowered
  // here) or a Dual2's `.value` / `.tangent`.
  bool lower_results(Scope& sc, const clang::Expr* e, std::vector<adgen::Stmt>& out, std::vector<Operand>& results);
  bool resolve_module(Scope& sc, const clang::Expr* e, ModPath& path, bool report);

  // text of inactive code with `self.` and renamed locals
  std::string text(Scope& sc, const clang::Stmt* s);
  bool reevaluable(Scope& sc, const clang::Stmt* s) const;
  void check_mutation(Scope& sc, const clang::Stmt* s);
  bool mentions_active(Scope& sc, const clang::Stmt* s) const;
  bool data_dependent(const clang::Stmt* s) const;

  clang::ASTContext& ctx_;
  Diagnostics& diag_;
  Activity act_;
  Rules rules_;
  Program program_;
  std::map<const clang::FunctionDecl*, FuncPlan*> planned_;
  std::set<const clang::FunctionDecl*> in_progress_;
  std::map<const clang::CXXRecordDecl*, std::string> modules_;
  std::set<std::string> func_ids_;
  std::set<std::string> files_;
  std::map<const clang::FunctionDecl*, FuncPlan*> jvps_;
  std::set<const clang::FunctionDecl*> in_jvp_;
  std::map<std::pair<const FuncPlan*, std::vector<int>>, FuncPlan*> specials_;
  std::map<std::tuple<const FuncPlan*, std::vector<bool>, int>, FuncPlan*> tangents_;
  std::map<std::pair<const FuncPlan*, const FuncPlan*>, FuncPlan*> merges_;
};

}  // namespace adgen
