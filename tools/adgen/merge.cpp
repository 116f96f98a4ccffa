// Calls that share a primal stream become one call. A physics-informed loss calls several plans of
// one function on the same arguments: u_jvp2(net, p, ex, ex) for u, u_x and u_xx, u_jvp(net, p, et)
// for u_t, sometimes u(net, p) itself. Each would run u's own statements again, and their
// pullbacks again in the backward. Every such plan runs its base's statements unchanged and in
// order (ir.h, FuncPlan::base), with statements of its own around them that read them but never
// assign the base's names; so two of them merge into one plan that runs the base's statements
// once, each surrounded by both plans' own statements in their order, and returns the first
// plan's results followed by the second's tangents (the second's value is the first's).
//
// Two calls in one statement list merge when their callees have the same base, at least one is a
// jvp, they pass the same base arguments (values that cannot change between the two calls), and
// the later call's other arguments exist where the earlier one runs: the merged call takes the
// earlier one's place.
#include <functional>

#include "planner_internal.h"

namespace adgen {

namespace {

// N for a temporary "tN", else -1.
int temp_index(const std::string& t) {
  if (t.size() < 2 || t[0] != 't' || t.find_first_not_of("0123456789", 1) != std::string::npos) return -1;
  return std::stoi(t.substr(1));
}

void assigned_locals(const std::vector<Stmt>& body, std::set<std::string>& out) {
  for (const Stmt& s : body) {
    if (s.kind == Stmt::Kind::Assign) out.insert(s.local);
    assigned_locals(s.then_body, out);
    assigned_locals(s.else_body, out);
    assigned_locals(s.body, out);
  }
}

bool same_operand(const Operand& a, const Operand& b) {
  return a.src == b.src && a.kind == b.kind && a.name == b.name && a.field == b.field &&
         a.mod.primal() == b.mod.primal() && a.fwd_text == b.fwd_text && a.rev_text == b.rev_text &&
         a.is_literal == b.is_literal;
}

bool same_operands(const std::vector<Operand>& a, const std::vector<Operand>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_operand(a[i], b[i])) return false;
  return true;
}

bool same_modules(const std::vector<ModPath>& a, const std::vector<ModPath>& b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::string pa = i < a.size() ? a[i].root + ":" + a[i].primal() : "";
    const std::string pb = i < b.size() ? b[i].root + ":" + b[i].primal() : "";
    if (pa != pb) return false;
  }
  return true;
}

// A statement without a body, the same in both plans.
bool same_leaf(const Stmt& a, const Stmt& b) {
  if (a.kind != b.kind || a.temp != b.temp || a.more_temps != b.more_temps || a.op != b.op ||
      !same_operand(a.lhs, b.lhs) || !same_operand(a.rhs, b.rhs) || a.declare != b.declare || a.local != b.local ||
      a.local_kind != b.local_kind || !same_operand(a.value, b.value) || !same_operands(a.more_values, b.more_values) ||
      a.text != b.text)
    return false;
  const Call &ca = a.call, &cb = b.call;
  return ca.kind == cb.kind && ca.name == cb.name && ca.fwd_name == cb.fwd_name && ca.pullback == cb.pullback &&
         ca.func == cb.func && ca.has_object == cb.has_object && ca.object.primal() == cb.object.primal() &&
         same_operands(ca.args, cb.args) && same_modules(ca.module_args, cb.module_args, ca.args.size()) &&
         ca.checkpoint == cb.checkpoint && ca.ret == cb.ret && ca.results == cb.results && ca.scalar == cb.scalar;
}

// A call that may merge: a plan with a base, returning a Tensor (its value first).
bool mergeable(const Stmt& s) {
  if (s.kind != Stmt::Kind::Call || s.call.kind != Call::Kind::Func || s.call.checkpoint) return false;
  const FuncPlan* g = s.call.func;
  return g->base != nullptr && g->ret == VKind::Tensor && g->base->ret == VKind::Tensor;
}

