// Forward mode: from a planned function's IR to the IR of its tangent (JVP) function.
//
// The tangent function runs the primal statements unchanged and, after each one whose value
// depends on a tangent input, statements computing that value's tangent: calls of rules that
// have pullbacks (linear's tangent is linear_nobias with the same weight, an element-wise op's
// is a mul by its slope) and float arithmetic. Its IR is therefore of the same kind as a
// lowered user function, so the reverse emitter differentiates it like any other: a loss that
// calls a jvp gets the parameters' gradient of the whole from one generated backward.
//
// Each function called with tangent-carrying arguments gets a tangent function of its own (one
// per set of such arguments) returning a Dual; a map_unary's scalar function gets a slope
// function (`f_slope(x)` = f'(x), itself differentiable, so the nested backward gets f'').
#include <functional>
#include <tuple>

#include "cse.h"
#include "planner_internal.h"

namespace adgen {

using namespace clang;
using namespace planner_detail;

class TangentBuilder {
 public:
  TangentBuilder(Planner& p, const FuncPlan& f, FuncPlan& j, Planner::TangentMode mode, SourceLocation loc, bool top)
      : p_(p), f_(f), j_(j), mode_(mode), loc_(loc), top_(top), temps_(f.temps) {}

  bool run(const std::vector<bool>& mask) {
    if (mode_ == Planner::TangentMode::Taylor) {
      // The primal values of f (a Dual plan) move along the direction f follows: their tangents
      // are the ones f computes.
      std::set<std::string> locals;
      for (const auto& [name, kind] : f_.locals) locals.insert(name);
      for (const auto& [name, t] : f_.tangent_of) {
        act_.insert(name);
        primal_.insert(name);
        if (locals.count(name) && t.src == Operand::Src::Local)
          tan_local_[name] = t.name;
        else
          tan_[name] = t;
      }
    }
    for (std::size_t i = 0; i < f_.params.size(); ++i) {
      if (!mask[i]) continue;
      const Param& p = f_.params[i];
      act_.insert(p.name);
      if (mode_ == Planner::TangentMode::Slope) {
        tan_[p.name] = literal("1.0f");
        continue;
      }
      Param t;
      t.name = fresh(p.name);
      t.source_name = t.name;
      t.kind = p.kind;
      t.type = p.kind == VKind::Tensor ? "const llmcc::Tensor &" : "float";
      t.value_type = p.kind == VKind::Tensor ? "llmcc::Tensor" : "float";
      j_.tangent_param[i] = static_cast<int>(j_.params.size());
      j_.params.push_back(t);
      tan_[p.name] = named(Operand::Src::Param, t.kind, t.name);
    }
    for (bool changed = true; changed;) {
      changed = false;
      scan(f_.body, changed);
    }
    xform(f_.body, j_.body);
    j_.temps = temps_;
    if (mode_ == Planner::TangentMode::Dual) {
      // What the Taylor mode of this plan reads: every value's tangent.
      for (const auto& [name, t] : tan_) j_.tangent_of[name] = t;
      for (const auto& [name, local] : tan_local_) {
        VKind kind = VKind::Tensor;
        for (const auto& [n, k] : f_.locals)
          if (n == name) kind = k;
        j_.tangent_of[name] = named(Operand::Src::Local, kind, local);
      }
    }
    return ok_;
  }

 private:
  // ---- names and operands ----------------------------------------------------------------------
  std::string fresh(const std::string& base) {
    std::string stem = base;
    while (!stem.empty() && stem[0] == '_') stem.erase(0, 1);
    stem = (stem.empty() ? "v" : stem) + "_dot";
    auto taken = [&](const std::string& n) {
      return j_.used_names.count(n) || j_.used_names.count("d_" + n) ||
             (n.rfind("d_", 0) == 0 && j_.used_names.count(n.substr(2)));
    };
    std::string name = stem;
    for (int k = 2; taken(name); ++k) name = stem + "_" + std::to_string(k);
    j_.used_names.insert(name);
    return name;
  }
  static Operand named(Operand::Src src, VKind kind, const std::string& name) {
    Operand o;
    o.src = src;
    o.kind = kind;
    o.name = name;
    return o;
  }
  static Operand literal(const std::string& text) {
    Operand o;
    o.fwd_text = o.rev_text = text;
    o.type = "float";
    o.is_literal = true;
    return o;
  }
  static bool is_literal(const Operand& o, const char* text) {
    return o.src == Operand::Src::Inactive && o.is_literal && o.fwd_text == text;
  }
  bool active(const Operand& o) const {
    return (o.src == Operand::Src::Param || o.src == Operand::Src::Local || o.src == Operand::Src::Temp) &&
           act_.count(o.name) > 0;
  }
  std::optional<Operand> tangent(const Operand& o) const {
    if (!active(o)) return std::nullopt;
    if (o.src == Operand::Src::Local) {
      auto it = tan_local_.find(o.name);
      if (it == tan_local_.end()) return std::nullopt;
      return named(Operand::Src::Local, o.kind, it->second);
    }
    auto it = tan_.find(o.name);
    if (it == tan_.end()) return std::nullopt;
    return it->second;
  }

  void error(const std::string& what) {
    if (ok_) p_.diag_.error(loc_, "forward mode (the tangent of " + f_.source + "): " + what);
    ok_ = false;
  }

