// Shared by the planner's translation units (planner.cpp: call graph and modules;
// lowering.cpp: statements and expressions to IR; inspect.cpp: source text and checks).
#pragma once

#include <algorithm>
#include <functional>

#include "clang/AST/Attr.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"

#include "planner.h"

namespace adgen {

using namespace clang;

// Per-function lowering state.
struct Planner::Scope {
  FuncPlan* fp = nullptr;
  const FunctionDecl* fd = nullptr;
  const CXXRecordDecl* self = nullptr;          // module of a member function
  std::map<const VarDecl*, std::string> names;  // unique names of locals
  std::set<std::string> used_names;
  std::map<const VarDecl*, ModPath> aliases;             // module references (range-for element, ...)
  std::map<const VarDecl*, std::vector<Operand>> duals;  // Dual / Dual2 locals: their results
  std::set<const VarDecl*> loop_vars;                    // counted-loop variables (restored backwards)
  std::set<std::string> active_locals;
  int temps = 0;
  int blocks = 0;  // If/Loop ids
  int errors_at_start = 0;
  const clang::Stmt* last = nullptr;  // the body's final statement (the one return)
  bool reported_early_return = false;
  std::set<const clang::ReturnStmt*> tail_returns;  // returns that assign `_ret` (final if/else)

  // The name generated code gives a user's parameter, local or loop variable `vd`: its own, unless
  // generated code could use it too (`_`-prefixed helpers, `d_` adjoints, `self`, temporaries
  // `t<N>`, the maths functions the backward calls; for a parameter also `out`, whose adjoint
  // would be the backward's `d_out`), then with `_v` appended; and unique in the function. Recorded in `names`, so
  // inactive text is rewritten too.
  std::string bind_name(const VarDecl* vd, bool parameter = false);
};

namespace planner_detail {

inline bool has_annotation(const Decl* d, const char* what) {
  for (const Decl* r : d->redecls())
    for (const auto* a : r->specific_attrs<AnnotateAttr>())
      if (a->getAnnotation() == what) return true;
  return false;
}

inline const Expr* strip(const Expr* e) {
  while (true) {
    e = e->IgnoreParens();
    if (const auto* c = dyn_cast<ImplicitCastExpr>(e)) {
      const CastKind k = c->getCastKind();
      if (k == CK_NoOp || k == CK_LValueToRValue || k == CK_UncheckedDerivedToBase || k == CK_DerivedToBase ||
          k == CK_ConstructorConversion || k == CK_UserDefinedConversion) {
        e = c->getSubExpr();
        continue;
      }
      return e;
    }
    if (const auto* m = dyn_cast<MaterializeTemporaryExpr>(e)) {
      e = m->getSubExpr();
      continue;
    }
    if (const auto* b = dyn_cast<CXXBindTemporaryExpr>(e)) {
      e = b->getSubExpr();
      continue;
    }
    if (const auto* w = dyn_cast<ExprWithCleanups>(e)) {
      e = w->getSubExpr();
      continue;
    }
    if (const auto* c = dyn_cast<ExplicitCastExpr>(e)) {
      if (c->getCastKind() == CK_NoOp && c->getType().getCanonicalType().getUnqualifiedType() ==
                                             c->getSubExpr()->getType().getCanonicalType().getUnqualifiedType()) {
        e = c->getSubExpr();  // static_cast<float>(a float)
        continue;
      }
      return e;
    }
    if (const auto* c = dyn_cast<CXXConstructExpr>(e)) {
      if (c->getNumArgs() == 1 && c->getConstructor()->isCopyOrMoveConstructor()) {
        e = c->getArg(0);
        continue;
      }
      return e;
    }
    return e;
  }
}

inline bool is_math(const FunctionDecl* f) {
  static const std::set<std::string> names = {"expf", "tanhf", "logf", "sqrtf", "powf", "fabsf", "sinf", "cosf",
                                              "exp",  "tanh",  "log",  "sqrt",  "pow",  "fabs",  "sin",  "cos"};
  const std::string q = f->getQualifiedNameAsString();
  const std::string n = f->getNameAsString();
  return names.count(n) && (q == n || q == "std::" + n);
}

}  // namespace planner_detail

}  // namespace adgen
