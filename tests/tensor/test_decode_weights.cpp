// Low-precision weight copies (llmcc/decode_weights.h): which tensors get a copy and what it holds
// (bf16 rounding; int8 blocks of 32 within half a scale of each weight), that a one-row linear
// product under a scope reads the copy (equal to the product with the weight's copied values, and
// for int8 with the row rounded to int8 blocks as well)
// while several rows, no scope, or a weight of another shape at the same address compute in fp32,
// that scopes nest, and that int8 copies refuse a non-finite weight by name.
#include "llmcc/decode_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/int8_rows.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/ops/linear.h"
#include "llmcc/train/rng.h"
#include "test_support.h"

namespace llmcc {
namespace {

// Parameters: a (7, 70) matrix (rows of two full int8 blocks and a short one), a (70) vector, a
// (3, 5) matrix (one short block per row); each N(0, 1), a's row 2 all zero and row 3 with one
// large value.
ParameterStore store() {
  ParameterStore s({{"a", Shape{7, 70}}, {"norm", Shape{70}}, {"b", Shape{3, 5}}});
  Rng rng(3);
  rng.fill_normal(s.data(), s.size(), 0.0f, 1.0f);
  float* a = s.tensor(0).f32();
  for (int c = 0; c < 70; ++c) a[2 * 70 + c] = 0.0f;
  a[3 * 70 + 40] = 300.0f;
  return s;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// The values a copy multiplies: element k of the (rows, cols) matrix m.
float copied(const DecodeWeights::Matrix& m, std::int64_t cols, std::int64_t k) {
  if (m.bf16 != nullptr) return cpu::bf16_to_float(m.bf16[k]);
  const std::int64_t r = k / cols, c = k % cols;
  return static_cast<float>(m.q[k]) * m.scales[r * cpu::int8_blocks(cols) + c / cpu::kInt8Block];
}

TEST(DecodeWeights, NamesParseBothWays) {
  for (const DecodeDtype d : {DecodeDtype::Bf16, DecodeDtype::Int8})
    EXPECT_EQ(parse_decode_dtype(decode_dtype_name(d)), d);
  EXPECT_FALSE(parse_decode_dtype("f32"));
  EXPECT_FALSE(parse_decode_dtype("q8_0"));
}

TEST(DecodeWeights, Bf16CopiesEveryMatrixRoundedAndNothingElse) {
  const ParameterStore s = store();
  const DecodeWeights copies(s, DecodeDtype::Bf16);
  EXPECT_EQ(copies.matrices(), 2u);
  EXPECT_EQ(copies.bytes(), (7u * 70u + 3u * 5u) * 2u);
  const Tensor a = s.tensor(0), norm = s.tensor(1), b = s.tensor(2);
  const DecodeWeights::Matrix* ca = copies.copy_of(a.f32(), 7, 70);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(ca->bf16, nullptr);
  EXPECT_EQ(ca->q, nullptr);
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(ca->bf16[i], cpu::bf16_bits(a.f32()[i]));
  EXPECT_NE(copies.copy_of(b.f32(), 2, 5), nullptr);  // fewer rows: a part of the matrix
  EXPECT_EQ(copies.copy_of(b.f32(), 4, 5), nullptr);  // more rows than it has
  EXPECT_EQ(copies.copy_of(b.f32(), 3, 4), nullptr);  // other columns
  EXPECT_EQ(copies.copy_of(norm.f32(), 1, 70), nullptr);
}

TEST(DecodeWeights, Int8BlocksAreWithinHalfAScaleOfEachWeight) {
  const ParameterStore s = store();
  const DecodeWeights copies(s, DecodeDtype::Int8);
  EXPECT_EQ(copies.matrices(), 2u);
  // a: 7 rows of 70 int8 and 3 scales; b: 3 rows of 5 int8 and 1 scale.
  EXPECT_EQ(copies.bytes(), 7u * 70u + 7u * 3u * 4u + 3u * 5u + 3u * 4u);
  for (const std::size_t i : {std::size_t{0}, std::size_t{2}}) {
    const Tensor t = s.tensor(i);
    const std::int64_t rows = t.shape()[0], cols = t.shape()[1], nb = cpu::int8_blocks(cols);
    const DecodeWeights::Matrix* m = copies.copy_of(t.f32(), rows, cols);
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->q, nullptr);
    EXPECT_EQ(m->bf16, nullptr);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t blk = 0; blk < nb; ++blk) {
        const std::int64_t c0 = blk * cpu::kInt8Block, c1 = std::min(cols, c0 + cpu::kInt8Block);
        float amax = 0.0f;
        for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::abs(t.f32()[r * cols + c]));
        const float d = m->scales[r * nb + blk];
        EXPECT_EQ(d, amax / 127.0f) << s.name(i) << " row " << r << " block " << blk;
        int at_limit = 0;
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t k = r * cols + c;
          EXPECT_LE(std::abs(int{m->q[k]}), 127);
          at_limit += std::abs(int{m->q[k]}) == 127;
          EXPECT_LE(std::abs(copied(*m, cols, k) - t.f32()[k]), d * 0.5f * (1.0f + 1e-5f))
              << s.name(i) << " element " << k;
        }
        if (amax > 0.0f)
          EXPECT_GE(at_limit, 1) << "the largest weight maps to +-127";
        else
          EXPECT_EQ(at_limit, 0);
      }
    }
  }
  // The zero row: scale 0, all q 0, copied values exactly 0.
  const DecodeWeights::Matrix* ma = copies.copy_of(s.tensor(0).f32(), 7, 70);
  for (int c = 0; c < 70; ++c) EXPECT_EQ(copied(*ma, 70, 2 * 70 + c), 0.0f);
  // The outlier coarsens only its own block: row 3's other blocks keep N(0, 1)-sized scales.
  EXPECT_GT(ma->scales[3 * 3 + 1], 2.0f);
  EXPECT_LT(ma->scales[3 * 3 + 0], 0.1f);
  EXPECT_LT(ma->scales[3 * 3 + 2], 0.1f);
}

