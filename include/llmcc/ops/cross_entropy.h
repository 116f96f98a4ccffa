// cross_entropy: fused softmax + cross-entropy loss, the mean over the tokens whose target is
// not ignore_index; and its tangent, for adgen's forward mode. Only the first vocab_size columns of the logits are real
// classes: GPT-2 pads its vocabulary from 50257 to 50304 columns, and the padded columns take no probability and get no
// gradient.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// What the backward reads besides logits and targets.
struct CrossEntropySaved {
  Tensor lse;     // (N): log-sum-exp over the real vocab, for every row (ignored ones too)
  int count = 0;  // tokens whose target is not ignore_index
};

// loss = (1 / count) * sum over rows n with targets[n] != ignore_index of
//        lse[n] - logits[n, targets[n]],  lse[n] = log sum_{v < vocab_size} exp(logits[n, v]).
// logits: (B, T, Vp) with targets (B, T), or (N, Vp) with targets of any (B, T) with
// B * T == N; 1 <= vocab_size <= Vp. Every target is in [0, vocab_size) or equal to
// ignore_index (PyTorch uses -100, llm.c -1). The sum is accumulated in double.
// When every target is ignored the loss is 0 and count is 0 (PyTorch would return NaN), and
// the pullback adds nothing: an all-padding micro-batch contributes neither loss nor gradient.
float cross_entropy(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index);
// The same, also filling saved.lse (N) from the current arena and saved.count.
float cross_entropy_fwd(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                        CrossEntropySaved& saved);

// d_logits[n, v] += d_out / count * (softmax(logits[n, :vocab_size])[v] - [v == targets[n]])
// for v < vocab_size and rows that are not ignored; padded columns, ignored rows (and all of
// d_logits when count is 0) are left unchanged. A null d_logits is skipped. `out` is not read.
void cross_entropy_pullback(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index, float out,
                            const CrossEntropySaved& saved, float d_out, Tensor* d_logits);

// The tangent of cross_entropy(logits, ...) along `tangent` (logits' shape):
// (1 / count) sum over rows that count of sum_{v < vocab_size} p[n, v] tangent[n, v] -
// tangent[n, targets[n]], p = softmax(logits[n, :vocab_size]); 0 when count is 0. Arguments and
// checks as cross_entropy's.
float cross_entropy_tangent(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                            const Tensor& tangent);
// With g = d_out / count, for v < vocab_size and rows that count (s_n the row's sum above):
//   d_logits += g p (tangent - s_n)  (the loss's Hessian times the tangent),
//   d_tangent += g (p - [v == targets[n]])  (the loss's gradient);
// padded columns and ignored rows unchanged; each may be null (skipped). `out` is not read.
void cross_entropy_tangent_pullback(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                                    const Tensor& tangent, float out, float d_out, Tensor* d_logits, Tensor* d_tangent);

}  // namespace llmcc
