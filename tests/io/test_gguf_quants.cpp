// ggml's tensor types as llmcc's GGUF export writes them (llmcc/io/gguf_quants.h): each type's bytes
// decode to within its error bound on rows of every kind (random, outliers, zeros, constants, one
// sign, tiny), the packings put each value where the layout says (blocks built by hand), and a
// row its type cannot block is refused by name. tests/hf/test_gguf_export.py checks the same
// bytes against the `gguf` package's decoder.
#include "llmcc/io/gguf_quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "test_support.h"

namespace {

using llmcc::GgmlType;
using llmcc::test::throws_error;

const GgmlType kAll[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                         GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K};

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint8_t> bytes(llmcc::ggml_row_bytes(t, n));
  llmcc::ggml_quantize_row(t, x.data(), n, bytes.data());
  std::vector<float> y(x.size());
  llmcc::ggml_dequantize_row(t, bytes.data(), n, y.data());
  return y;
}

// Rows of 1024 values (four K super-blocks) of different kinds.
std::vector<std::pair<std::string, std::vector<float>>> rows() {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  std::vector<float> normal = llmcc::test::random_vector<float>(1024, 11, -1.0, 1.0);
  out.emplace_back("uniform", normal);
  std::vector<float> outliers = llmcc::test::random_vector<float>(1024, 12, -0.05, 0.05);
  for (int i = 0; i < 1024; i += 97) outliers[static_cast<std::size_t>(i)] = (i % 2 ? 3.0f : -2.5f);
  out.emplace_back("outliers", outliers);
  out.emplace_back("zeros", std::vector<float>(1024, 0.0f));
  out.emplace_back("constant", std::vector<float>(1024, 0.37f));
  std::vector<float> positive = llmcc::test::random_vector<float>(1024, 13, 0.5, 2.0);
  out.emplace_back("positive", positive);
  std::vector<float> negative = llmcc::test::random_vector<float>(1024, 14, -2.0, -0.1);
  out.emplace_back("negative", negative);
  std::vector<float> tiny = llmcc::test::random_vector<float>(1024, 15, -1e-3, 1e-3);
  out.emplace_back("tiny", tiny);
  // Blocks of very different scales side by side.
  std::vector<float> mixed = llmcc::test::random_vector<float>(1024, 16, -1.0, 1.0);
  for (std::size_t i = 0; i < mixed.size(); ++i)
    mixed[i] *= (i / 32 % 3 == 0) ? 100.0f : (i / 32 % 3 == 1) ? 1.0f : 0.01f;
  out.emplace_back("mixed scales", mixed);
  return out;
}

// The largest error each type may make on a value of a block whose largest magnitude is amax:
// half a step of its grid (plus the fp16 rounding of the scale), or for the types whose grid is
// one-sided, a whole step on the clamped side.
double bound(GgmlType t, double value, double amax, double sub_range) {
  switch (t) {
    case GgmlType::F32:
      return 0.0;
    case GgmlType::F16:
      return std::fabs(value) * 0x1p-11 + 0x1p-25;
    case GgmlType::BF16:
      return std::fabs(value) * 0x1p-8;
    case GgmlType::Q8_0:
      return amax / 127.0 * 0.51 + 1e-30;
    case GgmlType::Q4_0:
      return amax / 8.0 * 1.01 + 1e-30;
    case GgmlType::Q5_0:
      return amax / 16.0 * 1.01 + 1e-30;
    // K types: a step of the sub-block's own range, the 6-bit scale's rounding included.
    case GgmlType::Q4_K:
      return sub_range / 15.0 * 1.5 + amax * 2e-3;
    case GgmlType::Q6_K:
      return sub_range / 63.0 * 1.5 + amax * 2e-3;
  }
  return 0.0;
}

