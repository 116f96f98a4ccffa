// Fast kernels for linear: the matrix products go through cpu::gemm (one GEMM each), the bias
// sum is an OpenMP loop over column blocks. Weight layout (OC, C) as in PyTorch.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out (N, OC) = x (N, C) . w (OC, C)^T + b (OC); b may be null. One GEMM, which adds the bias
// as it stores each tile of out (gemm_bias), so no pass over out before or after it.
void linear_forward(float* out, const float* x, const float* w, const float* b, std::int64_t N, std::int64_t C,
                    std::int64_t OC);

// d_x (N, C) += d_out . w (= with overwrite_dx: beta 0, d_x not read); d_w (OC, C) +=
// d_out^T . x (beta 1); d_b (OC) += column sums of d_out. A null adjoint skips its GEMM or sum.
void linear_backward(float* d_x, float* d_w, float* d_b, const float* d_out, const float* x, const float* w,
                     std::int64_t N, std::int64_t C, std::int64_t OC, bool overwrite_dx = false);

// The same products with w stored in bf16 (a frozen weight, rounded once: --base-dtype bf16):
// out (N, OC) = x . w^T (+ b), d_x (N, C) += d_out . w (= with overwrite_dx). The GEMM packs
// w's own bits (gemm_packed_b_bf16: as bf16 pairs for the bf16 matmul dtype, widened for fp32),
// so no float copy of w exists and the results are those of the fp32 product on w's values.
// Where the bf16 GEMM is AMX's (which packs floats), w is widened a block of rows at a time into
// a buffer of the calling thread's instead. N == 1 is a product of rows on the bf16 values
// themselves. No weight gradient: a bf16 weight is frozen.
void linear_forward_bf16w(float* out, const float* x, const std::uint16_t* w, const float* b, std::int64_t N,
                          std::int64_t C, std::int64_t OC);
void linear_backward_bf16w(float* d_x, const float* d_out, const std::uint16_t* w, std::int64_t N, std::int64_t C,
                           std::int64_t OC, bool overwrite_dx = false);

}  // namespace llmcc::cpu
