// A linear classifier written as a user writes a model: the struct, its forward and its loss;
// adgen generates the backward, the parameter list and the trait the Trainer takes.
#pragma once

#include <cstdint>

#include "llmcc/adgen.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"

namespace test_train {

struct Dense {
  Dense() = default;
  Dense(std::int64_t out, std::int64_t in) : w(nullptr, llmcc::Shape{out, in}), b(nullptr, llmcc::Shape{out}) {}
  llmcc::Tensor w LLMCC_ADGEN_NAME("weight");                                             // (out, in)
  llmcc::Tensor b LLMCC_ADGEN_NAME("bias");                                               // (out)
  llmcc::Tensor forward(const llmcc::Tensor& x) const { return llmcc::linear(x, w, b); }  // (B, 1, out)
};

struct Classifier {
  int classes = 0;
  Dense hidden;  // (H, D)
  Dense head;    // (classes, H)

  Classifier() = default;
  Classifier(int D, int H, int K) : classes(K), hidden(H, D), head(K, H) {}
  llmcc::Tensor forward(const llmcc::Tensor& x) const {  // x: (B, 1, D) -> (B, 1, K)
    return head.forward(llmcc::gelu(hidden.forward(x)));
  }
};

// Mean cross-entropy of the labels y (B, 1) given features x (B, 1, D).
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float classifier_loss(const Classifier& m, const llmcc::Tensor& x,
                                                                    const llmcc::Tokens& y) {
  return llmcc::cross_entropy(m.forward(x), y, m.classes, -1);
}

}  // namespace test_train
