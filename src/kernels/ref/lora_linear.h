// Reference kernels for lora_linear: plain loops, templated on the scalar type so that gradient
// tests can run them in double. Layouts: x (N, C), w (OC, C), a (R, C), b (OC, R), as PEFT's.
// m (N, C) is the dropout mask of the adapter's input (kernels/cpu/dropout_mask.h; all ones
// without dropout), drawn element by element.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/dropout_mask.h"
#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// m (N, C) as values: 0 or 1 / (1 - p).
template <class T>
std::vector<T> dropout_factors(std::int64_t N, std::int64_t C, const cpu::Dropout& dropout) {
  std::vector<T> m(static_cast<std::size_t>(N * C), T(1));
  if (!dropout.active()) return m;
  const cpu::DropoutMask mask(dropout);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::uint32_t key = mask.row_key(n);
    for (std::int64_t c = 0; c < C; ++c) m[n * C + c] = static_cast<T>(mask.factor(key, c));
  }
  return m;
}

// xa (N, R) = (x . m) A^T; out (N, OC) = x W^T (+ bias) + s xa B^T.
template <class T>
void lora_linear_forward(T* out, T* xa, const T* x, const T* w, const T* a, const T* b, T s, std::int64_t N,
                         std::int64_t C, std::int64_t OC, std::int64_t R, const cpu::Dropout& dropout = {},
                         const T* bias = nullptr) {
  const std::vector<T> m = dropout_factors<T>(N, C, dropout);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t r = 0; r < R; ++r) {
      T acc = T(0);
      for (std::int64_t c = 0; c < C; ++c) acc += x[n * C + c] * m[n * C + c] * a[r * C + c];
      xa[n * R + r] = acc;
    }
    for (std::int64_t o = 0; o < OC; ++o) {
      T base = T(0), update = T(0);
      for (std::int64_t c = 0; c < C; ++c) base += x[n * C + c] * w[o * C + c];
      for (std::int64_t r = 0; r < R; ++r) update += xa[n * R + r] * b[o * R + r];
      out[n * OC + o] = base + (bias ? bias[o] : T(0)) + s * update;
    }
  }
}

// With G = d_out B (N, R): d_x += d_out W + s (G A) . m; d_w += d_out^T x; d_a += s G^T (x . m);
// d_b += s d_out^T xa; d_bias += column sums of d_out. Null adjoints are skipped. Only primals, xa and d_out are read,
// so adjoints that alias stay correct.
template <class T>
void lora_linear_backward(T* d_x, T* d_w, T* d_a, T* d_b, const T* d_out, const T* x, const T* w, const T* a,
                          const T* b, const T* xa, T s, std::int64_t N, std::int64_t C, std::int64_t OC, std::int64_t R,
                          const cpu::Dropout& dropout = {}, T* d_bias = nullptr) {
  const std::vector<T> m = dropout_factors<T>(N, C, dropout);
  if (d_bias) {
    for (std::int64_t o = 0; o < OC; ++o) {
      T acc = T(0);
      for (std::int64_t n = 0; n < N; ++n) acc += d_out[n * OC + o];
      d_bias[o] += acc;
    }
  }
  std::vector<T> g(static_cast<std::size_t>(N * R), T(0));  // (N, R)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t r = 0; r < R; ++r) {
      T acc = T(0);
      for (std::int64_t o = 0; o < OC; ++o) acc += d_out[n * OC + o] * b[o * R + r];
      g[n * R + r] = acc;
    }
  if (d_x) {
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c) {
        T base = T(0), update = T(0);
        for (std::int64_t o = 0; o < OC; ++o) base += d_out[n * OC + o] * w[o * C + c];
        for (std::int64_t r = 0; r < R; ++r) update += g[n * R + r] * a[r * C + c];
        d_x[n * C + c] += base + s * update * m[n * C + c];
      }
  }
  if (d_w) {
    for (std::int64_t o = 0; o < OC; ++o)
      for (std::int64_t c = 0; c < C; ++c) {
        T acc = T(0);
        for (std::int64_t n = 0; n < N; ++n) acc += d_out[n * OC + o] * x[n * C + c];
        d_w[o * C + c] += acc;
      }
  }
  if (d_a) {
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t c = 0; c < C; ++c) {
        T acc = T(0);
        for (std::int64_t n = 0; n < N; ++n) acc += g[n * R + r] * x[n * C + c] * m[n * C + c];
        d_a[r * C + c] += s * acc;
      }
  }
  if (d_b) {
    for (std::int64_t o = 0; o < OC; ++o)
      for (std::int64_t r = 0; r < R; ++r) {
        T acc = T(0);
        for (std::int64_t n = 0; n < N; ++n) acc += d_out[n * OC + o] * xa[n * R + r];
        d_b[o * R + r] += s * acc;
      }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
