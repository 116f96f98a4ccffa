// The reverse emitter. For each planned function it writes
//   Ret  F_fwd(params, F_Saved& _s)                       the primal, recording into _s
//   void F_bwd(params, const F_Saved& _s, d_out, adjoint pointers)   the reverse sweep
// Every value the backward reads lives in the Saved record (temps as `_s.t3`, snapshots of
// locals as `_s.x_3`, rule buffers, callee records, one record per loop iteration), so the
// backward never re-runs a forward unless a call is checkpointed.
#include "emitter.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace adgen {
namespace {

const char* kTensor = "llmcc::Tensor";

// Where result k of a jvp's return value is: a Dual's value and tangent, a Dual2's four tensors,
// a merged plan's array element.
std::string result_path(const FuncPlan& g, int k) {
  static const char* const kDual[] = {".value", ".tangent"};
  static const char* const kDual2[] = {".value.value", ".value.tangent", ".tangent.value", ".tangent.tangent"};
  if (g.tuple_results) return "[" + std::to_string(k) + "]";
  return g.results == 2 ? kDual[k] : kDual2[k];
}

// Whether `word` is used as a variable in `text`: as a whole identifier, not as a member or a
// qualified name (`_s.acc`, `p->acc`, `llmcc::adgen::acc`).
bool contains_word(const std::string& text, const std::string& word) {
  std::size_t pos = 0;
  auto is_id = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while ((pos = text.find(word, pos)) != std::string::npos) {
    const char before = pos == 0 ? ' ' : text[pos - 1];
    const bool left =
        !is_id(before) && before != '.' && before != ':' && !(before == '>' && pos >= 2 && text[pos - 2] == '-');
    const bool right = pos + word.size() >= text.size() || !is_id(text[pos + word.size()]);
    if (left && right) return true;
    pos += word.size();
  }
  return false;
}

// An operand's text ready to stand beside an operator: an inactive operand is source text
// (`1.0f + 0.5f * k`), so anything but a name, a member path or a number is parenthesised.
std::string operand(const std::string& text) {
  const bool simple = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
  return simple ? text : "(" + text + ")";
}

// Indented text.
class Out {
 public:
  void line(const std::string& s) {
    if (s.empty()) {
      text_ += "\n";
      return;
    }
    text_ += std::string(static_cast<std::size_t>(indent_) * 2, ' ') + s + "\n";
  }
  void open(const std::string& s) {
    line(s.empty() ? "{" : s + " {");
    ++indent_;
  }
  void close(const std::string& tail = "}") {
    --indent_;
    line(tail);
  }
  void raw(const std::string& s) { text_ += s; }
  void set_indent(int i) { indent_ = i; }
  int indent() const { return indent_; }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

// One Saved record (the function's, or one loop iteration's).
struct Record {
  std::string var;                                         // "_s", "_r0"
  std::string type;                                        // "Block_forward_Saved", "Loop0"
  std::vector<std::pair<std::string, std::string>> slots;  // (type, name)
  std::vector<std::string> visit;                          // lines of visit()
  std::vector<std::unique_ptr<Record>> nested;             // loop records
  std::set<std::string> used;

