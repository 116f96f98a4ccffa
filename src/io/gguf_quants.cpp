#include "llmcc/io/gguf_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"  // f32_to_f16_bits, f16_to_f32, f32_to_bf16_bits, bf16_bits_to_f32

namespace llmcc {
namespace {

constexpr const char* kWhere = "gguf";

// Blocks hold their scale in fp16: a value rounded the way the file stores it, so that
// quantizing against it is what dequantizing sees.
float f16_round(float x) { return f16_to_f32(f32_to_f16_bits(x)); }
void put_f16(std::uint8_t* at, float x) {
  const std::uint16_t h = f32_to_f16_bits(x);
  std::memcpy(at, &h, 2);
}
float get_f16(const std::uint8_t* at) {
  std::uint16_t h;
  std::memcpy(&h, at, 2);
  return f16_to_f32(h);
}
int nearest(float x) { return static_cast<int>(std::lrintf(x)); }

// The value of largest magnitude, with its sign.
float signed_max(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  return max;
}

// ---- Q8_0, Q4_0, Q5_0: one fp16 scale per 32 values ---------------------------------------

void quantize_q8_0(const float* x, std::uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = f16_round(amax / 127.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int i = 0; i < 32; ++i)
    b[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::clamp(nearest(x[i] * id), -127, 127)));
}

void dequantize_q8_0(const std::uint8_t* b, float* y) {
  const float d = get_f16(b);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(static_cast<std::int8_t>(b[2 + i]));
}

// Q4_0 and Q5_0: the signed extreme maps to the lowest level (-2^(bits-1)), so the scale's sign
// makes the other side reach 2^(bits-1) - 1.
template <int kBits>
void quantize_q_0(const float* x, int* q, float* d_out) {
  constexpr int kHalf = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  const float d = f16_round(signed_max(x, 32) / -static_cast<float>(kHalf));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(nearest(x[i] * id) + kHalf, 0, kTop);
  *d_out = d;
}

void quantize_q4_0(const float* x, std::uint8_t* b) {
  int q[32];
  float d;
  quantize_q_0<4>(x, q, &d);
  put_f16(b, d);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
}

void dequantize_q4_0(const std::uint8_t* b, float* y) {
  const float d = get_f16(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((b[2 + j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

void quantize_q5_0(const float* x, std::uint8_t* b) {
  int q[32];
  float d;
  quantize_q_0<5>(x, q, &d);
  put_f16(b, d);
  std::uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    b[6 + j] = static_cast<std::uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    high |= static_cast<std::uint32_t>(q[j] >> 4) << j;
    high |= static_cast<std::uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(b + 2, &high, 4);  // little-endian, as the file is
}

void dequantize_q5_0(const std::uint8_t* b, float* y) {
  const float d = get_f16(b);
  std::uint32_t high;
  std::memcpy(&high, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[6 + j] & 0xF) | static_cast<int>(((high >> j) & 1u) << 4);
    const int hi = (b[6 + j] >> 4) | static_cast<int>(((high >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + 16] = d * static_cast<float>(hi - 16);
  }
}

// ---- Q4_K: 256 values, eight sub-blocks of 32 with a 6-bit scale and a 6-bit min each ----------
//
// Layout: f16 d, f16 dmin, scales[12], qs[128]. Sub-block s's scale and min (0..63):
//   s < 4:  scale = scales[s] & 63,                                min = scales[s + 4] & 63
//   s >= 4: scale = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4,
//           min   = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4
// Values 64c .. 64c + 31 (sub-block 2c) are the low nibbles of qs[32c .. 32c + 31], values
// 64c + 32 .. 64c + 63 (sub-block 2c + 1) their high nibbles; x = d * scale * q - dmin * min.

void k4_scale_min(const std::uint8_t* scales, int s, int* scale, int* min) {
  if (s < 4) {
    *scale = scales[s] & 63;
    *min = scales[s + 4] & 63;
  } else {
    *scale = (scales[s + 4] & 0xF) | ((scales[s - 4] >> 6) << 4);
    *min = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}

void put_k4_scale_min(std::uint8_t* scales, int s, int scale, int min) {
  if (s < 4) {
    scales[s] = static_cast<std::uint8_t>((scales[s] & 0xC0) | scale);
    scales[s + 4] = static_cast<std::uint8_t>((scales[s + 4] & 0xC0) | min);
  } else {
    scales[s + 4] = static_cast<std::uint8_t>((scale & 0xF) | ((min & 0xF) << 4));
    scales[s - 4] = static_cast<std::uint8_t>(scales[s - 4] | ((scale >> 4) << 6));
    scales[s] = static_cast<std::uint8_t>(scales[s] | ((min >> 4) << 6));
  }
}

// x ~ scale * q - min with q in [0, nmax] and min >= 0, weights w: starting from the grid over
// [min(x, 0), max(x)], then trying grids of slightly other widths, each followed by the weighted
// least-squares scale and offset for its levels; keeps the smallest weighted squared error.
// Returns the scale and sets *min_out.
float fit_scale_min(const float* x, const float* w, int n, int nmax, float* min_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    *min_out = -lo;
    return 0.0f;
  }
  const auto error_of = [&](float scale, float offset, const int* q) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(q[i]) + offset - x[i];
      e += w[i] * diff * diff;
    }
    return e;
  };
  int q[32], trial[32];
  float best_scale = (hi - lo) / static_cast<float>(nmax), best_offset = lo;
  for (int i = 0; i < n; ++i) q[i] = std::clamp(nearest((x[i] - lo) / best_scale), 0, nmax);
  float best = error_of(best_scale, best_offset, q);
  float sum_w = 0.0f, sum_x = 0.0f;
  for (int i = 0; i < n; ++i) {
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  // Grid widths from nmax - 1 to nmax + 1 levels over the range, in tenths.
  for (int step = 0; step <= 20; ++step) {
    const float inv = (static_cast<float>(nmax) - 1.0f + 0.1f * static_cast<float>(step)) / (hi - lo);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      trial[i] = std::clamp(nearest(inv * (x[i] - lo)), 0, nmax);
      const float l = static_cast<float>(trial[i]);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (offset > 0.0f) {  // the offset is a min subtracted: it may not add
      offset = 0.0f;
      scale = sum_xl / sum_l2;
    }
    const float e = error_of(scale, offset, trial);
    if (e < best) {
      best = e;
      best_scale = scale;
      best_offset = offset;
      std::copy(trial, trial + n, q);
    }
  }
  *min_out = -best_offset;
  return best_scale;
}

void quantize_q4_k(const float* x, std::uint8_t* b) {
  float scale[8], min[8], w[32];
  float sum_x2 = 0.0f;
  for (int i = 0; i < 256; ++i) sum_x2 += x[i] * x[i];
  const float rms = std::sqrt(sum_x2 / 256.0f);
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    // Larger values weigh more: their relative error is what the model sees.
    for (int i = 0; i < 32; ++i) w[i] = rms + std::fabs(x[32 * s + i]);
    scale[s] = fit_scale_min(x + 32 * s, w, 32, 15, &min[s]);
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, min[s]);
  }
  const float d = f16_round(max_scale / 63.0f), dmin = f16_round(max_min / 63.0f);
  const float inv_d = d > 0.0f ? 1.0f / d : 0.0f, inv_dmin = dmin > 0.0f ? 1.0f / dmin : 0.0f;
  std::uint8_t* scales = b + 4;
  std::fill(scales, scales + 12, std::uint8_t{0});
  for (int s = 0; s < 8; ++s)
    put_k4_scale_min(scales, s, std::clamp(nearest(inv_d * scale[s]), 0, 63),
                     std::clamp(nearest(inv_dmin * min[s]), 0, 63));
  put_f16(b, d);
  put_f16(b + 2, dmin);
  // The levels against the scales as stored.
  int q[256];
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(scales, s, &sc, &m);
    const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) q[32 * s + i] = ds != 0.0f ? std::clamp(nearest((x[32 * s + i] + dm) / ds), 0, 15) : 0;
  }
  std::uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i) qs[32 * c + i] = static_cast<std::uint8_t>(q[64 * c + i] | (q[64 * c + 32 + i] << 4));
}

void dequantize_q4_k(const std::uint8_t* b, float* y) {
  const float d = get_f16(b), dmin = get_f16(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    k4_scale_min(scales, 2 * c, &sc0, &m0);
    k4_scale_min(scales, 2 * c + 1, &sc1, &m1);
    for (int i = 0; i < 32; ++i) {
      y[64 * c + i] =
          d * static_cast<float>(sc0) * static_cast<float>(qs[32 * c + i] & 0xF) - dmin * static_cast<float>(m0);
      y[64 * c + 32 + i] =
          d * static_cast<float>(sc1) * static_cast<float>(qs[32 * c + i] >> 4) - dmin * static_cast<float>(m1);
    }
  }
}

// ---- Q6_K: 256 values, sixteen sub-blocks of 16 with an int8 scale each ----------------------
//
// Layout: ql[128], qh[64], int8 scales[16], f16 d. Each half h (values 128h .. 128h + 127) uses
// ql[64h ..], qh[32h ..] and scales[8h ..]; within it, for i < 32, the 6-bit levels of values
// i, i + 32, i + 64, i + 96 are
//   (ql[i] & 15) | (qh[i] & 3) << 4,          (ql[i + 32] & 15) | (qh[i] >> 2 & 3) << 4,
//   (ql[i] >> 4) | (qh[i] >> 4 & 3) << 4,     (ql[i + 32] >> 4) | (qh[i] >> 6 & 3) << 4,
// and value v of the half has x = d * scales[8h + v / 16] * (level - 32).

// x ~ scale * q with q in [-nmax, nmax - 1]: grids around the one that puts the signed extreme at
// -nmax, each followed by the least-squares scale for its levels (weights x^2); returns the scale.
float fit_scale_symmetric(const float* x, int n, int nmax) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-30f) return 0.0f;
  float best_scale = 0.0f, best = -1.0f;
  for (int step = -9; step <= 9; ++step) {
    const float inv = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    float sum_lx = 0.0f, sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(std::clamp(nearest(inv * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    // The least-squares scale sum_lx / sum_l2 leaves an error that falls as sum_lx^2 / sum_l2
    // rises.
    if (sum_l2 > 0.0f && sum_lx * sum_lx / sum_l2 > best) {
      best = sum_lx * sum_lx / sum_l2;
      best_scale = sum_lx / sum_l2;
    }
  }
  return best_scale;
}

void quantize_q6_k(const float* x, std::uint8_t* b) {
  float scale[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = fit_scale_symmetric(x + 16 * s, 16, 32);
    if (std::fabs(scale[s]) > amax) {
      amax = std::fabs(scale[s]);
      max_scale = scale[s];
    }
  }
  std::uint8_t* ql = b;
  std::uint8_t* qh = b + 128;
  auto* scales = reinterpret_cast<std::int8_t*>(b + 192);
  // The largest scale maps to -128 (its sign carried by d), as the levels' extreme maps to -32.
  const float d = amax > 0.0f ? f16_round(max_scale / -128.0f) : 0.0f;
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  for (int s = 0; s < 16; ++s) scales[s] = static_cast<std::int8_t>(std::clamp(nearest(inv_d * scale[s]), -128, 127));
  put_f16(b + 208, d);
  int q[256];
  for (int s = 0; s < 16; ++s) {
    const float ds = d * static_cast<float>(scales[s]);
    for (int i = 0; i < 16; ++i)
      q[16 * s + i] = ds != 0.0f ? std::clamp(nearest(x[16 * s + i] / ds), -32, 31) + 32 : 32;
  }
  for (int h = 0; h < 2; ++h) {
    const int* v = q + 128 * h;
    for (int i = 0; i < 32; ++i) {
      ql[64 * h + i] = static_cast<std::uint8_t>((v[i] & 0xF) | ((v[i + 64] & 0xF) << 4));
      ql[64 * h + 32 + i] = static_cast<std::uint8_t>((v[i + 32] & 0xF) | ((v[i + 96] & 0xF) << 4));
      qh[32 * h + i] = static_cast<std::uint8_t>((v[i] >> 4) | ((v[i + 32] >> 4) << 2) | ((v[i + 64] >> 4) << 4) |
                                                 ((v[i + 96] >> 4) << 6));
    }
  }
}

void dequantize_q6_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = get_f16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const std::uint8_t* l = ql + 64 * h;
    const std::uint8_t* hb = qh + 32 * h;
    const std::int8_t* sc = scales + 8 * h;
    float* out = y + 128 * h;
    for (int i = 0; i < 32; ++i) {
      const int q1 = ((l[i] & 0xF) | ((hb[i] & 3) << 4)) - 32;
      const int q2 = ((l[i + 32] & 0xF) | (((hb[i] >> 2) & 3) << 4)) - 32;
      const int q3 = ((l[i] >> 4) | (((hb[i] >> 4) & 3) << 4)) - 32;
      const int q4 = ((l[i + 32] >> 4) | (((hb[i] >> 6) & 3) << 4)) - 32;
      out[i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>(q1);
      out[i + 32] = d * static_cast<float>(sc[2 + i / 16]) * static_cast<float>(q2);
      out[i + 64] = d * static_cast<float>(sc[4 + i / 16]) * static_cast<float>(q3);
      out[i + 96] = d * static_cast<float>(sc[6 + i / 16]) * static_cast<float>(q4);
    }
  }
}

}  // namespace

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return "f32";
    case GgmlType::F16:
      return "f16";
    case GgmlType::BF16:
      return "bf16";
    case GgmlType::Q8_0:
      return "q8_0";
    case GgmlType::Q4_0:
      return "q4_0";
    case GgmlType::Q5_0:
      return "q5_0";
    case GgmlType::Q4_K:
      return "q4_K";
    case GgmlType::Q6_K:
      return "q6_K";
  }
  return "?";
}

