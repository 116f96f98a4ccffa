#include "kernels/cpu/lora_linear.h"

#include <algorithm>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_amx.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/thread_buffer.h"
#include "llmcc/runtime.h"

namespace llmcc::cpu {
namespace {

// Rows of the masked input formed at a time: about 1M floats (4 MB), so the rank-R products of a
// block keep the GEMM's threads busy while the buffer stays well below the step's arena.
std::int64_t mask_rows(std::int64_t N, std::int64_t C) {
  return std::max<std::int64_t>(1, std::min(N, (std::int64_t{1} << 20) / std::max<std::int64_t>(C, 1)));
}

// The calling thread's buffer for masked rows (thread_buffer.h).
struct MaskTag;
float* mask_buffer(std::size_t floats) {
  return thread_buffer<MaskTag>(floats, "lora_linear", "for a block of the adapter's masked input");
}

constexpr std::int64_t kParallelMin = 1 << 14;

// A rank-R product, in the run's matmul dtype as the base product is: on operands rounded to
// bf16 under --dtype bf16 (as PyTorch's autocast runs an adapter's products), else in fp32.
void product(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
             int ldb, float beta, float* C, int ldc) {
  if (matmul_dtype() == MatmulDtype::Bf16) {
    gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr);
  } else {
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// dst (rows, C) = x[row0 .. row0 + rows) . m, on the team.
void masked_rows(float* dst, const float* x, std::int64_t row0, std::int64_t rows, std::int64_t C,
                 const DropoutMask& mask) {
  parallel_for(rows, rows * C > kParallelMin, [&](std::int64_t begin, std::int64_t end) {
    dropout_rows(dst + begin * C, x + (row0 + begin) * C, row0 + begin, end - begin, C, mask);
  });
}

// d_x[row0 .. row0 + rows) += s t . m for t (rows, C), on the team.
void add_masked_rows(float* d_x, const float* t, std::int64_t row0, std::int64_t rows, std::int64_t C, float s,
                     const DropoutMask& mask) {
  parallel_for(rows, rows * C > kParallelMin, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      mask.add_times_row(d_x + (row0 + i) * C, t + i * C, s, C, mask.row_key(row0 + i));
  });
}

struct ScaledTag;
struct TransposedTag;

// d_b (OC, R) += s d_out^T . xa. In bf16 as (R, OC) = xa^T . d_out into a buffer, then added in
// transposed: the GEMM's tiles are 32 columns wide, so the direct form (R = 16 columns) leaves
// half of every tile's vdpbf16ps idle, where the transposed one spreads OC over the columns.
// fp32 keeps the direct form, whose tiles are narrower and gain nothing from the extra pass.
void adapter_b_gradient(float* d_b, const float* d_out, const float* xa, float s, int n, int oc, int r) {
  if (matmul_dtype() != MatmulDtype::Bf16) {
    product(true, false, oc, r, n, s, d_out, oc, xa, r, 1.0f, d_b, r);
    return;
  }
  float* t = thread_buffer<TransposedTag>(static_cast<std::size_t>(r) * oc, "lora_linear",
                                          "for the adapter's transposed gradient");  // (R, OC)
  product(true, false, r, oc, n, s, xa, r, d_out, oc, 0.0f, t, oc);
  parallel_for(oc, std::int64_t{oc} * r > kParallelMin, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o)
      for (int j = 0; j < r; ++j) d_b[o * r + j] += t[j * std::int64_t{oc} + o];
  });
}

// C (M, N) = A (M, K) . op(w) + beta C (+ bias) + s a2 (M, R) . op(b2) (R, N): the base product
// of a map (forward: op(w) = w^T, trans_w; backward: op(w) = w) with the rank-R update in the
// same pass over C (gemm_packed.h's SecondProduct), when llmcc's packed GEMM runs the base
// product: not on AMX tiles, not with another fp32 GEMM library, not for a few rows (the
// one-row and skinny products). Returns false, computing nothing, otherwise.
bool base_with_update(bool trans_w, int M, int N, int K, const float* A, LoraWeight w, int ldw, float beta, float* C,
                      const float* bias, float s, const float* a2, int R, bool trans_b2, const float* b2, int ldb2) {
  const bool bf16 = matmul_dtype() == MatmulDtype::Bf16;
  if (M <= 4 || N <= 4 || K <= 4) return false;
  if (bf16 ? gemm_bf16_uses_amx(M, N, K) : (!w.bf16 && !gemm_is_packed())) return false;
  // s a2 in a buffer of the calling thread's (kept across calls), so that the update shares the
  // base product's alpha (1) and joins its last slice of K.
  const std::size_t count = static_cast<std::size_t>(M) * R;
  float* scaled = thread_buffer<ScaledTag>(count, "lora_linear", "for the update's scaled rows");  // (M, R)
  for (std::size_t i = 0; i < count; ++i) scaled[i] = s * a2[i];
  const SecondProduct update{R, 1.0f, scaled, R, trans_b2, b2, ldb2};
  if (w.bf16) {
    gemm_packed_b_bf16(bf16, false, trans_w, M, N, K, 1.0f, A, K, w.bf16, ldw, beta, C, N, bias, update);
  } else {
    gemm_packed_with_second(bf16, false, trans_w, M, N, K, 1.0f, A, K, w.f32, ldw, beta, C, N, bias, update);
  }
  return true;
}

}  // namespace