  // A member name from `base` (a user's local or field name), distinct from the others and from
  // the names the record's own code uses: visit, its parameter f, loop records r, types Loop<N>.
  std::string slot(const std::string& type_name, const std::string& base) {
    auto taken = [&](const std::string& n) {
      const bool loop_type =
          n.rfind("Loop", 0) == 0 && n.size() > 4 && n.find_first_not_of("0123456789", 4) == std::string::npos;
      return used.count(n) || n == "visit" || n == "f" || n == "r" || n == "F" || loop_type;
    };
    std::string name = base;
    for (int k = 2; taken(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    slots.push_back({type_name, name});
    return name;
  }
};

// Where the emitter put each statement's values.
struct StmtSlots {
  std::string out;                  // Call/Arith: the temp's slot
  std::string saved;                // Call: rule or callee record
  std::map<int, std::string> snap;  // Call/Arith: argument index -> snapshot slot
  std::string branch;               // If
  std::string loop;                 // Loop: vector slot
  std::string loop_var_slot;        // counted Loop
  Record* record = nullptr;         // Loop: the iteration record
};

// Whether f holds parameter gradients: a member function, or one with a module argument. Its
// backward then takes `bool _final` (see FinalPlan).
bool has_roots(const FuncPlan& f) {
  if (f.is_method) return true;
  for (const auto& p : f.params)
    if (p.is_module) return true;
  return false;
}

// ---- gradient-final notifications ------------------------------------------------------------
// A backward called with `_final` true is the last contribution to every gradient in its module
// arguments, so it tells llmcc::adgen::grad_final about each of them once, after its last
// contribution in this body. A path is a root (`self`, a module argument) and the fields and
// indices below it: {"self", ".h", "[_i0]", ".fc", ".w"}. Indices are compared as "any element",
// except for a vector whose elements are touched only by the loop that walks it, one element per
// iteration (the recognised loop over layers): there each element is final after its iteration.
using Path = std::vector<std::string>;

bool is_index(const std::string& e) { return !e.empty() && e[0] == '['; }

// Whether a and b may name overlapping gradients: one is a prefix of the other, indices matching
// any index.
bool overlap(const Path& a, const Path& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i] && !(is_index(a[i]) && is_index(b[i]))) return false;
  return true;
}

Path path_of(const ModPath& m) {
  Path p{m.root};
  p.insert(p.end(), m.elems.begin(), m.elems.end());
  return p;
}

// The gradient a path names, as a reference expression (`d_self->h[_i0]`, `*d_m`).
std::string grad_ref(const Path& p) {
  if (p.size() == 1) return "*d_" + p[0];
  std::string s;
  for (std::size_t i = 1; i < p.size(); ++i) s += p[i];
  if (s[0] == '.') s = s.substr(1);
  return "d_" + p[0] + "->" + s;
}
std::string notify_line(const Path& p) {
  return "if (_final && d_" + p[0] + ") llmcc::adgen::grad_final(" + grad_ref(p) + ");";
}

// Every gradient path a statement (with its nested bodies) contributes to: fields read by rules
// and pass-throughs, modules handed to callees.
void touches(const Stmt& s, std::vector<Path>& out) {
  auto field = [&](const Operand& op) {
    if (op.src != Operand::Src::Field) return;
    Path p = path_of(op.mod);
    p.push_back("." + op.field);
    out.push_back(p);
  };
  switch (s.kind) {
    case Stmt::Kind::Call:
      if (s.call.kind == Call::Kind::Func && s.call.has_object) out.push_back(path_of(s.call.object));
      for (const auto& m : s.call.module_args)
        if (!m.root.empty()) out.push_back(path_of(m));
      for (const auto& a : s.call.args) field(a);
      break;
    case Stmt::Kind::Arith:
      field(s.lhs);
      field(s.rhs);
      break;
    case Stmt::Kind::Assign:
    case Stmt::Kind::Return:
      field(s.value);
      break;
    case Stmt::Kind::If:
      for (const auto& b : s.then_body) touches(b, out);
      for (const auto& b : s.else_body) touches(b, out);
      break;
    case Stmt::Kind::Loop:
      for (const auto& b : s.body) touches(b, out);
      break;
    case Stmt::Kind::Verbatim:
      break;
  }
}

// The index a loop gives the elements of the vector it walks once each ("[_i0]" for a range-for,
// "[i]" for `for (int i = 0; i < v.size(); ++i)`), or "" when it is not such a loop over v.
std::string per_iteration_index(const Stmt& loop, const Path& v) {
  if (loop.kind != Stmt::Kind::Loop) return "";
  if (loop.range_over_modules) return path_of(loop.range) == v ? "[_i" + std::to_string(loop.id) + "]" : "";
  std::string vec = v[0];
  for (std::size_t k = 1; k < v.size(); ++k) vec += v[k];
  const std::string& i = loop.loop_var;
  const std::string head = "for (" + loop.loop_var_type + " " + i + " = 0; " + i + " < ";
  if (loop.header.rfind(head, 0) != 0) return "";
  for (const std::string& bound : {vec + ".size()", "static_cast<" + loop.loop_var_type + ">(" + vec + ".size())"})
    for (const std::string& step : {"; ++" + i + ")", "; " + i + "++)"})
      if (loop.header == head + bound + step) return "[" + i + "]";
  return "";
}

// Where a tracked backward notifies: after a statement (in whichever body holds it), in the
// branch that skips a callee whose adjoint never got a contribution, or at the end.
struct FinalPlan {
  std::map<const Stmt*, std::vector<std::string>> after;
  std::map<const Stmt*, std::vector<std::string>> skipped;  // callees passed `_final`
  std::vector<std::string> end;
};

FinalPlan plan_final(const Program& prog, const FuncPlan& f) {
  FinalPlan plan;
  struct Touch {
    Path path;
    std::size_t top;   // index in f.body
    std::size_t body;  // index in the body of the loop f.body[top], or npos
  };
  const std::size_t npos = static_cast<std::size_t>(-1);
  std::vector<Touch> all;
  for (std::size_t k = 0; k < f.body.size(); ++k) {
    std::vector<Path> ps;
    const Stmt& s = f.body[k];
    if (s.kind == Stmt::Kind::Loop) {
      for (std::size_t j = 0; j < s.body.size(); ++j) {
        ps.clear();
        touches(s.body[j], ps);
        for (auto& p : ps) all.push_back({p, k, j});
      }
    } else {
      touches(s, ps);
      for (auto& p : ps) all.push_back({p, k, npos});
    }
  }
  struct Unit {
    Path path;
    std::size_t loop = static_cast<std::size_t>(-1);  // per-iteration: the loop's index in f.body
  };
  std::vector<Unit> units;
  auto find_module = [&](const std::string& type) -> const ModulePlan* {
    for (const auto& m : prog.modules)
      if (m.type == type) return &m;
    return nullptr;
  };
  // A gradient is notified whole when a touch reaches all of it or none reaches it; otherwise its
  // fields are, a vector's elements only per iteration of the loop walking it (else it is whole).
  auto whole = [&](const Path& n) {
    for (const auto& t : all)
      if (t.path.size() <= n.size() && overlap(t.path, n)) return true;
    return false;
  };
  auto inside = [&](const Path& n) {
    for (const auto& t : all)
      if (t.path.size() > n.size() && overlap(t.path, n)) return true;
    return false;
  };
  std::function<void(const Path&, const ModulePlan*)> split = [&](const Path& n, const ModulePlan* m) {
    if (m == nullptr || whole(n) || !inside(n)) {
      units.push_back({n, npos});
      return;
    }
    for (const auto& fld : m->fields) {
      Path c = n;
      c.push_back("." + fld.name);
      if (fld.kind == ModuleField::Kind::Tensor) {
        units.push_back({c, npos});
      } else if (fld.kind == ModuleField::Kind::Module) {
        split(c, find_module(fld.type));
      } else if (whole(c) || !inside(c)) {
        units.push_back({c, npos});
      } else {
        std::size_t loop = npos;
        std::string index;
        bool ok = true;
        for (const auto& t : all) {
          if (!(t.path.size() > c.size() && overlap(t.path, c))) continue;
          if (t.body == npos || (loop != npos && t.top != loop)) {
            ok = false;
            break;
          }
          if (loop == npos) {
            loop = t.top;
            index = per_iteration_index(f.body[loop], c);
          }
          if (index.empty() || t.path[c.size()] != index) {
            ok = false;
            break;
          }
        }
        if (ok) {
          c.push_back(index);
          units.push_back({c, loop});
        } else {
          units.push_back({c, npos});
        }
      }
    }
  };
  if (f.is_method) split({"self"}, find_module(f.self_type));
  for (const auto& p : f.params)
    if (p.is_module) split({p.name}, find_module(p.module_type));

  // Each unit after its last contribution in the backward (the first in forward order).
  std::map<const Stmt*, std::vector<Path>> at;
  for (const auto& u : units) {
    const Stmt* point = nullptr;
    if (u.loop == npos) {
      for (const auto& t : all)  // in forward order
        if (overlap(t.path, u.path)) {
          point = &f.body[t.top];
          break;
        }
    } else {  // after the element's first touch in the loop body, in each iteration
      std::size_t j = npos;
      for (const auto& t : all)
        if (t.top == u.loop && overlap(t.path, u.path)) j = std::min(j, t.body);
      point = &f.body[u.loop].body[j];
    }
    if (point == nullptr)
      plan.end.push_back(notify_line(u.path));
    else
      at[point].push_back(u.path);
  }
  // A callee whose module arguments are exactly units final at its call, disjoint, and not also
  // reached through a tensor argument, is told `_final` and notifies them itself (finer, earlier);
  // the caller notifies them only when the call is skipped.
  for (auto& [stmt, paths] : at) {
    std::vector<Path> mods;
    bool pass = stmt->kind == Stmt::Kind::Call && stmt->call.kind == Call::Kind::Func;
    if (pass) {
      const Call& c = stmt->call;
      if (c.has_object) mods.push_back(path_of(c.object));
      for (const auto& m : c.module_args)
        if (!m.root.empty()) mods.push_back(path_of(m));
      for (std::size_t a = 0; a < mods.size() && pass; ++a) {
        pass = std::find(paths.begin(), paths.end(), mods[a]) != paths.end();
        for (std::size_t b = 0; b < a && pass; ++b) pass = !overlap(mods[a], mods[b]);
        for (const auto& arg : c.args) {
          if (arg.src != Operand::Src::Field) continue;
          Path fp = path_of(arg.mod);
          fp.push_back("." + arg.field);
          if (overlap(fp, mods[a])) pass = false;
        }
      }
      pass = pass && !mods.empty();
    }
    for (const auto& p : paths) {
      const bool by_callee = pass && std::find(mods.begin(), mods.end(), p) != mods.end();
      (by_callee ? plan.skipped[stmt] : plan.after[stmt]).push_back(notify_line(p));
    }
  }
  return plan;
}

class FuncEmitter {
 public:
  FuncEmitter(const Program& p, const FuncPlan& f) : prog_(p), f_(f) {
    root_.var = "_s";
    root_.type = f.id + "_Saved";
  }

  void run() {
    fwd_.set_indent(1);
    emit_fwd(f_.body, root_);
    bwd_body_.set_indent(1);
    if (has_roots(f_)) final_ = plan_final(prog_, f_);
    emit_bwd(f_.body, root_);
    for (const auto& l : final_.end) bwd_body_.line(l);
  }

  std::string saved_struct() const {
    Out o;
    write_record(o, root_, true);
    return o.str();
  }
  std::string fwd_signature(bool define) const {
    std::string s = ret_type() + " " + f_.id + "_fwd(" + primal_params(define ? &fwd_.str() : nullptr);
    s += (f_.params.empty() && !f_.is_method ? "" : ", ") + f_.id + "_Saved& _s)";
    return s;
  }
  std::string bwd_signature(bool define) const {
    const std::string* body = define ? &bwd_text_ : nullptr;
    std::string s = "void " + f_.id + "_bwd(" + primal_params(body);
    s += (f_.params.empty() && !f_.is_method ? "" : ", ");
    s += "const " + f_.id + "_Saved& " + name_if_used("_s", body);
    s += f_.ret == VKind::Tensor ? ", const llmcc::Tensor& " : ", float ";
    s += name_if_used("d_out", body);
    for (int k = 1; k < f_.results; ++k)
      s += ", const llmcc::Tensor& " + name_if_used("d_out" + std::to_string(k), body);
    if (f_.is_method) s += ", " + f_.self_grad_type + "* " + name_if_used("d_self", body);
    for (const auto& p : f_.params) {
      if (p.is_module)
        s += ", " + p.grad_type + "* " + name_if_used("d_" + p.name, body);
      else if (p.kind == VKind::Tensor)
        s += ", llmcc::Tensor* " + name_if_used("d_" + p.name, body);
      else if (p.kind == VKind::Float)
        s += ", float* " + name_if_used("d_" + p.name, body);
    }
    if (has_roots(f_)) s += define ? ", bool " + name_if_used("_final", body) : ", bool _final = false";
    return s + ")";
  }
  std::string fwd_definition() const { return fwd_signature(true) + " {\n" + fwd_.str() + "}\n"; }
  std::string bwd_definition() {
    finish_bwd();
    return bwd_signature(true) + " {\n" + bwd_text_ + "}\n";
  }

