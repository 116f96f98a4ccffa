#include "kernels/cpu/linear.h"

#include <algorithm>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_amx.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/thread_buffer.h"
#include "llmcc/decode_weights.h"
#include "llmcc/runtime.h"

namespace llmcc::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a team costs more.
constexpr std::int64_t kParallelMin = 32768;
// Columns per block of the bias sum: 64 floats are four AVX-512 registers of accumulators, and
// OC = 768 gives 12 blocks to share between threads.
constexpr std::int64_t kBiasBlock = 64;

// C = op(A) . op(B) + beta * C (+ bias): the GEMM library in fp32, or llmcc's bf16 GEMM (AMX
// tiles or the packed vdpbf16ps kernel, gemm_amx.h) when llmcc::matmul_dtype() is Bf16.
void matmul(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc, const float* bias) {
  if (matmul_dtype() == MatmulDtype::Bf16) {
    gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
  } else if (bias) {
    gemm_bias(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
  } else {
    gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  }
}

// Whether a product on a bf16 weight runs on the weight's own bits (gemm_packed_b_bf16, which
// widens or pairs the values as it packs them) rather than on widened blocks: everywhere but
// where the bf16 GEMM is AMX's, whose packing reads floats.
// M, N, K: the product's.
bool packs_bf16_weight(int M, int N, int K) {
  return matmul_dtype() != MatmulDtype::Bf16 || !gemm_bf16_uses_amx(M, N, K);
}

// Rows of a bf16 weight widened per block (for AMX's bf16 GEMM): about 2M floats (8 MB), so a
// block is a few of the GEMM's own KC x NC panels and the widening (6 bytes moved per weight)
// stays small beside the 2 N flops each weight takes; whole micro-kernel column panels (32) where
// the rows allow.
std::int64_t widen_rows(std::int64_t rows, std::int64_t cols) {
  const std::int64_t target = std::max<std::int64_t>(32, (std::int64_t{1} << 21) / std::max<std::int64_t>(cols, 1));
  return std::min(rows, target / 32 * 32);
}

// The calling thread's widening buffer (thread_buffer.h).
struct WidenTag;
float* widen_buffer(std::size_t floats) {
  return thread_buffer<WidenTag>(floats, "linear", "to widen a block of a bf16 weight");
}

// dst[i] = the float of bf16 src[i] for i < n, on the team.
void widen(float* dst, const std::uint16_t* src, std::int64_t n) {
  parallel_for(n, n > kParallelMin,
               [&](std::int64_t begin, std::int64_t end) { bf16_to_floats(src + begin, dst + begin, end - begin); });
}

}  // namespace

void linear_forward_bf16w(float* out, const float* x, const std::uint16_t* w, const float* b, std::int64_t N,
                          std::int64_t C, std::int64_t OC) {
  if (N == 1) {
    gemv_rows_bf16(static_cast<int>(OC), static_cast<int>(C), x, w, static_cast<int>(C), out, b);
    return;
  }
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC);
  if (packs_bf16_weight(n, oc, c)) {
    // out (N, OC) = x (N, C) . w^T (C, OC) (+ b)
    gemm_packed_b_bf16(matmul_dtype() == MatmulDtype::Bf16, false, true, n, oc, c, 1.0f, x, c, w, c, 0.0f, out, oc, b);
    return;
  }
  const std::int64_t block = widen_rows(OC, C);
  float* wide = widen_buffer(static_cast<std::size_t>(block * C));  // (block, C)
  for (std::int64_t o0 = 0; o0 < OC; o0 += block) {
    const std::int64_t rows = std::min(block, OC - o0);
    widen(wide, w + o0 * C, rows * C);
    // out[:, o0:o0 + rows] = x (N, C) . wide^T (C, rows) (+ b[o0:]): each element of out sums its
    // K in the order the unblocked product would.
    matmul(false, true, static_cast<int>(N), static_cast<int>(rows), static_cast<int>(C), x, static_cast<int>(C), wide,
           static_cast<int>(C), 0.0f, out + o0, static_cast<int>(OC), b ? b + o0 : nullptr);
  }
}