  // ---- statements adgen adds -----------------------------------------------------------------
  Operand rule(const std::string& name, const std::vector<Operand>& args, std::vector<Stmt>& out,
               VKind ret = VKind::Tensor) {
    const FunctionDecl* fd = p_.library_function(name, args.size());
    bool broken = false;
    const RuleInfo* info = fd != nullptr ? p_.rules_.lookup(fd, loc_, &broken) : nullptr;
    if (info == nullptr) {
      if (!broken)
        error("the tangent needs the rule 'llmcc::" + name +
              "', which this translation unit does not declare: include \"llmcc/ops.h\"");
      ok_ = false;
      return literal("0.0f");
    }
    Call c;
    c.kind = Call::Kind::Rule;
    c.name = info->primal->getQualifiedNameAsString();
    c.pullback = info->pullback->getQualifiedNameAsString();
    if (info->fwd != nullptr) {
      c.fwd_name = info->fwd->getQualifiedNameAsString();
      c.saved_type = info->saved_type;
      c.saved_tensor_fields = info->saved_tensor_fields;
    }
    c.adjoint_of = info->adjoint_of;
    c.args = args;
    c.ret = ret;
    p_.need_file(info->primal);
    p_.need_file(info->pullback);
    return push(std::move(c), out);
  }
  Operand push(Call c, std::vector<Stmt>& out) {
    Stmt st;
    st.kind = Stmt::Kind::Call;
    st.temp = "t" + std::to_string(temps_++);
    st.call = std::move(c);
    const Operand r = named(Operand::Src::Temp, st.call.ret, st.temp);
    out.push_back(std::move(st));
    return r;
  }
  Operand arith(char op, const Operand& a, const Operand& b, std::vector<Stmt>& out) {
    if (op == '*' && is_literal(a, "1.0f")) return b;
    if (op == '*' && is_literal(b, "1.0f")) return a;
    if (a.is_literal && (op == 'n' || b.is_literal))  // constants fold into one literal
      return literal(op == 'n' ? "(-" + a.fwd_text + ")" : "(" + a.fwd_text + " " + op + " " + b.fwd_text + ")");
    Stmt st;
    st.kind = Stmt::Kind::Arith;
    st.op = op;
    st.lhs = a;
    st.rhs = b;
    st.temp = "t" + std::to_string(temps_++);
    out.push_back(st);
    return named(Operand::Src::Temp, VKind::Float, st.temp);
  }
  Operand math(const std::string& name, const std::vector<Operand>& args, std::vector<Stmt>& out) {
    Call c;
    c.kind = Call::Kind::Math;
    c.name = name;
    c.args = args;
    c.ret = VKind::Float;
    return push(std::move(c), out);
  }
  std::optional<Operand> sum(const std::optional<Operand>& a, const std::optional<Operand>& b, VKind kind,
                             std::vector<Stmt>& out) {
    if (!a) return b;
    if (!b) return a;
    return kind == VKind::Tensor ? rule("add", {*a, *b}, out) : arith('+', *a, *b, out);
  }
  // A zero tangent of the value v: scale(v, 0) has v's shape and a pullback (that adds zero).
  Operand zero(const Operand& v, VKind kind, std::vector<Stmt>& out) {
    if (kind == VKind::Float) return literal("0.0f");
    return rule("scale", {v, literal("0.0f")}, out);
  }

  // ---- which values carry a tangent (a fixpoint: loops carry locals around) -----------------------
  void scan(const std::vector<Stmt>& body, bool& changed) {
    auto mark = [&](const std::string& n) {
      if (!n.empty() && act_.insert(n).second) changed = true;
    };
    for (const Stmt& s : body) {
      switch (s.kind) {
        case Stmt::Kind::Call:
          for (const auto& a : s.call.args)
            if (active(a)) {
              mark(s.temp);
              for (const auto& t : s.more_temps) mark(t);
            }
          break;
        case Stmt::Kind::Arith:
          if (active(s.lhs) || (s.op != 'n' && active(s.rhs))) mark(s.temp);
          break;
        case Stmt::Kind::Assign:
          if (active(s.value)) mark(s.local);
          break;
        case Stmt::Kind::If:
          scan(s.then_body, changed);
          scan(s.else_body, changed);
          break;
        case Stmt::Kind::Loop:
          scan(s.body, changed);
          break;
        case Stmt::Kind::Verbatim:
        case Stmt::Kind::Return:
          break;
      }
    }
  }

  // ---- the transformation ------------------------------------------------------------------------
  void xform(const std::vector<Stmt>& in, std::vector<Stmt>& out) {
    for (const Stmt& s : in) {
      switch (s.kind) {
        case Stmt::Kind::Verbatim:
          out.push_back(s);
          break;
        case Stmt::Kind::If: {
          Stmt n = s;
          n.then_body.clear();
          n.else_body.clear();
          xform(s.then_body, n.then_body);
          xform(s.else_body, n.else_body);
          out.push_back(std::move(n));
          break;
        }
        case Stmt::Kind::Loop: {
          Stmt n = s;
          n.body.clear();
          xform(s.body, n.body);
          out.push_back(std::move(n));
          break;
        }
        case Stmt::Kind::Assign:
          assign(s, out);
          break;
        case Stmt::Kind::Arith:
          out.push_back(s);
          if (act_.count(s.temp) && !primal_.count(s.temp)) tan_[s.temp] = arith_tangent(s, out);
          break;
        case Stmt::Kind::Call:
          call(s, out);
          break;
        case Stmt::Kind::Return:
          ret(s, out);
          break;
      }
    }
  }

  void assign(const Stmt& s, std::vector<Stmt>& out) {
    out.push_back(s);
    if (!act_.count(s.local) || primal_.count(s.local)) return;
    if (s.declare) tan_local_[s.local] = fresh(s.local);
    auto it = tan_local_.find(s.local);
    if (it == tan_local_.end()) return error("local '" + s.local + "' is assigned before it is declared");
    Operand v;
    if (auto t = tangent(s.value)) {
      v = *t;
    } else if (s.declare && s.value.src == Operand::Src::Inactive &&
               (s.value.fwd_text == "llmcc::Tensor()" || s.value.fwd_text == "0.0f")) {
      v = s.value;  // declared empty, assigned later
    } else {
      v = zero(s.value, s.local_kind, out);
    }
    Stmt a;
    a.kind = Stmt::Kind::Assign;
    a.declare = s.declare;
    a.local = it->second;
    a.local_kind = s.local_kind;
    a.value = v;
    out.push_back(a);
    if (s.declare) j_.locals.push_back({a.local, a.local_kind});
  }

  // The results, then their tangents: (u) -> (u, u'); (u, u'v) -> ((u, u'v), (u'w, u''[v, w])).
  void ret(const Stmt& s, std::vector<Stmt>& out) {
    std::vector<Operand> values{s.value};
    values.insert(values.end(), s.more_values.begin(), s.more_values.end());
    std::vector<Operand> tangents;
    for (const Operand& v : values) {
      std::optional<Operand> t = tangent(v);
      if (!t && top_ && v.name == s.value.name) {
        error("the returned value does not depend on the arguments the tangent is taken along: it would be zero");
        t = literal("0.0f");
      }
      tangents.push_back(t ? *t : zero(v, f_.ret, out));
    }
    Stmt r = s;
    if (mode_ == Planner::TangentMode::Slope) {
      r.value = tangents[0];
    } else {
      r.more_values.assign(values.begin() + 1, values.end());
      r.more_values.insert(r.more_values.end(), tangents.begin(), tangents.end());
    }
    out.push_back(r);
  }

  Operand arith_tangent(const Stmt& s, std::vector<Stmt>& out) {
    const std::optional<Operand> ta = tangent(s.lhs);
    const std::optional<Operand> tb = s.op == 'n' ? std::nullopt : tangent(s.rhs);
    const Operand y = named(Operand::Src::Temp, VKind::Float, s.temp);
    switch (s.op) {
      case '+':
        return *sum(ta, tb, VKind::Float, out);
      case '-':
        if (ta && tb) return arith('-', *ta, *tb, out);
        if (ta) return *ta;
        return arith('n', *tb, Operand(), out);
      case '*': {
        std::optional<Operand> pa, pb;
        if (ta) pa = arith('*', *ta, s.rhs, out);
        if (tb) pb = arith('*', s.lhs, *tb, out);
        return *sum(pa, pb, VKind::Float, out);
      }
      case '/': {
        // (a / b)' = (a' - (a / b) b') / b, the quotient recomputed: a statement computing this
        // tangent does not read the value it is the tangent of (whose own tangent, in Taylor
        // mode, comes from that tangent's last statement).
        Operand num;
        if (tb) {
          const Operand q = arith('*', arith('/', s.lhs, s.rhs, out), *tb, out);
          num = ta ? arith('-', *ta, q, out) : arith('n', q, Operand(), out);
        } else {
          num = *ta;
        }
        return arith('/', num, s.rhs, out);
      }
      case 'n':
        return arith('n', *ta, Operand(), out);
    }
    return literal("0.0f");
  }

