#include "kernels/cpu/lora_linear.h"

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"

namespace llmcc::cpu {

void lora_linear_forward(float* out, float* xa, const float* x, LoraWeight w, const float* a, const float* b, float s,
                         std::int64_t N, std::int64_t C, std::int64_t OC, std::int64_t R) {
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC), r = static_cast<int>(R);
  if (w.bf16)
    linear_forward_bf16w(out, x, w.bf16, nullptr, N, C, OC);
  else
    linear_forward(out, x, w.f32, nullptr, N, C, OC);
  gemm(false, true, n, r, c, 1.0f, x, c, a, c, 0.0f, xa, r);   // xa (N, R) = x . a^T
  gemm(false, true, n, oc, r, s, xa, r, b, r, 1.0f, out, oc);  // out += s xa . b^T
}

void lora_linear_backward(float* d_x, float* d_w, float* d_a, float* d_b, float* g, const float* d_out, const float* x,
                          LoraWeight w, const float* a, const float* b, const float* xa, float s, std::int64_t N,
                          std::int64_t C, std::int64_t OC, std::int64_t R, bool overwrite_dx) {
  const int n = static_cast<int>(N), c = static_cast<int>(C), oc = static_cast<int>(OC), r = static_cast<int>(R);
  if (g) gemm(false, false, n, r, oc, 1.0f, d_out, oc, b, r, 0.0f, g, r);  // g (N, R) = d_out . b
  if (w.bf16) {
    if (d_x) linear_backward_bf16w(d_x, d_out, w.bf16, N, C, OC, overwrite_dx);
  } else {
    linear_backward(d_x, d_w, nullptr, d_out, x, w.f32, N, C, OC, overwrite_dx);
  }
  if (d_x) gemm(false, false, n, c, r, s, g, r, a, c, 1.0f, d_x, c);        // d_x += s g . a
  if (d_a) gemm(true, false, r, c, n, s, g, r, x, c, 1.0f, d_a, c);         // d_a += s g^T . x
  if (d_b) gemm(true, false, oc, r, n, s, d_out, oc, xa, r, 1.0f, d_b, r);  // d_b += s d_out^T . xa
}

}  // namespace llmcc::cpu