TEST(GgufQuantsKernel, EveryTypeDecodesWithinItsBound) {
  for (GgmlType t : kAll) {
    const int block = llmcc::ggml_block_size(t);
    // Sub-blocks the K types scale separately; the others scale their whole block.
    const int sub = t == GgmlType::Q4_K ? 32 : t == GgmlType::Q6_K ? 16 : block;
    for (const auto& [kind, x] : rows()) {
      SCOPED_TRACE(std::string(llmcc::ggml_type_name(t)) + " " + kind);
      const std::vector<float> y = round_trip(t, x);
      double worst = 0.0, sum_sq = 0.0, sum_x2 = 0.0;
      for (std::size_t b = 0; b < x.size(); b += static_cast<std::size_t>(block)) {
        double amax = 0.0;
        for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b + i])));
        for (int s = 0; s < block; s += sub) {
          double lo = 0.0, hi = 0.0;
          for (int i = s; i < s + sub; ++i) {
            lo = std::min(lo, static_cast<double>(x[b + i]));
            hi = std::max(hi, static_cast<double>(x[b + i]));
          }
          for (int i = s; i < s + sub; ++i) {
            const double err = std::fabs(static_cast<double>(y[b + i]) - x[b + i]);
            ASSERT_LE(err, bound(t, x[b + i], amax, hi - lo)) << "value " << b + i << " = " << x[b + i];
            worst = std::max(worst, err);
            sum_sq += err * err;
            sum_x2 += static_cast<double>(x[b + i]) * x[b + i];
          }
        }
      }
      if (kind == std::string("zeros")) {
        EXPECT_EQ(worst, 0.0);
      }
      if (kind == std::string("uniform"))
        std::printf("[ note     ] %-5s uniform row: rms error %.3g of the rms value\n", llmcc::ggml_type_name(t),
                    std::sqrt(sum_sq / sum_x2));
    }
  }
}

TEST(GgufQuantsKernel, RoundingErrorsAreAsSmallAsTheGridAllows) {
  // On uniform values the rms error against the rms value: half-step rounding gives
  // step / sqrt(12) per value, so each type's error sits near its grid's.
  const std::vector<float> x = llmcc::test::random_vector<float>(1 << 14, 21, -1.0, 1.0);
  const auto rms_rel = [&](GgmlType t) {
    const std::vector<float> y = round_trip(t, x);
    double e = 0.0, s = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      e += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
      s += static_cast<double>(x[i]) * x[i];
    }
    return std::sqrt(e / s);
  };
  EXPECT_LT(rms_rel(GgmlType::Q8_0), 0.006);
  EXPECT_LT(rms_rel(GgmlType::Q6_K), 0.02);
  EXPECT_LT(rms_rel(GgmlType::Q5_0), 0.045);
  EXPECT_LT(rms_rel(GgmlType::Q4_K), 0.08);
  EXPECT_LT(rms_rel(GgmlType::Q4_0), 0.1);
  EXPECT_LT(rms_rel(GgmlType::Q6_K), rms_rel(GgmlType::Q5_0));
  EXPECT_LT(rms_rel(GgmlType::Q4_K), rms_rel(GgmlType::Q4_0));
}

TEST(GgufQuantsKernel, BytesDoNotDependOnWhereTheRowLies) {
  // The K types' scale fits sum over their blocks, and a vectorised loop may take a scalar
  // path for a row that is not aligned; the same values at every float offset within a cache
  // line give the same bytes.
  const std::vector<float> x = llmcc::test::random_vector<float>(4096, 23, -0.1, 0.1);
  for (const GgmlType t : kAll) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<std::uint8_t> first(llmcc::ggml_row_bytes(t, n)), bytes(first.size());
    std::vector<float> buffer(x.size() + 16);
    llmcc::ggml_quantize_row(t, x.data(), n, first.data());
    for (int offset = 0; offset < 16; ++offset) {
      std::copy(x.begin(), x.end(), buffer.begin() + offset);
      llmcc::ggml_quantize_row(t, buffer.data() + offset, n, bytes.data());
      EXPECT_EQ(first, bytes) << llmcc::ggml_type_name(t) << " at offset " << offset;
    }
  }
}

void put_f16(std::uint8_t* at, float x) {
  const std::uint16_t h = llmcc::f32_to_f16_bits(x);
  std::memcpy(at, &h, 2);
}

