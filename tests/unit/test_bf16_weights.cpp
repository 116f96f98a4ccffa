// bf16 weight copies (llmcc/bf16_weights.h): which tensors get a copy, that a one-row linear
// product under a scope reads the copy (equal to the product with the weight rounded to bf16)
// while several rows, no scope, or a weight of another shape at the same address compute in fp32,
// and that scopes nest.
#include "llmcc/bf16_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "llmcc/arena.h"
#include "llmcc/ops/linear.h"
#include "llmcc/train/rng.h"
#include "test_support.h"

namespace llmcc {
namespace {

// Parameters: a (7, 5) matrix, a (5) vector, a (3, 5) matrix; each N(0, 1).
ParameterStore store() {
  ParameterStore s({{"a", Shape{7, 5}}, {"norm", Shape{5}}, {"b", Shape{3, 5}}});
  Rng rng(3);
  rng.fill_normal(s.data(), s.size(), 0.0f, 1.0f);
  return s;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

TEST(Bf16Weights, CopiesEveryMatrixRoundedAndNothingElse) {
  const ParameterStore s = store();
  const Bf16Weights copies(s);
  EXPECT_EQ(copies.matrices(), 2u);
  EXPECT_EQ(copies.bytes(), (7u * 5u + 3u * 5u) * 2u);
  const Tensor a = s.tensor(0), norm = s.tensor(1), b = s.tensor(2);
  const std::uint16_t* ca = copies.copy_of(a.f32(), 7, 5);
  ASSERT_NE(ca, nullptr);
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(ca[i], cpu::bf16_bits(a.f32()[i]));
  EXPECT_NE(copies.copy_of(b.f32(), 2, 5), nullptr);  // fewer rows: a part of the matrix
  EXPECT_EQ(copies.copy_of(b.f32(), 4, 5), nullptr);  // more rows than it has
  EXPECT_EQ(copies.copy_of(b.f32(), 3, 4), nullptr);  // other columns
  EXPECT_EQ(copies.copy_of(norm.f32(), 1, 5), nullptr);
}

TEST(Bf16Weights, OneRowProductsUnderAScopeReadTheCopy) {
  const ParameterStore s = store();
  const Tensor a = s.tensor(0);  // (7, 5)
  Arena arena(1 << 20);
  ArenaScope arena_scope(arena);
  std::vector<float> xs(10);
  Rng rng(4);
  rng.fill_normal(xs.data(), xs.size(), 0.0f, 1.0f);
  const Tensor row(xs.data(), Shape{1, 1, 5}), rows(xs.data(), Shape{1, 2, 5});
  // What the copy computes: the product with the weight's bf16 values.
  std::vector<float> rounded = values(a);
  for (float& v : rounded) v = cpu::round_to_bf16(v);
  const Tensor a_rounded(rounded.data(), Shape{7, 5});
  const std::vector<float> want_bf16 = values(linear_nobias(row, a_rounded));
  const std::vector<float> fp32_row = values(linear_nobias(row, a)), fp32_rows = values(linear_nobias(rows, a));
  ASSERT_NE(want_bf16, fp32_row);  // N(0, 1) weights: rounding shows

  const Bf16Weights copies(s);
  EXPECT_EQ(active_bf16_weights(), nullptr);
  {
    const Bf16WeightsScope use(copies);
    EXPECT_EQ(active_bf16_weights(), &copies);
    const std::vector<float> got = values(linear_nobias(row, a));
    EXPECT_TRUE(test::all_close("bf16 row", got, want_bf16, 1e-6, 1e-6));
    EXPECT_EQ(values(linear_nobias(rows, a)), fp32_rows);         // two rows: fp32
    EXPECT_EQ(values(linear_nobias(row, a_rounded)), want_bf16);  // a weight without a copy
    {
      const ParameterStore other = store();
      const Bf16Weights inner(other);
      const Bf16WeightsScope nested(inner);
      EXPECT_EQ(active_bf16_weights(), &inner);
      EXPECT_EQ(values(linear_nobias(row, a)), fp32_row);  // the outer copies are hidden
    }
    EXPECT_EQ(active_bf16_weights(), &copies);
  }
  EXPECT_EQ(active_bf16_weights(), nullptr);
  EXPECT_EQ(values(linear_nobias(row, a)), fp32_row);
}

}  // namespace
}  // namespace llmcc
