// Single-query attention over a KV cache: the decode step of generation (one new position
// attends to every cached one, itself included, so no causal mask is needed).
#pragma once

#include <cstdint>

namespace llmcc::nn {

// For each head h (HS = head size, columns h*HS .. h*HS+HS-1 of a row):
//   s_j      = q_h . k_j,h / sqrt(HS)                     j = 0 .. n-1
//   out_h    = sum_j softmax(s)_j v_j,h
// q, out: (NH * HS); k, v: n rows of `stride` floats (a layer of the cache, (maxT, C) with
// stride C); scores: (NH * n) scratch. n >= 1. Heads run in parallel (OpenMP) when the work is
// large enough; the dot products and the weighted sum are SIMD loops over HS.
void attention_single_query(float* out, const float* q, const float* k, const float* v, int n, int NH, int HS,
                            std::int64_t stride, float* scores);

}  // namespace llmcc::nn
