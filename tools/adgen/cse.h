// Common-subexpression elimination on a planned function's IR (used on the plans adgen makes:
// tangent functions and their specialisations). A statement computing what an earlier one in
// scope computed (the same rule, maths function, callee or arithmetic on the same operands) is
// dropped and its temporaries read the earlier one's. The jvp of a jvp taken along the direction
// the inner jvp already follows repeats the inner tangent's statements exactly; this removes them.
#pragma once

#include "ir.h"

namespace adgen {

// Rewrites f.body. Sound for the subset's IR: rules, maths calls and differentiated callees have no
// side effects; an operand that is a local is only equal to itself until the local is assigned
// again; inactive operands other than literals are never matched (their text may read state that
// changes between two statements).
void eliminate_common_subexpressions(FuncPlan& f);

}  // namespace adgen