 private:
  std::string ret_type() const {
    if (f_.tuple_results) return "std::array<llmcc::Tensor, " + std::to_string(f_.results) + ">";
    return f_.results == 4           ? "llmcc::adgen::Dual2"
           : f_.results == 2         ? "llmcc::adgen::Dual"
           : f_.ret == VKind::Tensor ? kTensor
                                     : "float";
  }

  static std::string name_if_used(const std::string& name, const std::string* body) {
    if (body == nullptr || contains_word(*body, name)) return name;
    return "/*" + name + "*/";
  }
  std::string primal_params(const std::string* body) const {
    std::string s;
    if (f_.is_method) s += "const " + f_.self_type + "& " + name_if_used("self", body);
    for (const auto& p : f_.params) {
      if (!s.empty()) s += ", ";
      s += p.type + " " + name_if_used(p.name, body);
    }
    return s;
  }

  void write_record(Out& o, const Record& r, bool top) const {
    o.open("struct " + r.type);
    for (const auto& n : r.nested) write_record(o, *n, false);
    for (const auto& [type, name] : r.slots) o.line(type + " " + name + ";");
    if (r.visit.empty()) {
      o.line("template <class F>");
      o.line("void visit(F&&) const {}");
    } else {
      o.line("// Every tensor this record keeps for the backward (see adgen::saved_bytes).");
      o.line("template <class F>");
      o.open("void visit(F&& f) const");
      for (const auto& v : r.visit) o.line(v);
      o.close();
    }
    o.close("};");
    (void)top;
  }

  // ---- operands ----------------------------------------------------------------------------
  std::string field_text(const Operand& op) const { return op.mod.primal() + "." + op.field; }
  std::string field_grad_ptr(const Operand& op) const {
    std::string path;
    for (const auto& e : op.mod.elems) path += e;
    if (!path.empty() && path[0] == '.') path = path.substr(1);
    std::string member = path.empty() ? op.field : path + "." + op.field;
    return "(" + op.mod.grad_root() + " ? &" + op.mod.grad_root() + "->" + member + " : nullptr)";
  }

  std::string fwd_text(const Operand& op, const Record& r, const StmtSlots* ss, int idx) const {
    if (ss != nullptr) {
      auto it = ss->snap.find(idx);
      if (it != ss->snap.end()) return r.var + "." + it->second;
    }
    switch (op.src) {
      case Operand::Src::Param:
      case Operand::Src::Local:
        return op.name;
      case Operand::Src::Temp:
        return r.var + "." + temp_slot_.at(op.name);
      case Operand::Src::Field:
        return field_text(op);
      case Operand::Src::Inactive:
        return op.fwd_text;
    }
    return "";
  }
  std::string rev_text(const Operand& op, const Record& r, const StmtSlots& ss, int idx) const {
    auto it = ss.snap.find(idx);
    if (it != ss.snap.end()) return r.var + "." + it->second;
    switch (op.src) {
      case Operand::Src::Param:
        return op.name;
      case Operand::Src::Local:
        return "/*unsaved*/" + op.name;  // never: locals are snapshot
      case Operand::Src::Temp:
        return r.var + "." + temp_slot_.at(op.name);
      case Operand::Src::Field:
        return field_text(op);
      case Operand::Src::Inactive:
        return op.rev_text;
    }
    return "";
  }
  // Pointer to the operand's adjoint (Tensor* or float*), or "nullptr".
  std::string adj_ptr(const Operand& op) const {
    if (op.kind == VKind::Inactive) return "nullptr";
    switch (op.src) {
      case Operand::Src::Param:
        return "d_" + op.name;
      case Operand::Src::Local:
        return "&_d_" + op.name;
      case Operand::Src::Temp:
        return "&_d_" + op.name;
      case Operand::Src::Field:
        return field_grad_ptr(op);
      case Operand::Src::Inactive:
        return "nullptr";
    }
    return "nullptr";
  }
  // `adjoint += value` for a float operand.
  void float_contrib(Out& o, const Operand& op, const std::string& value) {
    if (op.kind != VKind::Float) return;
    switch (op.src) {
      case Operand::Src::Param:
        o.line("if (d_" + op.name + ") *d_" + op.name + " += " + value + ";");
        break;
      case Operand::Src::Local:
      case Operand::Src::Temp:
        o.line("_d_" + op.name + " += " + value + ";");
        break;
      default:
        break;
    }
  }
  void tensor_contrib(Out& o, const Operand& op, const std::string& value) {
    if (op.kind != VKind::Tensor) return;
    switch (op.src) {
      // Adjoints the caller owns (arguments', parameter gradients) are never handed a buffer
      // of this call's scratch memory: see adgen::accumulate_to_caller.
      case Operand::Src::Param:
        o.line("llmcc::adgen::accumulate_to_caller(d_" + op.name + ", " + value + ");");
        break;
      case Operand::Src::Local:
      case Operand::Src::Temp:
        o.line("llmcc::adgen::accumulate(_d_" + op.name + ", " + value + ");");
        break;
      case Operand::Src::Field:
        o.line("llmcc::adgen::accumulate_to_caller(" + field_grad_ptr(op) + ", " + value + ");");
        break;
      default:
        break;
    }
  }
  void note_adjoint(const Operand& op) {
    if (op.kind == VKind::Inactive) return;
    if (op.src == Operand::Src::Local || op.src == Operand::Src::Temp) adjoints_[op.name] = op.kind;
  }

  // Snapshot slots for arguments the backward cannot read otherwise.
  void snapshot(Out& o, Record& r, StmtSlots& ss, const Operand& op, int idx, const std::string& base) {
    std::string type;
    std::string value;
    if (op.src == Operand::Src::Local) {
      type = op.kind == VKind::Tensor ? kTensor : "float";
      value = op.name;
    } else if (op.src == Operand::Src::Inactive && op.rev_text.empty()) {
      type = op.type;
      value = op.fwd_text;
    } else {
      return;
    }
    const std::string name = r.slot(type, base);
    ss.snap[idx] = name;
    o.line(r.var + "." + name + " = " + value + ";");
    if (type == kTensor) r.visit.push_back("f(" + name + ");");
  }

  std::string snap_base(const Operand& op, const std::string& temp) const {
    const std::string n = temp.size() > 1 ? temp.substr(1) : temp;
    if (op.src == Operand::Src::Local) return op.name + "_" + n;
    return "a" + n;
  }

  // ---- forward -----------------------------------------------------------------------------
  void emit_fwd(const std::vector<Stmt>& body, Record& r) {
    for (const Stmt& s : body) emit_fwd_stmt(s, r);
  }

  std::string callee_args_fwd(const Stmt& s, const Record& r, const StmtSlots& ss) const {
    std::vector<std::string> a;
    const Call& c = s.call;
    if (c.kind == Call::Kind::Func && c.has_object) a.push_back(c.object.primal());
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      if (c.kind == Call::Kind::Func && i < c.module_args.size() && !c.module_args[i].root.empty())
        a.push_back(c.module_args[i].primal());
      else
        a.push_back(fwd_text(c.args[i], r, &ss, static_cast<int>(i)));
    }
    std::string out;
    for (std::size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + a[i];
    return out;
  }
  std::string callee_args_rev(const Stmt& s, const Record& r, const StmtSlots& ss) const {
    std::vector<std::string> a;
    const Call& c = s.call;
    if (c.kind == Call::Kind::Func && c.has_object) a.push_back(c.object.primal());
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      if (c.kind == Call::Kind::Func && i < c.module_args.size() && !c.module_args[i].root.empty())
        a.push_back(c.module_args[i].primal());
      else
        a.push_back(rev_text(c.args[i], r, ss, static_cast<int>(i)));
    }
    std::string out;
    for (std::size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + a[i];
    return out;
  }

