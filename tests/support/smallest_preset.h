// The preset of a registered family with the fewest parameters (gpt2-tiny, llama-tiny, ...): the
// tests that walk the registry (models/registry.h) run each family at it.
#pragma once

#include <cstdint>
#include <string>

#include "models/model.h"

namespace llmcc::test {

inline std::string smallest_preset(const llmcc::models::Family& f) {
  std::string best;
  std::int64_t fewest = 0;
  for (const std::string& name : f.preset_names()) {
    const std::int64_t n = f.preset(name).parameter_count();
    if (best.empty() || n < fewest) best = name, fewest = n;
  }
  return best;
}

}  // namespace llmcc::test
