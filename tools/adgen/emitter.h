// IR -> generated C++: the Grad mirrors, the Saved records, `f_fwd`, `f_bwd` and the entry's
// `f_grad`. Output is deterministic (only IR order and counters decide names) and indented.
#pragma once

#include <string>

#include "ir.h"

namespace adgen {

inline constexpr const char* kVersion = "0.1";

struct Generated {
  std::string header;  // types and declarations
  std::string source;  // definitions; includes the header by `header_name`
};

Generated emit(const Program& program, const std::string& header_name);

}  // namespace adgen
