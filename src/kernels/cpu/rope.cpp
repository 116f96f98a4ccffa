#include "kernels/cpu/rope.h"

#include <cmath>
#include <cstddef>

#include "kernels/cpu/parallel.h"
#include "kernels/ref/rope.h"
#include "llmcc/arena.h"

namespace llmcc::cpu {
namespace {

constexpr std::int64_t kParallelElements = 16384;

// cos and sin of every (t, i) angle: two (T, HS/2) float tables from the current arena.
struct Table {
  float* cos;  // (T, HS/2)
  float* sin;  // (T, HS/2)
};
Table make_table(int T, int HS, const RopeConfig& cfg, int pos_offset) {
  const std::int64_t H2 = HS / 2;
  const auto bytes = static_cast<std::size_t>(T) * H2 * sizeof(float);
  Arena& arena = current_arena("rope");
  Table tab{static_cast<float*>(arena.allocate(bytes, "rope cos table")),
            static_cast<float*>(arena.allocate(bytes, "rope sin table"))};
  parallel_for(T, T * H2 >= 4096, [&](std::int64_t begin, std::int64_t end) {
    for (int t = static_cast<int>(begin); t < static_cast<int>(end); ++t) {
      for (int i = 0; i < H2; ++i) {
        const double a = ref::rope_angle(static_cast<std::int64_t>(pos_offset) + t, i, HS, cfg);
        tab.cos[t * H2 + i] = static_cast<float>(std::cos(a));
        tab.sin[t * H2 + i] = static_cast<float>(std::sin(a));
      }
    }
  });
  return tab;
}

// Applies the rotation (sign = +1) or its inverse (sign = -1) to every head of every row;
// out = rot(in) when accumulate is false, out += rot(in) when true.
template <bool accumulate>
void rotate(float* out, const float* __restrict in, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset,
            float sign) {
  const Table tab = make_table(T, HS, cfg, pos_offset);
  const std::int64_t H2 = HS / 2, C = static_cast<std::int64_t>(NH) * HS;
  const std::int64_t rows = static_cast<std::int64_t>(B) * T;
  parallel_for(rows, rows * C >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t t = r % T;
      const float* __restrict c = tab.cos + t * H2;
      const float* __restrict s = tab.sin + t * H2;
      for (int h = 0; h < NH; ++h) {
        const float* xr = in + r * C + h * HS;
        float* __restrict yr = out + r * C + h * HS;
#pragma omp simd
        for (std::int64_t i = 0; i < H2; ++i) {
          const float x0 = xr[2 * i], x1 = xr[2 * i + 1], si = sign * s[i];
          const float y0 = x0 * c[i] - x1 * si, y1 = x0 * si + x1 * c[i];
          if constexpr (accumulate) {
            yr[2 * i] += y0;
            yr[2 * i + 1] += y1;
          } else {
            yr[2 * i] = y0;
            yr[2 * i + 1] = y1;
          }
        }
      }
    }
  });
}

}  // namespace

void rope_forward(float* out, const float* x, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset) {
  rotate<false>(out, x, B, T, NH, HS, cfg, pos_offset, 1.0f);
}

void rope_backward(float* d_x, const float* d_out, int B, int T, int NH, int HS, const RopeConfig& cfg,
                   int pos_offset) {
  rotate<true>(d_x, d_out, B, T, NH, HS, cfg, pos_offset, -1.0f);
}

}  // namespace llmcc::cpu
