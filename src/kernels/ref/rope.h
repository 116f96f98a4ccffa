// Reference kernels for rope: scalar loops, templated on the scalar type so that gradient tests
// can run them in double. Frequencies and angles are computed in double whatever the scalar type.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "llmcc/ops/rope.h"
#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// The inverse frequency of pair i (of HS/2): theta^(-2i/HS), then rescaled as RopeScaling says
// (the formula is written out at llmcc::rope_inv_freq in llmcc/ops/rope.h).
inline double rope_inv_freq(const RopeConfig& cfg, int i, int HS) {
  const double f = std::pow(static_cast<double>(cfg.theta), -2.0 * i / HS);
  if (cfg.scaling.type == RopeScaling::Type::None) return f;
  const RopeScaling& s = cfg.scaling;
  const double L = s.original_max_position_embeddings, low = s.low_freq_factor, high = s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / f;
  if (wavelen < L / high) return f;                          // high frequencies: kept
  if (wavelen > L / low) return f / s.factor;                // low frequencies: scaled by the factor
  const double smooth = (L / wavelen - low) / (high - low);  // in [0, 1] between the two
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

// The rotation angle of pair i (of HS/2) at position pos.
inline double rope_angle(std::int64_t pos, int i, int HS, const RopeConfig& cfg) {
  return static_cast<double>(pos) * ref::rope_inv_freq(cfg, i, HS);
}

// out = x with each pair (x[2i], x[2i+1]) of each head rotated by rope_angle(pos_offset + t, i).
// x, out: (B, T, NH * HS).
template <class S>
void rope_forward(S* out, const S* x, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset) {
  const std::int64_t C = static_cast<std::int64_t>(NH) * HS;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) {
        const std::int64_t base = (static_cast<std::int64_t>(b) * T + t) * C + h * HS;
        for (int i = 0; i < HS / 2; ++i) {
          const double a = rope_angle(static_cast<std::int64_t>(pos_offset) + t, i, HS, cfg);
          const S c = static_cast<S>(std::cos(a)), s = static_cast<S>(std::sin(a));
          const S x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
          out[base + 2 * i] = x0 * c - x1 * s;
          out[base + 2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  }
}

// d_x += the transpose (= inverse) rotation of d_out:
//   d_x[2i] += d_out[2i] * cos + d_out[2i+1] * sin,  d_x[2i+1] += -d_out[2i] * sin + d_out[2i+1] * cos.
// d_out, d_x: (B, T, NH * HS).
template <class S>
void rope_backward(S* d_x, const S* d_out, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset) {
  const std::int64_t C = static_cast<std::int64_t>(NH) * HS;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) {
        const std::int64_t base = (static_cast<std::int64_t>(b) * T + t) * C + h * HS;
        for (int i = 0; i < HS / 2; ++i) {
          const double a = rope_angle(static_cast<std::int64_t>(pos_offset) + t, i, HS, cfg);
          const S c = static_cast<S>(std::cos(a)), s = static_cast<S>(std::sin(a));
          const S g0 = d_out[base + 2 * i], g1 = d_out[base + 2 * i + 1];
          d_x[base + 2 * i] += g0 * c + g1 * s;
          d_x[base + 2 * i + 1] += -g0 * s + g1 * c;
        }
      }
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