void lora_linear_forward(float* out, float* xa, const float* x, LoraWeight w, const float* a, const float* b, float s,
                         std::int64_t N, std::int64_t C, std::int64_t OC, std::int64_t R, const Dropout& dropout,
                         const float* bias) {
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC), r = static_cast<int>(R);
  if (!dropout.active()) {
    product(false, true, n, r, c, 1.0f, x, c, a, c, 0.0f, xa, r);  // xa (N, R) = x . a^T
  } else {
    const DropoutMask mask(dropout);
    const std::int64_t block = mask_rows(N, C);
    float* xm = mask_buffer(static_cast<std::size_t>(block * C));  // (block, C)
    for (std::int64_t i0 = 0; i0 < N; i0 += block) {
      const std::int64_t rows = std::min(block, N - i0);
      masked_rows(xm, x, i0, rows, C, mask);
      // xa[i0 ..] (rows, R) = (x . m)[i0 ..] . a^T
      product(false, true, static_cast<int>(rows), r, c, 1.0f, xm, c, a, c, 0.0f, xa + i0 * R, r);
    }
  }
  // out (N, OC) = x . w^T (+ bias) + s xa . b^T, in one pass where the packed GEMM can.
  if (base_with_update(true, n, oc, c, x, w, c, 0.0f, out, bias, s, xa, r, true, b, r)) return;
  if (w.bf16)
    linear_forward_bf16w(out, x, w.bf16, bias, N, C, OC);
  else
    linear_forward(out, x, w.f32, bias, N, C, OC);
  product(false, true, n, oc, r, s, xa, r, b, r, 1.0f, out, oc);  // out += s xa . b^T
}

void lora_linear_backward(float* d_x, float* d_w, float* d_a, float* d_b, float* g, const float* d_out, const float* x,
                          LoraWeight w, const float* a, const float* b, const float* xa, float s, std::int64_t N,
                          std::int64_t C, std::int64_t OC, std::int64_t R, bool overwrite_dx, const Dropout& dropout,
                          float* d_bias) {
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC), r = static_cast<int>(R);
  if (g) product(false, false, n, r, oc, 1.0f, d_out, oc, b, r, 0.0f, g, r);  // g (N, R) = d_out . b
  // d_x (N, C) (+)= d_out . w + s g . a, in one pass where the packed GEMM can (with a dropout
  // the update's part is masked first: below).
  const bool dx_done =
      d_x && !dropout.active() &&
      base_with_update(false, n, c, oc, d_out, w, c, overwrite_dx ? 0.0f : 1.0f, d_x, nullptr, s, g, r, false, a, c);
  float* base_dx = dx_done ? nullptr : d_x;  // d_x for the base product alone
  if (w.bf16) {
    if (base_dx) linear_backward_bf16w(base_dx, d_out, w.bf16, N, C, OC, overwrite_dx);
    if (d_bias) linear_backward(nullptr, nullptr, d_bias, d_out, x, nullptr, N, C, OC);
  } else {
    linear_backward(base_dx, d_w, d_bias, d_out, x, w.f32, N, C, OC, overwrite_dx);
  }
  if (!dropout.active()) {
    if (base_dx) product(false, false, n, c, r, s, g, r, a, c, 1.0f, d_x, c);  // d_x += s g . a
    if (d_a) product(true, false, r, c, n, s, g, r, x, c, 1.0f, d_a, c);       // d_a += s g^T . x
  } else if (d_x || d_a) {
    const DropoutMask mask(dropout);
    const std::int64_t block = mask_rows(N, C);
    float* buf = mask_buffer(static_cast<std::size_t>(block * C));  // (block, C)
    for (std::int64_t i0 = 0; i0 < N; i0 += block) {
      const int rows = static_cast<int>(std::min(block, N - i0));
      const float* g0 = g + i0 * R;  // (rows, R)
      if (d_x) {
        // d_x[i0 ..] += s (g . a)[i0 ..] . m (the base product above wrote d_x already).
        product(false, false, rows, c, r, 1.0f, g0, r, a, c, 0.0f, buf, c);
        add_masked_rows(d_x, buf, i0, rows, C, s, mask);
      }
      if (d_a) {
        // d_a += s g[i0 ..]^T . (x . m)[i0 ..]
        masked_rows(buf, x, i0, rows, C, mask);
        product(true, false, r, c, rows, s, g0, r, buf, c, 1.0f, d_a, c);
      }
    }
  }
  if (d_b) adapter_b_gradient(d_b, d_out, xa, s, n, oc, r);  // d_b += s d_out^T . xa
}

}  // namespace llmcc::cpu
