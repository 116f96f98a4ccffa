// The chain rule through a merged LoRA matrix, for the families' LoRA tests: with W' = W + s B A
// (A (r, in), B (out, r)) and the merged model's own gradient dW' (out, in), the adapters'
// gradients are dB = s dW' A^T and dA = s B^T dW'. expect_chain_rule checks an adapter's
// generated gradients against those, each within 1e-4 of its largest magnitude.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "llmcc/tensor.h"

namespace llmcc::test {

// The largest difference of got and want's values, relative to want's largest magnitude.
inline double rel_diff(const std::vector<double>& got, const Tensor& want) {
  double worst = 0.0, scale = 0.0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::abs(got[static_cast<std::size_t>(i)] - double(want.f32()[i])));
    scale = std::max(scale, std::abs(double(want.f32()[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// a (r, in), b (out, r): the adapter; s its scale; d_a, d_b its generated gradients; dW (out, in)
// the merged model's gradient of the matrix it adapts.
inline void expect_chain_rule(const Tensor& a, const Tensor& b, float s, const Tensor& d_a, const Tensor& d_b,
                              const Tensor& dW) {
  const std::int64_t O = b.shape()[0], R = a.shape()[0], I = a.shape()[1];
  std::vector<double> dB(static_cast<std::size_t>(O * R), 0.0), dA(static_cast<std::size_t>(R * I), 0.0);
  for (std::int64_t o = 0; o < O; ++o)
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t i = 0; i < I; ++i) {
        const double d = s * double(dW.f32()[o * I + i]);
        dB[static_cast<std::size_t>(o * R + r)] += d * a.f32()[r * I + i];
        dA[static_cast<std::size_t>(r * I + i)] += d * b.f32()[o * R + r];
      }
  EXPECT_LT(rel_diff(dB, d_b), 1e-4);
  EXPECT_LT(rel_diff(dA, d_a), 1e-4);
}

}  // namespace llmcc::test
