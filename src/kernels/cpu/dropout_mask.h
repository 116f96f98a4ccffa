// Dropout masks drawn from a counter-based hash: element (i, j) of an (N, C) input is kept or
// dropped by a hash of (seed, i, j) alone, so the forward and the pullback draw the same mask
// without storing it, on any thread count and any instruction set (32-bit integer arithmetic).
// A kept element is multiplied by 1 / (1 - p), as in PyTorch's nn.Dropout.
//
// The hash is Wellons' "lowbias32" (a bijection of 32-bit values with a bias near the best known
// for two multiplies). An element's value is the hash of its row's key (the seed's and the row
// index's halves mixed) xor the hash of its column: with key + column instead, two rows whose keys
// differ by less than C would share a run of their masks, shifted. It is dropped when its top 24
// bits are below round(p * 2^24), so p is honoured to 6e-8.
#pragma once

#include <cmath>
#include <cstdint>

namespace llmcc::cpu {

// The dropout of an op's input: probability p in [0, 1) (0: none) and the seed of its mask.
struct Dropout {
  float p = 0.0f;
  std::uint64_t seed = 0;
  bool active() const { return p > 0.0f; }
};

inline std::uint32_t lowbias32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

class DropoutMask {
 public:
  explicit DropoutMask(const Dropout& d)
      : threshold_(static_cast<std::uint32_t>(std::lround(static_cast<double>(d.p) * 16777216.0))),
        seed_lo_(static_cast<std::uint32_t>(d.seed)),
        seed_hi_(static_cast<std::uint32_t>(d.seed >> 32)),
        scale_(d.p > 0.0f ? 1.0f / (1.0f - d.p) : 1.0f) {}

  // The key of row i.
  std::uint32_t row_key(std::int64_t i) const {
    const auto u = static_cast<std::uint64_t>(i);
    const std::uint32_t h = lowbias32(static_cast<std::uint32_t>(u >> 32) ^ lowbias32(seed_hi_ ^ 0x9e3779b9U));
    return lowbias32(static_cast<std::uint32_t>(u) ^ lowbias32(h ^ seed_lo_));
  }
  // 1 / (1 - p) for a kept element of the row with key `key`, 0 for a dropped one.
  float factor(std::uint32_t key, std::int64_t j) const {
    return (lowbias32(key ^ column_hash(j)) >> 8) < threshold_ ? 0.0f : scale_;
  }
  float scale() const { return scale_; }

  // dst[j] = src[j] * factor(key, j) for j < C. The mask's fields are read into locals first:
  // a store through dst could otherwise alias them, and the loop would reload them and stay
  // scalar.
  void times_row(float* __restrict dst, const float* __restrict src, std::int64_t C, std::uint32_t key) const {
    const std::uint32_t threshold = threshold_;
    const float scale = scale_;
    for (std::int64_t j = 0; j < C; ++j)
      dst[j] = src[j] * ((lowbias32(key ^ column_hash(j)) >> 8) < threshold ? 0.0f : scale);
  }
  // dst[j] += s * (src[j] * factor(key, j)) for j < C.
  void add_times_row(float* __restrict dst, const float* __restrict src, float s, std::int64_t C,
                     std::uint32_t key) const {
    const std::uint32_t threshold = threshold_;
    const float scale = scale_;
    for (std::int64_t j = 0; j < C; ++j)
      dst[j] += s * (src[j] * ((lowbias32(key ^ column_hash(j)) >> 8) < threshold ? 0.0f : scale));
  }

 private:
  static std::uint32_t column_hash(std::int64_t j) { return lowbias32(static_cast<std::uint32_t>(j) + 0x632be5abU); }

  std::uint32_t threshold_, seed_lo_, seed_hi_;
  float scale_;
};

// dst[i, j] = x[i, j] * factor(i, j) for the rows [row0, row0 + rows) of an (N, C) input, dst
// holding those rows only.
inline void dropout_rows(float* dst, const float* x, std::int64_t row0, std::int64_t rows, std::int64_t C,
                         const DropoutMask& mask) {
  for (std::int64_t i = 0; i < rows; ++i) mask.times_row(dst + i * C, x + i * C, C, mask.row_key(row0 + i));
}

}  // namespace llmcc::cpu