  void emit_fwd_stmt(const Stmt& s, Record& r) {
    StmtSlots& ss = slots_[&s];
    switch (s.kind) {
      case Stmt::Kind::Call: {
        const Call& c = s.call;
        const std::string n = s.temp.substr(1);
        for (std::size_t i = 0; i < c.args.size(); ++i)
          if (!(c.kind == Call::Kind::Func && i < c.module_args.size() && !c.module_args[i].root.empty()))
            snapshot(fwd_, r, ss, c.args[i], static_cast<int>(i), snap_base(c.args[i], s.temp));
        const bool tensor = c.ret == VKind::Tensor;
        ss.out = r.slot(tensor ? kTensor : "float", s.temp);
        temp_slot_[s.temp] = ss.out;
        if (tensor) r.visit.push_back("f(" + ss.out + ");");
        std::string args = callee_args_fwd(s, r, ss);
        std::string lhs = r.var + "." + ss.out + " = ";
        if (c.kind == Call::Kind::Math) {
          fwd_.line(lhs + c.name + "(" + args + ");");
        } else if (c.kind == Call::Kind::Rule) {
          if (!c.fwd_name.empty()) {
            std::string base = c.name.substr(c.name.rfind(':') == std::string::npos ? 0 : c.name.rfind(':') + 1);
            ss.saved = r.slot(c.saved_type, base + "_" + n);
            for (const auto& fld : c.saved_tensor_fields) r.visit.push_back("f(" + ss.saved + "." + fld + ");");
            fwd_.line(lhs + c.fwd_name + "(" + args + (args.empty() ? "" : ", ") + r.var + "." + ss.saved + ");");
          } else {
            fwd_.line(lhs + c.name + "(" + args + ");");
          }
        } else {  // generated callee
          const FuncPlan& g = *c.func;
          if (c.checkpoint) {
            // Checkpointed: run the primal, keep only the inputs (snapshots above).
            std::string call = c.has_object ? c.object.primal() + "." + g.primal : g.primal;
            std::string pargs;
            for (std::size_t i = 0; i < c.args.size(); ++i) {
              std::string t = (i < c.module_args.size() && !c.module_args[i].root.empty())
                                  ? c.module_args[i].primal()
                                  : fwd_text(c.args[i], r, &ss, static_cast<int>(i));
              pargs += (i ? ", " : "") + t;
            }
            // Its activations live in scratch memory freed right after; only the inputs (the
            // snapshots above) and one copy of the output are kept.
            fwd_.open("");
            fwd_.line("// checkpointed: inputs saved, forward re-run in the backward");
            if (c.ret == VKind::Tensor) {
              fwd_.line("llmcc::Arena& _keep = llmcc::current_arena(\"adgen checkpoint\");");
              fwd_.line("llmcc::adgen::Scratch _scratch;");
              fwd_.line(lhs + "llmcc::adgen::copy_to(_keep, " + call + "(" + pargs + "));");
            } else {
              fwd_.line("llmcc::adgen::Scratch _scratch;");
              fwd_.line(lhs + call + "(" + pargs + ");");
            }
            fwd_.close();
          } else {
            std::string base = c.has_object && !c.object.last.empty() ? c.object.last : g.id;
            ss.saved = r.slot(g.id + "_Saved", base);
            r.visit.push_back(ss.saved + ".visit(f);");
            const std::string call = g.id + "_fwd(" + args + (args.empty() ? "" : ", ") + r.var + "." + ss.saved + ")";
            if (c.results > 1) {
              // A jvp: each of its results is a temporary.
              fwd_.open("");
              fwd_.line("const auto _jvp = " + call + ";");
              fwd_.line(lhs + "_jvp" + result_path(g, 0) + ";");
              for (std::size_t k = 0; k < s.more_temps.size(); ++k) {
                const std::string slot = r.slot(kTensor, s.more_temps[k]);
                temp_slot_[s.more_temps[k]] = slot;
                r.visit.push_back("f(" + slot + ");");
                fwd_.line(r.var + "." + slot + " = _jvp" + result_path(g, static_cast<int>(k) + 1) + ";");
              }
              fwd_.close();
            } else {
              fwd_.line(lhs + call + ";");
            }
          }
        }
        break;
      }
      case Stmt::Kind::Arith: {
        snapshot(fwd_, r, ss, s.lhs, 0, snap_base(s.lhs, s.temp));
        if (s.op != 'n') snapshot(fwd_, r, ss, s.rhs, 1, snap_base(s.rhs, s.temp) + "b");
        ss.out = r.slot("float", s.temp);
        temp_slot_[s.temp] = ss.out;
        std::string a = operand(fwd_text(s.lhs, r, &ss, 0));
        std::string e =
            s.op == 'n' ? "-" + a : a + " " + std::string(1, s.op) + " " + operand(fwd_text(s.rhs, r, &ss, 1));
        fwd_.line(r.var + "." + ss.out + " = " + e + ";");
        break;
      }
      case Stmt::Kind::Assign: {
        const std::string v = fwd_text(s.value, r, nullptr, -1);
        const std::string type = s.local_kind == VKind::Tensor ? kTensor : "float";
        fwd_.line((s.declare ? type + " " : std::string()) + s.local + " = " + v + ";");
        break;
      }
      case Stmt::Kind::Verbatim:
        fwd_.line(s.text);
        break;
      case Stmt::Kind::If: {
        ss.branch = r.slot("bool", "branch" + std::to_string(s.id));
        fwd_.line(r.var + "." + ss.branch + " = static_cast<bool>(" + s.cond + ");");
        fwd_.open("if (" + r.var + "." + ss.branch + ")");
        emit_fwd(s.then_body, r);
        if (!s.else_body.empty()) {
          fwd_.close("} else {");
          fwd_.set_indent(fwd_.indent() + 1);
          emit_fwd(s.else_body, r);
        }
        fwd_.close();
        break;
      }
      case Stmt::Kind::Loop: {
        auto rec = std::make_unique<Record>();
        rec->var = "_r" + std::to_string(s.id);
        rec->type = "Loop" + std::to_string(s.id);
        ss.loop = r.slot("std::vector<" + rec->type + ">", "loop" + std::to_string(s.id));
        ss.record = rec.get();
        const std::string vec = r.var + "." + ss.loop;
        r.visit.push_back("for (const auto& r : " + ss.loop + ") r.visit(f);");
        // Records are reused across steps (next_record), so a steady-state step allocates nothing.
        const std::string count = "_n" + std::to_string(s.id);
        fwd_.line("std::size_t " + count + " = 0;");
        const std::string next = "auto& " + rec->var + " = llmcc::adgen::next_record(" + vec + ", " + count + ");";
        if (s.range_over_modules) {
          const std::string i = "_i" + std::to_string(s.id);
          fwd_.open("for (std::size_t " + i + " = 0; " + i + " < " + s.range.primal() + ".size(); ++" + i + ")");
          fwd_.line(next);
        } else {
          fwd_.open(s.header);
          fwd_.line(next);
          ss.loop_var_slot = rec->slot(s.loop_var_type, s.loop_var);
          fwd_.line(rec->var + "." + ss.loop_var_slot + " = " + s.loop_var + ";");
        }
        emit_fwd(s.body, *rec);
        if (rec->slots.empty() && s.range_over_modules) fwd_.line("(void)" + rec->var + ";");
        fwd_.close();
        fwd_.line(vec + ".resize(" + count + ");");
        r.nested.push_back(std::move(rec));
        break;
      }
      case Stmt::Kind::Return:
        if (f_.results == 1) {
          fwd_.line("return " + fwd_text(s.value, r, nullptr, -1) + ";");
        } else {
          std::vector<std::string> v{fwd_text(s.value, r, nullptr, -1)};
          for (const auto& m : s.more_values) v.push_back(fwd_text(m, r, nullptr, -1));
          if (f_.tuple_results) {
            std::string list;
            for (const auto& e : v) list += (list.empty() ? "" : ", ") + e;
            fwd_.line("return " + ret_type() + "{" + list + "};");
          } else if (f_.results == 2)
            fwd_.line("return llmcc::adgen::Dual{" + v[0] + ", " + v[1] + "};");
          else
            fwd_.line("return llmcc::adgen::Dual2{{" + v[0] + ", " + v[1] + "}, {" + v[2] + ", " + v[3] + "}};");
        }
        break;
    }
  }

