// Token ids for model tests: n ids drawn uniformly from [0, vocab) with llmcc's Rng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmcc/train/rng.h"

namespace llmcc::test {

inline std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(n);  // (n)
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

}  // namespace llmcc::test
