// The fixed parameter layout fuzz_checkpoint loads into (and make_seeds saves from).
#pragma once

#include "llmcc/parameters.h"

namespace llmcc::fuzz {

inline ParameterStore tiny_store() {
  return ParameterStore({{"w", Shape{2, 3}}, {"b", Shape{3}}, {"h.0.x", Shape{1, 2, 2}}});
}

}  // namespace llmcc::fuzz