// Whether a statement of `body` (at any depth) assigns `local` or defines `temp`.
bool writes(const std::vector<Stmt>& body, const Operand& o) {
  for (const Stmt& s : body) {
    if (o.src == Operand::Src::Temp &&
        (s.temp == o.name || std::find(s.more_temps.begin(), s.more_temps.end(), o.name) != s.more_temps.end()))
      return true;
    if ((o.src == Operand::Src::Local || o.src == Operand::Src::Param) && s.kind == Stmt::Kind::Assign &&
        s.local == o.name)
      return true;
    if (o.src == Operand::Src::Inactive && !o.is_literal && s.kind != Stmt::Kind::Call && s.kind != Stmt::Kind::Arith &&
        s.kind != Stmt::Kind::Assign)
      return true;  // inactive text may read what inactive code changes
    if (writes(s.then_body, o) || writes(s.else_body, o) || writes(s.body, o)) return true;
  }
  return false;
}

// Renames the names of a plan that are not its base's.
struct Renamer {
  std::map<std::string, std::string> temps, locals, params;

  static void rename(std::string& name, const std::map<std::string, std::string>& m) {
    if (auto it = m.find(name); it != m.end()) name = it->second;
  }
  void operand(Operand& o) const {
    if (o.src == Operand::Src::Temp) rename(o.name, temps);
    if (o.src == Operand::Src::Local) rename(o.name, locals);
    if (o.src == Operand::Src::Param) rename(o.name, params);
  }
  void stmt(Stmt& s) const {
    rename(s.temp, temps);
    for (auto& t : s.more_temps) rename(t, temps);
    if (s.kind == Stmt::Kind::Assign) rename(s.local, locals);
    for (auto& a : s.call.args) operand(a);
    operand(s.lhs);
    operand(s.rhs);
    operand(s.value);
    for (auto& v : s.more_values) operand(v);
    for (auto* b : {&s.then_body, &s.else_body, &s.body})
      for (Stmt& t : *b) stmt(t);
  }
};

}  // namespace