  void call(const Stmt& s, std::vector<Stmt>& out) {
    const Call& c = s.call;
    if (primal_.count(s.temp) && c.kind == Call::Kind::Func && c.results == 2) return taylor_call(s, out);
    if (!act_.count(s.temp) || primal_.count(s.temp)) {
      out.push_back(s);
      return;
    }
    if (c.kind == Call::Kind::Math) {
      out.push_back(s);
      tan_[s.temp] = math_tangent(s, out);
      return;
    }
    if (c.kind == Call::Kind::Rule) {
      out.push_back(s);
      tan_[s.temp] = rule_tangent(s, out);
      return;
    }
    const FuncPlan& g = *c.func;
    if (g.results > 2)
      return error("a call of " + g.source + " (a second derivative) on the tangent's path: adgen's forward mode " +
                   "goes to the second order");
    if (c.checkpoint) return error("a checkpointed call (" + g.source + ") on the tangent's path");
    if (g.ret != VKind::Tensor)
      return error("the call of " + g.source + ", which returns a float, on the tangent's path: return a Tensor");
    Stmt n = s;
    if (!call_tangent_plan(s, Planner::TangentMode::Dual, false, n)) return out.push_back(s);
    // The callee's results keep their temporaries; their tangents follow, in the same order.
    std::vector<std::string> results{s.temp};
    results.insert(results.end(), s.more_temps.begin(), s.more_temps.end());
    for (const auto& r : results) {
      n.more_temps.push_back("t" + std::to_string(temps_++));
      tan_[r] = named(Operand::Src::Temp, VKind::Tensor, n.more_temps.back());
    }
    out.push_back(std::move(n));
  }

  // Taylor mode, a call of a callee's jvp (value, tangent): the callee's Taylor plan gives the
  // same two and the tangent's tangent; the value's tangent is the tangent it already had.
  void taylor_call(const Stmt& s, std::vector<Stmt>& out) {
    Stmt n = s;
    if (!call_tangent_plan(s, Planner::TangentMode::Taylor, true, n)) return out.push_back(s);
    n.more_temps = {s.more_temps[0], "t" + std::to_string(temps_++), "t" + std::to_string(temps_++)};
    tan_[s.more_temps[0]] = named(Operand::Src::Temp, VKind::Tensor, n.more_temps[2]);
    out.push_back(std::move(n));
  }
  // The call statement s redirected into n: to the callee's tangent plan in `mode`, along the
  // arguments that carry a tangent (in Taylor mode, of those, the ones that are not primal values,
  // whose tangents the callee computes), with those tangents appended as arguments.
  bool call_tangent_plan(const Stmt& s, Planner::TangentMode mode, bool skip_primal, Stmt& n) {
    const Call& c = s.call;
    const FuncPlan& g = *c.func;
    std::vector<bool> mask(c.args.size(), false);
    for (std::size_t i = 0; i < c.args.size(); ++i)
      mask[i] = !g.params[i].is_module && g.params[i].kind != VKind::Inactive && active(c.args[i]) &&
                !(skip_primal && primal_operand(c.args[i]));
    FuncPlan* tj = p_.tangent_plan(g, mask, mode, "", loc_, false);
    if (tj == nullptr) {
      ok_ = false;
      return false;
    }
    n.call.func = tj;
    n.call.results = tj->results;
    n.call.module_args.resize(c.args.size());
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      if (!mask[i]) continue;
      n.call.args.push_back(*tangent(c.args[i]));
      n.call.module_args.emplace_back();
    }
    return true;
  }
  bool primal_operand(const Operand& o) const {
    return (o.src == Operand::Src::Param || o.src == Operand::Src::Local || o.src == Operand::Src::Temp) &&
           primal_.count(o.name) > 0;
  }

  Operand math_tangent(const Stmt& s, std::vector<Stmt>& out) {
    const Call& c = s.call;
    std::string n = c.name;
    if (n.rfind("std::", 0) == 0) n = n.substr(5);
    if (!n.empty() && n.back() == 'f' && n != "erf") n.pop_back();  // expf -> exp
    const Operand& a = c.args[0];
    const std::optional<Operand> ta = tangent(a);
    const Operand y = named(Operand::Src::Temp, VKind::Float, s.temp);
    const std::string sfx = c.name.back() == 'f' ? "f" : "";
    if (n == "pow") {
      const Operand& e = c.args[1];
      const std::optional<Operand> te = tangent(e);
      std::optional<Operand> pa, pe;
      if (ta) {
        const Operand em1 = arith('-', e, literal("1.0f"), out);
        pa = arith('*', arith('*', e, math(c.name, {a, em1}, out), out), *ta, out);
      }
      if (te) pe = arith('*', arith('*', math(c.name, {a, e}, out), math("log" + sfx, {a}, out), out), *te, out);
      return *sum(pa, pe, VKind::Float, out);
    }
    if (!ta) return literal("0.0f");
    if (n == "exp") return arith('*', y, *ta, out);
    if (n == "tanh") {
      const Operand again = math(c.name, {a}, out);  // tanh(a) again: see '/' in arith_tangent
      return arith('*', arith('-', literal("1.0f"), arith('*', again, again, out), out), *ta, out);
    }
    if (n == "log") return arith('/', *ta, a, out);
    if (n == "sqrt") return arith('/', arith('*', literal("0.5f"), *ta, out), y, out);
    if (n == "sin") return arith('*', math("cos" + sfx, {a}, out), *ta, out);
    if (n == "cos") return arith('n', arith('*', math("sin" + sfx, {a}, out), *ta, out), Operand(), out);
    error("no tangent rule for '" + c.name + "' (exp, tanh, log, sqrt, sin, cos and pow have one)");
    return literal("0.0f");
  }

