#include "kernels/cpu/int8_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmcc::cpu {

void quantize_rows_int8(const float* w, std::int64_t rows, std::int64_t cols, std::int8_t* q, float* scales) {
  const std::int64_t nb = int8_blocks(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::int64_t c0 = b * kInt8Block, n = std::min<std::int64_t>(kInt8Block, cols - c0);
      const float* wb = w + r * cols + c0;  // (n)
      std::int8_t* qb = q + r * cols + c0;  // (n)
      float amax = 0.0f;
      bool finite = true;
      for (std::int64_t i = 0; i < n; ++i) {
        amax = std::max(amax, std::abs(wb[i]));
        finite = finite && std::isfinite(wb[i]);
      }
      if (!finite) {
        std::fill(qb, qb + n, std::int8_t{0});
        scales[r * nb + b] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const float d = amax / 127.0f;
      const float inv = d > 0.0f ? 1.0f / d : 0.0f;
      // |w * inv| <= 127 up to the rounding of inv; the clamp keeps a value that rounds just
      // above 127 in range.
      for (std::int64_t i = 0; i < n; ++i)
        qb[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(wb[i] * inv), -127.0f, 127.0f));
      scales[r * nb + b] = d;
    }
  }
}

}  // namespace llmcc::cpu