// One plan running a's and b's statements with their common base's once (null when their bodies
// do not line up on the base's statements, which a plan adgen made always does). When one of the
// two is the base itself, the other already is that plan.
const FuncPlan* Planner::merged(const FuncPlan& a, const FuncPlan& b) {
  if (a.base != nullptr && a.base == b.base) {
    if (&a == a.base) return &b;
    if (&b == b.base) return &a;
  }
  const auto key = std::make_pair(&a, &b);
  if (auto it = merges_.find(key); it != merges_.end()) return it->second;
  merges_[key] = nullptr;
  if (a.base == nullptr || a.base != b.base) return nullptr;
  const FuncPlan& f0 = *a.base;
  const std::size_t n0 = f0.params.size();
  if (a.params.size() < n0 || b.params.size() < n0 || a.is_method != b.is_method) return nullptr;
  for (std::size_t i = 0; i < n0; ++i)
    if (a.params[i].name != f0.params[i].name || b.params[i].name != f0.params[i].name) return nullptr;

  auto owned = std::make_unique<FuncPlan>();
  FuncPlan& m = *owned;
  m.primal = a.primal;
  m.is_method = a.is_method;
  m.self_type = a.self_type;
  m.self_grad_type = a.self_grad_type;
  m.params = a.params;
  m.ret = a.ret;
  m.ret_type = a.ret_type;
  m.locals = a.locals;
  m.used_names = a.used_names;
  m.source = a.source + ", with " + b.source + " sharing its statements";
  m.results = a.results + b.results - 1;
  m.tuple_results = true;
  m.base = &f0;
  m.temps = a.temps + b.temps - f0.temps;

  // b's own names: temporaries after a's, locals and tangent parameters renamed where a took them.
  std::set<std::string> base_locals;
  assigned_locals(f0.body, base_locals);
  auto taken = [&](const std::string& n) {
    return m.used_names.count(n) || m.used_names.count("d_" + n) ||
           (n.rfind("d_", 0) == 0 && m.used_names.count(n.substr(2)));
  };
  auto fresh = [&](const std::string& name) {
    std::string n = name;
    for (int k = 2; taken(n); ++k) n = name + "_" + std::to_string(k);
    m.used_names.insert(n);
    return n;
  };
  Renamer r;
  for (int k = f0.temps; k < b.temps; ++k)
    r.temps["t" + std::to_string(k)] = "t" + std::to_string(a.temps + k - f0.temps);
  for (std::size_t i = n0; i < b.params.size(); ++i) {
    Param p = b.params[i];
    const std::string name = fresh(p.name);
    r.params[p.name] = name;
    p.name = p.source_name = name;
    m.params.push_back(p);
  }
  std::set<std::string> b_locals;
  assigned_locals(b.body, b_locals);
  for (const std::string& l : b_locals)
    if (!base_locals.count(l)) r.locals[l] = fresh(l);
  for (const auto& [name, kind] : b.locals)
    if (!base_locals.count(name)) m.locals.push_back({r.locals.count(name) ? r.locals[name] : name, kind});
  std::vector<Stmt> b_body = b.body;
  for (Stmt& s : b_body) r.stmt(s);

  auto is_base = [&](const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Call:
      case Stmt::Kind::Arith: {
        const int k = temp_index(s.temp);
        return k >= 0 && k < f0.temps;
      }
      case Stmt::Kind::Assign:
        return base_locals.count(s.local) > 0;
      default:
        return true;
    }
  };
  // The base's statement as both plans have it: the same, or calls of two plans of one callee
  // (merged in turn), or loops, branches and the return holding both.
  std::function<bool(const std::vector<Stmt>&, const std::vector<Stmt>&, std::vector<Stmt>&)> zip;
  auto combine = [&](const Stmt& x, const Stmt& y, std::vector<Stmt>& out) {
    if (x.kind != y.kind) return false;
    switch (x.kind) {
      case Stmt::Kind::Loop: {
        if (x.id != y.id || x.header != y.header || x.range_over_modules != y.range_over_modules ||
            x.range.primal() != y.range.primal() || x.range_var != y.range_var || x.loop_var != y.loop_var)
          return false;
        Stmt n = x;
        n.body.clear();
        if (!zip(x.body, y.body, n.body)) return false;
        out.push_back(std::move(n));
        return true;
      }
      case Stmt::Kind::If: {
        if (x.id != y.id || x.cond != y.cond) return false;
        Stmt n = x;
        n.then_body.clear();
        n.else_body.clear();
        if (!zip(x.then_body, y.then_body, n.then_body) || !zip(x.else_body, y.else_body, n.else_body)) return false;
        out.push_back(std::move(n));
        return true;
      }
      case Stmt::Kind::Return: {
        if (!same_operand(x.value, y.value)) return false;
        Stmt n = x;
        n.more_values.insert(n.more_values.end(), y.more_values.begin(), y.more_values.end());
        out.push_back(std::move(n));
        return true;
      }
      default:
        break;
    }
    if (same_leaf(x, y)) {
      out.push_back(x);
      return true;
    }
    // A call of the base's callee g0 that each plan redirected to a plan of its own (its jvp, its
    // Taylor plan): one call of their merge.
    const Call &cx = x.call, &cy = y.call;
    if (x.kind != Stmt::Kind::Call || x.temp != y.temp || !mergeable(x) || !mergeable(y) ||
        cx.has_object != cy.has_object || cx.object.primal() != cy.object.primal() || cx.func->base != cy.func->base)
      return false;
    const std::size_t g0 = cx.func->base->params.size();
    if (cx.args.size() < g0 || cy.args.size() < g0) return false;
    for (std::size_t i = 0; i < g0; ++i)
      if (!same_operand(cx.args[i], cy.args[i])) return false;
    if (!same_modules(cx.module_args, cy.module_args, g0)) return false;
    const FuncPlan* g = merged(*cx.func, *cy.func);
    if (g == nullptr) return false;
    Stmt n = x;
    n.call.func = g;
    n.call.results = g->results;
    n.call.args.insert(n.call.args.end(), cy.args.begin() + static_cast<long>(g0), cy.args.end());
    n.more_temps.insert(n.more_temps.end(), y.more_temps.begin(), y.more_temps.end());
    out.push_back(std::move(n));
    return true;
  };
  zip = [&](const std::vector<Stmt>& xs, const std::vector<Stmt>& ys, std::vector<Stmt>& out) {
    std::size_t i = 0, j = 0;
    while (true) {
      while (i < xs.size() && !is_base(xs[i])) out.push_back(xs[i++]);
      while (j < ys.size() && !is_base(ys[j])) out.push_back(ys[j++]);
      if (i == xs.size() || j == ys.size()) return i == xs.size() && j == ys.size();
      if (!combine(xs[i++], ys[j++], out)) return false;
    }
  };
  if (!zip(a.body, b_body, m.body)) return nullptr;

  m.id = a.id + "_with_" + b.id;
  for (std::string stem = m.id; func_ids_.count(m.id);) m.id = stem + "_" + std::to_string(func_ids_.size());
  func_ids_.insert(m.id);
  FuncPlan* result = owned.get();
  merges_[key] = result;
  program_.funcs.push_back(std::move(owned));
  return result;
}