  Operand rule_tangent(const Stmt& s, std::vector<Stmt>& out) {
    const Call& c = s.call;
    const Operand y = named(Operand::Src::Temp, VKind::Tensor, s.temp);
    auto t = [&](std::size_t i) { return i < c.args.size() ? tangent(c.args[i]) : std::nullopt; };
    const std::string n = c.name.rfind("llmcc::", 0) == 0 ? c.name.substr(7) : c.name;
    const FuncPlan* scalar = c.scalar;
    if (n == "silu" || n == "gelu") {
      // Through the activation's scalar form (llmcc::adgen::<op>_scalar), as map_unary.
      const FunctionDecl* fd = p_.library_function("adgen::" + n + "_scalar", 1);
      scalar = fd != nullptr && fd->getDefinition() != nullptr ? p_.plan_function(fd->getDefinition(), loc_) : nullptr;
      if (scalar == nullptr) {
        error("the tangent of '" + c.name + "' needs llmcc::adgen::" + n + "_scalar (llmcc/adgen.h)");
        return literal("0.0f");
      }
    }
    if (scalar != nullptr) {
      // map_unary<f>(x): x' * f'(x), with f' a generated scalar function (differentiable too).
      FuncPlan* slope = p_.tangent_plan(*scalar, {true}, Planner::TangentMode::Slope, "", loc_, false);
      if (slope == nullptr) {
        ok_ = false;
        return literal("0.0f");
      }
      Call m;
      m.kind = Call::Kind::Rule;
      m.ret = VKind::Tensor;
      m.name = "llmcc::adgen::map_unary<" + slope->id + ">";
      m.pullback = "llmcc::adgen::map_unary_pullback<" + slope->id + "_grad>";
      m.adjoint_of = {1, 0};
      m.scalar = slope;
      m.args = {c.args[0], literal("\"" + slope->id + "\"")};
      const Operand d = push(std::move(m), out);
      return rule("mul", {*t(0), d}, out);
    }
    if (n == "add" || n == "sub") {
      // A broadcast operand's tangent has its shape, not the output's: alone, it is broadcast by
      // adding it to (or subtracting it from) a zero of the output's shape.
      const auto ta = t(0), tb = t(1);
      if (ta && tb) return rule(n, {*ta, *tb}, out);
      const Operand z = zero(y, VKind::Tensor, out);
      return ta ? rule("add", {z, *ta}, out) : rule(n, {z, *tb}, out);
    }
    if (n == "neg") return rule("neg", {*t(0)}, out);
    if (n == "rsub") {
      const auto ts = t(0), tx = t(1);
      if (ts && tx) return rule("rsub", {*ts, *tx}, out);
      if (tx) return rule("neg", {*tx}, out);
      return rule("rsub", {*ts, zero(y, VKind::Tensor, out)}, out);
    }
    if (n == "mul") {
      std::optional<Operand> pa, pb;
      if (auto ta = t(0)) pa = rule("mul", {*ta, c.args[1]}, out);
      if (auto tb = t(1)) pb = rule("mul", {c.args[0], *tb}, out);
      return *sum(pa, pb, VKind::Tensor, out);
    }
    if (n == "scale" && is_literal(c.args[1], "0.0f")) return y;  // a zero's tangent is a zero (itself)
    if (n == "scale") {
      std::optional<Operand> px, ps;
      if (auto tx = t(0)) px = rule("scale", {*tx, c.args[1]}, out);
      if (auto ts = t(1)) ps = rule("scale", {c.args[0], *ts}, out);
      return *sum(px, ps, VKind::Tensor, out);
    }
    if (n == "linear" || n == "linear_nobias") {
      std::optional<Operand> px, pw;
      if (auto tx = t(0)) px = rule("linear_nobias", {*tx, c.args[1]}, out);
      if (auto tw = t(1)) pw = rule("linear_nobias", {c.args[0], *tw}, out);
      std::optional<Operand> p = sum(px, pw, VKind::Tensor, out);
      if (n == "linear")
        if (auto tb = t(2)) p = rule("add", {p ? *p : zero(y, VKind::Tensor, out), *tb}, out);
      return *p;
    }
    if (n == "tanh") return rule("tanh_tangent", {y, *t(0)}, out);  // x' (1 - y^2), one pass
    if (n == "tanh_tangent") {
      // t (1 - y^2) along (y', t'): t' (1 - y^2) - 2 y y' t, one pass when both move.
      const auto ty = t(0), tt = t(1);
      if (ty && tt) return rule("tanh_tangent2", {c.args[0], c.args[1], *ty, *tt}, out);
      if (tt) return rule("tanh_tangent", {c.args[0], *tt}, out);
      return rule("mul", {*ty, rule("scale", {rule("mul", {c.args[0], c.args[1]}, out), literal("-2.0f")}, out)}, out);
    }
    if (n == "mse_loss") {
      // (2 / N) sum (p - t)(p' - t'); a difference with one side still gets a zero for the other.
      const auto tp = t(0), tt = t(1);
      return rule(
          "mse_loss_tangent",
          {c.args[0], c.args[1], tp ? *tp : zero(*tt, VKind::Tensor, out), tt ? *tt : zero(*tp, VKind::Tensor, out)},
          out, VKind::Float);
    }
    if (n == "mse_loss_tangent") {
      // Bilinear in (p - t) and (tp - tt): the tangent is the sum of the form with each pair moved.
      std::optional<Operand> first, second;
      const auto a = t(0), b = t(1), c2 = t(2), d = t(3);
      if (a || b)
        first =
            rule("mse_loss_tangent",
                 {a ? *a : zero(*b, VKind::Tensor, out), b ? *b : zero(*a, VKind::Tensor, out), c.args[2], c.args[3]},
                 out, VKind::Float);
      if (c2 || d)
        second = rule(
            "mse_loss_tangent",
            {c.args[0], c.args[1], c2 ? *c2 : zero(*d, VKind::Tensor, out), d ? *d : zero(*c2, VKind::Tensor, out)},
            out, VKind::Float);
      return *sum(first, second, VKind::Float, out);
    }
    if (n == "attention") {
      const auto tq = t(0), tk = t(1), tv = t(2);
      const Operand &q = c.args[0], &k = c.args[1], &v = c.args[2];
      return rule("attention_tangent",
                  {q, k, v, tq ? *tq : zero(q, VKind::Tensor, out), tk ? *tk : zero(k, VKind::Tensor, out),
                   tv ? *tv : zero(v, VKind::Tensor, out), c.args[3], c.args[4]},
                  out);
    }
    if (n == "attention_qkv") return rule("attention_qkv_tangent", {c.args[0], *t(0), c.args[1], c.args[2]}, out);
    if (n == "attention_tangent" || n == "attention_qkv_tangent" || n == "cross_entropy_tangent") {
      const std::string op = n.rfind("attention", 0) == 0 ? "attention" : "cross_entropy";
      error("a second derivative of " + op + ": forward mode takes " + op + " to the first order (its tangent, " + n +
            ", has a pullback but no tangent rule)");
      return literal("0.0f");
    }
    if (n == "cross_entropy")
      return rule("cross_entropy_tangent", {c.args[0], c.args[1], c.args[2], c.args[3], *t(0)}, out, VKind::Float);
    if (n == "view") return rule("view", {*t(0), c.args[1], c.args[2]}, out);
    if (n == "mean_pool") return rule("mean_pool", {*t(0)}, out);
    if (n == "row_mean") return rule("row_mean", {*t(0)}, out);
    // Linear in the argument that carries the tangent: the same call with the tangent in its place.
    if (n == "rope") return same_op(c, {{0, *t(0)}}, out);
    if (n == "token_embedding") return same_op(c, {{1, *t(1)}}, out);
    if (n == "token_position_embedding") {
      const auto te = t(1), tp = t(2);
      return same_op(
          c, {{1, te ? *te : zero(c.args[1], VKind::Tensor, out)}, {2, tp ? *tp : zero(c.args[2], VKind::Tensor, out)}},
          out);
    }
    if (n == "rmsnorm") return rmsnorm_tangent(c.args[0], c.args[1], c.args[2], t(0), t(1), out);
    if (n == "layernorm") return layernorm_tangent(c.args[0], c.args[1], t(0), t(1), t(2), y, out);
    error("no tangent rule for '" + c.name +
          "' (add, sub, neg, rsub, mul, scale, linear, linear_nobias, tanh, gelu, silu, view, mean_pool, row_mean, "
          "rmsnorm, layernorm, rope, token_embedding, token_position_embedding, attention, attention_qkv, mse_loss, "
          "cross_entropy and map_unary have one)");
    return literal("0.0f");
  }

