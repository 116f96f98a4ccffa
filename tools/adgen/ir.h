// The IR between the planner (Clang AST -> IR) and the emitter (IR -> C++). Clang-free on
// purpose: the emitter and the golden shape of generated code do not depend on AST details.
//
// A differentiated function is lowered to three-address form: every active call or float
// operation writes a numbered temporary, so the reverse sweep is the statement list walked
// backwards. Operands say where a value lives in the forward (a parameter, a local, a temp, a
// module field) so the emitter knows both how to read it in the backward (directly, or from
// the Saved record) and where its adjoint goes.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace adgen {

enum class VKind { Tensor, Float, Inactive };

// A module object: a root (`self` or a module parameter) and a path of fields and indices.
struct ModPath {
  std::string root;                // "self" or the parameter name
  std::string type;                // the module's C++ type (qualified)
  std::string grad_type;           // the generated mirror, e.g. "Block_Grad"
  std::vector<std::string> elems;  // ".ln1", "[_i0]", "[i]"
  std::string last;                // last field name, for naming saved slots

  std::string primal() const {
    std::string s = root;
    for (const auto& e : elems) s += e;
    return s;
  }
  std::string grad_root() const { return "d_" + root; }
  // A Grad pointer expression, null when the root's adjoint is null.
  std::string grad_ptr() const {
    if (elems.empty()) return grad_root();
    std::string s = grad_root() + "->";
    std::string p;
    for (const auto& e : elems) p += e;
    if (!p.empty() && p[0] == '.') p = p.substr(1);
    return "(" + grad_root() + " ? &" + s + p + " : nullptr)";
  }
};

struct Operand {
  enum class Src { Param, Local, Temp, Field, Inactive };
  Src src = Src::Inactive;
  VKind kind = VKind::Inactive;
  std::string name;      // Param/Local: (unique) variable name; Temp: "t3"
  ModPath mod;           // Field: the module holding it
  std::string field;     // Field: the Tensor field name
  std::string fwd_text;  // Inactive: the expression in the forward
  std::string rev_text;  // Inactive: the same in the backward ("" -> read a snapshot)
  std::string type;      // Inactive: value type for a snapshot
  bool is_literal = false;
};

struct FuncPlan;

struct Call {
  enum class Kind { Rule, Func, Math };
  Kind kind = Kind::Rule;
  std::string name;                              // rule / math function (qualified for rules)
  std::string fwd_name;                          // Rule: op_fwd when the rule saves extra buffers, else ""
  std::string saved_type;                        // Rule: its Saved struct (qualified) when fwd_name is set
  std::vector<std::string> saved_tensor_fields;  // Rule Saved fields of type Tensor
  std::string pullback;                          // Rule: op_pullback (qualified)
  std::vector<int> adjoint_of;                   // Rule: per argument, whether the pullback takes d_<param>
  const FuncPlan* func = nullptr;                // Func: the generated callee
  bool has_object = false;                       // Func: a member function called on `object`
  ModPath object;
  std::vector<Operand> args;
  std::vector<ModPath> module_args;  // Func: module arguments, by position (others empty root)
  bool checkpoint = false;
  VKind ret = VKind::Tensor;
  int results = 1;                   // Func: 1, or a jvp's 2 (adgen::Dual), 4 (adgen::Dual2) or more (merged)
  const FuncPlan* scalar = nullptr;  // map_unary: the scalar function's plan
};

struct Stmt {
  enum class Kind { Call, Arith, Assign, Verbatim, If, Loop, Return };
  Kind kind = Kind::Verbatim;
  // Call / Arith: the temporary written ("t3"); a jvp call's further results go to more_temps
  // (Dual: the tangent; Dual2: value.tangent, tangent.value, tangent.tangent)
  std::string temp;
  std::vector<std::string> more_temps;
  Call call;
  // Arith: op is one of + - * / or 'n' (negate); unary uses lhs only
  char op = '+';
  Operand lhs, rhs;
  // Assign: `[decl_type] local = value;`
  bool declare = false;
  std::string local;
  VKind local_kind = VKind::Tensor;
  Operand value;
  // Return of a jvp: its results after `value`, in more_temps' order
  std::vector<Operand> more_values;
  // Verbatim: forward-only text (inactive code)
  std::string text;
  // If: condition (forward text); then/else bodies
  std::string cond;
  std::vector<Stmt> then_body, else_body;
  // Loop
  bool range_over_modules = false;
  ModPath range;                        // range-for: the std::vector<Module> field
  std::string range_var;                // range-for: the element name (bound to range[_iN])
  std::string header;                   // counted for: "for (int i = 0; i < n; ++i)"
  std::string loop_var, loop_var_type;  // counted for: restored in the backward
  std::vector<Stmt> body;
  int id = 0;  // If/Loop number within the function
};