void Planner::merge_calls(FuncPlan& f) {
  std::map<std::string, std::string> value_of;  // a merged-away call's value: the merged call's
  std::function<void(std::vector<Stmt>&)> walk = [&](std::vector<Stmt>& body) {
    for (Stmt& s : body) {
      walk(s.then_body);
      walk(s.else_body);
      walk(s.body);
    }
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (!mergeable(body[i])) continue;
      for (std::size_t j = i + 1; j < body.size(); ++j) {
        Stmt& a = body[i];
        const Stmt& b = body[j];
        if (!mergeable(b)) continue;
        const Call &ca = a.call, &cb = b.call;
        if (ca.func->base != cb.func->base || (ca.func->results < 2 && cb.func->results < 2) ||
            ca.has_object != cb.has_object || ca.object.primal() != cb.object.primal())
          continue;
        const std::vector<Stmt> between(body.begin() + static_cast<long>(i) + 1, body.begin() + static_cast<long>(j));
        const std::vector<Stmt> from_a(body.begin() + static_cast<long>(i), body.begin() + static_cast<long>(j));
        const std::size_t n0 = ca.func->base->params.size();
        bool ok = ca.args.size() >= n0 && cb.args.size() >= n0 && same_modules(ca.module_args, cb.module_args, n0);
        // The base's arguments: the same values at both calls.
        for (std::size_t k = 0; ok && k < n0; ++k) {
          if (k < ca.module_args.size() && !ca.module_args[k].root.empty()) continue;
          ok = same_operand(ca.args[k], cb.args[k]) &&
               (ca.args[k].src != Operand::Src::Inactive || ca.args[k].is_literal) && !writes(between, ca.args[k]);
        }
        // The later call's directions: already there where the earlier call runs.
        for (std::size_t k = n0; ok && k < cb.args.size(); ++k) ok = !writes(from_a, cb.args[k]);
        if (!ok) continue;
        const FuncPlan* g = merged(*ca.func, *cb.func);
        if (g == nullptr) continue;
        value_of[b.temp] = a.temp;
        a.call.func = g;
        a.call.results = g->results;
        a.call.args.insert(a.call.args.end(), cb.args.begin() + static_cast<long>(n0), cb.args.end());
        a.more_temps.insert(a.more_temps.end(), b.more_temps.begin(), b.more_temps.end());
        body.erase(body.begin() + static_cast<long>(j));
        --j;
      }
    }
  };
  walk(f.body);
  if (value_of.empty()) return;
  Renamer r;
  r.temps = value_of;
  for (Stmt& s : f.body) r.stmt(s);
}

}  // namespace adgen