  // The call c again with some arguments replaced (index, operand).
  Operand same_op(const Call& c, const std::vector<std::pair<std::size_t, Operand>>& with, std::vector<Stmt>& out) {
    Call m = c;
    for (const auto& [i, o] : with) m.args[i] = o;
    return push(std::move(m), out);
  }

  // The norms' tangents are compositions of ops that have tangent rules themselves (row_mean,
  // mul and sub with a column broadcast, map_unary of a scalar function), so a tangent of a tangent
  // needs nothing more. With r = 1 / sqrt(mean(xc^2) + eps) per row:
  //   (xc r)' = xc' r - xc r^3 mean(xc xc'),
  // rmsnorm: xc = x; layernorm: xc = x - mean(x), xc' = x' - mean(x').

  // 1 / sqrt(m + eps), element-wise, through llmcc::adgen::rsqrt_scalar.
  Operand rsqrt_plus(const Operand& m, const Operand& eps, std::vector<Stmt>& out) {
    const Operand v = rule("rsub", {eps, rule("neg", {m}, out)}, out);  // eps - (-m)
    const FunctionDecl* fd = p_.library_function("adgen::rsqrt_scalar", 1);
    FuncPlan* g =
        fd != nullptr && fd->getDefinition() != nullptr ? p_.plan_function(fd->getDefinition(), loc_) : nullptr;
    if (g == nullptr) {
      error("the tangent of a norm needs llmcc::adgen::rsqrt_scalar (llmcc/adgen.h)");
      return literal("0.0f");
    }
    g->entry = true;  // its _grad is the pullback's derivative
    Call m2;
    m2.kind = Call::Kind::Rule;
    m2.ret = VKind::Tensor;
    m2.name = "llmcc::adgen::map_unary<llmcc::adgen::rsqrt_scalar>";
    m2.pullback = "llmcc::adgen::map_unary_pullback<" + g->id + "_grad>";
    m2.adjoint_of = {1, 0};
    m2.scalar = g;
    m2.args = {v, literal("\"rsqrt\"")};
    return push(std::move(m2), out);
  }
  // (xc r)' for a centred (or raw) xc and its tangent txc; r = rsqrt_plus(mean(xc^2), eps).
  Operand normalized_tangent(const Operand& xc, const Operand& txc, const Operand& r, std::vector<Stmt>& out) {
    const Operand d = rule("row_mean", {rule("mul", {xc, txc}, out)}, out);                      // (..., 1)
    const Operand r3d = rule("mul", {rule("mul", {rule("mul", {r, r}, out), r}, out), d}, out);  // (..., 1)
    return rule("sub", {rule("mul", {txc, r}, out), rule("mul", {xc, r3d}, out)}, out);
  }
  Operand rmsnorm_tangent(const Operand& x, const Operand& w, const Operand& eps, const std::optional<Operand>& tx,
                          const std::optional<Operand>& tw, std::vector<Stmt>& out) {
    std::optional<Operand> px, pw;
    if (tx) {
      const Operand r = rsqrt_plus(rule("row_mean", {rule("mul", {x, x}, out)}, out), eps, out);
      px = rule("mul", {normalized_tangent(x, *tx, r, out), w}, out);
    }
    if (tw) pw = rule("rmsnorm", {x, *tw, eps}, out);  // x r w'
    return *sum(px, pw, VKind::Tensor, out);
  }
  Operand layernorm_tangent(const Operand& x, const Operand& w, const std::optional<Operand>& tx,
                            const std::optional<Operand>& tw, const std::optional<Operand>& tb, const Operand& y,
                            std::vector<Stmt>& out) {
    std::optional<Operand> px, pw, pb;
    if (tx || tw) {
      const Operand xc = rule("sub", {x, rule("row_mean", {x}, out)}, out);
      const Operand r = rsqrt_plus(rule("row_mean", {rule("mul", {xc, xc}, out)}, out), literal("1e-5f"), out);
      if (tx) {
        const Operand txc = rule("sub", {*tx, rule("row_mean", {*tx}, out)}, out);
        px = rule("mul", {normalized_tangent(xc, txc, r, out), w}, out);
      }
      if (tw) pw = rule("mul", {rule("mul", {xc, r}, out), *tw}, out);
    }
    if (tb) pb = rule("add", {zero(y, VKind::Tensor, out), *tb}, out);
    return *sum(sum(px, pw, VKind::Tensor, out), pb, VKind::Tensor, out);
  }

  Planner& p_;
  const FuncPlan& f_;
  FuncPlan& j_;
  Planner::TangentMode mode_;
  SourceLocation loc_;
  bool top_;
  int temps_;
  bool ok_ = true;
  std::set<std::string> act_;                     // names whose value carries a tangent
  std::set<std::string> primal_;                  // Taylor mode: f's primal values (tangents known)
  std::map<std::string, Operand> tan_;            // tangent of a parameter or temporary
  std::map<std::string, std::string> tan_local_;  // tangent local of a local
};

// `name` ("mul", "adgen::silu_scalar") in namespace llmcc, with `params` parameters, or null.
const FunctionDecl* Planner::library_function(const std::string& name, std::size_t params) {
  const DeclContext* dc = ctx_.getTranslationUnitDecl();
  std::string rest = "llmcc::" + name;
  for (std::size_t sep; (sep = rest.find("::")) != std::string::npos; rest = rest.substr(sep + 2)) {
    const NamespaceDecl* next = nullptr;
    for (const NamedDecl* nd : dc->lookup(DeclarationName(&ctx_.Idents.get(rest.substr(0, sep)))))
      if ((next = dyn_cast<NamespaceDecl>(nd)) != nullptr) break;
    if (next == nullptr) return nullptr;
    dc = next;
  }
  for (const NamedDecl* d : dc->lookup(DeclarationName(&ctx_.Idents.get(rest))))
    if (const auto* fd = dyn_cast<FunctionDecl>(d); fd != nullptr && fd->getNumParams() == params) return fd;
  return nullptr;
}

