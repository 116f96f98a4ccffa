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

// The loss's tangent along t (ref::cross_entropy_tangent_forward), per-row sums in a fixed order,
// the rows summed in double in row order (`row_terms`, N doubles, is the caller's scratch).
double cross_entropy_tangent_forward(double* row_terms, const float* logits, const float* t,
                                     const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                                     std::int32_t ignore_index);
// Its pullback (ref::cross_entropy_tangent_backward); d_logits or d_t may be null. With
// overwrite_*, = instead of +=, and ignored rows and padded columns are written 0.
void cross_entropy_tangent_backward(float* d_logits, float* d_t, const float* logits, const float* t,
                                    const std::int32_t* targets, float g, std::int64_t N, std::int64_t V,
                                    std::int64_t Vp, std::int32_t ignore_index, bool overwrite_logits,
                                    bool overwrite_t);

}  // namespace llmcc::cpu
