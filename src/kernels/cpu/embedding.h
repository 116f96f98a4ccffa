// Fast kernels for token_embedding and token_position_embedding on float: OpenMP over
// positions for the gather, over channel blocks (d_wte) and positions (d_wpe) for the
// scatter-add, so the backward is race-free and its sums run in (b, t) order for every thread
// count: bit-for-bit deterministic, and equal to the reference in float.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out[b, t, :] = wte[idx[b, t], :] (+ wpe[t, :] unless wpe is null).
// idx: (B, T); wte: (V, C); wpe: (maxT, C); out: (B, T, C).
void embedding_forward(float* out, const std::int32_t* idx, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C);

// d_wte[idx[b, t], :] += d_out[b, t, :];  d_wpe[t, :] += d_out[b, t, :]. Null adjoints are
// skipped; d_wte and d_wpe may alias. d_out: (B, T, C); d_wte: (V, C); d_wpe: (maxT, C).
void embedding_backward(float* d_wte, float* d_wpe, const float* d_out, const std::int32_t* idx, std::int64_t B,
                        std::int64_t T, std::int64_t C);

}  // namespace llmcc::cpu
