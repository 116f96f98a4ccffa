// Low-precision copies of a model's matrices for one-row products: KV-cache decoding reads every
// weight once per token, so its speed is the memory traffic of the weights; reading smaller copies
// cuts it. The fp32 weights stay as they are and the copies come on top of them:
//
//   bf16  each weight rounded to bf16 (nearest, ties to even): 2 bytes per weight, logits move by
//         about bf16's relative precision (2^-9) of each product's terms;
//   int8  each block of 32 consecutive weights of a row (kernels/cpu/int8_rows.h) as one fp32
//         scale d = max |w| / 127 and 32 integers q = round(w / d) in [-127, 127], w ~ q * d:
//         1.125 bytes per weight, each weight off by at most d / 2 (llama.cpp's Q8_0 rounding,
//         with an fp32 scale).
//
//   llmcc::DecodeWeights copies(model->params(), llmcc::DecodeDtype::Int8);  // every 2-D parameter
//   llmcc::DecodeWeightsScope use(copies);  // while alive: one-row linear products
//   ... generate ...                        // whose weight has a copy read the copy
//
// Only products of one row against a weight (linear of a (1, C) input, the fast kernels) take a
// copy; prompts (several rows), training and the reference kernels compute in fp32 as before. One
// scope is active at a time in a process; a nested scope hides the outer one until it ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmcc/parameters.h"

namespace llmcc {

enum class DecodeDtype { Bf16, Int8 };

// "bf16", "int8".
const char* decode_dtype_name(DecodeDtype dtype);
// The dtype named so ("bf16", "int8"), else none.
std::optional<DecodeDtype> parse_decode_dtype(std::string_view name);

class DecodeWeights {
 public:
  // One matrix's copy: bf16 (rows, cols) for Bf16; q (rows, cols) and scales
  // (rows, ceil(cols / 32)) for Int8. The other pointers are null.
  struct Matrix {
    const std::uint16_t* bf16 = nullptr;
    const std::int8_t* q = nullptr;
    const float* scales = nullptr;
  };

  // Copies every 2-D tensor of `params` (matrices and embeddings; vectors such as norm weights
  // stay fp32). The store must outlive the copies and keep its storage where it is. Int8 needs
  // finite weights: a NaN or infinity throws llmcc::Error naming the parameter.
  DecodeWeights(const ParameterStore& params, DecodeDtype dtype);
  DecodeDtype dtype() const { return dtype_; }
  // The copy of the matrix whose fp32 data starts at w, when that matrix has `cols` columns and
  // at least `rows` rows (the part a product reads); else null.
  const Matrix* copy_of(const float* w, std::int64_t rows, std::int64_t cols) const;
  std::size_t bytes() const;
  std::size_t matrices() const { return at_.size(); }

 private:
  DecodeDtype dtype_;
  std::vector<std::uint16_t> bf16_;
  std::vector<std::int8_t> q_;
  std::vector<float> scales_;
  struct Copy {
    Matrix m;
    std::int64_t rows, cols;
  };
  std::unordered_map<const float*, Copy> at_;  // by the fp32 data's address
};

class DecodeWeightsScope {
 public:
  explicit DecodeWeightsScope(const DecodeWeights& weights);
  ~DecodeWeightsScope();
  DecodeWeightsScope(const DecodeWeightsScope&) = delete;
  DecodeWeightsScope& operator=(const DecodeWeightsScope&) = delete;

 private:
  const DecodeWeights* previous_;
};

// The copies in use (the innermost live scope's), or null.
const DecodeWeights* active_decode_weights();

}  // namespace llmcc
