// Primitive rules: a function `f` is a rule when `f_pullback` is declared beside it (same
// namespace). `f_fwd(args..., FSaved&)` is used in the forward when it exists and the pullback
// then takes `const FSaved&`. Operators are mapped to rules by LLMCC_ADGEN_RULE("name"), their
// parameters matched to the rule's by name. Every registration is checked against the contract
// in docs/adding-an-op.md and a mismatch is reported naming the parameter that is wrong.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "activity.h"
#include "diagnostics.h"

namespace adgen {

struct RuleInfo {
  const clang::FunctionDecl* primal = nullptr;    // the rule (for an operator: the mapped rule)
  const clang::FunctionDecl* fwd = nullptr;       // f_fwd, or null
  const clang::FunctionDecl* pullback = nullptr;  // f_pullback
  std::string saved_type;                         // FSaved, qualified, when fwd is set
  std::vector<std::string> saved_tensor_fields;
  std::vector<int> adjoint_of;  // per rule parameter: 1 when the pullback takes d_<param>
  std::vector<int> arg_of;      // per rule parameter: index of the call argument that feeds it
};

class Rules {
 public:
  Rules(clang::ASTContext& ctx, Diagnostics& diag, Activity& act) : ctx_(ctx), diag_(diag), act_(act) {}

  // The rule for a call of `callee` at `use`. Null with *broken == false: not a rule.
  // Null with *broken == true: a rule whose registration is wrong (already reported).
  const RuleInfo* lookup(const clang::FunctionDecl* callee, clang::SourceLocation use, bool* broken);

  std::string type_name(clang::QualType t) const;

 private:
  std::vector<const clang::FunctionDecl*> named(const clang::FunctionDecl* near, const std::string& name) const;
  std::string check(const clang::FunctionDecl* f, const clang::FunctionDecl* fwd, const clang::FunctionDecl* pb,
                    RuleInfo& info) const;

  clang::ASTContext& ctx_;
  Diagnostics& diag_;
  Activity& act_;
  std::map<const clang::FunctionDecl*, RuleInfo> cache_;
  std::map<const clang::FunctionDecl*, bool> broken_;
};

}  // namespace adgen
