// The planner: call graph from the entries, module types and their Grad mirrors, one FuncPlan
// per differentiated function (callees first).
#include <cctype>

#include "planner_internal.h"

namespace adgen {

namespace {
bool generated_code_may_use(const std::string& name) {
  static const char* const kNames[] = {"self",  "expf", "tanhf", "logf",  "sqrtf", "powf",
                                       "fabsf", "sinf", "cosf",  "llmcc", "std"};
  if (name.empty() || name[0] == '_' || name.rfind("d_", 0) == 0) return true;
  if (name.size() > 1 && name[0] == 't' && name.find_first_not_of("0123456789", 1) == std::string::npos) return true;
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}
}  // namespace

std::string Planner::Scope::bind_name(const VarDecl* vd, bool parameter) {
  // `_s` becomes `s_v`, not `_s_v`: its adjoint `d_s_v` must not hold a reserved `__`.
  const std::string source = vd->getNameAsString();
  const std::string stripped = source.substr(std::min(source.find_first_not_of('_'), source.size()));
  // A parameter `out` (`out1`, `out2`, ...) would have the adjoint `d_out` (`d_out1`, ...), the
  // names of a backward's incoming adjoints (a merged jvp plan has one per result).
  const bool out_name = source.rfind("out", 0) == 0 && source.find_first_not_of("0123456789", 3) == std::string::npos;
  const bool reserved = generated_code_may_use(source) || (parameter && out_name);
  const std::string base = !reserved ? source : stripped.empty() ? "v" : stripped + "_v";
  // Unique, and never one name's adjoint `d_<name>` another's name (`d_out` becomes `d_out_v`,
  // so a parameter `out` must not become `out_v`).
  auto taken = [&](const std::string& n) {
    return used_names.count(n) || used_names.count("d_" + n) ||
           (n.rfind("d_", 0) == 0 && used_names.count(n.substr(2)));
  };
  std::string name = base;
  for (int k = 2; taken(name); ++k) name = base + "_" + std::to_string(k);
  used_names.insert(name);
  names[vd] = name;
  return name;
}

using namespace clang;
using namespace planner_detail;

Planner::Planner(ASTContext& ctx, Diagnostics& diag) : ctx_(ctx), diag_(diag), act_(ctx), rules_(ctx, diag, act_) {}

void Planner::need_file(const Decl* d) {
  const SourceManager& sm = ctx_.getSourceManager();
  const SourceLocation loc = sm.getExpansionLoc(d->getLocation());
  if (sm.isInSystemHeader(loc)) return;
  const auto entry = sm.getFileEntryRefForID(sm.getFileID(loc));
  if (entry) files_.insert(entry->getName().str());
}

std::string Planner::ensure_module(const CXXRecordDecl* rd) {
  rd = rd->getDefinition();
  if (auto it = modules_.find(rd); it != modules_.end()) return it->second;
  std::string grad = rd->getNameAsString() + "_Grad";
  modules_[rd] = grad;
  need_file(rd);
  if (isa<ClassTemplateSpecializationDecl>(rd))
    diag_.error(rd->getLocation(), "module '" + rd->getNameAsString() +
                                       "' is a class template: adgen supports plain structs of parameters");
  ModulePlan m;
  m.type = rules_.type_name(ctx_.getRecordType(rd));
  m.grad_type = grad;
  std::map<std::string, const FieldDecl*> param_names;  // for duplicate names
  for (const FieldDecl* f : rd->fields()) {
    ModuleField mf;
    mf.name = f->getNameAsString();
    // LLMCC_ADGEN_NAME("weight"): the field's part of parameter names ("h.0.ln_1.weight").
    const AnnotateAttr* name_attr = nullptr;
    const AnnotateAttr* optional_attr = nullptr;  // LLMCC_ADGEN_OPTIONAL
    for (const auto* a : f->specific_attrs<AnnotateAttr>()) {
      if (a->getAnnotation().starts_with("llmcc.adgen.name:")) name_attr = a;
      if (a->getAnnotation() == "llmcc.adgen.optional") optional_attr = a;
    }
    mf.param_name = mf.name;
    if (name_attr != nullptr) {
      mf.param_name = name_attr->getAnnotation().substr(17).str();
      const std::string& n = mf.param_name;
      const bool bad_char = std::any_of(n.begin(), n.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return c == '"' || c == '\\' || std::isspace(u) || !std::isprint(u);
      });
      if (n.empty() || n.front() == '.' || n.back() == '.' || n.find("..") != std::string::npos || bad_char)
        diag_.error(name_attr->getLocation(),
                    "LLMCC_ADGEN_NAME(\"" + n + "\") on field '" + mf.name +
                        "': a parameter name part is non-empty, has no spaces, quotes or backslashes, and "
                        "neither starts nor ends with '.' nor holds '..'");
    }
    // A pointer or reference to a module or Tensor: module_record and is_tensor look through
    // them, but the mirror would own what the model only points to.
    const QualType ft = f->getType().getCanonicalType();
    const bool indirect = (ft->isPointerType() || ft->isReferenceType()) && act_.holds_parameters(ft);
    if (!indirect && act_.is_tensor(f->getType())) {
      mf.kind = ModuleField::Kind::Tensor;
    } else if (const auto* sub = indirect ? nullptr : act_.module_record(f->getType())) {
      mf.kind = ModuleField::Kind::Module;
      mf.type = rules_.type_name(ctx_.getRecordType(sub));
      mf.grad_type = ensure_module(sub);
    } else if (const auto* el = indirect ? nullptr : act_.module_vec_elem(f->getType())) {
      mf.kind = ModuleField::Kind::ModuleVec;
      mf.type = rules_.type_name(ctx_.getRecordType(el));
      mf.grad_type = ensure_module(el);
      mf.optional = optional_attr != nullptr;
    } else {
      // Configuration: no gradient. Tensors hidden in containers adgen does not mirror would
      // silently get none, so they are errors.
      if (act_.holds_parameters(f->getType()))
        diag_.error(f->getLocation(), "module field '" + mf.name + "' of type '" + f->getType().getAsString() +
                                          "' holds parameters adgen cannot mirror: use Tensor fields, nested "
                                          "modules by value or std::vector<Module>");
      else if (name_attr != nullptr)
        diag_.error(name_attr->getLocation(), "LLMCC_ADGEN_NAME on field '" + mf.name +
                                                  "', which holds no parameters: it names Tensor fields, nested "
                                                  "modules and std::vector<Module> fields");
      else if (optional_attr != nullptr)
        diag_.error(optional_attr->getLocation(), "LLMCC_ADGEN_OPTIONAL on field '" + mf.name +
                                                      "', which is not a std::vector<Module>: it marks a vector "
                                                      "of at most one module");
      continue;
    }
    if (optional_attr != nullptr && mf.kind != ModuleField::Kind::ModuleVec)
      diag_.error(optional_attr->getLocation(), "LLMCC_ADGEN_OPTIONAL on field '" + mf.name +
                                                    "', which is not a std::vector<Module>: it marks a vector "
                                                    "of at most one module");
    if (auto [it, fresh] = param_names.emplace(mf.param_name, f); !fresh) {
      diag_.error(f->getLocation(), "module field '" + mf.name + "' gives parameters the name '" + mf.param_name +
                                        "', as field '" + it->second->getNameAsString() +
                                        "' does: give one of them another LLMCC_ADGEN_NAME");
      diag_.note(it->second->getLocation(), "field '" + it->second->getNameAsString() + "' declared here");
    }
    if (mf.name == "shape_like" || mf.name == "bound_like" || mf.name == "for_each_pair" ||
        mf.name == "for_each_parameter" || mf.name == "for_each_grad")
      diag_.error(f->getLocation(), "module field '" + mf.name +
                                        "' has the name of a member function of the "
                                        "generated gradient mirror '" +
                                        grad + "': rename the field");
    if (f->getAccess() == AS_private || f->getAccess() == AS_protected)
      diag_.error(f->getLocation(), "module field '" + mf.name +
                                        "' is not public: the generated backward reads parameters directly; "
                                        "make it a public field (struct)");
    m.fields.push_back(mf);
  }
  program_.modules.push_back(m);  // after its sub-modules: dependencies first
  return grad;
}

