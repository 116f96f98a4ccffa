// Source text of inactive code (with `self.` and renamed locals) and the checks that read the
// AST: re-evaluable in the backward, reads differentiable values, mutates a saved tensor.
#include "planner_internal.h"

namespace adgen {

using namespace clang;
using namespace planner_detail;

// ---- text ----------------------------------------------------------------------------------

std::string Planner::text(Scope& sc, const clang::Stmt* s) {
  const SourceManager& sm = ctx_.getSourceManager();
  const LangOptions& lo = ctx_.getLangOpts();
  const CharSourceRange range = CharSourceRange::getTokenRange(sm.getExpansionRange(s->getSourceRange()).getAsRange());
  const SourceLocation begin = range.getBegin();
  std::string src = Lexer::getSourceText(range, sm, lo).str();
  const unsigned base = sm.getFileOffset(begin);
  struct Edit {
    unsigned off, len;
    std::string with;
  };
  std::vector<Edit> edits;
  auto offset = [&](SourceLocation l) -> long {
    l = sm.getExpansionLoc(l);
    if (sm.getFileID(l) != sm.getFileID(begin)) return -1;
    return static_cast<long>(sm.getFileOffset(l)) - static_cast<long>(base);
  };
  std::function<void(const clang::Stmt*)> walk = [&](const clang::Stmt* n) {
    if (n == nullptr) return;
    if (const auto* me = dyn_cast<MemberExpr>(n)) {
      if (const auto* th = dyn_cast<CXXThisExpr>(me->getBase()->IgnoreImpCasts())) {
        if (th->isImplicit()) {
          const long o = offset(me->getMemberLoc());
          if (o >= 0) edits.push_back({static_cast<unsigned>(o), 0, "self."});
        } else {
          const long o = offset(th->getBeginLoc());
          const long m = offset(me->getMemberLoc());
          if (o >= 0 && m >= o) edits.push_back({static_cast<unsigned>(o), static_cast<unsigned>(m - o), "self."});
        }
        return;  // `this` itself needs no more edits
      }
    }
    if (const auto* dre = dyn_cast<DeclRefExpr>(n)) {
      if (const auto* vd = dyn_cast<VarDecl>(dre->getDecl())) {
        const long o = offset(dre->getLocation());
        const unsigned len = static_cast<unsigned>(vd->getName().size());
        if (auto a = sc.aliases.find(vd); a != sc.aliases.end() && o >= 0)
          edits.push_back({static_cast<unsigned>(o), len, a->second.primal()});
        else if (auto r = sc.names.find(vd); r != sc.names.end() && r->second != vd->getName() && o >= 0)
          edits.push_back({static_cast<unsigned>(o), len, r->second});
      }
    }
    if (const auto* ds = dyn_cast<DeclStmt>(n)) {
      for (const Decl* d : ds->decls())
        if (const auto* vd = dyn_cast<VarDecl>(d)) {
          if (auto r = sc.names.find(vd); r != sc.names.end() && r->second != vd->getName()) {
            const long o = offset(vd->getLocation());
            if (o >= 0)
              edits.push_back({static_cast<unsigned>(o), static_cast<unsigned>(vd->getName().size()), r->second});
          }
          if (vd->getInit()) walk(vd->getInit());
        }
      return;
    }
    for (const clang::Stmt* c : n->children()) walk(c);
  };
  walk(s);
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.off > b.off; });
  for (const Edit& e : edits)
    if (e.off + e.len <= src.size()) src.replace(e.off, e.len, e.with);
  // One line: generated code is re-indented by the emitter.
  std::string flat;
  bool space = false;
  for (char c : src) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !flat.empty()) flat += ' ';
    space = false;
    flat += c;
  }
  return flat;
}

