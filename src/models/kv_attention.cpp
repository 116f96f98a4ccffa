#include "models/kv_attention.h"

#include <cmath>
#include <limits>

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::models {

namespace {
// Below this many multiply-adds (NH * n * HS, twice) one thread is faster than waking a team.
constexpr std::int64_t kParallelMin = 16384;
}  // namespace

void attention_single_query(float* out, const float* q, const float* k, const float* v, int n, int NH, int NKV, int HS,
                            std::int64_t stride, float* scores) {
  const int group = NH / NKV;  // query heads per key/value head
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  cpu::parallel_for(NH, std::int64_t{NH} * n * HS > kParallelMin, [&](std::int64_t begin, std::int64_t end) {
    for (int h = static_cast<int>(begin); h < static_cast<int>(end); ++h) {
      const float* qh = q + std::int64_t{h} * HS;                // (HS)
      float* s = scores + std::int64_t{h} * n;                   // (n)
      const std::int64_t kv_col = std::int64_t{h / group} * HS;  // the key/value head's columns
      float max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) {
        const float* kj = k + j * stride + kv_col;  // (HS)
        s[j] = cpu::ordered_sum(HS, [&](std::int64_t d) { return qh[d] * kj[d]; }) * scale;
        max = std::fmax(max, s[j]);
      }
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) {
        s[j] = std::exp(s[j] - max);
        sum += s[j];
      }
      float* oh = out + std::int64_t{h} * HS;  // (HS)
#pragma omp simd
      for (int d = 0; d < HS; ++d) oh[d] = 0.0f;
      for (int j = 0; j < n; ++j) {
        const float* vj = v + j * stride + kv_col;  // (HS)
        const float p = s[j];
#pragma omp simd
        for (int d = 0; d < HS; ++d) oh[d] += p * vj[d];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int d = 0; d < HS; ++d) oh[d] *= inv;
    }
  });
}

}  // namespace llmcc::models