  // ---- backward ----------------------------------------------------------------------------
  void emit_bwd(const std::vector<Stmt>& body, const Record& r) {
    for (auto it = body.rbegin(); it != body.rend(); ++it) {
      emit_bwd_stmt(*it, r);
      auto after = final_.after.find(&*it);
      if (after != final_.after.end())
        for (const auto& l : after->second) bwd_body_.line(l);
    }
  }

  void emit_bwd_stmt(const Stmt& s, const Record& r) {
    Out& o = bwd_body_;
    const StmtSlots& ss = slots_.at(&s);
    switch (s.kind) {
      case Stmt::Kind::Return: {
        if (f_.ret == VKind::Tensor) {
          note_adjoint(s.value);
          tensor_contrib(o, s.value, "d_out");
          for (std::size_t k = 0; k < s.more_values.size(); ++k) {
            note_adjoint(s.more_values[k]);
            tensor_contrib(o, s.more_values[k], "d_out" + std::to_string(k + 1));
          }
        } else {
          note_adjoint(s.value);
          float_contrib(o, s.value, "d_out");
        }
        break;
      }
      case Stmt::Kind::Assign: {
        adjoints_[s.local] = s.local_kind;
        note_adjoint(s.value);
        if (s.value.kind == VKind::Inactive) {
          // The local gets a constant: its adjoint stops here.
          o.line("_d_" + s.local + (s.local_kind == VKind::Tensor ? " = llmcc::Tensor();" : " = 0.0f;"));
        } else if (s.local_kind == VKind::Tensor) {
          o.open("if (_d_" + s.local + ".defined())");
          o.line("const llmcc::Tensor _g = _d_" + s.local + ";");
          o.line("_d_" + s.local + " = llmcc::Tensor();");
          tensor_contrib(o, s.value, "_g");
          o.close();
        } else {
          o.open("");
          o.line("const float _g = _d_" + s.local + ";");
          o.line("_d_" + s.local + " = 0.0f;");
          float_contrib(o, s.value, "_g");
          o.close();
        }
        break;
      }
      case Stmt::Kind::Verbatim:
        break;
      case Stmt::Kind::Arith: {
        // Arithmetic on constants only (a tangent's `-1.0f * k`) passes nothing back.
        if (s.lhs.kind != VKind::Float && (s.op == 'n' || s.rhs.kind != VKind::Float)) break;
        adjoints_[s.temp] = VKind::Float;
        note_adjoint(s.lhs);
        if (s.op != 'n') note_adjoint(s.rhs);
        const std::string a = operand(rev_text(s.lhs, r, ss, 0));
        const std::string b = s.op == 'n' ? "" : operand(rev_text(s.rhs, r, ss, 1));
        o.open("");
        o.line("const float _g = _d_" + s.temp + ";");
        o.line("_d_" + s.temp + " = 0.0f;");
        switch (s.op) {
          case '+':
            float_contrib(o, s.lhs, "_g");
            float_contrib(o, s.rhs, "_g");
            break;
          case '-':
            float_contrib(o, s.lhs, "_g");
            float_contrib(o, s.rhs, "-_g");
            break;
          case '*':
            float_contrib(o, s.lhs, "_g * " + b);
            float_contrib(o, s.rhs, "_g * " + a);
            break;
          case '/':
            float_contrib(o, s.lhs, "_g / " + b);
            float_contrib(o, s.rhs, "-_g * " + a + " / (" + b + " * " + b + ")");
            break;
          case 'n':
            float_contrib(o, s.lhs, "-_g");
            break;
        }
        o.close();
        break;
      }
      case Stmt::Kind::Call:
        emit_bwd_call(s, r, ss);
        break;
      case Stmt::Kind::If: {
        o.open("if (" + r.var + "." + ss.branch + ")");
        emit_bwd(s.then_body, r);
        if (!s.else_body.empty()) {
          o.close("} else {");
          o.set_indent(o.indent() + 1);
          emit_bwd(s.else_body, r);
        }
        o.close();
        break;
      }
      case Stmt::Kind::Loop: {
        const Record& rec = *ss.record;
        const std::string i = "_i" + std::to_string(s.id);
        o.open("for (std::size_t " + i + " = " + r.var + "." + ss.loop + ".size(); " + i + "-- > 0;)");
        const int mark = static_cast<int>(o.str().size());
        Out inner;
        inner.set_indent(o.indent());
        std::swap(inner, bwd_body_);
        emit_bwd(s.body, rec);
        std::swap(inner, bwd_body_);
        const std::string body = inner.str();
        if (contains_word(body, rec.var) || (!s.range_over_modules && contains_word(body, s.loop_var)))
          o.line("const auto& " + rec.var + " = " + r.var + "." + ss.loop + "[" + i + "];");
        if (!s.range_over_modules && contains_word(body, s.loop_var))
          o.line("const " + s.loop_var_type + " " + s.loop_var + " = " + rec.var + "." + ss.loop_var_slot + ";");
        o.raw(body);
        (void)mark;
        o.close();
        break;
      }
    }
  }

