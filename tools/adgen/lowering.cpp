// Lowering of statements and expressions to three-address IR: every active call or float
// operation writes a numbered temporary; unsupported constructs are reported where they are.
#include "planner_internal.h"

namespace adgen {

using namespace clang;
using namespace planner_detail;

// ---- statements ----------------------------------------------------------------------------

void Planner::lower_stmt(Scope& sc, const clang::Stmt* s, std::vector<adgen::Stmt>& out) {
  if (s == nullptr || isa<NullStmt>(s)) return;
  if (const auto* cs = dyn_cast<CompoundStmt>(s)) {
    for (const clang::Stmt* c : cs->body()) lower_stmt(sc, c, out);
    return;
  }
  if (const auto* ds = dyn_cast<DeclStmt>(s)) return lower_decl(sc, ds, out);
  if (const auto* rs = dyn_cast<ReturnStmt>(s)) {
    if (sc.tail_returns.count(rs) && rs->getRetValue() != nullptr) {
      check_mutation(sc, rs->getRetValue());
      adgen::Stmt st;
      st.kind = adgen::Stmt::Kind::Assign;
      st.local = "_ret";
      st.local_kind = sc.fp->ret;
      st.value = lower_expr(sc, rs->getRetValue(), out);
      out.push_back(st);
      return;
    }
    if (s != sc.last) {
      if (!sc.reported_early_return)
        diag_.error(rs->getBeginLoc(),
                    "early return: a differentiated function has one return, as its last "
                    "statement (assign a local in each branch and return it)");
      sc.reported_early_return = true;
      return;
    }
    if (rs->getRetValue() == nullptr) {
      diag_.error(rs->getBeginLoc(), "return without a value");
      return;
    }
    check_mutation(sc, rs->getRetValue());
    adgen::Stmt st;
    st.kind = adgen::Stmt::Kind::Return;
    st.value = lower_expr(sc, rs->getRetValue(), out);
    if (st.value.kind == VKind::Inactive && diag_.errors() == sc.errors_at_start)
      diag_.error(rs->getBeginLoc(), "the returned value of '" + sc.fd->getNameAsString() +
                                         "' does not depend on any differentiable input (parameters, Tensor or "
                                         "float arguments): its gradient would be zero");
    out.push_back(st);
    return;
  }
  if (const auto* is = dyn_cast<IfStmt>(s)) return lower_if(sc, is, out);
  if (const auto* fs = dyn_cast<ForStmt>(s)) return lower_for(sc, fs, out);
  if (const auto* rf = dyn_cast<CXXForRangeStmt>(s)) return lower_range_for(sc, rf, out);
  if (const auto* ws = dyn_cast<WhileStmt>(s)) {
    if (data_dependent(ws->getCond()))
      diag_.error(ws->getWhileLoc(),
                  "while loop whose trip count depends on a differentiable value: adgen "
                  "supports range-for and counted for loops over layers");
    else
      diag_.error(ws->getWhileLoc(),
                  "while loop: adgen supports range-for and counted for loops "
                  "(`for (int i = 0; i < n; ++i)`) whose trip count does not depend on tensors");
    return;
  }
  if (const auto* dw = dyn_cast<DoStmt>(s)) {
    diag_.error(dw->getDoLoc(), "do-while loop: adgen supports range-for and counted for loops");
    return;
  }
  if (isa<GotoStmt>(s) || isa<IndirectGotoStmt>(s)) {
    diag_.error(s->getBeginLoc(), "goto: adgen supports structured control flow only (if/else, for, range-for)");
    return;
  }
  if (const auto* ls = dyn_cast<LabelStmt>(s)) {
    diag_.error(ls->getBeginLoc(), "label '" + std::string(ls->getName()) + "': goto and labels are not supported");
    return lower_stmt(sc, ls->getSubStmt(), out);
  }
  if (isa<SwitchStmt>(s)) {
    diag_.error(s->getBeginLoc(), "switch: use if/else on a non-differentiable condition");
    return;
  }
  if (isa<BreakStmt>(s) || isa<ContinueStmt>(s)) {
    diag_.error(s->getBeginLoc(), std::string(isa<BreakStmt>(s) ? "break" : "continue") +
                                      ": loops over layers run every iteration; use if/else inside the body");
    return;
  }
  if (isa<CXXTryStmt>(s)) {
    diag_.error(s->getBeginLoc(), "try/catch inside a differentiated function is not supported");
    return;
  }
  if (const auto* e = dyn_cast<Expr>(s)) {
    const Expr* x = e->IgnoreParens();
    if (const auto* w = dyn_cast<ExprWithCleanups>(x)) x = w->getSubExpr()->IgnoreParens();
    if (const auto* bo = dyn_cast<BinaryOperator>(x)) {
      if (bo->isAssignmentOp()) {
        char op = 0;
        switch (bo->getOpcode()) {
          case BO_AddAssign:
            op = '+';
            break;
          case BO_SubAssign:
            op = '-';
            break;
          case BO_MulAssign:
            op = '*';
            break;
          case BO_DivAssign:
            op = '/';
            break;
          default:
            break;
        }
        return lower_assign(sc, bo, bo->getLHS(), bo->getRHS(), op, out);
      }
    }
    if (const auto* oc = dyn_cast<CXXOperatorCallExpr>(x)) {
      if (oc->getOperator() == OO_Equal && oc->getNumArgs() == 2)
        return lower_assign(sc, oc, oc->getArg(0), oc->getArg(1), 0, out);
    }
    check_mutation(sc, e);
    adgen::Stmt st;
    st.kind = adgen::Stmt::Kind::Verbatim;
    st.text = text(sc, e) + ";";
    out.push_back(st);
    return;
  }
  if (!mentions_active(sc, s)) {
    adgen::Stmt st;
    st.kind = adgen::Stmt::Kind::Verbatim;
    st.text = text(sc, s);
    out.push_back(st);
    return;
  }
  diag_.error(s->getBeginLoc(), std::string("unsupported statement '") + s->getStmtClassName() +
                                    "' in a differentiated function (see docs/adgen-subset.md)");
}

void Planner::lower_decl(Scope& sc, const DeclStmt* ds, std::vector<adgen::Stmt>& out) {
  for (const Decl* d : ds->decls()) {
    const auto* vd = dyn_cast<VarDecl>(d);
    if (vd == nullptr) continue;
    const std::string name = sc.bind_name(vd);
    const QualType t = vd->getType();
    if (vd->isStaticLocal()) {
      diag_.error(vd->getLocation(), "static local '" + name + "' in a differentiated function is not supported");
      continue;
    }
    if (vd->getInit() != nullptr && isa<LambdaExpr>(strip(vd->getInit()))) {
      diag_.error(vd->getLocation(), "lambda '" + name +
                                         "' in a differentiated function: write a named "
                                         "function (a module member or a free function)");
      continue;
    }
    if (act_.is_module_like(t)) {
      if (!t->isReferenceType()) {
        diag_.error(vd->getLocation(),
                    "local module copy '" + name + "': bind modules by const reference (`const Block& b = h[i];`)");
        continue;
      }
      ModPath p;
      if (vd->getInit() && resolve_module(sc, vd->getInit(), p, true)) {
        if (p.last.empty()) p.last = name;
        sc.aliases[vd] = p;
      }
      continue;
    }
    if (act_.is_dual(t)) {
      // `const Dual r = u_jvp(...);`: names for the call's results, no statement of its own.
      std::vector<Operand> results;
      if (vd->getInit() == nullptr) {
        diag_.error(vd->getLocation(), "Dual local '" + name + "' without a value: bind a jvp call's result");
        continue;
      }
      if (lower_results(sc, vd->getInit(), out, results)) sc.duals[vd] = results;
      continue;
    }
    if (act_.is_double(t) && act_.active_var(vd)) {
      diag_.error(vd->getLocation(),
                  "double local '" + name + "' holds a differentiable value: adgen differentiates float scalars");
      continue;
    }
    if ((act_.is_tensor(t) || act_.is_float(t)) && act_.active_var(vd)) {
      adgen::Stmt st;
      st.kind = adgen::Stmt::Kind::Assign;
      st.declare = true;
      st.local = name;
      st.local_kind = act_.is_tensor(t) ? VKind::Tensor : VKind::Float;
      const auto* ctor = vd->getInit() ? dyn_cast<CXXConstructExpr>(strip(vd->getInit())) : nullptr;
      if (vd->getInit() == nullptr || (ctor != nullptr && ctor->getNumArgs() == 0)) {
        // `Tensor c;` / `float r;`: starts empty (zero), assigned later.
        st.value.src = Operand::Src::Inactive;
        st.value.kind = VKind::Inactive;
        st.value.fwd_text = st.local_kind == VKind::Tensor ? "llmcc::Tensor()" : "0.0f";
        st.value.rev_text = st.value.fwd_text;
      } else {
        check_mutation(sc, vd->getInit());
        st.value = lower_expr(sc, vd->getInit(), out);
      }
      sc.fp->locals.push_back({name, st.local_kind});
      out.push_back(st);
      continue;
    }
    // Inactive local: forward only.
    if (vd->getInit()) check_mutation(sc, vd->getInit());
    adgen::Stmt st;
    st.kind = adgen::Stmt::Kind::Verbatim;
    std::string type = rules_.type_name(t);
    st.text = type + " " + name;
    if (const Expr* init = vd->getInit()) {
      const auto* ce = dyn_cast<CXXConstructExpr>(strip(init));
      if (ce != nullptr && ce->getNumArgs() == 0)
        st.text += "{}";
      else if (vd->getInitStyle() == VarDecl::ListInit)
        st.text += text(sc, init);
      else
        st.text += " = " + text(sc, init);
    }
    st.text += ";";
    out.push_back(st);
  }
}

void Planner::lower_assign(Scope& sc, const Expr* whole, const Expr* lhs, const Expr* rhs, char compound,
                           std::vector<adgen::Stmt>& out) {
  const auto* dre = dyn_cast<DeclRefExpr>(lhs->IgnoreParenImpCasts());
  const VarDecl* vd = dre ? dyn_cast<VarDecl>(dre->getDecl()) : nullptr;
  const bool carrier = act_.is_tensor(lhs->getType()) || act_.is_float(lhs->getType());
  const int before = diag_.errors();
  check_mutation(sc, lhs);
  if (diag_.errors() > before) return;
  if (vd != nullptr && act_.is_dual(vd->getType())) {
    diag_.error(whole->getExprLoc(),
                "assignment to the Dual local '" + text(sc, lhs) + "': a Dual is bound once, where it is declared");
    return;
  }
  if (vd == nullptr || isa<ParmVarDecl>(vd) || !vd->isLocalVarDecl()) {
    if (carrier || act_.is_double(lhs->getType())) {
      diag_.error(whole->getExprLoc(), "mutation of a saved tensor or parameter: assignment to '" + text(sc, lhs) +
                                           "'; only locals of the differentiated function may be reassigned");
      return;
    }
  }
  if (vd == nullptr || !act_.active_var(vd)) {
    if (act_.is_double(lhs->getType()) && act_.active(rhs)) {
      diag_.error(whole->getExprLoc(), "double arithmetic on a differentiable value: use float");
      return;
    }
    check_mutation(sc, whole);
    adgen::Stmt st;
    st.kind = adgen::Stmt::Kind::Verbatim;
    st.text = text(sc, whole) + ";";
    out.push_back(st);
    return;
  }
  if (act_.is_double(lhs->getType())) {
    diag_.error(whole->getExprLoc(), "double arithmetic on a differentiable value: use float");
    return;
  }
  check_mutation(sc, rhs);
  adgen::Stmt st;
  st.kind = adgen::Stmt::Kind::Assign;
  st.local = sc.names.count(vd) ? sc.names[vd] : vd->getNameAsString();
  st.local_kind = act_.is_tensor(lhs->getType()) ? VKind::Tensor : VKind::Float;
  Operand value = lower_expr(sc, rhs, out);
  if (compound != 0) {
    if (st.local_kind != VKind::Float) {
      diag_.error(whole->getExprLoc(), "compound assignment on a tensor: write `x = x + y` (the add rule)");
      return;
    }
    Operand cur;
    cur.src = Operand::Src::Local;
    cur.kind = VKind::Float;
    cur.name = st.local;
    adgen::Stmt ar;
    ar.kind = adgen::Stmt::Kind::Arith;
    ar.temp = "t" + std::to_string(sc.temps++);
    ar.op = compound;
    ar.lhs = cur;
    ar.rhs = value;
    out.push_back(ar);
    value = Operand();
    value.src = Operand::Src::Temp;
    value.kind = VKind::Float;
    value.name = ar.temp;
  }
  st.value = value;
  out.push_back(st);
}

void Planner::lower_if(Scope& sc, const IfStmt* s, std::vector<adgen::Stmt>& out) {
  if (s->getInit() != nullptr || s->getConditionVariable() != nullptr || s->isConstexpr() || s->isConsteval()) {
    diag_.error(s->getIfLoc(),
                "if with an initialiser, condition variable or constexpr: write a plain "
                "`if (condition)`");
    return;
  }
  // A condition may read differentiable floats (`if (x > 0)` in a scalar function): the branch
  // taken is recorded and the backward differentiates that branch (piecewise derivative).
  check_mutation(sc, s->getCond());
  adgen::Stmt st;
  st.kind = adgen::Stmt::Kind::If;
  st.id = sc.blocks++;
  st.cond = text(sc, s->getCond());
  lower_stmt(sc, s->getThen(), st.then_body);
  if (s->getElse()) lower_stmt(sc, s->getElse(), st.else_body);
  out.push_back(std::move(st));
}

void Planner::lower_for(Scope& sc, const ForStmt* s, std::vector<adgen::Stmt>& out) {
  if (!mentions_active(sc, s->getBody())) {
    adgen::Stmt st;  // a loop that computes nothing differentiable: forward only
    st.kind = adgen::Stmt::Kind::Verbatim;
    st.text = text(sc, s);
    out.push_back(st);
    return;
  }
  const auto* init = dyn_cast_or_null<DeclStmt>(s->getInit());
  const VarDecl* var = init && init->isSingleDecl() ? dyn_cast<VarDecl>(init->getSingleDecl()) : nullptr;
  if (var == nullptr || !var->getType()->isIntegerType()) {
    diag_.error(s->getForLoc(),
                "for loop without an integer loop variable: adgen supports counted loops "
                "`for (int i = 0; i < n; ++i)` and range-for over std::vector<Module>");
    return;
  }
  if (data_dependent(s->getCond()) || data_dependent(s->getInc())) {
    diag_.error(s->getForLoc(),
                "loop whose trip count depends on a differentiable value: the number of "
                "iterations must come from configuration, sizes or integers");
    return;
  }
  // The backward restores the loop variable from each iteration's record, so the body must not
  // change it.
  std::function<bool(const clang::Stmt*)> writes = [&](const clang::Stmt* n) -> bool {
    if (n == nullptr) return false;
    const Expr* target = nullptr;
    if (const auto* bo = dyn_cast<BinaryOperator>(n); bo && bo->isAssignmentOp()) target = bo->getLHS();
    if (const auto* uo = dyn_cast<UnaryOperator>(n); uo && uo->isIncrementDecrementOp()) target = uo->getSubExpr();
    if (target != nullptr)
      if (const auto* d = dyn_cast<DeclRefExpr>(target->IgnoreParenImpCasts()); d && d->getDecl() == var) return true;
    for (const clang::Stmt* c : n->children())
      if (writes(c)) return true;
    return false;
  };
  if (writes(s->getBody())) {
    diag_.error(s->getForLoc(), "the loop variable '" + var->getNameAsString() +
                                    "' is modified in the loop body: counted loops over layers step only in "
                                    "the increment");
    return;
  }
  const std::string name = sc.bind_name(var);
  sc.loop_vars.insert(var);
  adgen::Stmt st;
  st.kind = adgen::Stmt::Kind::Loop;
  st.id = sc.blocks++;
  st.loop_var = name;
  st.loop_var_type = rules_.type_name(var->getType());
  st.header = "for (" + text(sc, s->getInit());
  if (st.header.back() != ';') st.header += ";";
  st.header += " " + (s->getCond() ? text(sc, s->getCond()) : std::string()) + "; " +
               (s->getInc() ? text(sc, s->getInc()) : std::string()) + ")";
  lower_stmt(sc, s->getBody(), st.body);
  out.push_back(std::move(st));
}

void Planner::lower_range_for(Scope& sc, const CXXForRangeStmt* s, std::vector<adgen::Stmt>& out) {
  const VarDecl* var = s->getLoopVariable();
  ModPath range;
  if (!act_.module_vec_elem(s->getRangeInit()->getType())) {
    if (!mentions_active(sc, s->getBody())) {
      adgen::Stmt st;
      st.kind = adgen::Stmt::Kind::Verbatim;
      st.text = text(sc, s);
      out.push_back(st);
      return;
    }
    diag_.error(s->getForLoc(), "range-for over '" + s->getRangeInit()->getType().getAsString() +
                                    "': adgen's range-for walks a std::vector<Module> field (the layers)");
    return;
  }
  if (!resolve_module(sc, s->getRangeInit(), range, true)) return;
  if (!var->getType()->isReferenceType()) {
    diag_.error(var->getLocation(), "range-for copies each module: write `for (const Block& b : h)`");
    return;
  }
  adgen::Stmt st;
  st.kind = adgen::Stmt::Kind::Loop;
  st.id = sc.blocks++;
  st.range_over_modules = true;
  st.range = range;
  ModPath elem = range;
  elem.elems.push_back("[_i" + std::to_string(st.id) + "]");
  elem.type = rules_.type_name(ctx_.getRecordType(act_.module_vec_elem(s->getRangeInit()->getType())));
  elem.grad_type = ensure_module(act_.module_vec_elem(s->getRangeInit()->getType()));
  sc.aliases[var] = elem;
  sc.used_names.insert(var->getNameAsString());
  lower_stmt(sc, s->getBody(), st.body);
  out.push_back(std::move(st));
}

// ---- expressions ---------------------------------------------------------------------------

Operand Planner::inactive(Scope& sc, const Expr* e) {
  Operand op;
  op.src = Operand::Src::Inactive;
  op.kind = VKind::Inactive;
  if (const auto* da = dyn_cast<CXXDefaultArgExpr>(e->IgnoreParenImpCasts())) {
    op.fwd_text = text(sc, da->getParam()->getDefaultArg());
    op.rev_text = op.fwd_text;
  } else {
    op.fwd_text = text(sc, e);
    if (reevaluable(sc, e)) op.rev_text = op.fwd_text;
  }
  op.type = rules_.type_name(Activity::bare(e->getType()));
  const Expr* s = e->IgnoreParenImpCasts();
  op.is_literal = isa<FloatingLiteral>(s) || isa<IntegerLiteral>(s);
  return op;
}

bool Planner::resolve_module(Scope& sc, const Expr* e, ModPath& path, bool report) {
  e = strip(e);
  auto fail = [&](const std::string& what) {
    if (report) diag_.error(e->getExprLoc(), "unsupported module expression '" + text(sc, e) + "': " + what);
    return false;
  };
  if (const auto* th = dyn_cast<CXXThisExpr>(e)) {
    (void)th;
    path = ModPath();
    path.root = "self";
    path.type = sc.fp->self_type;
    path.grad_type = sc.fp->self_grad_type;
    return true;
  }
  if (const auto* dre = dyn_cast<DeclRefExpr>(e)) {
    const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
    if (vd != nullptr) {
      if (auto a = sc.aliases.find(vd); a != sc.aliases.end()) {
        path = a->second;
        return true;
      }
      if (isa<ParmVarDecl>(vd) && act_.module_record(vd->getType())) {
        path = ModPath();
        path.root = sc.names.count(vd) ? sc.names[vd] : vd->getNameAsString();
        path.last = vd->getNameAsString();
        path.type = rules_.type_name(ctx_.getRecordType(act_.module_record(vd->getType())));
        path.grad_type = ensure_module(act_.module_record(vd->getType()));
        return true;
      }
    }
    return fail("modules are reached from `this`, a module parameter or a const reference to an element");
  }
  if (const auto* me = dyn_cast<MemberExpr>(e)) {
    const auto* fd = dyn_cast<FieldDecl>(me->getMemberDecl());
    if (fd == nullptr) return fail("not a field");
    if (!resolve_module(sc, me->getBase(), path, report)) return false;
    path.elems.push_back("." + fd->getNameAsString());
    path.last = fd->getNameAsString();
    if (const auto* m = act_.module_record(fd->getType())) {
      path.type = rules_.type_name(ctx_.getRecordType(m));
      path.grad_type = ensure_module(m);
    }
    return true;
  }
  const Expr* base = nullptr;
  const Expr* index = nullptr;
  if (const auto* oc = dyn_cast<CXXOperatorCallExpr>(e); oc && oc->getOperator() == OO_Subscript) {
    base = oc->getArg(0);
    index = oc->getArg(1);
  } else if (const auto* mc = dyn_cast<CXXMemberCallExpr>(e);
             mc && mc->getMethodDecl() && mc->getMethodDecl()->getName() == "at" && mc->getNumArgs() == 1) {
    base = mc->getImplicitObjectArgument();
    index = mc->getArg(0);
  }
  if (base != nullptr && act_.module_vec_elem(base->getType())) {
    if (!resolve_module(sc, base, path, report)) return false;
    if (!reevaluable(sc, index)) return fail("the index must be made of loop variables, parameters and constants");
    path.elems.push_back("[" + text(sc, index) + "]");
    const auto* el = act_.module_vec_elem(base->getType());
    path.type = rules_.type_name(ctx_.getRecordType(el));
    path.grad_type = ensure_module(el);
    return true;
  }
  return fail("adgen follows fields, vector elements and const references of modules");
}

Operand Planner::lower_expr(Scope& sc, const Expr* e0, std::vector<adgen::Stmt>& out) {
  // adgen reads an expression as written: its operands' text is copied and its calls are matched
  // to rules by their source. A macro's expansion has no text of its own there (TWICE(x) would be
  // copied as TWICE(x) where x's saved value belongs), so it is refused where it is used.
  for (const SourceLocation loc : {e0->getBeginLoc(), e0->getEndLoc()}) {
    if (!loc.isMacroID()) continue;
    const SourceManager& sm = ctx_.getSourceManager();
    const std::string name = Lexer::getImmediateMacroName(loc, sm, ctx_.getLangOpts()).str();
    diag_.error(sm.getExpansionLoc(loc), "the macro '" + name +
                                             "' expands inside a differentiated expression: adgen reads the code "
                                             "as written, so write the expression out (or call an inline function)");
    return inactive(sc, e0);
  }
  const Expr* e = strip(e0);
  if (!act_.active(e)) return inactive(sc, e);
  const QualType t = e->getType();
  if (act_.is_double(t)) {
    diag_.error(e->getExprLoc(), "double arithmetic on a differentiable value: adgen differentiates float scalars");
    return inactive(sc, e);
  }
  Operand op;
  op.kind = act_.is_tensor(t) ? VKind::Tensor : act_.is_float(t) ? VKind::Float : VKind::Inactive;
  if (const auto* dre = dyn_cast<DeclRefExpr>(e)) {
    const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
    if (vd != nullptr && isa<ParmVarDecl>(vd)) {
      op.src = Operand::Src::Param;
      op.name = sc.names.count(vd) ? sc.names[vd] : vd->getNameAsString();
      return op;
    }
    if (vd != nullptr && op.kind != VKind::Inactive) {
      op.src = Operand::Src::Local;
      op.name = sc.names.count(vd) ? sc.names[vd] : vd->getNameAsString();
      return op;
    }
  }
  if (const auto* me = dyn_cast<MemberExpr>(e); me != nullptr && act_.is_dual(me->getBase()->getType())) {
    std::vector<Operand> results;  // the base is a Dual here: (value, tangent)
    if (!lower_results(sc, me->getBase(), out, results) || results.size() != 2) return inactive(sc, e);
    return results[me->getMemberDecl()->getName() == "tangent" ? 1 : 0];
  }
  if (const auto* me = dyn_cast<MemberExpr>(e)) {
    const auto* fd = dyn_cast<FieldDecl>(me->getMemberDecl());
    if (fd != nullptr && act_.is_tensor(fd->getType()) && act_.module_record(me->getBase()->getType())) {
      if (!resolve_module(sc, me->getBase(), op.mod, true)) return inactive(sc, e);
      op.src = Operand::Src::Field;
      op.field = fd->getNameAsString();
      return op;
    }
  }
  if (const auto* ce = dyn_cast<CallExpr>(e)) return lower_call(sc, ce, out, false);
  if (const auto* bo = dyn_cast<BinaryOperator>(e)) {
    const BinaryOperatorKind k = bo->getOpcode();
    if (op.kind == VKind::Float && (k == BO_Add || k == BO_Sub || k == BO_Mul || k == BO_Div)) {
      adgen::Stmt st;
      st.kind = adgen::Stmt::Kind::Arith;
      st.lhs = lower_expr(sc, bo->getLHS(), out);
      st.rhs = lower_expr(sc, bo->getRHS(), out);
      st.op = k == BO_Add ? '+' : k == BO_Sub ? '-' : k == BO_Mul ? '*' : '/';
      st.temp = "t" + std::to_string(sc.temps++);
      out.push_back(st);
      Operand r;
      r.src = Operand::Src::Temp;
      r.kind = VKind::Float;
      r.name = st.temp;
      return r;
    }
  }
  if (const auto* uo = dyn_cast<UnaryOperator>(e)) {
    if (op.kind == VKind::Float && uo->getOpcode() == UO_Plus) return lower_expr(sc, uo->getSubExpr(), out);
    if (op.kind == VKind::Float && uo->getOpcode() == UO_Minus) {
      adgen::Stmt st;
      st.kind = adgen::Stmt::Kind::Arith;
      st.op = 'n';
      st.lhs = lower_expr(sc, uo->getSubExpr(), out);
      st.temp = "t" + std::to_string(sc.temps++);
      out.push_back(st);
      Operand r;
      r.src = Operand::Src::Temp;
      r.kind = VKind::Float;
      r.name = st.temp;
      return r;
    }
  }
  if (const auto* ic = dyn_cast<ImplicitCastExpr>(e)) {
    if (ic->getCastKind() == CK_FloatingCast)
      diag_.error(e->getExprLoc(), "conversion between float and double of a differentiable value: use float");
    else if (ic->getCastKind() == CK_FloatingToIntegral)
      return inactive(sc, e);
    else
      diag_.error(e->getExprLoc(), "unsupported conversion of a differentiable value");
    return inactive(sc, e);
  }
  if (isa<ConditionalOperator>(e)) {
    diag_.error(e->getExprLoc(), "?: on differentiable values: use if/else on a non-differentiable condition");
    return inactive(sc, e);
  }
  if (isa<LambdaExpr>(e)) {
    diag_.error(e->getExprLoc(), "lambda in a differentiated function: write a named function");
    return inactive(sc, e);
  }
  diag_.error(e->getExprLoc(), std::string("unsupported expression '") + e->getStmtClassName() +
                                   "' on a differentiable value (see docs/adgen-subset.md)");
  return inactive(sc, e);
}

Operand Planner::lower_call(Scope& sc, const CallExpr* ce, std::vector<adgen::Stmt>& out, bool checkpoint) {
  const FunctionDecl* callee = ce->getDirectCallee();
  if (callee == nullptr) {
    diag_.error(ce->getExprLoc(), "call through a function pointer or callable object '" + text(sc, ce->getCallee()) +
                                      "': adgen needs a direct call to a rule or to a function with a body");
    return inactive(sc, ce);
  }
  if (callee->getQualifiedNameAsString() == "llmcc::adgen::checkpoint") {
    const Expr* inner = strip(ce->getArg(0));
    const auto* ic = dyn_cast<CallExpr>(inner);
    if (ic == nullptr) {
      diag_.error(ce->getExprLoc(), "checkpoint() takes a call of a differentiated function");
      return inactive(sc, ce);
    }
    return lower_call(sc, ic, out, true);
  }
  if (callee->getQualifiedNameAsString() == "llmcc::adgen::map_unary") return lower_map_unary(sc, ce, callee, out);
  if (!jvp_target(callee).empty()) {
    if (checkpoint) diag_.error(ce->getExprLoc(), "checkpoint() of a jvp call is not supported");
    return lower_jvp_call(sc, ce, callee, out);
  }
  Call call;
  call.checkpoint = checkpoint;
  call.ret = act_.is_tensor(ce->getType()) ? VKind::Tensor : VKind::Float;
  if (!act_.is_tensor(ce->getType()) && !act_.is_float(ce->getType())) {
    diag_.error(ce->getExprLoc(), "call of '" + callee->getNameAsString() + "' returning '" +
                                      ce->getType().getAsString() + "' on differentiable values");
    return inactive(sc, ce);
  }
  std::vector<const Expr*> args;
  const auto* md = dyn_cast<CXXMethodDecl>(callee);
  const Expr* object = nullptr;
  if (md != nullptr && !md->isStatic()) {
    if (const auto* mc = dyn_cast<CXXMemberCallExpr>(ce)) {
      object = mc->getImplicitObjectArgument();
      for (const Expr* a : mc->arguments()) args.push_back(a);
    } else if (const auto* oc = dyn_cast<CXXOperatorCallExpr>(ce)) {
      object = oc->getArg(0);
      for (unsigned i = 1; i < oc->getNumArgs(); ++i) args.push_back(oc->getArg(i));
    }
    if (md->isVirtual() && !md->hasAttr<FinalAttr>() && !md->getParent()->hasAttr<FinalAttr>()) {
      diag_.error(ce->getExprLoc(), "virtual call of '" + md->getQualifiedNameAsString() +
                                        "': adgen needs the callee statically; make it non-virtual (modules are "
                                        "plain structs)");
      return inactive(sc, ce);
    }
    if (object == nullptr || !act_.is_module_like(object->getType())) {
      diag_.error(ce->getExprLoc(), "method call '" + md->getNameAsString() +
                                        "' on a non-module object produces a differentiable value: only rules "
                                        "(free functions with a pullback) and module member functions are supported");
      return inactive(sc, ce);
    }
  } else {
    for (const Expr* a : ce->arguments()) args.push_back(a);
  }
  const FunctionDecl* def = callee->getDefinition();
  const bool system = act_.in_system_header(callee);
  bool broken = false;
  const RuleInfo* rule = nullptr;
  if (is_math(callee)) {
    call.kind = Call::Kind::Math;
    call.name = callee->getNameAsString();
    for (const Expr* a : args) call.args.push_back(lower_expr(sc, a, out));
  } else if (md == nullptr && (rule = rules_.lookup(callee, ce->getExprLoc(), &broken)) != nullptr) {
    call.kind = Call::Kind::Rule;
    call.name = rule->primal->getQualifiedNameAsString();
    call.pullback = rule->pullback->getQualifiedNameAsString();
    if (rule->fwd) {
      call.fwd_name = rule->fwd->getQualifiedNameAsString();
      call.saved_type = rule->saved_type;
      call.saved_tensor_fields = rule->saved_tensor_fields;
    }
    call.adjoint_of = rule->adjoint_of;
    need_file(rule->primal);
    need_file(rule->pullback);
    if (callee != rule->primal) need_file(callee);
    for (std::size_t i = 0; i < rule->arg_of.size(); ++i) {
      const Expr* a = args[static_cast<std::size_t>(rule->arg_of[i])];
      Operand o = lower_expr(sc, a, out);
      if (o.kind != VKind::Inactive && !rule->adjoint_of[i])
        diag_.warning(a->getExprLoc(), "differentiable value passed to parameter '" +
                                           rule->primal->getParamDecl(static_cast<unsigned>(i))->getNameAsString() +
                                           "' of rule '" + rule->primal->getNameAsString() +
                                           "', which takes no adjoint: no gradient flows through it");
      call.args.push_back(o);
    }
    if (checkpoint)
      diag_.warning(ce->getExprLoc(),
                    "checkpoint() of a rule has no effect: rules save only what "
                    "their pullback reads");
    call.checkpoint = false;
  } else if (broken) {
    return inactive(sc, ce);
  } else if (callee->isOverloadedOperator() && md == nullptr) {
    diag_.error(ce->getExprLoc(), "operator '" + callee->getNameAsString() +
                                      "' has no rule: mark its declaration LLMCC_ADGEN_RULE(\"<rule>\") "
                                      "(parameters named like the rule's)");
    return inactive(sc, ce);
  } else if (system) {
    diag_.error(ce->getExprLoc(), "call of library function '" + callee->getQualifiedNameAsString() +
                                      "' on differentiable values: adgen never differentiates the standard "
                                      "library; use a rule");
    return inactive(sc, ce);
  } else if (def == nullptr || !def->hasBody()) {
    diag_.error(ce->getExprLoc(), "call of '" + callee->getQualifiedNameAsString() + "' has no rule (no '" +
                                      callee->getNameAsString() +
                                      "_pullback' declared beside it) and no body adgen can differentiate");
    return inactive(sc, ce);
  } else {
    FuncPlan* g = plan_function(def, ce->getExprLoc());
    if (g == nullptr) return inactive(sc, ce);
    call.kind = Call::Kind::Func;
    call.func = g;
    call.checkpoint = checkpoint || g->checkpoint;
    if (md != nullptr) {
      call.has_object = true;
      if (!resolve_module(sc, object, call.object, true)) return inactive(sc, ce);
    }
    call.module_args.resize(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const ParmVarDecl* p = def->getParamDecl(static_cast<unsigned>(i));
      if (act_.module_record(p->getType())) {
        if (!resolve_module(sc, args[i], call.module_args[i], true)) return inactive(sc, ce);
        Operand placeholder;
        call.args.push_back(placeholder);
      } else {
        call.args.push_back(lower_expr(sc, args[i], out));
      }
    }
  }
  // (Passing a differentiable tensor to a mutable reference is reported by check_mutation.)
  return push_call(sc, std::move(call), out);
}

// Appends `t<N> = call` and returns the temporary as an operand.
Operand Planner::push_call(Scope& sc, Call call, std::vector<adgen::Stmt>& out) {
  adgen::Stmt st;
  st.kind = adgen::Stmt::Kind::Call;
  st.temp = "t" + std::to_string(sc.temps++);
  st.call = std::move(call);
  Operand result;
  result.src = Operand::Src::Temp;
  result.kind = st.call.ret;
  result.name = st.temp;
  out.push_back(std::move(st));
  return result;
}

// `adgen::map_unary<f>(x, "name")`: an element-wise rule built from a scalar function. adgen
// differentiates f itself (its generated `f_grad` is declared in the generated header), and the
// pullback is `adgen::map_unary_pullback<f_grad>`, so the user writes neither.
Operand Planner::lower_map_unary(Scope& sc, const CallExpr* ce, const FunctionDecl* callee,
                                 std::vector<adgen::Stmt>& out) {
  const TemplateArgumentList* targs = callee->getTemplateSpecializationArgs();
  const auto* f = targs != nullptr && targs->size() == 1 && targs->get(0).getKind() == TemplateArgument::Declaration
                      ? dyn_cast<FunctionDecl>(targs->get(0).getAsDecl())
                      : nullptr;
  const FunctionDecl* def = f != nullptr ? f->getDefinition() : nullptr;
  if (def == nullptr || !def->hasBody() || def->getNumParams() != 1 || !act_.is_float(def->getReturnType()) ||
      !act_.is_float(def->getParamDecl(0)->getType())) {
    diag_.error(ce->getExprLoc(),
                "map_unary<f>: f must be a function `float f(float)` with a body adgen can "
                "differentiate (no rule, no declaration only)");
    return inactive(sc, ce);
  }
  FuncPlan* g = plan_function(def, ce->getExprLoc());
  if (g == nullptr) return inactive(sc, ce);
  g->entry = true;  // its `<f>_grad(float x, float* d_x)` is the derivative the pullback calls
  need_file(def);
  Call call;
  call.kind = Call::Kind::Rule;
  call.ret = VKind::Tensor;
  call.name = "llmcc::adgen::map_unary<" + def->getQualifiedNameAsString() + ">";
  call.pullback = "llmcc::adgen::map_unary_pullback<" + g->id + "_grad>";
  call.adjoint_of = {1, 0};
  call.scalar = g;
  call.args.push_back(lower_expr(sc, ce->getArg(0), out));
  call.args.push_back(lower_expr(sc, ce->getArg(1), out));
  return push_call(sc, std::move(call), out);
}

// A call of a function declared LLMCC_ADGEN_JVP: a generated callee returning a Dual (Dual2), its
// results in temporaries (the value returned here, the others in the statement's more_temps).
Operand Planner::lower_jvp_call(Scope& sc, const CallExpr* ce, const FunctionDecl* callee,
                                std::vector<adgen::Stmt>& out) {
  FuncPlan* g = plan_jvp(callee, ce->getExprLoc());
  if (g == nullptr) return inactive(sc, ce);
  Call call;
  call.kind = Call::Kind::Func;
  call.func = g;
  call.results = g->results;
  call.ret = VKind::Tensor;
  call.module_args.resize(ce->getNumArgs());
  for (unsigned i = 0; i < ce->getNumArgs(); ++i) {
    if (act_.module_record(callee->getParamDecl(i)->getType())) {
      if (!resolve_module(sc, ce->getArg(i), call.module_args[i], true)) return inactive(sc, ce);
      call.args.emplace_back();
    } else {
      call.args.push_back(lower_expr(sc, ce->getArg(i), out));
    }
  }
  const int results = call.results;
  Operand value = push_call(sc, std::move(call), out);
  for (int k = 1; k < results; ++k) out.back().more_temps.push_back("t" + std::to_string(sc.temps++));
  return value;
}

bool Planner::lower_results(Scope& sc, const Expr* e0, std::vector<adgen::Stmt>& out, std::vector<Operand>& results) {
  const Expr* e = strip(e0);
  if (const auto* dre = dyn_cast<DeclRefExpr>(e)) {
    const auto* vd = dyn_cast<VarDecl>(dre->getDecl());
    if (auto it = vd ? sc.duals.find(vd) : sc.duals.end(); it != sc.duals.end()) {
      results = it->second;
      return true;
    }
  }
  if (const auto* ce = dyn_cast<CallExpr>(e)) {
    const FunctionDecl* callee = ce->getDirectCallee();
    if (callee != nullptr && !jvp_target(callee).empty()) {
      const Operand value = lower_jvp_call(sc, ce, callee, out);
      if (value.src != Operand::Src::Temp) return false;
      results = {value};
      for (const auto& t : out.back().more_temps) {
        Operand o = value;
        o.name = t;
        results.push_back(o);
      }
      return true;
    }
  }
  if (const auto* me = dyn_cast<MemberExpr>(e); me != nullptr && act_.is_dual(me->getBase()->getType())) {
    std::vector<Operand> all;  // a Dual2's .value (its first two results) or .tangent (the last two)
    if (!lower_results(sc, me->getBase(), out, all) || all.size() != 4) return false;
    const std::size_t at = me->getMemberDecl()->getName() == "tangent" ? 2 : 0;
    results.assign(all.begin() + static_cast<long>(at), all.begin() + static_cast<long>(at) + 2);
    return true;
  }
  diag_.error(e0->getExprLoc(),
              "an adgen::Dual here must be a call of a function declared LLMCC_ADGEN_JVP or a Dual local bound "
              "to one");
  return false;
}

}  // namespace adgen
