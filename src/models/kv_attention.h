// Single-query attention over a KV cache: the decode step of generation (one new position
// attends to every cached one, itself included, so no causal mask is needed).
#pragma once

#include <cstdint>

namespace llmcc::models {

// For each query head h (HS = head size) reading key/value head g = h / (NH / NKV) (grouped-query
// attention; NKV = NH is plain multi-head attention):
//   s_j      = q_h . k_j,g / sqrt(HS)                     j = 0 .. n-1
//   out_h    = sum_j softmax(s)_j v_j,g
// q, out: (NH * HS); k, v: n rows of `stride` floats whose first NKV * HS hold the heads (a layer
// of the cache: GPT-2's (maxT, C) with stride C, Llama's (maxT, NKV * HS)); scores: (NH * n)
// scratch. n >= 1, NKV divides NH. Heads run in parallel (OpenMP) when the work is large enough;
// the dot products and the weighted sum are SIMD loops over HS.
void attention_single_query(float* out, const float* q, const float* k, const float* v, int n, int NH, int NKV, int HS,
                            std::int64_t stride, float* scores);

}  // namespace llmcc::models
