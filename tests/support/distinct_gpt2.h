// A GPT-2 whose every parameter element is distinct, for tests of weight files and name
// mappings: an element that lands in the wrong place (a missing transpose, a swapped tensor)
// changes a compared value instead of hiding among equal ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "gpt2.grad.h"  // the generated parameter list
#include "llmcc/tensor.h"
#include "nn/gpt2_weights.h"

namespace llmcc::test {

// Element k (counting through for_each_parameter) is 1e-3 k + 0.25 sin(k); wte's padding rows
// (vocab_size..padded_vocab_size) are zero, as a loaded model has them.
inline nn::Gpt2Weights distinct_gpt2(const nn::Gpt2Config& c) {
  nn::Gpt2Weights w = nn::make_gpt2(c);
  float k = 0.0f;
  llmcc::for_each_parameter(w.model, [&](const std::string& name, Tensor& t) {
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      k += 1.0f;
      const bool pad = name == "wte" && i >= std::int64_t{c.vocab_size} * c.n_embd;
      t.f32()[i] = pad ? 0.0f : 1e-3f * k + 0.25f * std::sin(k);
    }
  });
  return w;
}

}  // namespace llmcc::test