  void emit_bwd_call(const Stmt& s, const Record& r, const StmtSlots& ss) {
    Out& o = bwd_body_;
    const Call& c = s.call;
    const bool tensor = c.ret == VKind::Tensor;
    adjoints_[s.temp] = c.ret;
    for (const auto& t : s.more_temps) adjoints_[t] = VKind::Tensor;
    for (std::size_t i = 0; i < c.args.size(); ++i) note_adjoint(c.args[i]);
    const std::string d = "_d_" + s.temp;
    // A jvp call's backward runs when any of its results got a contribution.
    std::string cond = d + ".defined()", more;
    for (const auto& t : s.more_temps) {
      cond += " || _d_" + t + ".defined()";
      more += ", _d_" + t;
    }
    o.open(tensor ? "if (" + cond + ")" : "");
    const std::string args = callee_args_rev(s, r, ss);
    const std::string sep = args.empty() ? "" : ", ";
    if (c.kind == Call::Kind::Math) {
      const std::string x = operand(rev_text(c.args[0], r, ss, 0));
      const std::string y = r.var + "." + ss.out;
      o.line("const float _g = " + d + ";");
      o.line(d + " = 0.0f;");
      const std::string& n = c.name;
      auto is = [&](const char* a) { return n == a || n == std::string("std::") + (a + 0); };
      if (is("expf") || is("exp"))
        float_contrib(o, c.args[0], "_g * " + y);
      else if (is("tanhf") || is("tanh"))
        float_contrib(o, c.args[0], "_g * (1.0f - " + y + " * " + y + ")");
      else if (is("logf") || is("log"))
        float_contrib(o, c.args[0], "_g / " + x);
      else if (is("sqrtf") || is("sqrt"))
        float_contrib(o, c.args[0], "_g * 0.5f / " + y);
      else if (is("fabsf") || is("fabs") || is("abs"))
        float_contrib(o, c.args[0], "(" + x + " >= 0.0f ? _g : -_g)");
      else if (is("sinf") || is("sin"))
        float_contrib(o, c.args[0], "_g * cosf(" + x + ")");
      else if (is("cosf") || is("cos"))
        float_contrib(o, c.args[0], "-_g * sinf(" + x + ")");
      else if (is("powf") || is("pow")) {
        const std::string e = operand(rev_text(c.args[1], r, ss, 1));
        float_contrib(o, c.args[0], "_g * " + e + " * powf(" + x + ", " + e + " - 1.0f)");
        float_contrib(o, c.args[1], "_g * " + y + " * logf(" + x + ")");
      }
      o.close();
      return;
    }
    if (c.kind == Call::Kind::Rule) {
      std::string call = c.pullback + "(" + args + sep + r.var + "." + ss.out;
      if (!ss.saved.empty()) call += ", " + r.var + "." + ss.saved;
      call += ", " + d;
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        if (!c.adjoint_of[i]) continue;
        const Operand& a = c.args[i];
        std::string p = adj_ptr(a);
        if (p != "nullptr" && a.kind == VKind::Tensor)
          p = "llmcc::adgen::acc(" + p + ", " + rev_text(a, r, ss, static_cast<int>(i)) + ")";
        call += ", " + p;
      }
      o.line(call + ");");
    } else {
      const FuncPlan& g = *c.func;
      std::string tail;
      std::vector<std::string> escaping;  // tensor adjoints leaving the callee, allocated before scratch
      if (c.has_object) tail += ", " + c.object.grad_ptr();
      const bool pass_final = final_.skipped.count(&s) > 0;
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        const Param& p = g.params[i];
        if (p.is_module) {
          tail += ", " + c.module_args[i].grad_ptr();
        } else if (p.kind != VKind::Inactive) {
          std::string ptr = adj_ptr(c.args[i]);
          if (p.kind == VKind::Tensor && ptr != "nullptr") {
            const std::string name = "_a" + std::to_string(escaping.size());
            escaping.push_back("llmcc::Tensor* " + name + " = llmcc::adgen::acc(" + ptr + ", " +
                               rev_text(c.args[i], r, ss, static_cast<int>(i)) + ");");
            ptr = name;
          }
          tail += ", " + ptr;
        }
      }
      if (has_roots(g)) tail += pass_final ? ", _final" : ", false";
      if (c.checkpoint) {
        o.line("// checkpointed: the adjoints that leave the call are allocated in the step arena;");
        o.line("// the forward is re-run and reversed in scratch memory freed at the end of the block");
        for (const auto& e : escaping) o.line(e);
        o.open("");
        o.line("llmcc::adgen::Scratch _scratch;");
        o.line(g.id + "_Saved _c;");
        o.line(g.id + "_fwd(" + args + sep + "_c);");
        o.line(g.id + "_bwd(" + args + sep + "_c, " + d + tail + ");");
        o.close();
      } else {
        // Adjoint liveness: the adjoints that leave the callee live in the caller's arena; the
        // callee's own adjoints and pullback scratch are freed when it returns.
        for (const auto& e : escaping) o.line(e);
        o.open("");
        o.line("llmcc::adgen::Scratch _scratch;");
        o.line(g.id + "_bwd(" + args + sep + r.var + "." + ss.saved + ", " + d + more + tail + ");");
        o.close();
      }
    }
    o.line(tensor ? d + " = llmcc::Tensor();" : d + " = 0.0f;");
    for (const auto& t : s.more_temps) o.line("_d_" + t + " = llmcc::Tensor();");
    auto skipped = final_.skipped.find(&s);
    if (tensor && skipped != final_.skipped.end()) {
      // The callee did not run: its gradients got nothing more, so they are final now.
      o.close("} else {");
      o.set_indent(o.indent() + 1);
      for (const auto& l : skipped->second) o.line(l);
    }
    o.close();
  }

  void finish_bwd() {
    if (finished_) return;
    finished_ = true;
    std::string decls;
    const std::string body = bwd_body_.str();
    for (const auto& [name, kind] : adjoints_) {
      if (!contains_word(body, "_d_" + name)) continue;
      decls += kind == VKind::Tensor ? "  llmcc::Tensor _d_" + name + ";  // adjoint of " + name + "\n"
                                     : "  float _d_" + name + " = 0.0f;\n";
    }
    bwd_text_ = decls + body;
  }

  const Program& prog_;
  const FuncPlan& f_;
  Record root_;
  Out fwd_, bwd_body_;
  std::string bwd_text_;
  bool finished_ = false;
  std::map<const Stmt*, StmtSlots> slots_;
  std::map<std::string, std::string> temp_slot_;
  std::map<std::string, VKind> adjoints_;
  FinalPlan final_;
};

bool wanted(const FuncPlan& f, const std::string& name) {
  return f.wrt.empty() || std::find(f.wrt.begin(), f.wrt.end(), name) != f.wrt.end();
}

std::string entry_signature(const FuncPlan& f, bool define) {
  std::string s = "float " + f.id + "_grad(";
  bool first = true;
  auto add = [&](const std::string& x) {
    s += (first ? "" : ", ") + x;
    first = false;
  };
  if (f.is_method) add("const " + f.self_type + "& self");
  for (const auto& p : f.params) add(p.type + " " + p.name);
  if (f.is_method && wanted(f, "self")) add(f.self_grad_type + "& d_self");
  for (const auto& p : f.params) {
    if (!wanted(f, p.name)) continue;
    if (p.is_module)
      add(p.grad_type + "& d_" + p.name);
    else if (p.kind == VKind::Tensor)
      add("llmcc::Tensor* d_" + p.name);
    else if (p.kind == VKind::Float)
      add("float* d_" + p.name);
  }
  (void)define;
  return s + ")";
}

std::string entry_definition(const FuncPlan& f) {
  Out o;
  {
    // The overload without a record makes a fresh one; keeping one across steps (the overload
    // below) reuses its loop records, so steady-state steps allocate nothing on the heap.
    std::string call = f.is_method ? "self" : "";
    for (const auto& p : f.params) call += (call.empty() ? "" : ", ") + p.name;
    if (f.is_method && wanted(f, "self")) call += ", d_self";
    for (const auto& p : f.params)
      if ((p.is_module || p.kind != VKind::Inactive) && wanted(f, p.name)) call += ", d_" + p.name;
    o.open(entry_signature(f, true));
    o.line(f.id + "_Saved _s;");
    o.line("return " + f.id + "_grad(" + call + ", _s);");
    o.close();
    o.line("");
  }
  std::string sig = entry_signature(f, true);
  sig = sig.substr(0, sig.size() - 1) + ", " + f.id + "_Saved& _s)";
  o.open(sig);
  std::string args = f.is_method ? "self" : "";
  for (const auto& p : f.params) args += (args.empty() ? "" : ", ") + p.name;
  // Arguments outside LLMCC_ADGEN_WRT get a null adjoint: inactive, their pullbacks skip work.
  std::string grads = f.is_method ? (wanted(f, "self") ? ", &d_self" : ", nullptr") : "";
  for (const auto& p : f.params) {
    if (p.is_module)
      grads += wanted(f, p.name) ? ", &d_" + p.name : ", nullptr";
    else if (p.kind != VKind::Inactive)
      grads += wanted(f, p.name) ? ", d_" + p.name : ", nullptr";
  }
  const std::string fn = "\"" + f.id + "_grad\"";
  if (f.is_method && wanted(f, "self")) o.line("llmcc::adgen::check_grad(d_self, self, " + fn + ", \"d_self\");");
  for (const auto& p : f.params) {
    if (!wanted(f, p.name)) continue;
    if (p.is_module)
      o.line("llmcc::adgen::check_grad(d_" + p.name + ", " + p.name + ", " + fn + ", \"d_" + p.name + "\");");
    else if (p.kind == VKind::Tensor)
      o.line("llmcc::adgen::check_adjoint(d_" + p.name + ", " + p.name + ", " + fn + ", \"d_" + p.name + "\");");
  }
  o.line("const float _value = " + f.id + "_fwd(" + args + (args.empty() ? "" : ", ") + "_s);");
  // Tracked: each parameter gradient is reported to the thread's GradFinalListener once final.
  o.line(f.id + "_bwd(" + args + (args.empty() ? "" : ", ") + "_s, 1.0f" + grads + (has_roots(f) ? ", true" : "") +
         ");");
  o.line("return _value;");
  o.close();
  return o.str();
}