TEST(DecodeWeights, Int8RefusesANonFiniteWeightByName) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    ParameterStore s = store();
    s.tensor(2).f32()[4] = bad;
    try {
      const DecodeWeights copies(s, DecodeDtype::Int8);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("parameter b holds"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("at element 4"), std::string::npos) << e.what();
    }
    const DecodeWeights bf16(s, DecodeDtype::Bf16);  // bf16 keeps NaN and infinity as they are
    EXPECT_EQ(bf16.matrices(), 2u);
  }
}

TEST(DecodeWeights, OneRowProductsUnderAScopeReadTheCopy) {
  for (const DecodeDtype dtype : {DecodeDtype::Bf16, DecodeDtype::Int8}) {
    SCOPED_TRACE(decode_dtype_name(dtype));
    const ParameterStore s = store();
    const Tensor a = s.tensor(0);  // (7, 70)
    Arena arena(1 << 20);
    ArenaScope arena_scope(arena);
    std::vector<float> xs(140);
    Rng rng(4);
    rng.fill_normal(xs.data(), xs.size(), 0.0f, 1.0f);
    const Tensor row(xs.data(), Shape{1, 1, 70}), rows(xs.data(), Shape{1, 2, 70});

    const DecodeWeights copies(s, dtype);
    // What the copy computes: the product with the weight's copied values.
    std::vector<float> as_copied = values(a);
    const DecodeWeights::Matrix* m = copies.copy_of(a.f32(), 7, 70);
    ASSERT_NE(m, nullptr);
    for (std::int64_t k = 0; k < a.numel(); ++k) as_copied[static_cast<std::size_t>(k)] = copied(*m, 70, k);
    const Tensor a_copied(as_copied.data(), Shape{7, 70});
    // int8 products round the row to int8 blocks too (cpu::gemv_rows_int8).
    std::vector<float> row_values(xs.begin(), xs.begin() + 70);
    if (dtype == DecodeDtype::Int8) {
      std::vector<std::int8_t> q(70);
      std::vector<float> d(3);
      cpu::quantize_rows_int8(row_values.data(), 1, 70, q.data(), d.data());
      for (int c = 0; c < 70; ++c) row_values[c] = static_cast<float>(q[c]) * d[c / cpu::kInt8Block];
    }
    const std::vector<float> want = values(linear_nobias(Tensor(row_values.data(), Shape{1, 1, 70}), a_copied));
    const std::vector<float> fp32_row = values(linear_nobias(row, a)), fp32_rows = values(linear_nobias(rows, a));
    const std::vector<float> fp32_copied = values(linear_nobias(row, a_copied));
    ASSERT_NE(want, fp32_row);  // N(0, 1) weights: rounding shows

    EXPECT_EQ(active_decode_weights(), nullptr);
    {
      const DecodeWeightsScope use(copies);
      EXPECT_EQ(active_decode_weights(), &copies);
      const std::vector<float> got = values(linear_nobias(row, a));
      EXPECT_TRUE(test::all_close("copy row", got, want, 1e-5, 1e-6));
      EXPECT_EQ(values(linear_nobias(rows, a)), fp32_rows);          // two rows: fp32
      EXPECT_EQ(values(linear_nobias(row, a_copied)), fp32_copied);  // a weight without a copy: fp32
      {
        const ParameterStore other = store();
        const DecodeWeights inner(other, dtype);
        const DecodeWeightsScope nested(inner);
        EXPECT_EQ(active_decode_weights(), &inner);
        EXPECT_EQ(values(linear_nobias(row, a)), fp32_row);  // the outer copies are hidden
      }
      EXPECT_EQ(active_decode_weights(), &copies);
    }
    EXPECT_EQ(active_decode_weights(), nullptr);
    EXPECT_EQ(values(linear_nobias(row, a)), fp32_row);
  }
}

}  // namespace
}  // namespace llmcc
