// Activity analysis: which types carry derivatives (Tensor, float, modules of parameters) and,
// inside one function, which locals and expressions depend on a differentiable input.
//
// Types: a *module* is a user struct that holds Tensor fields directly or through nested
// modules / std::vector<Module>; its other fields are configuration and never active.
// Tokens, integers, bools, enums and configs never carry a derivative.
// Values: a parameter of Tensor, float or module type is active; a local is active when any
// assignment to it is (flow-insensitive fixpoint); an expression is active when its type can
// carry a derivative and it reads an active value. An int read from a tensor (x.dim(0)) or a
// config float read from a module (cfg.eps) is therefore inactive.
#pragma once

#include <map>
#include <set>

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/Expr.h"

namespace adgen {

class Activity {
 public:
  explicit Activity(clang::ASTContext& ctx) : ctx_(ctx) {}

  // ---- types -------------------------------------------------------------------------------
  static clang::QualType bare(clang::QualType t);  // no reference, no cv
  bool is_tensor(clang::QualType t) const;
  bool is_tokens(clang::QualType t) const;
  bool is_float(clang::QualType t) const;
  bool is_double(clang::QualType t) const;
  bool is_dual(clang::QualType t) const;                               // llmcc::adgen::Dual or Dual2: a jvp's results
  const clang::CXXRecordDecl* module_record(clang::QualType t) const;  // null: not a module
  // Whether a value of type t contains a Tensor or a module anywhere: directly, through a pointer,
  // in an array or as a template argument (std::array<Block, 2>, std::map<int, Tensor>).
  bool holds_parameters(clang::QualType t) const;
  const clang::CXXRecordDecl* module_vec_elem(clang::QualType t) const;  // std::vector<Module>
  bool is_module_like(clang::QualType t) const { return module_record(t) || module_vec_elem(t); }
  bool in_system_header(const clang::Decl* d) const;

  // ---- values in one function ------------------------------------------------------------------
  void analyze(const clang::FunctionDecl* f);
  bool active(const clang::Expr* e) const;
  bool active_var(const clang::VarDecl* v) const { return active_vars_.count(v) > 0; }

 private:
  bool module_uncached(const clang::CXXRecordDecl* rd) const;
  void scan(const clang::Stmt* s, bool& changed);
  void mark(const clang::Expr* lhs, const clang::Expr* rhs, bool& changed);

  clang::ASTContext& ctx_;
  mutable std::map<const clang::CXXRecordDecl*, bool> module_cache_;
  std::set<const clang::VarDecl*> active_vars_;
};

}  // namespace adgen