bool Planner::reevaluable(Scope& sc, const clang::Stmt* s) const {
  if (s == nullptr) return true;
  if (const auto* dre = dyn_cast<DeclRefExpr>(s)) {
    const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
    if (vd == nullptr || !vd->isLocalVarDeclOrParm()) return true;
    if (isa<ParmVarDecl>(vd) || sc.loop_vars.count(vd)) return true;
    if (sc.aliases.count(vd)) return true;
    return false;
  }
  for (const clang::Stmt* c : s->children())
    if (!reevaluable(sc, c)) return false;
  return true;
}

bool Planner::mentions_active(Scope& sc, const clang::Stmt* s) const {
  if (s == nullptr) return false;
  if (const auto* e = dyn_cast<Expr>(s))
    if (act_.active(e)) return true;
  if (const auto* ds = dyn_cast<DeclStmt>(s))
    for (const Decl* d : ds->decls())
      if (const auto* vd = dyn_cast<VarDecl>(d))
        if (act_.active_var(vd) || act_.is_module_like(vd->getType())) return true;
  for (const clang::Stmt* c : s->children())
    if (mentions_active(sc, c)) return true;
  return false;
}

// Reads a differentiable value (a float, or a tensor's data) rather than only shapes and config.
bool Planner::data_dependent(const clang::Stmt* s) const {
  if (s == nullptr) return false;
  if (const auto* e = dyn_cast<Expr>(s)) {
    if ((act_.is_float(e->getType()) || act_.is_double(e->getType())) && act_.active(e)) return true;
    if (const auto* mc = dyn_cast<CXXMemberCallExpr>(e)) {
      const Expr* obj = mc->getImplicitObjectArgument();
      const CXXMethodDecl* m = mc->getMethodDecl();
      if (obj && m && act_.is_tensor(obj->getType()) && act_.active(obj) &&
          (m->getName() == "f32" || m->getName() == "raw"))
        return true;
    }
  }
  for (const clang::Stmt* c : s->children())
    if (data_dependent(c)) return true;
  return false;
}

// Writes to a tensor's data (or rebinding it) would change a value the backward reads.
void Planner::check_mutation(Scope& sc, const clang::Stmt* s) {
  if (s == nullptr) return;
  if (const auto* mc = dyn_cast<CXXMemberCallExpr>(s)) {
    const Expr* obj = mc->getImplicitObjectArgument();
    const CXXMethodDecl* m = mc->getMethodDecl();
    if (obj != nullptr && m != nullptr && act_.is_tensor(obj->getType()) && act_.active(obj)) {
      const std::string n = m->getNameAsString();
      if (n == "f32" || n == "raw" || n == "bind" || !m->isConst())
        diag_.error(mc->getExprLoc(), "mutation of a saved tensor: '" + n + "()' exposes or rebinds the data of '" +
                                          text(sc, obj) +
                                          "', which the backward reads; differentiated code only combines "
                                          "tensors through rules (write a rule with a pullback instead)");
    }
  }
  if (const auto* ce = dyn_cast<CallExpr>(s); ce && !isa<CXXMemberCallExpr>(s)) {
    if (const FunctionDecl* fd = ce->getDirectCallee()) {
      const unsigned shift = isa<CXXOperatorCallExpr>(s) && isa<CXXMethodDecl>(fd) ? 1 : 0;
      for (unsigned i = shift; i < ce->getNumArgs() && i - shift < fd->getNumParams(); ++i) {
        const QualType pt = fd->getParamDecl(i - shift)->getType();
        const bool mut = (pt->isReferenceType() && !pt.getNonReferenceType().isConstQualified()) ||
                         (pt->isPointerType() && !pt->getPointeeType().isConstQualified());
        const Expr* a = ce->getArg(i);
        if (mut && act_.is_tensor(a->getType()) && act_.active(a))
          diag_.error(a->getExprLoc(), "mutation of a saved tensor: '" + text(sc, a) +
                                           "' is passed to a non-const reference or pointer parameter of '" +
                                           fd->getNameAsString() + "', which could change a value the backward reads");
      }
    }
  }
  for (const clang::Stmt* c : s->children()) check_mutation(sc, c);
}

}  // namespace adgen
