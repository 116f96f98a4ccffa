// bf16 copies of a model's matrices for one-row products: KV-cache decoding reads every weight
// once per token, so its speed is the memory traffic of the weights; reading bf16 copies halves
// it. The fp32 weights stay as they are (the copies add half their size); the copies round each
// weight to bf16 (nearest, ties to even), so logits move by about bf16's relative precision
// (2^-9) of each product's terms.
//
//   llmcc::Bf16Weights copies(model->params());   // converts every 2-D parameter
//   llmcc::Bf16WeightsScope use(copies);           // while alive: one-row linear products
//   ... generate ...                               // whose weight has a copy read the copy
//
// Only products of one row against a weight (linear of a (1, C) input, the fast kernels) take a
// copy; prompts (several rows), training and the reference kernels compute in fp32 as before. One
// scope is active at a time in a process; a nested scope hides the outer one until it ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "llmcc/parameters.h"

namespace llmcc {

class Bf16Weights {
 public:
  // Copies every 2-D tensor of `params` (matrices and embeddings; vectors such as norm weights
  // stay fp32). The store must outlive the copies and keep its storage where it is.
  explicit Bf16Weights(const ParameterStore& params);
  // The copy of the matrix whose fp32 data starts at w, when that matrix has `cols` columns and
  // at least `rows` rows (the part a product reads); else null.
  const std::uint16_t* copy_of(const float* w, std::int64_t rows, std::int64_t cols) const;
  std::size_t bytes() const { return bits_.size() * sizeof(std::uint16_t); }
  std::size_t matrices() const { return at_.size(); }

 private:
  std::vector<std::uint16_t> bits_;
  struct Copy {
    std::size_t at;  // offset in bits_
    std::int64_t rows, cols;
  };
  std::unordered_map<const float*, Copy> at_;  // by the fp32 data's address
};

class Bf16WeightsScope {
 public:
  explicit Bf16WeightsScope(const Bf16Weights& weights);
  ~Bf16WeightsScope();
  Bf16WeightsScope(const Bf16WeightsScope&) = delete;
  Bf16WeightsScope& operator=(const Bf16WeightsScope&) = delete;

 private:
  const Bf16Weights* previous_;
};

// The copies in use (the innermost live scope's), or null.
const Bf16Weights* active_bf16_weights();

}  // namespace llmcc