FuncPlan* Planner::tangent_plan(const FuncPlan& f, const std::vector<bool>& mask, TangentMode mode,
                                const std::string& id, SourceLocation loc, bool top) {
  const auto key = std::make_tuple(&f, mask, static_cast<int>(mode));
  if (auto it = tangents_.find(key); it != tangents_.end()) return it->second;
  tangents_[key] = nullptr;  // a function on its own tangent's path is recursion, reported there
  if (f.results > 2) {
    diag_.error(loc, "forward mode goes to the second order: the tangent of " + f.source + " would be a third one");
    return nullptr;
  }
  auto owned = std::make_unique<FuncPlan>();
  FuncPlan* j = owned.get();
  j->id = !id.empty() ? id
                      : f.id + (mode == TangentMode::Slope    ? "_slope"
                                : mode == TangentMode::Taylor ? "_taylor"
                                                              : "_jvp");
  if (id.empty() && mode == TangentMode::Dual && std::find(mask.begin(), mask.end(), false) != mask.end()) {
    // Tangents for some arguments only: the id says which ("_jvp_1_3": arguments 1 and 3).
    for (std::size_t i = 0; i < mask.size(); ++i)
      if (mask[i] && !f.params[i].is_module && f.params[i].kind != VKind::Inactive) j->id += "_" + std::to_string(i);
  }
  for (std::string base = j->id; func_ids_.count(j->id);) j->id = base + "_" + std::to_string(func_ids_.size());
  func_ids_.insert(j->id);
  j->primal = f.primal;
  j->is_method = f.is_method;
  j->self_type = f.self_type;
  j->self_grad_type = f.self_grad_type;
  j->params = f.params;
  j->ret = f.ret;
  j->ret_type = f.ret_type;
  j->locals = f.locals;
  j->source = std::string(mode == TangentMode::Slope    ? "the slope of "
                          : mode == TangentMode::Taylor ? "the tangent along its own direction of "
                                                        : "the tangent of ") +
              f.source;
  j->used_names = f.used_names;
  j->results = mode == TangentMode::Dual ? 2 * f.results : mode == TangentMode::Taylor ? 4 : 1;
  j->jvp_of = &f;
  j->base = mode == TangentMode::Slope ? nullptr : f.base;  // a slope returns no value
  j->tangent_param.assign(f.params.size(), -1);
  if (mode == TangentMode::Taylor && (f.results != 2 || f.jvp_of == nullptr)) {
    diag_.error(loc, "internal: the Taylor mode of " + f.source + ", which is not a jvp");
    return nullptr;
  }
  TangentBuilder b(*this, f, *j, mode, loc, top);
  if (!b.run(mask)) return nullptr;
  if (mode == TangentMode::Slope) {
    // `float f_slope(float x)`, the derivative map_unary's pullback of the tangent needs.
    j->entry = true;
    j->primal_decl = "float " + j->id + "(" + j->params[0].type + " " + j->params[0].name + ")";
  }
  tangents_[key] = j;
  program_.funcs.push_back(std::move(owned));
  return j;
}

std::string Planner::jvp_target(const FunctionDecl* f) {
  for (const Decl* r : f->redecls())
    for (const auto* a : r->specific_attrs<AnnotateAttr>())
      if (a->getAnnotation().starts_with("llmcc.adgen.jvp:")) {
        const std::string spec = a->getAnnotation().substr(16).str();
        return spec.substr(0, spec.find('|'));
      }
  return "";
}

namespace {
// g = the jvp (along w) of f = the jvp (along v) of f0: the pairs (v, w) of g's parameters when g
// moves exactly the arguments of f0 that f moves, and none of f's directions; given the same
// tensor (or float) as each pair, g's results are f's Taylor plan's (value, first and second
// derivative along v). Empty otherwise: a g that moves fewer arguments than f (or other ones)
// takes a second derivative along another direction than v.
std::vector<std::pair<int, int>> taylor_pairs(const FuncPlan& g) {
  const FuncPlan* f = g.jvp_of;
  if (g.results != 4 || f == nullptr || f->results != 2 || f->jvp_of == nullptr) return {};
  const std::size_t n0 = f->jvp_of->params.size();
  std::vector<std::pair<int, int>> pairs;
  for (std::size_t i = 0; i < f->params.size(); ++i) {
    const int w = g.tangent_param[i];
    const int v = i < n0 ? f->tangent_param[i] : -1;
    if ((v >= 0) != (w >= 0)) return {};
    if (v >= 0) pairs.emplace_back(v, w);
  }
  return pairs;
}

// LLMCC_ADGEN_JVP_WRT's names ("x, y"), empty for LLMCC_ADGEN_JVP (every Tensor and float).
std::vector<std::string> jvp_wrt(const FunctionDecl* f) {
  std::vector<std::string> names;
  for (const Decl* r : f->redecls())
    for (const auto* a : r->specific_attrs<AnnotateAttr>()) {
      const std::string spec = a->getAnnotation().str();
      if (spec.rfind("llmcc.adgen.jvp:", 0) != 0 || spec.find('|') == std::string::npos) continue;
      std::string list = spec.substr(spec.find('|') + 1);
      for (std::size_t pos = 0; pos <= list.size();) {
        std::size_t end = std::min(list.find(',', pos), list.size());
        std::string n = list.substr(pos, end - pos);
        n.erase(0, n.find_first_not_of(' '));
        n.erase(n.find_last_not_of(' ') + 1);
        if (!n.empty()) names.push_back(n);
        pos = end + 1;
      }
    }
  return names;
}
}  // namespace

FuncPlan* Planner::plan_jvp(const FunctionDecl* decl, SourceLocation use) {
  decl = decl->getCanonicalDecl();
  if (auto it = jvps_.find(decl); it != jvps_.end()) {
    if (it->second == nullptr && in_jvp_.count(decl))
      diag_.error(use, "'" + decl->getNameAsString() + "' is the jvp of itself");
    return it->second;
  }
  jvps_[decl] = nullptr;  // reported once
  in_jvp_.insert(decl);
  FuncPlan* j = plan_jvp_uncached(decl);
  in_jvp_.erase(decl);
  jvps_[decl] = j;
  return j;
}