void Planner::plan_entry(const FunctionDecl* entry) {
  const FunctionDecl* def = entry->getDefinition();
  if (def == nullptr || !def->hasBody()) {
    diag_.error(entry->getLocation(), "entry '" + entry->getNameAsString() + "' has no body in this translation unit");
    return;
  }
  if (!act_.is_float(def->getReturnType())) {
    diag_.error(def->getLocation(),
                "entry '" + def->getNameAsString() + "' must return float (the loss); differentiate a scalar");
    return;
  }
  need_file(entry);
  FuncPlan* fp = plan_function(def, def->getLocation());
  if (fp == nullptr) return;
  fp->entry = true;
  // LLMCC_ADGEN_WRT("m, x"): the arguments the gradient is taken with respect to.
  for (const Decl* r : def->redecls())
    for (const auto* a : r->specific_attrs<AnnotateAttr>()) {
      const std::string text = a->getAnnotation().str();
      if (text.rfind("llmcc.adgen.wrt:", 0) != 0) continue;
      std::string list = text.substr(16);
      for (std::size_t pos = 0; pos <= list.size();) {
        std::size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        std::string name = list.substr(pos, end - pos);
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        pos = end + 1;
        if (name.empty()) continue;
        std::string found;  // the parameter's name in generated code
        for (const Param& p : fp->params)
          if (p.source_name == name && (p.is_module || p.kind != VKind::Inactive)) found = p.name;
        if (fp->is_method && name == "self") found = "self";
        if (found.empty())
          diag_.error(a->getLocation(), "LLMCC_ADGEN_WRT names '" + name +
                                            "', which is not a module, Tensor or "
                                            "float parameter of '" +
                                            def->getNameAsString() + "'");
        else if (std::find(fp->wrt.begin(), fp->wrt.end(), found) == fp->wrt.end())
          fp->wrt.push_back(found);
      }
    }
}

