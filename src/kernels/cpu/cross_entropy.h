// Fast kernels for cross_entropy on float: OpenMP over rows, vectorised max / exp-sum /
// softmax passes (fast_exp from kernels/cpu/fast_math.h so that the loops vectorise).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// lse[n] = log sum_{v < V} exp(logits[n, v]) for every row; returns the mean over
// non-ignored rows of lse[n] - logits[n, targets[n]] (summed in double in row order, so the
// result does not depend on the thread count; 0 when every row is ignored) and writes their
// number to *count.  logits: (N, Vp); targets, lse: (N).
double cross_entropy_forward(float* lse, std::int64_t* count, const float* logits, const std::int32_t* targets,
                             std::int64_t N, std::int64_t V, std::int64_t Vp, std::int32_t ignore_index);

// d_logits[n, v] += scale * (softmax_v - [v == targets[n]]) for v < V, non-ignored rows.
// With overwrite, = instead of +=, and every other element (ignored rows, padded columns
// v >= V) is written 0: d_logits' old contents are not read.
// logits, d_logits: (N, Vp); lse, targets: (N); scale = d_out / count.
void cross_entropy_backward(float* d_logits, const float* logits, const float* lse, const std::int32_t* targets,
                            float scale, std::int64_t N, std::int64_t V, std::int64_t Vp, std::int32_t ignore_index,
                            bool overwrite = false);

}  // namespace llmcc::cpu