// A type for the Entry trait's aliases: a global type spelled like one of them (`Model`) gets
// `::`, since inside the struct the alias would hide it.
std::string trait_type(const std::string& type) {
  static const char* const kAliases[] = {"Model", "Grad", "Saved", "Inputs"};
  auto is_id = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (std::size_t i = 0; i < type.size();) {
    if (!is_id(type[i])) {
      out += type[i++];
      continue;
    }
    std::size_t j = i;
    while (j < type.size() && is_id(type[j])) ++j;
    const std::string word = type.substr(i, j - i);
    const bool qualified = i >= 2 && type.compare(i - 2, 2, "::") == 0;
    bool alias = false;
    for (const char* a : kAliases) alias = alias || word == a;
    out += (alias && !qualified ? "::" : "") + word;
    i = j;
  }
  return out;
}

// Why an entry gets no `<entry>_Entry` trait ("" when it gets one): the trait is for entries
// whose first argument is a module and whose other arguments get no adjoint, so that a trainer
// can hold them as a tuple and call the forward, the backward and the primal with them.
std::string entry_trait_blocker(const FuncPlan& f) {
  if (f.is_method) return "a member function (the model must be the first argument)";
  if (f.params.empty() || !f.params[0].is_module)
    return f.params.empty() ? "no arguments (the model must be the first argument)"
                            : "the first argument " + f.params[0].source_name + " is not a module";
  if (!wanted(f, f.params[0].name))
    return "the model " + f.params[0].source_name + " gets no adjoint (LLMCC_ADGEN_WRT)";
  for (std::size_t i = 1; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    if ((p.is_module || p.kind != VKind::Inactive) && wanted(f, p.name))
      return "argument " + p.source_name + " gets an adjoint";
    if (p.by_mutable_ref) return "argument " + p.source_name + " is taken by non-const reference";
  }
  return "";
}

// The trait a trainer is instantiated with (`Trainer<gpt2_loss_Entry>`): the model, its
// gradient mirror, the forward's record, the arguments after the model as a tuple, and calls
// of the split forward, the backward and the primal that take that tuple.
std::string entry_trait(const FuncPlan& f) {
  const std::string blocker = entry_trait_blocker(f);
  if (!blocker.empty()) return "// no " + f.id + "_Entry: " + blocker + "\n";
  const Param& model = f.params[0];
  std::string types, args, adjoints;
  for (std::size_t i = 1; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    types += (i > 1 ? ", " : "") + trait_type(p.value_type);
    args += ", std::get<" + std::to_string(i - 1) + ">(in)";
    if (p.is_module || p.kind != VKind::Inactive) adjoints += ", nullptr";  // outside LLMCC_ADGEN_WRT
  }
  const std::string in = f.params.size() > 1 ? "in" : "/*in*/";
  // The primal is called by its qualified name: unqualified, `loss` would find the member.
  const std::string primal = f.primal.find("::") == std::string::npos ? "::" + f.primal : f.primal;
  Out o;
  o.line("// What llmcc::Trainer needs to train with " + f.id + ": the model type, its gradient");
  o.line("// mirror, the record the forward fills, the inputs after the model, and the three calls.");
  o.open("struct " + f.id + "_Entry");
  o.line("using Model = " + trait_type(model.module_type) + ";");
  o.line("using Grad = " + model.grad_type + ";");
  o.line("using Saved = " + f.id + "_Saved;");
  o.line("using Inputs = std::tuple<" + types + ">;  // the arguments after the model");
  o.line("static constexpr const char* name = \"" + f.id + "\";");
  o.open("static float fwd(const Model& m, const Inputs& " + in + ", Saved& s)");
  o.line("return " + f.id + "_fwd(m" + args + ", s);");
  o.close();
  o.open("static void bwd(const Model& m, const Inputs& " + in + ", const Saved& s, float d_loss, Grad* g)");
  o.line(f.id + "_bwd(m" + args + ", s, d_loss, g" + adjoints + ", true);");
  o.close();
  o.open("static float loss(const Model& m, const Inputs& " + in + ")");
  o.line("return " + primal + "(m" + args + ");");
  o.close();
  o.close("};");
  return o.str();
}

void emit_module(Out& o, const ModulePlan& m) {
  o.line("// Gradient mirror of " + m.type + ": one adjoint per parameter, accumulated (+=).");
  o.open("struct " + m.grad_type);
  for (const auto& f : m.fields) {
    if (f.kind == ModuleField::Kind::Tensor)
      o.line("llmcc::Tensor " + f.name + ";");
    else if (f.kind == ModuleField::Kind::Module)
      o.line(f.grad_type + " " + f.name + ";");
    else
      o.line("std::vector<" + f.grad_type + "> " + f.name + ";");
  }
  o.line("");
  // Fields are read through `this->`, so a field named like a parameter or local of these
  // methods (`m`, `f`, `prefix`, `i`) stays unambiguous.
  o.line("// Declares every gradient with its parameter's shape (no storage; see adgen::make_grad).");
  o.open("void shape_like(const " + m.type + "& m)");
  for (const auto& f : m.fields) {
    const std::string mine = "this->" + f.name;
    if (f.kind == ModuleField::Kind::Tensor)
      o.line(mine + " = llmcc::Tensor(nullptr, m." + f.name + ".shape());");
    else if (f.kind == ModuleField::Kind::Module)
      o.line(mine + ".shape_like(m." + f.name + ");");
    else {
      o.line(mine + ".resize(m." + f.name + ".size());");
      o.line("for (std::size_t i = 0; i < " + mine + ".size(); ++i) " + mine + "[i].shape_like(m." + f.name + "[i]);");
    }
  }
  o.close();
  o.line("// Whether every gradient is bound to storage with its parameter's shape.");
  o.open("bool bound_like(const " + m.type + "& m) const");
  for (const auto& f : m.fields) {
    const std::string mine = "this->" + f.name;
    if (f.kind == ModuleField::Kind::Tensor)
      o.line("if (!" + mine + ".defined() || " + mine + ".shape() != m." + f.name + ".shape()) return false;");
    else if (f.kind == ModuleField::Kind::Module)
      o.line("if (!" + mine + ".bound_like(m." + f.name + ")) return false;");
    else {
      o.line("if (" + mine + ".size() != m." + f.name + ".size()) return false;");
      o.line("for (std::size_t i = 0; i < " + mine + ".size(); ++i)");
      o.line("  if (!" + mine + "[i].bound_like(m." + f.name + "[i])) return false;");
    }
  }
  o.line("return true;");
  o.close();
  // Parameter names: a field's LLMCC_ADGEN_NAME (else its name), "<name>." before a nested
  // module's, "<name>.<i>." before a vector element's ("<name>." for an LLMCC_ADGEN_OPTIONAL
  // vector's one element); the same in both lists below, so the gradient store's names are the
  // parameter store's.
  o.line("// Calls f(name, parameter, gradient) for every parameter, in field order.");
  o.line("template <class F>");
  o.open("void for_each_pair(const " + m.type + "& m, const std::string& prefix, F&& f)");
  for (const auto& f : m.fields) {
    const std::string mine = "this->" + f.name;
    const std::string& n = f.param_name;
    if (f.kind == ModuleField::Kind::Tensor)
      o.line("f(prefix + \"" + n + "\", m." + f.name + ", " + mine + ");");
    else if (f.kind == ModuleField::Kind::Module)
      o.line(mine + ".for_each_pair(m." + f.name + ", prefix + \"" + n + ".\", f);");
    else if (f.optional)
      o.line("for (std::size_t i = 0; i < " + mine + ".size(); ++i) " + mine + "[i].for_each_pair(m." + f.name +
             "[i], prefix + \"" + n + ".\", f);");
    else
      o.line("for (std::size_t i = 0; i < " + mine + ".size(); ++i) " + mine + "[i].for_each_pair(m." + f.name +
             "[i], prefix + \"" + n + ".\" + std::to_string(i) + \".\", f);");
  }
  o.close();
  o.line("// Calls f(const Tensor&) for every gradient, in field order (see adgen::grad_final).");
  o.line("template <class F>");
  o.open("void for_each_grad(F&& f) const");
  for (const auto& f : m.fields) {
    const std::string mine = "this->" + f.name;
    if (f.kind == ModuleField::Kind::Tensor)
      o.line("f(" + mine + ");");
    else if (f.kind == ModuleField::Kind::Module)
      o.line(mine + ".for_each_grad(f);");
    else
      o.line("for (const auto& g : " + mine + ") g.for_each_grad(f);");
  }
  o.close();
  // The model's parameter list (llmcc::for_each_parameter), for a mutable and a const model.
  for (const char* cv : {"", "const "}) {
    o.line(std::string("// Calls f(name, ") + (*cv ? "const " : "") +
           "Tensor&) for every parameter of m, in field order, with its full name.");
    o.line("template <class F>");
    o.open("static void for_each_parameter(" + std::string(cv) + m.type + "& m, const std::string& prefix, F&& f)");
    for (const auto& f : m.fields) {
      const std::string& n = f.param_name;
      if (f.kind == ModuleField::Kind::Tensor)
        o.line("f(prefix + \"" + n + "\", m." + f.name + ");");
      else if (f.kind == ModuleField::Kind::Module)
        o.line(f.grad_type + "::for_each_parameter(m." + f.name + ", prefix + \"" + n + ".\", f);");
      else if (f.optional) {
        // At most one module, named without an index: a second would repeat its names.
        o.line("if (m." + f.name + ".size() > 1) llmcc::fail(\"adgen\", prefix + \"" + n +
               " holds \" + std::to_string(m." + f.name +
               ".size()) + \" modules; an LLMCC_ADGEN_OPTIONAL field holds at most one\");");
        o.line("for (std::size_t i = 0; i < m." + f.name + ".size(); ++i) " + f.grad_type + "::for_each_parameter(m." +
               f.name + "[i], prefix + \"" + n + ".\", f);");
      } else
        o.line("for (std::size_t i = 0; i < m." + f.name + ".size(); ++i) " + f.grad_type + "::for_each_parameter(m." +
               f.name + "[i], prefix + \"" + n + ".\" + std::to_string(i) + \".\", f);");
    }
    o.close();
  }
  o.close("};");
  o.line("");
}

}  // namespace