FuncPlan* Planner::plan_function(const FunctionDecl* f, SourceLocation use) {
  f = f->getDefinition() ? f->getDefinition() : f;
  if (auto it = planned_.find(f); it != planned_.end()) return it->second;
  if (in_progress_.count(f)) {
    diag_.error(use, "recursive call of '" + f->getNameAsString() +
                         "': adgen differentiates call trees without recursion (use a loop over layers)");
    return nullptr;
  }
  if (f->isVariadic() || f->getTemplatedKind() != FunctionDecl::TK_NonTemplate) {
    diag_.error(
        use, "'" + f->getNameAsString() + "' is a template or variadic function: adgen differentiates plain functions");
    return nullptr;
  }
  in_progress_.insert(f);
  auto owned = std::make_unique<FuncPlan>();
  FuncPlan* fp = owned.get();
  fp->base = fp;
  Scope sc;
  sc.errors_at_start = diag_.errors();
  sc.fp = fp;
  sc.fd = f;
  const auto* md = dyn_cast<CXXMethodDecl>(f);
  if (md != nullptr && !md->isStatic()) {
    sc.self = act_.module_record(ctx_.getRecordType(md->getParent()));
    if (sc.self == nullptr) {
      diag_.error(use, "member function '" + md->getQualifiedNameAsString() +
                           "' of a type without parameters: adgen differentiates members of modules "
                           "(structs holding Tensor fields)");
      in_progress_.erase(f);
      return nullptr;
    }
    if (!md->isConst())
      diag_.error(md->getLocation(), "member function '" + md->getQualifiedNameAsString() +
                                         "' is not const: a differentiated forward must not modify its module");
    fp->is_method = true;
    fp->self_type = rules_.type_name(ctx_.getRecordType(md->getParent()));
    fp->self_grad_type = ensure_module(sc.self);
    std::string method = md->getOverloadedOperator() == OO_Call ? "call" : md->getNameAsString();
    fp->id = md->getParent()->getNameAsString() + "_" + method;
    fp->primal = md->getOverloadedOperator() == OO_Call ? "operator()" : md->getNameAsString();
  } else {
    fp->id = f->getNameAsString();
    fp->primal = f->getQualifiedNameAsString();
  }
  for (std::string base = fp->id; func_ids_.count(fp->id);) fp->id = base + "_" + std::to_string(func_ids_.size());
  func_ids_.insert(fp->id);
  fp->checkpoint = has_annotation(f, "llmcc.adgen.checkpoint");
  {
    const PresumedLoc pl = ctx_.getSourceManager().getPresumedLoc(f->getLocation());
    std::string file = pl.isValid() ? pl.getFilename() : "?";
    file = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1);
    fp->source = (md ? md->getQualifiedNameAsString() : f->getQualifiedNameAsString()) + " (" + file + ":" +
                 std::to_string(pl.isValid() ? pl.getLine() : 0) + ")";
  }
  if (act_.is_tensor(f->getReturnType())) {
    fp->ret = VKind::Tensor;
  } else if (act_.is_float(f->getReturnType())) {
    fp->ret = VKind::Float;
  } else {
    diag_.error(use, "'" + f->getNameAsString() + "' returns '" + f->getReturnType().getAsString() +
                         "': differentiated functions return Tensor or float");
    in_progress_.erase(f);
    return nullptr;
  }
  fp->ret_type = rules_.type_name(f->getReturnType());
  for (const ParmVarDecl* p : f->parameters()) {
    Param pp;
    pp.name =
        p->getNameAsString().empty() ? "unnamed" + std::to_string(fp->params.size()) + "_v" : sc.bind_name(p, true);
    pp.source_name = p->getNameAsString();
    pp.type = rules_.type_name(p->getType());
    const QualType t = p->getType();
    pp.value_type = rules_.type_name(t.getNonReferenceType().getUnqualifiedType());
    pp.by_mutable_ref =
        t->isRValueReferenceType() || (t->isLValueReferenceType() && !t.getNonReferenceType().isConstQualified());
    const bool mutable_ref =
        (t->isReferenceType() && !t.getNonReferenceType().isConstQualified()) || t->isPointerType();
    if (act_.is_tensor(t) || act_.is_float(t)) {
      pp.kind = act_.is_tensor(t) ? VKind::Tensor : VKind::Float;
      if (mutable_ref)
        diag_.error(p->getLocation(), "parameter '" + pp.name +
                                          "' is a non-const reference or pointer: a differentiated function "
                                          "takes tensors by value or const reference");
    } else if (const auto* m = act_.module_record(t)) {
      pp.is_module = true;
      pp.module_type = rules_.type_name(ctx_.getRecordType(m));
      pp.grad_type = ensure_module(m);
      if (!t->isReferenceType() || !t.getNonReferenceType().isConstQualified())
        diag_.error(p->getLocation(), "module parameter '" + pp.name + "' must be a const reference");
    } else if (act_.is_double(t)) {
      diag_.error(p->getLocation(), "parameter '" + pp.name + "' is double: adgen differentiates float scalars");
    } else if (act_.is_dual(t)) {
      diag_.error(p->getLocation(),
                  "parameter '" + pp.name + "' is an adgen::Dual: pass its tensors (`r.value`, `r.tangent`) instead");
    }
    fp->params.push_back(pp);
  }
  if (f->getBody() == nullptr) {
    in_progress_.erase(f);
    return nullptr;
  }
  act_.analyze(f);
  const auto* body = dyn_cast<CompoundStmt>(f->getBody());
  if (body == nullptr) {
    diag_.error(f->getLocation(), "function-try-blocks are not supported");
  } else {
    const clang::Stmt* last = body->body_empty() ? nullptr : body->body_back();
    sc.last = last;
    // A final if/else whose every branch ends in a return (`if (c) return a; else return b;`)
    // assigns a result local in each branch and returns it once.
    std::function<bool(const clang::Stmt*)> tail = [&](const clang::Stmt* st) -> bool {
      if (st == nullptr) return false;
      if (const auto* cs = dyn_cast<CompoundStmt>(st)) return !cs->body_empty() && tail(cs->body_back());
      if (const auto* rs = dyn_cast<ReturnStmt>(st)) {
        sc.tail_returns.insert(rs);
        return true;
      }
      if (const auto* is = dyn_cast<IfStmt>(st))
        return is->getElse() != nullptr && tail(is->getThen()) && tail(is->getElse());
      return false;
    };
    const bool tail_if = last != nullptr && isa<IfStmt>(last) && tail(last);
    if (!tail_if) sc.tail_returns.clear();
    if (tail_if) {
      adgen::Stmt decl;
      decl.kind = adgen::Stmt::Kind::Assign;
      decl.declare = true;
      decl.local = "_ret";
      decl.local_kind = fp->ret;
      decl.value.fwd_text = decl.value.rev_text = fp->ret == VKind::Tensor ? "llmcc::Tensor()" : "0.0f";
      fp->body.push_back(decl);
    }
    for (const clang::Stmt* s : body->body()) lower_stmt(sc, s, fp->body);
    if (tail_if) {
      adgen::Stmt ret;
      ret.kind = adgen::Stmt::Kind::Return;
      ret.value.src = Operand::Src::Local;
      ret.value.kind = fp->ret;
      ret.value.name = "_ret";
      fp->body.push_back(ret);
    } else if (last == nullptr || !isa<ReturnStmt>(last)) {
      diag_.error(f->getEndLoc(), "'" + f->getNameAsString() + "' must end with `return <expression>;`");
    }
  }
  in_progress_.erase(f);
  fp->used_names = sc.used_names;
  fp->temps = sc.temps;
  planned_[f] = fp;
  program_.funcs.push_back(std::move(owned));
  return fp;
}

}  // namespace adgen