TEST(GgufQuantsKernel, BlocksBuiltByHandDecodeAsTheLayoutSays) {
  // Q4_0: byte j holds value j (low nibble) and value j + 16 (high nibble); x = d (q - 8).
  std::uint8_t q4[18];
  put_f16(q4, 0.5f);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  float y[256];
  llmcc::ggml_dequantize_row(GgmlType::Q4_0, q4, 32, y);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j));
  }
  // Q5_0: the fifth bits in a little-endian u32, value j at bit j, value j + 16 at bit j + 16.
  std::uint8_t q5[22] = {};
  put_f16(q5, 1.0f);
  const std::uint32_t high = 0x00010002u;  // value 1's and value 16's fifth bits
  std::memcpy(q5 + 2, &high, 4);
  for (int j = 0; j < 16; ++j) q5[6 + j] = 0x00;
  llmcc::ggml_dequantize_row(GgmlType::Q5_0, q5, 32, y);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[17], -16.0f);
  // Q8_0: x = d q.
  std::uint8_t q8[34];
  put_f16(q8, 0.25f);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16));
  llmcc::ggml_dequantize_row(GgmlType::Q8_0, q8, 32, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * static_cast<float>(j - 16));

  // Q4_K: scales s < 4 in the low 6 bits of bytes s (scale) and s + 4 (min); s >= 4 split between
  // byte s + 4's nibbles and the top two bits of bytes s - 4 and s. All levels 1 here, so each
  // value is d * scale_s - dmin * min_s.
  std::uint8_t k4[144] = {};
  put_f16(k4, 1.0f);
  put_f16(k4 + 2, 0.5f);
  const int scale[8] = {1, 2, 3, 63, 17, 33, 48, 63}, min[8] = {0, 5, 9, 62, 20, 40, 1, 63};
  std::uint8_t* sc = k4 + 4;
  for (int s = 0; s < 4; ++s) {
    sc[s] = static_cast<std::uint8_t>(scale[s] | ((scale[s + 4] >> 4) << 6));
    sc[s + 4] = static_cast<std::uint8_t>(min[s] | ((min[s + 4] >> 4) << 6));
    sc[s + 8] = static_cast<std::uint8_t>((scale[s + 4] & 15) | ((min[s + 4] & 15) << 4));
  }
  for (int i = 0; i < 128; ++i) k4[16 + i] = 0x11;
  llmcc::ggml_dequantize_row(GgmlType::Q4_K, k4, 256, y);
  for (int v = 0; v < 256; ++v) {
    // Sub-block of value v: chunk c = v / 64 holds sub-blocks 2c (low nibbles) and 2c + 1.
    const int s = v / 32;
    EXPECT_EQ(y[v], static_cast<float>(scale[s]) - 0.5f * static_cast<float>(min[s])) << "value " << v;
  }

  // Q6_K: level of value i of half h from ql's nibbles and qh's 2-bit pairs; scales[8h + v / 16].
  std::uint8_t k6[210] = {};
  for (int s = 0; s < 16; ++s) k6[192 + s] = static_cast<std::uint8_t>(static_cast<std::int8_t>(s - 8));
  put_f16(k6 + 208, 0.125f);
  // Level 33 (q - 32 = 1) for value 5 of half 0: low nibble 1 in ql[5] & 15, high bits 2 in qh[5] & 3.
  k6[5] = 0x1;
  k6[128 + 5] = 0x2;
  // Value 5 + 96 of half 1: ql[64 + 32 + 5] >> 4, qh[32 + 5] >> 6.
  k6[64 + 32 + 5] = 0x30;
  k6[128 + 32 + 5] = 0x40;  // high bits 1: level 0x13 = 19
  llmcc::ggml_dequantize_row(GgmlType::Q6_K, k6, 256, y);
  EXPECT_EQ(y[5], 0.125f * static_cast<float>(0 - 8) * static_cast<float>(0x21 - 32));
  EXPECT_EQ(y[128 + 96 + 5], 0.125f * static_cast<float>(14 - 8) * static_cast<float>(0x13 - 32));
  EXPECT_EQ(y[6], 0.125f * static_cast<float>(0 - 8) * -32.0f);  // level 0 everywhere else
}

TEST(GgufQuantsApi, ARowItsTypeCannotBlockIsRefusedByName) {
  EXPECT_TRUE(throws_error([] { llmcc::ggml_row_bytes(GgmlType::Q4_K, 64); }, {"[gguf]", "64", "q4_K", "256"}));
  EXPECT_TRUE(throws_error([] { llmcc::ggml_row_bytes(GgmlType::Q8_0, 33); }, {"[gguf]", "33", "q8_0", "32"}));
  EXPECT_EQ(llmcc::ggml_row_bytes(GgmlType::Q6_K, 512), 420u);
  EXPECT_EQ(llmcc::ggml_row_bytes(GgmlType::F16, 3), 6u);
}

}  // namespace
