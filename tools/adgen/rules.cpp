#include "rules.h"

#include "clang/AST/Attr.h"
#include "clang/AST/QualTypeNames.h"

namespace adgen {

using namespace clang;

std::string Rules::type_name(QualType t) const {
  PrintingPolicy pp(ctx_.getLangOpts());
  pp.SuppressScope = false;
  pp.FullyQualifiedName = true;
  return TypeName::getFullyQualifiedName(t, ctx_, pp, /*WithGlobalNsPrefix=*/false);
}

std::vector<const FunctionDecl*> Rules::named(const FunctionDecl* near, const std::string& name) const {
  std::vector<const FunctionDecl*> out;
  const DeclContext* dc = near->getDeclContext()->getRedeclContext();
  auto result = dc->lookup(DeclarationName(&ctx_.Idents.get(name)));
  for (const NamedDecl* nd : result)
    if (const auto* fd = dyn_cast<FunctionDecl>(nd)) out.push_back(fd);
  return out;
}

static bool same(QualType a, QualType b) { return a.getCanonicalType() == b.getCanonicalType(); }

std::string Rules::check(const FunctionDecl* f, const FunctionDecl* fwd, const FunctionDecl* pb, RuleInfo& info) const {
  const std::string fname = f->getNameAsString();
  const unsigned n = f->getNumParams();
  const bool tensor_out = act_.is_tensor(f->getReturnType());
  const bool float_out = act_.is_float(f->getReturnType());
  if (!tensor_out && !float_out)
    return "rule '" + fname + "' returns '" + f->getReturnType().getAsString() + "'; a rule returns Tensor or float";
  const std::string out_t = tensor_out ? "const Tensor&" : "float";
  const unsigned need = n + 2 + (fwd != nullptr ? 1 : 0);
  std::string shape = "(<" + std::to_string(n) + " primal arguments>, " + out_t + " out, ";
  if (fwd != nullptr) shape += "const " + info.saved_type + "& saved, ";
  shape += out_t + " d_out, <d_ adjoint pointers>)";
  if (pb->getNumParams() < need)
    return "pullback '" + pb->getNameAsString() + "' has " + std::to_string(pb->getNumParams()) +
           " parameters, expected at least " + std::to_string(need) + ": " + shape;
  for (unsigned i = 0; i < n; ++i) {
    const ParmVarDecl* p = pb->getParamDecl(i);
    if (!same(p->getType(), f->getParamDecl(i)->getType()))
      return "pullback '" + pb->getNameAsString() + "' parameter " + std::to_string(i + 1) + " '" +
             p->getNameAsString() + "' has type '" + p->getType().getAsString() + "', expected '" +
             f->getParamDecl(i)->getType().getAsString() + "' (primal parameter '" +
             f->getParamDecl(i)->getNameAsString() + "')";
  }
  auto out_ok = [&](QualType t) { return tensor_out ? act_.is_tensor(t) && !t->isPointerType() : act_.is_float(t); };
  unsigned k = n;
  const ParmVarDecl* out = pb->getParamDecl(k++);
  if (!out_ok(out->getType()))
    return "pullback '" + pb->getNameAsString() + "' parameter " + std::to_string(k) + " '" + out->getNameAsString() +
           "' has type '" + out->getType().getAsString() + "', expected the forward's output '" + out_t + " out'";
  if (fwd != nullptr) {
    const ParmVarDecl* sp = pb->getParamDecl(k++);
    const QualType want = fwd->getParamDecl(fwd->getNumParams() - 1)->getType().getNonReferenceType();
    if (!sp->getType()->isReferenceType() || !same(Activity::bare(sp->getType()), Activity::bare(want)))
      return "pullback '" + pb->getNameAsString() + "' parameter " + std::to_string(k) + " '" + sp->getNameAsString() +
             "' has type '" + sp->getType().getAsString() + "', expected 'const " + info.saved_type + "&' (what " +
             fwd->getNameAsString() + " saved)";
  }
  const ParmVarDecl* dout = pb->getParamDecl(k++);
  if (!out_ok(dout->getType()))
    return "pullback '" + pb->getNameAsString() + "' parameter " + std::to_string(k) + " '" + dout->getNameAsString() +
           "' has type '" + dout->getType().getAsString() + "', expected '" + out_t +
           " d_out' (the adjoint of the output)";
  info.adjoint_of.assign(n, 0);
  int last = -1;
  for (; k < pb->getNumParams(); ++k) {
    const ParmVarDecl* p = pb->getParamDecl(k);
    const std::string pn = p->getNameAsString();
    int match = -1;
    for (unsigned i = 0; i < n; ++i)
      if (pn == "d_" + f->getParamDecl(i)->getNameAsString()) match = static_cast<int>(i);
    if (match < 0)
      return "pullback '" + pb->getNameAsString() + "' parameter " + std::to_string(k + 1) + " '" + pn +
             "' names no primal parameter: adjoints are named d_<primal parameter> (" + fname + " has " +
             [&] {
               std::string s;
               for (unsigned i = 0; i < n; ++i) s += (i ? ", " : "") + f->getParamDecl(i)->getNameAsString();
               return s;
             }() +
             ")";
    if (match <= last)
      return "pullback '" + pb->getNameAsString() + "' parameter '" + pn +
             "' is out of order: adjoints come in the primal parameters' order";
    last = match;
    const QualType pt = f->getParamDecl(match)->getType();
    const QualType at = p->getType();
    const bool ok = at->isPointerType() && !at->getPointeeType().isConstQualified() &&
                    ((act_.is_tensor(pt) && act_.is_tensor(at->getPointeeType())) ||
                     (act_.is_float(pt) && act_.is_float(at->getPointeeType())));
    if (!ok)
      return "pullback '" + pb->getNameAsString() + "' parameter '" + pn + "' has type '" + at.getAsString() +
             "', expected '" +
             (act_.is_tensor(pt)  ? "Tensor*"
              : act_.is_float(pt) ? "float*"
                                  : "<none>") +
             "' for primal parameter '" + f->getParamDecl(match)->getNameAsString() + "' of type '" + pt.getAsString() +
             "'" + (act_.is_tensor(pt) || act_.is_float(pt) ? "" : " (it takes no adjoint)");
    info.adjoint_of[match] = 1;
  }
  return "";
}

const RuleInfo* Rules::lookup(const FunctionDecl* callee, SourceLocation use, bool* broken) {
  *broken = false;
  callee = callee->getCanonicalDecl();
  if (auto it = cache_.find(callee); it != cache_.end()) return &it->second;
  if (auto it = broken_.find(callee); it != broken_.end()) {
    *broken = true;
    return nullptr;
  }
  const FunctionDecl* f = callee;
  RuleInfo info;
  // Operators map to a named rule by annotation; parameters are matched by name.
  if (callee->isOverloadedOperator()) {
    std::string rule;
    for (const auto* a : callee->getMostRecentDecl()->specific_attrs<AnnotateAttr>())
      if (a->getAnnotation().starts_with("llmcc.adgen.rule:")) rule = a->getAnnotation().substr(17).str();
    for (const FunctionDecl* r = callee->getMostRecentDecl(); rule.empty() && r; r = r->getPreviousDecl())
      for (const auto* a : r->specific_attrs<AnnotateAttr>())
        if (a->getAnnotation().starts_with("llmcc.adgen.rule:")) rule = a->getAnnotation().substr(17).str();
    if (rule.empty()) return nullptr;
    const FunctionDecl* target = nullptr;
    for (const FunctionDecl* cand : named(callee, rule)) {
      if (cand->getNumParams() != callee->getNumParams()) continue;
      std::vector<int> map;
      for (const ParmVarDecl* rp : cand->parameters())
        for (unsigned j = 0; j < callee->getNumParams(); ++j)
          if (callee->getParamDecl(j)->getName() == rp->getName() &&
              same(callee->getParamDecl(j)->getType(), rp->getType()))
            map.push_back(static_cast<int>(j));
      if (map.size() == cand->getNumParams()) {
        target = cand;
        info.arg_of = map;
      }
    }
    if (target == nullptr) {
      diag_.error(use, "operator '" + callee->getNameAsString() + "' is mapped to rule '" + rule + "', but no '" +
                           rule +
                           "' with the operator's parameter names and types is declared "
                           "beside it (parameters are matched by name)");
      broken_[callee] = true;
      *broken = true;
      return nullptr;
    }
    f = target;
  } else {
    for (unsigned i = 0; i < callee->getNumParams(); ++i) info.arg_of.push_back(static_cast<int>(i));
  }
  const std::string name = f->getNameAsString();
  const auto pbs = named(f, name + "_pullback");
  if (pbs.empty()) {
    if (callee->isOverloadedOperator()) {
      diag_.error(use, "rule '" + name + "' (for operator '" + callee->getNameAsString() + "') has no '" + name +
                           "_pullback' declared beside it");
      broken_[callee] = true;
      *broken = true;
    }
    return nullptr;
  }
  // f_fwd(args..., FSaved&) when the backward needs more than inputs and output.
  for (const FunctionDecl* g : named(f, name + "_fwd")) {
    if (g->getNumParams() != f->getNumParams() + 1) continue;
    bool ok = true;
    for (unsigned i = 0; i < f->getNumParams(); ++i)
      ok = ok && same(g->getParamDecl(i)->getType(), f->getParamDecl(i)->getType());
    const QualType last = g->getParamDecl(f->getNumParams())->getType();
    if (ok && last->isLValueReferenceType() && !last.getNonReferenceType().isConstQualified()) {
      info.fwd = g;
      const QualType st = last.getNonReferenceType();
      info.saved_type = type_name(st);
      if (const auto* rd = st->getAsCXXRecordDecl())
        for (const FieldDecl* fd : rd->fields())
          if (act_.is_tensor(fd->getType())) info.saved_tensor_fields.push_back(fd->getNameAsString());
    }
  }
  std::string first_error;
  for (const FunctionDecl* pb : pbs) {
    RuleInfo trial = info;
    const std::string err = check(f, trial.fwd, pb, trial);
    if (err.empty()) {
      trial.primal = f;
      trial.pullback = pb;
      return &(cache_[callee] = trial);
    }
    if (first_error.empty()) first_error = err;
  }
  diag_.error(use, "call to rule '" + name + "' whose pullback does not match the contract: " + first_error);
  diag_.note(pbs.front()->getLocation(), "pullback declared here");
  broken_[callee] = true;
  *broken = true;
  return nullptr;
}

}  // namespace adgen
