#include "activity.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Basic/SourceManager.h"

namespace adgen {

using namespace clang;

QualType Activity::bare(QualType t) { return t.getNonReferenceType().getCanonicalType().getUnqualifiedType(); }

static bool record_named(QualType t, const char* qualified) {
  const auto* rd = Activity::bare(t)->getAsCXXRecordDecl();
  return rd != nullptr && rd->getQualifiedNameAsString() == qualified;
}

bool Activity::is_tensor(QualType t) const { return record_named(t, "llmcc::Tensor"); }
bool Activity::is_tokens(QualType t) const { return record_named(t, "llmcc::Tokens"); }
bool Activity::is_float(QualType t) const { return bare(t)->isSpecificBuiltinType(BuiltinType::Float); }
bool Activity::is_double(QualType t) const {
  return bare(t)->isSpecificBuiltinType(BuiltinType::Double) || bare(t)->isSpecificBuiltinType(BuiltinType::LongDouble);
}

bool Activity::is_dual(QualType t) const {
  return record_named(t, "llmcc::adgen::Dual") || record_named(t, "llmcc::adgen::Dual2");
}

bool Activity::in_system_header(const Decl* d) const {
  return ctx_.getSourceManager().isInSystemHeader(ctx_.getSourceManager().getExpansionLoc(d->getLocation()));
}

const CXXRecordDecl* Activity::module_record(QualType t) const {
  QualType b = bare(t);
  if (b->isPointerType()) b = b->getPointeeType();  // `this`
  const auto* rd = b->getAsCXXRecordDecl();
  if (rd == nullptr || !rd->hasDefinition()) return nullptr;
  rd = rd->getDefinition();
  auto it = module_cache_.find(rd);
  if (it != module_cache_.end()) return it->second ? rd : nullptr;
  module_cache_[rd] = false;  // breaks cycles
  const bool m = module_uncached(rd);
  module_cache_[rd] = m;
  return m ? rd : nullptr;
}

bool Activity::module_uncached(const CXXRecordDecl* rd) const {
  if (in_system_header(rd) || rd->getQualifiedNameAsString().rfind("llmcc::", 0) == 0) {
    // Library types (Tensor, Tokens, rule Saved structs) are not modules.
    const std::string n = rd->getQualifiedNameAsString();
    if (n == "llmcc::Tensor" || n == "llmcc::Tokens" || n == "llmcc::adgen::Dual" || n == "llmcc::adgen::Dual2" ||
        in_system_header(rd))
      return false;
    if (n.find("Saved") != std::string::npos) return false;
  }
  if (rd->isLambda()) return false;
  for (const FieldDecl* f : rd->fields()) {
    // Tensors and modules in containers adgen does not mirror (std::vector<Tensor>,
    // std::array<Block, 2>, arrays, pointers) still make a module, so that the planner reports
    // the field instead of dropping its gradient.
    if (holds_parameters(f->getType())) return true;
  }
  return false;
}

bool Activity::holds_parameters(QualType t) const {
  t = t.getNonReferenceType().getCanonicalType();
  if (t->isPointerType()) return holds_parameters(t->getPointeeType());
  if (is_tensor(t) || module_record(t) != nullptr || module_vec_elem(t) != nullptr) return true;
  if (const auto* at = dyn_cast<ArrayType>(t.getTypePtr())) return holds_parameters(at->getElementType());
  if (const auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(t->getAsCXXRecordDecl()))
    for (const TemplateArgument& a : spec->getTemplateArgs().asArray())
      if (a.getKind() == TemplateArgument::Type && holds_parameters(a.getAsType())) return true;
  return false;
}

const CXXRecordDecl* Activity::module_vec_elem(QualType t) const {
  const auto* rd = bare(t)->getAsCXXRecordDecl();
  const auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(rd);
  if (spec == nullptr || spec->getQualifiedNameAsString() != "std::vector") return nullptr;
  const TemplateArgumentList& args = spec->getTemplateArgs();
  if (args.size() < 1 || args[0].getKind() != TemplateArgument::Type) return nullptr;
  return module_record(args[0].getAsType());
}

bool Activity::active(const Expr* e) const {
  if (e == nullptr) return false;
  const QualType t = e->getType();
  const bool carrier = is_tensor(t) || is_float(t) || is_double(t) || is_dual(t) || is_module_like(t);
  if (!carrier) return false;
  e = e->IgnoreParens();
  if (const auto* me = dyn_cast<MemberExpr>(e)) {
    if (const auto* fd = dyn_cast<FieldDecl>(me->getMemberDecl())) {
      const QualType ft = fd->getType();
      if (!is_tensor(ft) && !is_dual(ft) && !is_module_like(ft)) return false;  // a config field
    }
  }
  if (const auto* dre = dyn_cast<DeclRefExpr>(e)) {
    const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
    if (vd == nullptr) return false;
    if (is_module_like(vd->getType())) return true;
    if (isa<ParmVarDecl>(vd)) return is_tensor(vd->getType()) || is_float(vd->getType());
    return active_var(vd);
  }
  if (isa<CXXThisExpr>(e)) return true;
  // A member call on a module (m.forward(idx)) is active through its object, which hides
  // under the callee's bound-member type.
  if (const auto* mc = dyn_cast<CXXMemberCallExpr>(e))
    if (const Expr* obj = mc->getImplicitObjectArgument())
      if (is_module_like(obj->getType()) || active(obj)) return true;
  for (const Stmt* c : e->children())
    if (const auto* ce = dyn_cast_or_null<Expr>(c))
      if (active(ce)) return true;
  // Default arguments are not children: they are constants at the call site.
  return false;
}

void Activity::mark(const Expr* lhs, const Expr* rhs, bool& changed) {
  const auto* dre = dyn_cast<DeclRefExpr>(lhs->IgnoreParenImpCasts());
  if (dre == nullptr) return;
  const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
  if (vd == nullptr || isa<ParmVarDecl>(vd) || active_var(vd)) return;
  if (active(rhs)) {
    active_vars_.insert(vd);
    changed = true;
  }
}

void Activity::scan(const Stmt* s, bool& changed) {
  if (s == nullptr) return;
  if (const auto* ds = dyn_cast<DeclStmt>(s)) {
    for (const Decl* d : ds->decls()) {
      const auto* vd = dyn_cast<VarDecl>(d);
      if (vd == nullptr || active_var(vd)) continue;
      const QualType t = vd->getType();
      if (!(is_tensor(t) || is_float(t) || is_double(t) || is_dual(t))) continue;
      if (vd->getInit() != nullptr && active(vd->getInit())) {
        active_vars_.insert(vd);
        changed = true;
      }
    }
  } else if (const auto* bo = dyn_cast<BinaryOperator>(s)) {
    if (bo->isAssignmentOp()) mark(bo->getLHS(), bo->getRHS(), changed);
  } else if (const auto* oc = dyn_cast<CXXOperatorCallExpr>(s)) {
    if (oc->getOperator() == OO_Equal && oc->getNumArgs() == 2) mark(oc->getArg(0), oc->getArg(1), changed);
  }
  for (const Stmt* c : s->children()) scan(c, changed);
}

void Activity::analyze(const FunctionDecl* f) {
  // Locals are distinct declarations per function, so one set serves every function (a callee
  // planned in the middle of its caller must not reset the caller's state).
  bool changed = true;
  while (changed) {
    changed = false;
    scan(f->getBody(), changed);
  }
}

}  // namespace adgen
