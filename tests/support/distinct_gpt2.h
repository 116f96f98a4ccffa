// A GPT-2 whose every parameter element is distinct, for tests of weight files and name
// mappings (model_weights.h).
#pragma once

#include <cstdint>
#include <string>

#include "gpt2.grad.h"  // the generated parameter list
#include "llmcc/tensor.h"
#include "model_weights.h"
#include "models/gpt2/gpt2_weights.h"

namespace llmcc::test {

// Element k (counting through for_each_parameter) is 1e-3 k + 0.25 sin(k); wte's padding rows
// (vocab_size..padded_vocab_size) are zero, as a loaded model has them.
inline models::Gpt2Weights distinct_gpt2(const models::Gpt2Config& c) {
  models::Gpt2Weights w = models::make_gpt2(c);
  fill_distinct(w.model, [&](const std::string& name, std::int64_t i) {
    return name == "wte" && i >= std::int64_t{c.vocab_size} * c.n_embd;
  });
  return w;
}

}  // namespace llmcc::test
