#include "cse.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace adgen {
namespace {

struct Entry {
  std::vector<std::string> temps;  // the results (temp, then more_temps)
  std::set<std::string> locals;    // locals the key reads
};
using Table = std::map<std::string, Entry>;

class Cse {
 public:
  void block(std::vector<Stmt>& body, Table table) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      rename(s);
      switch (s.kind) {
        case Stmt::Kind::Call:
        case Stmt::Kind::Arith: {
          std::set<std::string> locals;
          const std::string k = key(s, locals);
          if (!k.empty()) {
            auto it = table.find(k);
            std::vector<std::string> mine{s.temp};
            mine.insert(mine.end(), s.more_temps.begin(), s.more_temps.end());
            if (it != table.end() && it->second.temps.size() == mine.size()) {
              for (std::size_t i = 0; i < mine.size(); ++i) renames_[mine[i]] = it->second.temps[i];
              continue;  // dropped
            }
            table[k] = Entry{mine, locals};
          }
          break;
        }
        case Stmt::Kind::Assign:
          forget(table, {s.local});
          break;
        case Stmt::Kind::If: {
          block(s.then_body, table);
          block(s.else_body, table);
          std::set<std::string> assigned;
          assigned_in(s.then_body, assigned);
          assigned_in(s.else_body, assigned);
          forget(table, assigned);
          break;
        }
        case Stmt::Kind::Loop: {
          // A later iteration sees the locals the body assigns changed: nothing that reads them
          // is available inside, nor after.
          std::set<std::string> assigned;
          assigned_in(s.body, assigned);
          forget(table, assigned);
          block(s.body, table);
          break;
        }
        case Stmt::Kind::Verbatim:
        case Stmt::Kind::Return:
          break;
      }
      out.push_back(std::move(s));
    }
    body = std::move(out);
  }

 private:
  static void assigned_in(const std::vector<Stmt>& body, std::set<std::string>& out) {
    for (const Stmt& s : body) {
      if (s.kind == Stmt::Kind::Assign) out.insert(s.local);
      assigned_in(s.then_body, out);
      assigned_in(s.else_body, out);
      assigned_in(s.body, out);
    }
  }
  static void forget(Table& table, const std::set<std::string>& locals) {
    for (auto it = table.begin(); it != table.end();) {
      bool reads = false;
      for (const auto& l : locals) reads = reads || it->second.locals.count(l) > 0;
      it = reads ? table.erase(it) : std::next(it);
    }
  }
  void rename(Operand& o) const {
    if (o.src != Operand::Src::Temp) return;
    if (auto it = renames_.find(o.name); it != renames_.end()) o.name = it->second;
  }
  void rename(Stmt& s) const {
    for (auto& a : s.call.args) rename(a);
    rename(s.lhs);
    rename(s.rhs);
    rename(s.value);
    for (auto& v : s.more_values) rename(v);
  }
  // The operand's identity, "" when it must not be matched.
  static std::string operand(const Operand& o, std::set<std::string>& locals) {
    switch (o.src) {
      case Operand::Src::Param:
        return "p:" + o.name;
      case Operand::Src::Local:
        locals.insert(o.name);
        return "l:" + o.name;
      case Operand::Src::Temp:
        return "t:" + o.name;
      case Operand::Src::Field:
        return "f:" + o.mod.primal() + "." + o.field;
      case Operand::Src::Inactive:
        return o.is_literal ? "c:" + o.fwd_text : "";
    }
    return "";
  }
  static std::string key(const Stmt& s, std::set<std::string>& locals) {
    std::string k;
    auto add = [&](const Operand& o) {
      const std::string id = operand(o, locals);
      if (id.empty()) return false;
      k += "|" + id;
      return true;
    };
    if (s.kind == Stmt::Kind::Arith) {
      k = std::string("A") + s.op;
      if (!add(s.lhs) || (s.op != 'n' && !add(s.rhs))) return "";
      return k;
    }
    const Call& c = s.call;
    if (c.kind == Call::Kind::Func) {
      if (c.checkpoint) return "";
      k = "F:" + c.func->id + (c.has_object ? "@" + c.object.primal() : "");
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        if (i < c.module_args.size() && !c.module_args[i].root.empty())
          k += "|m:" + c.module_args[i].primal();
        else if (!add(c.args[i]))
          return "";
      }
      return k;
    }
    k = (c.kind == Call::Kind::Math ? "M:" : "R:") + c.name;
    for (const auto& a : c.args)
      if (!add(a)) return "";
    return k;
  }

  std::map<std::string, std::string> renames_;
};

}  // namespace

void eliminate_common_subexpressions(FuncPlan& f) { Cse().block(f.body, {}); }

}  // namespace adgen