// A plan adgen made (a jvp, a slope) as a plain function: its forward into a record that is dropped.
std::string primal_definition(const FuncPlan& f, const std::string& decl, const std::string& ns) {
  std::string args;
  for (const auto& p : f.params) args += (args.empty() ? "" : ", ") + p.name;
  Out o;
  o.open(decl);
  if (f.taylor_alt != nullptr) {
    std::string same, inner;
    for (const auto& [v, w] : f.taylor_same) {
      const std::string &a = f.params[static_cast<std::size_t>(v)].name,
                        &b = f.params[static_cast<std::size_t>(w)].name;
      same += (same.empty() ? "" : " && ") + (f.params[static_cast<std::size_t>(v)].kind == VKind::Float
                                                  ? a + " == " + b
                                                  : "llmcc::adgen::same_tensor(" + a + ", " + b + ")");
    }
    for (std::size_t i = 0; i < f.taylor_alt->params.size(); ++i) inner += (i ? ", " : "") + f.params[i].name;
    o.line("// Along the inner directions again: the Taylor plan (value, first and second derivative).");
    o.open("if (" + same + ")");
    o.line(ns + f.taylor_alt->id + "_Saved _t;");
    o.line("return " + ns + f.taylor_alt->id + "_fwd(" + inner + ", _t);");
    o.close();
  }
  o.line(ns + f.id + "_Saved _s;");
  o.line("return " + ns + f.id + "_fwd(" + args + (args.empty() ? "" : ", ") + "_s);");
  o.close();
  return o.str();
}

Generated emit(const Program& p, const std::string& header_name) {
  Generated g;
  const std::string banner =
      "// Generated by adgen " + std::string(kVersion) + " from " + p.source_name + ". Do not edit: regenerate.\n";
  std::vector<std::unique_ptr<FuncEmitter>> fe;
  for (const auto& f : p.funcs) {
    fe.push_back(std::make_unique<FuncEmitter>(p, *f));
    fe.back()->run();
  }

  Out h;
  h.raw(banner);
  h.raw(
      "#pragma once\n\n#include <cstddef>\n#include <string>\n#include <tuple>\n#include <vector>\n\n"
      "#include \"llmcc/adgen.h\"\n");
  for (const auto& inc : p.includes) h.raw("#include \"" + inc + "\"\n");
  h.raw("\n");
  if (!p.ns.empty()) h.raw("namespace " + p.ns + " {\n\n");
  for (const auto& m : p.modules) emit_module(h, m);
  for (std::size_t i = 0; i < p.funcs.size(); ++i) {
    const FuncPlan& f = *p.funcs[i];
    if (!f.primal_decl.empty()) {
      h.line("// " + f.source + ", defined by adgen.");
      h.line(f.primal_decl + ";");
    }
    h.line("// " + f.id + ": what the backward of " + f.source + " reads.");
    h.raw(fe[i]->saved_struct());
    h.line(fe[i]->fwd_signature(false) + ";");
    h.line(fe[i]->bwd_signature(false) + ";");
    if (f.entry) {
      h.line("// Returns the value and accumulates the gradient into the d_ arguments.");
      h.line(entry_signature(f, false) + ";");
      h.line("// The same, reusing the record `_s` (kept across steps: no heap allocation once warm).");
      std::string sig = entry_signature(f, false);
      h.line(sig.substr(0, sig.size() - 1) + ", " + f.id + "_Saved& _s);");
      h.raw(entry_trait(f));
    }
    h.line("");
  }
  if (!p.ns.empty()) h.raw("}  // namespace " + p.ns + "\n\n");
  if (!p.modules.empty()) {
    h.raw("namespace llmcc::adgen {\n");
    const std::string q = p.ns.empty() ? "" : p.ns + "::";
    for (const auto& m : p.modules)
      h.raw("template <>\nstruct GradOf<" + m.type + "> {\n  using type = " + q + m.grad_type + ";\n};\n");
    h.raw("}  // namespace llmcc::adgen\n");
  }
  g.header = h.str();

  Out s;
  s.raw(banner);
  s.raw("#include \"" + header_name + "\"\n\n#include <cmath>\n\n");
  if (!p.ns.empty()) s.raw("namespace " + p.ns + " {\n\n");
  for (std::size_t i = 0; i < p.funcs.size(); ++i) {
    s.raw(fe[i]->fwd_definition());
    s.raw("\n");
    s.raw(fe[i]->bwd_definition());
    s.raw("\n");
    if (p.funcs[i]->entry) s.raw(entry_definition(*p.funcs[i]) + "\n");
    if (!p.funcs[i]->primal_decl.empty()) s.raw(primal_definition(*p.funcs[i], p.funcs[i]->primal_decl, "") + "\n");
  }
  if (!p.ns.empty()) s.raw("}  // namespace " + p.ns + "\n");
  // The jvp functions the user declared (LLMCC_ADGEN_JVP), by their qualified names.
  for (const auto& f : p.funcs)
    for (const auto& decl : f->primal_decls) s.raw("\n" + primal_definition(*f, decl, p.ns.empty() ? "" : p.ns + "::"));
  g.source = s.str();
  return g;
}

}  // namespace adgen
