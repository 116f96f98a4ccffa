// Reference kernels for token_embedding and token_position_embedding: scalar loops, templated
// on the scalar type so that gradient tests can run them in double.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[b, t, :] = wte[idx[b, t], :] (+ wpe[t, :] unless wpe is null).
// idx: (B, T); wte: (V, C); wpe: (maxT, C) with maxT >= T; out: (B, T, C).
template <class S>
void embedding_forward(S* out, const std::int32_t* idx, const S* wte, const S* wpe, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t bt = b * T + t;
      const S* e = wte + static_cast<std::int64_t>(idx[bt]) * C;
      S* o = out + bt * C;
      for (std::int64_t c = 0; c < C; ++c) o[c] = wpe ? e[c] + wpe[t * C + c] : e[c];
    }
  }
}

// d_wte[idx[b, t], :] += d_out[b, t, :];  d_wpe[t, :] += d_out[b, t, :]; in (b, t) order, which
// the fast kernel keeps per element. Null adjoints are skipped; d_wte and d_wpe may alias.
// d_out: (B, T, C); d_wte: (V, C); d_wpe: (maxT, C).
template <class S>
void embedding_backward(S* d_wte, S* d_wpe, const S* d_out, const std::int32_t* idx, std::int64_t B, std::int64_t T,
                        std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t bt = b * T + t;
      const S* g = d_out + bt * C;
      if (d_wte) {
        S* d = d_wte + static_cast<std::int64_t>(idx[bt]) * C;
        for (std::int64_t c = 0; c < C; ++c) d[c] += g[c];
      }
      if (d_wpe) {
        for (std::int64_t c = 0; c < C; ++c) d_wpe[t * C + c] += g[c];
      }
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