FuncPlan* Planner::plan_jvp_uncached(const FunctionDecl* decl) {
  const std::string name = decl->getNameAsString();
  const std::string target = jvp_target(decl);
  const std::vector<std::string> wrt = jvp_wrt(decl);
  const SourceLocation at = decl->getLocation();
  const std::string marker = "LLMCC_ADGEN_JVP(\"" + target + "\") on '" + name + "'";
  for (const FunctionDecl* r : decl->redecls())
    if (r->doesThisDeclarationHaveABody()) {
      diag_.error(r->getLocation(), "'" + name + "' is marked LLMCC_ADGEN_JVP and has a body: adgen defines it");
      return nullptr;
    }
  if (const auto* md = dyn_cast<CXXMethodDecl>(decl); md != nullptr && !md->isStatic()) {
    diag_.error(at, "LLMCC_ADGEN_JVP on the member function '" + name +
                        "': declare the jvp as a free function (taking the module as its first argument)");
    return nullptr;
  }
  // The target: a free function in the same scope with a body, or declared LLMCC_ADGEN_JVP itself
  // (a second derivative), whose parameters are the declaration's first ones; the declaration
  // adds one tangent per Tensor or float parameter (or per one named in LLMCC_ADGEN_JVP_WRT).
  const FunctionDecl* def = nullptr;
  std::string expected;
  std::vector<bool> mask;
  for (const NamedDecl* nd : decl->getDeclContext()->getRedeclContext()->lookup(&ctx_.Idents.get(target))) {
    const auto* fd = dyn_cast<FunctionDecl>(nd);
    if (fd == nullptr) continue;
    const bool is_jvp = !jvp_target(fd).empty();
    if (!is_jvp) {
      if (fd->getDefinition() == nullptr) continue;
      fd = fd->getDefinition();
    }
    std::vector<QualType> want;
    std::vector<bool> m;
    std::string sig;
    for (const ParmVarDecl* p : fd->parameters()) {
      want.push_back(p->getType());
      sig += (sig.empty() ? "" : ", ") + rules_.type_name(p->getType()) + " " + p->getNameAsString();
    }
    for (const ParmVarDecl* p : fd->parameters()) {
      const bool carrier = act_.is_tensor(p->getType()) || act_.is_float(p->getType());
      const bool named = wrt.empty() || std::find(wrt.begin(), wrt.end(), p->getNameAsString()) != wrt.end();
      m.push_back(carrier && named);
      if (!m.back()) continue;
      want.push_back(act_.is_tensor(p->getType()) ? p->getType() : ctx_.FloatTy);
      sig += ", " + std::string(act_.is_tensor(p->getType()) ? "const llmcc::Tensor& " : "float ") +
             p->getNameAsString() + "_tangent";
    }
    const std::string ret = is_jvp ? "llmcc::adgen::Dual2" : "llmcc::adgen::Dual";
    expected = ret + " " + name + "(" + sig + ")";
    bool match = want.size() == decl->getNumParams();
    for (std::size_t i = 0; match && i < want.size(); ++i) {
      const QualType have = decl->getParamDecl(static_cast<unsigned>(i))->getType();
      match = i < fd->getNumParams() ? ctx_.hasSameType(have, want[i])
                                     : Activity::bare(have) == Activity::bare(want[i]) &&
                                           (!have->isReferenceType() || have.getNonReferenceType().isConstQualified());
    }
    for (const std::string& w : wrt) {
      bool found = false;
      for (const ParmVarDecl* p : fd->parameters())
        found = found || (p->getNameAsString() == w && (act_.is_tensor(p->getType()) || act_.is_float(p->getType())));
      if (!found) {
        diag_.error(at, marker + ": '" + w + "' is not a Tensor or float parameter of '" + target + "'");
        return nullptr;
      }
    }
    if (match) {
      const auto* rd = Activity::bare(decl->getReturnType())->getAsCXXRecordDecl();
      if (rd == nullptr || "llmcc::adgen::" + rd->getNameAsString() != ret || !act_.is_dual(decl->getReturnType())) {
        diag_.error(at, marker + ": the declaration must return " + ret + " (`" + expected + "`)");
        return nullptr;
      }
      def = fd;
      mask = m;
      break;
    }
  }
  if (def == nullptr) {
    diag_.error(at, expected.empty() ? marker + ": no function '" + target + "' with a body in the same scope"
                                     : marker + ": the declaration must be `" + expected + "`");
    return nullptr;
  }
  FuncPlan* f = nullptr;
  if (!jvp_target(def).empty()) {
    f = plan_jvp(def, at);
  } else {
    if (!act_.is_tensor(def->getReturnType())) {
      diag_.error(at, marker + ": '" + target + "' returns '" + def->getReturnType().getAsString() +
                          "'; a jvp is taken of a function returning a Tensor");
      return nullptr;
    }
    f = plan_function(def, at);
  }
  if (f == nullptr) return nullptr;
  need_file(decl);
  FuncPlan* j = tangent_plan(*f, mask, TangentMode::Dual, name, at, true);
  if (j == nullptr) return nullptr;
  std::string params;
  for (unsigned i = 0; i < decl->getNumParams(); ++i)
    params += (i ? ", " : "") + rules_.type_name(decl->getParamDecl(i)->getType()) + " " + j->params[i].name;
  j->primal_decls.push_back(rules_.type_name(Activity::bare(decl->getReturnType())) + " " +
                            decl->getQualifiedNameAsString() + "(" + params + ")");
  // Called with the same tensors as both directions (u_xx), the plain definition of a jvp of a
  // jvp takes the Taylor plan (three streams instead of four).
  if (j->taylor_alt == nullptr) {
    if (std::vector<std::pair<int, int>> same = taylor_pairs(*j); !same.empty()) {
      j->taylor_alt = tangent_plan(*f, std::vector<bool>(f->params.size(), false), TangentMode::Taylor, "", at, false);
      j->taylor_same = std::move(same);
    }
  }
  return j;
}

// ---- specialisation on repeated arguments, then common subexpressions -------------------------

namespace {

void for_each_operand(std::vector<Stmt>& body, const std::function<void(Operand&)>& f) {
  for (Stmt& s : body) {
    for (auto& a : s.call.args) f(a);
    f(s.lhs);
    f(s.rhs);
    f(s.value);
    for (auto& v : s.more_values) f(v);
    for_each_operand(s.then_body, f);
    for_each_operand(s.else_body, f);
    for_each_operand(s.body, f);
  }
}

// Whether inactive text of the body (copied statements, inactive operands) reads `name`.
bool text_reads(std::vector<Stmt>& body, const std::string& name) {
  auto reads = [&](const std::string& text) {
    for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
      const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      const bool left = at == 0 || !word(text[at - 1]);
      const bool right = at + name.size() >= text.size() || !word(text[at + name.size()]);
      if (left && right) return true;
    }
    return false;
  };
  bool found = false;
  for_each_operand(body, [&](Operand& o) {
    if (o.src == Operand::Src::Inactive) found = found || reads(o.fwd_text) || reads(o.rev_text);
  });
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& b) {
    for (const Stmt& s : b) {
      if (s.kind == Stmt::Kind::Verbatim) found = found || reads(s.text);
      if (s.kind == Stmt::Kind::If) found = found || reads(s.cond);
      if (s.kind == Stmt::Kind::Loop) found = found || reads(s.header);
      walk(s.then_body);
      walk(s.else_body);
      walk(s.body);
    }
  };
  walk(body);
  return found;
}

std::string same_value(const Operand& o) {
  switch (o.src) {
    case Operand::Src::Param:
    case Operand::Src::Local:
    case Operand::Src::Temp:
      return std::to_string(static_cast<int>(o.src)) + ":" + o.name;
    case Operand::Src::Field:
      return "f:" + o.mod.primal() + "." + o.field;
    case Operand::Src::Inactive:
      return "";
  }
  return "";
}

}  // namespace