int ggml_block_size(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return 1;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
      return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return 256;
  }
  return 1;
}

int ggml_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return 4;
    case GgmlType::F16:
    case GgmlType::BF16:
      return 2;
    case GgmlType::Q8_0:
      return 34;
    case GgmlType::Q4_0:
      return 18;
    case GgmlType::Q5_0:
      return 22;
    case GgmlType::Q4_K:
      return 144;
    case GgmlType::Q6_K:
      return 210;
  }
  return 4;
}

std::size_t ggml_row_bytes(GgmlType t, std::int64_t n) {
  const int block = ggml_block_size(t);
  if (n < 0 || n % block != 0)
    fail(kWhere, std::string("a row of ") + std::to_string(n) + " values cannot be stored as " + ggml_type_name(t) +
                     " (blocks of " + std::to_string(block) + ")");
  return static_cast<std::size_t>(n / block) * static_cast<std::size_t>(ggml_block_bytes(t));
}

void ggml_quantize_row(GgmlType t, const float* x, std::int64_t n, std::uint8_t* out) {
  const std::size_t bytes = ggml_row_bytes(t, n);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(out, x, bytes);
      return;
    case GgmlType::F16:
      for (std::int64_t i = 0; i < n; ++i) put_f16(out + 2 * i, x[i]);
      return;
    case GgmlType::BF16:
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t h = f32_to_bf16_bits(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default:
      break;
  }
  const int block = ggml_block_size(t), block_bytes = ggml_block_bytes(t);
  for (std::int64_t i = 0; i < n / block; ++i) {
    const float* xb = x + i * block;
    std::uint8_t* b = out + i * block_bytes;
    switch (t) {
      case GgmlType::Q8_0:
        quantize_q8_0(xb, b);
        break;
      case GgmlType::Q4_0:
        quantize_q4_0(xb, b);
        break;
      case GgmlType::Q5_0:
        quantize_q5_0(xb, b);
        break;
      case GgmlType::Q4_K:
        quantize_q4_k(xb, b);
        break;
      case GgmlType::Q6_K:
        quantize_q6_k(xb, b);
        break;
      default:
        break;
    }
  }
}

void ggml_dequantize_row(GgmlType t, const std::uint8_t* in, std::int64_t n, float* out) {
  const std::size_t bytes = ggml_row_bytes(t, n);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(out, in, bytes);
      return;
    case GgmlType::F16:
      for (std::int64_t i = 0; i < n; ++i) out[i] = get_f16(in + 2 * i);
      return;
    case GgmlType::BF16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = bf16_bits_to_f32(h);
      }
      return;
    default:
      break;
  }
  const int block = ggml_block_size(t), block_bytes = ggml_block_bytes(t);
  for (std::int64_t i = 0; i < n / block; ++i) {
    const std::uint8_t* b = in + i * block_bytes;
    float* y = out + i * block;
    switch (t) {
      case GgmlType::Q8_0:
        dequantize_q8_0(b, y);
        break;
      case GgmlType::Q4_0:
        dequantize_q4_0(b, y);
        break;
      case GgmlType::Q5_0:
        dequantize_q5_0(b, y);
        break;
      case GgmlType::Q4_K:
        dequantize_q4_k(b, y);
        break;
      case GgmlType::Q6_K:
        dequantize_q6_k(b, y);
        break;
      default:
        break;
    }
  }
}

}  // namespace llmcc