void linear_backward_bf16w(float* d_x, const float* d_out, const std::uint16_t* w, std::int64_t N, std::int64_t C,
                           std::int64_t OC, bool overwrite_dx) {
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC);
  if (packs_bf16_weight(n, c, oc)) {
    // d_x (N, C) += d_out (N, OC) . w (OC, C), or = with overwrite_dx
    gemm_packed_b_bf16(matmul_dtype() == MatmulDtype::Bf16, false, false, n, c, oc, 1.0f, d_out, oc, w, c,
                       overwrite_dx ? 0.0f : 1.0f, d_x, c, nullptr);
    return;
  }
  const std::int64_t block = widen_rows(OC, C);
  float* wide = widen_buffer(static_cast<std::size_t>(block * C));  // (block, C)
  for (std::int64_t o0 = 0; o0 < OC; o0 += block) {
    const std::int64_t rows = std::min(block, OC - o0);
    widen(wide, w + o0 * C, rows * C);
    // d_x (N, C) += d_out[:, o0:o0 + rows] (N, rows) . wide (rows, C); the first block writes
    // when overwrite_dx.
    const float beta = overwrite_dx && o0 == 0 ? 0.0f : 1.0f;
    matmul(false, false, static_cast<int>(N), static_cast<int>(C), static_cast<int>(rows), d_out + o0,
           static_cast<int>(OC), wide, static_cast<int>(C), beta, d_x, static_cast<int>(C), nullptr);
  }
}

void linear_forward(float* out, const float* x, const float* w, const float* b, std::int64_t N, std::int64_t C,
                    std::int64_t OC) {
  // One row against a weight with a low-precision copy in use (llmcc/decode_weights.h): read the copy.
  if (N == 1) {
    if (const DecodeWeights* copies = active_decode_weights()) {
      if (const DecodeWeights::Matrix* m = copies->copy_of(w, OC, C)) {
        const int n = static_cast<int>(OC), k = static_cast<int>(C);
        if (m->bf16 != nullptr)
          gemv_rows_bf16(n, k, x, m->bf16, k, out, b);
        else
          gemv_rows_int8(n, k, x, m->q, m->scales, out, b);
        return;
      }
    }
  }
  // out (N, OC) = x (N, C) . w^T (+ b), w stored (OC, C).
  matmul(false, true, static_cast<int>(N), static_cast<int>(OC), static_cast<int>(C), x, static_cast<int>(C), w,
         static_cast<int>(C), 0.0f, out, static_cast<int>(OC), b);
}

void linear_backward(float* d_x, float* d_w, float* d_b, const float* d_out, const float* x, const float* w,
                     std::int64_t N, std::int64_t C, std::int64_t OC, bool overwrite_dx) {
  if (d_x) {
    // d_x (N, C) += d_out (N, OC) . w (OC, C), or = with beta 0
    matmul(false, false, static_cast<int>(N), static_cast<int>(C), static_cast<int>(OC), d_out, static_cast<int>(OC), w,
           static_cast<int>(C), overwrite_dx ? 0.0f : 1.0f, d_x, static_cast<int>(C), nullptr);
  }
  if (d_w) {
    // d_w (OC, C) += d_out^T (OC, N) . x (N, C); d_out is stored (N, OC).
    matmul(true, false, static_cast<int>(OC), static_cast<int>(C), static_cast<int>(N), d_out, static_cast<int>(OC), x,
           static_cast<int>(C), 1.0f, d_w, static_cast<int>(C), nullptr);
  }
  if (d_b) {
    // Each block of columns is summed over all rows by one thread: rows are read contiguously
    // and the inner loop vectorises, with no reduction across threads.
    const std::int64_t blocks = (OC + kBiasBlock - 1) / kBiasBlock;
    parallel_for(blocks, N * OC > kParallelMin, [&](std::int64_t blk_begin, std::int64_t blk_end) {
      for (std::int64_t blk = blk_begin; blk < blk_end; ++blk) {
        const std::int64_t o0 = blk * kBiasBlock, width = std::min(kBiasBlock, OC - o0);
        float acc[kBiasBlock] = {};
        for (std::int64_t n = 0; n < N; ++n) {
          const float* row = d_out + n * OC + o0;
#pragma omp simd
          for (std::int64_t j = 0; j < width; ++j) acc[j] += row[j];
        }
        for (std::int64_t j = 0; j < width; ++j) d_b[o0 + j] += acc[j];
      }
    });
  }
}

}  // namespace llmcc::cpu