// A copy of g in which parameter j reads parameter alias[j] (for alias[j] >= 0) and is gone: a
// jvp of a jvp called with the same direction twice, whose repeated statements CSE then removes.
FuncPlan* Planner::specialized(const FuncPlan& g, const std::vector<int>& alias) {
  const auto key = std::make_pair(&g, alias);
  if (auto it = specials_.find(key); it != specials_.end()) return it->second;
  auto owned = std::make_unique<FuncPlan>(g);
  FuncPlan* f = owned.get();
  f->primal_decl.clear();
  f->primal_decls.clear();
  f->entry = false;
  f->base = nullptr;  // its parameters are no longer the function's
  std::string suffix = "_same";
  for (std::size_t j = 0; j < alias.size(); ++j)
    if (alias[j] >= 0) suffix += "_" + std::to_string(j);
  f->id = g.id + suffix;
  for (std::string base = f->id; func_ids_.count(f->id);) f->id = base + "_" + std::to_string(func_ids_.size());
  func_ids_.insert(f->id);
  for (std::size_t j = 0; j < alias.size(); ++j) {
    if (alias[j] < 0) continue;
    const std::string from = g.params[j].name, to = g.params[static_cast<std::size_t>(alias[j])].name;
    for_each_operand(f->body, [&](Operand& o) {
      if (o.src == Operand::Src::Param && o.name == from) o.name = to;
    });
  }
  for (std::size_t j = alias.size(); j-- > 0;)
    if (alias[j] >= 0) f->params.erase(f->params.begin() + static_cast<long>(j));
  f->source = g.source + ", called with repeated arguments";
  specials_[key] = f;
  program_.funcs.push_back(std::move(owned));
  specialize_calls(*f);
  eliminate_common_subexpressions(*f);
  return f;
}

// g = the jvp (along w) of f = the jvp (along v) of f0, called with w = v for every argument
// that moves: the Taylor plan of f, or null.
FuncPlan* Planner::taylor_for(const FuncPlan& g, const std::vector<Operand>& args) {
  const std::vector<std::pair<int, int>> pairs = taylor_pairs(g);
  if (pairs.empty()) return nullptr;
  for (const auto& [v, w] : pairs) {
    const std::string a = same_value(args[static_cast<std::size_t>(v)]);
    if (a.empty() || a != same_value(args[static_cast<std::size_t>(w)])) return nullptr;
  }
  return tangent_plan(*g.jvp_of, std::vector<bool>(g.jvp_of->params.size(), false), TangentMode::Taylor, "",
                      SourceLocation(), false);
}

void Planner::specialize_calls(FuncPlan& f) {
  std::function<void(std::vector<Stmt>&)> walk = [&](std::vector<Stmt>& body) {
    for (Stmt& s : body) {
      walk(s.then_body);
      walk(s.else_body);
      walk(s.body);
      if (s.kind != Stmt::Kind::Call || s.call.kind != Call::Kind::Func || s.call.checkpoint) continue;
      const FuncPlan& g = *s.call.func;
      if (g.results < 2) continue;  // only jvps: user functions keep the calls as written
      if (FuncPlan* taylor = taylor_for(g, s.call.args)) {
        // The jvp of a jvp along the direction the inner one follows: its Taylor plan, which
        // takes the inner jvp's arguments only.
        s.call.args.resize(g.jvp_of->params.size());
        s.call.module_args.resize(std::min(s.call.module_args.size(), s.call.args.size()));
        s.call.func = taylor;
        continue;
      }
      std::vector<int> alias(s.call.args.size(), -1);
      bool any = false;
      for (std::size_t j = 0; j < alias.size(); ++j) {
        const Param& pj = g.params[j];
        if (pj.is_module || pj.kind == VKind::Inactive || same_value(s.call.args[j]).empty()) continue;
        for (std::size_t i = 0; i < j && alias[j] < 0; ++i) {
          const Param& pi = g.params[i];
          if (pi.is_module || pi.kind != pj.kind || alias[i] >= 0) continue;
          if (same_value(s.call.args[i]) == same_value(s.call.args[j])) alias[j] = static_cast<int>(i);
        }
        if (alias[j] >= 0) {
          // Inactive text naming the parameter would lose it: keep such calls as they are.
          std::vector<Stmt> body_copy = g.body;
          if (text_reads(body_copy, pj.name)) alias[j] = -1;
        }
        any = any || alias[j] >= 0;
      }
      if (!any) continue;
      FuncPlan* sp = specialized(g, alias);
      Call& c = s.call;
      for (std::size_t j = alias.size(); j-- > 0;) {
        if (alias[j] < 0) continue;
        c.args.erase(c.args.begin() + static_cast<long>(j));
        if (j < c.module_args.size()) c.module_args.erase(c.module_args.begin() + static_cast<long>(j));
      }
      c.func = sp;
    }
  };
  walk(f.body);
}

void Planner::finish() {
  // Calls of jvps with a repeated argument go to specialised copies; the plans adgen made lose
  // their repeated statements.
  for (std::size_t k = 0; k < program_.funcs.size(); ++k) specialize_calls(*program_.funcs[k]);
  // Calls that share a primal stream become one (merge.cpp); merged plans are appended, and their
  // own calls merge in turn.
  for (std::size_t k = 0; k < program_.funcs.size(); ++k) merge_calls(*program_.funcs[k]);
  for (const auto& [key, plan] : tangents_)
    if (plan != nullptr) eliminate_common_subexpressions(*plan);
  for (const auto& [key, plan] : merges_)
    if (plan != nullptr) eliminate_common_subexpressions(*plan);
  // Callees first (a caller's record holds its callees'): a depth-first order over the calls.
  std::vector<std::unique_ptr<FuncPlan>> sorted;
  std::map<const FuncPlan*, std::size_t> index;
  for (std::size_t k = 0; k < program_.funcs.size(); ++k) index[program_.funcs[k].get()] = k;
  std::vector<int> state(program_.funcs.size(), 0);
  std::function<void(std::size_t)> visit = [&](std::size_t k) {
    if (state[k] != 0) return;
    state[k] = 1;
    std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
      for (const Stmt& s : body) {
        if (s.kind == Stmt::Kind::Call && s.call.kind == Call::Kind::Func) visit(index.at(s.call.func));
        if (s.kind == Stmt::Kind::Call && s.call.scalar != nullptr) visit(index.at(s.call.scalar));
        walk(s.then_body);
        walk(s.else_body);
        walk(s.body);
      }
    };
    walk(program_.funcs[k]->body);
    state[k] = 2;
    sorted.push_back(std::move(program_.funcs[k]));
  };
  for (std::size_t k = 0; k < state.size(); ++k) visit(k);
  program_.funcs = std::move(sorted);
}

}  // namespace adgen