struct Param {
  std::string name;             // in generated code (see Planner::Scope::bind_name)
  std::string source_name;      // as the user wrote it
  std::string type;             // as declared, qualified ("const llmcc::Tensor &")
  std::string value_type;       // without reference and cv-qualifiers ("llmcc::Tensor")
  bool by_mutable_ref = false;  // a non-const lvalue reference or an rvalue reference
  VKind kind = VKind::Inactive;
  bool is_module = false;
  std::string module_type, grad_type;
};

struct FuncPlan {
  std::string id;      // "Block_forward", "loss"
  std::string primal;  // how to call the primal: "forward" (method) or "ns::f"
  bool is_method = false;
  std::string self_type, self_grad_type;
  std::vector<Param> params;
  VKind ret = VKind::Tensor;
  std::string ret_type;
  std::vector<Stmt> body;
  std::vector<std::pair<std::string, VKind>> locals;  // active locals (unique names)
  std::vector<std::string> temps_tensor, temps_float;
  bool entry = false;
  std::vector<std::string> wrt;  // entry: LLMCC_ADGEN_WRT names (empty: every differentiable argument)
  bool checkpoint = false;       // LLMCC_ADGEN_CHECKPOINT on the function
  std::string source;            // "file:line" for comments
  // Forward mode (tangent.cpp): 1, or 2 for a jvp returning adgen::Dual (value, tangent), 4 for
  // the jvp of a jvp returning adgen::Dual2 (the Dual and its tangent).
  int results = 1;
  // A plan made by adgen has no primal in the user's code; adgen defines it as
  // `<declaration> { <id>_Saved _s; return <id>_fwd(...); }`: a scalar slope function in the
  // generated namespace (primal_decl, declared in the generated header), a jvp the user declared
  // with LLMCC_ADGEN_JVP by its qualified name (primal_decls).
  std::string primal_decl;
  std::vector<std::string> primal_decls;
  std::set<std::string> used_names;  // every name the body binds (for names adgen adds)
  // A tangent plan (Dual mode): the plan it is the tangent of, and the tangent of each of that
  // plan's values along the tangent parameters (parameters, temporaries and locals by name), so
  // that its own tangent along the same direction (Taylor mode) reuses them.
  const FuncPlan* jvp_of = nullptr;
  std::vector<int> tangent_param;  // per parameter of jvp_of: its tangent parameter's index, or -1
  // A user-declared jvp of a jvp whose outer directions may be the inner ones (u_xx): its plain
  // definition runs this Taylor plan when each pair (inner, outer) of parameters holds the same
  // tensor at run time.
  const FuncPlan* taylor_alt = nullptr;
  std::vector<std::pair<int, int>> taylor_same;
  std::map<std::string, Operand> tangent_of;
  int temps = 0;  // temporaries t0..t<temps-1> are taken
  // The plan whose statements this one runs unchanged and in order, with its temporaries, locals
  // and first parameters: a user function's plan is its own base; its tangent plans (and theirs)
  // and their merges have that plan as base; a specialised copy has none. Two calls of plans with
  // one base on the same arguments share its statements (merge.cpp).
  const FuncPlan* base = nullptr;
  // A merged plan (merge.cpp): its results are returned as std::array<llmcc::Tensor, results>.
  bool tuple_results = false;
};

struct ModuleField {
  enum class Kind { Tensor, Module, ModuleVec };
  std::string name;
  std::string param_name;  // its part of parameter names: LLMCC_ADGEN_NAME("weight"), else the name
  Kind kind = Kind::Tensor;
  std::string type, grad_type;  // Module/ModuleVec: the element module
  bool optional = false;        // ModuleVec with LLMCC_ADGEN_OPTIONAL: at most one, named without an index
};

struct ModulePlan {
  std::string type;       // qualified C++ type
  std::string grad_type;  // "Block_Grad"
  std::vector<ModuleField> fields;
};

struct Program {
  std::string source_name;                       // for the header comment
  std::string ns;                                // namespace of the generated code ("" = global)
  std::vector<std::string> includes;             // "llmcc/ops/add.h"
  std::vector<ModulePlan> modules;               // dependencies first
  std::vector<std::unique_ptr<FuncPlan>> funcs;  // callees first
};

}  // namespace adgen
