// Frozen weights stored in bf16 (--base-dtype bf16): linear, linear_nobias, lora_linear,
// token_embedding and token_position_embedding read a bf16 weight as the f32 weight of the same values, in both kernel
// modes, on sizes that take several of the fast path's widening blocks and the one-row product; asking for a bf16
// weight's gradient is refused by name.
#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/lora_linear.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;
using test::random_vector;

// A weight rounded to bf16, held twice: as bf16 bits and widened back to f32 (the same values).
struct RoundedWeight {
  std::vector<std::uint16_t> bits;
  std::vector<float> wide;
  Tensor bf16, f32;
  RoundedWeight(Arena& arena, const Shape& shape, std::uint64_t seed) {
    const auto w = random_vector<float>(shape.numel(), seed);
    bits.resize(w.size());
    cpu::floats_to_bf16(w.data(), bits.data(), static_cast<std::int64_t>(w.size()));
    for (std::uint16_t b : bits) wide.push_back(cpu::bf16_to_float(b));
    bf16 = Tensor(bits.data(), shape, DType::BF16);
    f32 = test::tensor_from(arena, shape, wide);
  }
};

// N rows against (OC, C) weights: 1 (the row product), 7, and 70 with OC * C above the widening
// block (2M values), so that several blocks and a partial last one are multiplied.
struct Size {
  int N, C, OC;
};
const Size kSizes[] = {{1, 96, 65}, {7, 96, 65}, {70, 1024, 2100}, {1, 1024, 2100}};

std::string label(const Size& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC);
}

TEST(Bf16WeightApi, LinearReadsTheWeightAsItsF32Values) {
  Arena arena(std::size_t{64} << 20);
  ArenaScope scope(arena);
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    set_kernel_mode(mode);
    for (const Size& s : kSizes) {
      if (mode == KernelMode::Reference && s.C > 100) continue;  // triple loops: the small sizes
      SCOPED_TRACE(label(s) + (mode == KernelMode::Fast ? " fast" : " reference"));
      const RoundedWeight w(arena, {s.OC, s.C}, 1);
      Tensor x = test::tensor_from(arena, {s.N, s.C}, random_vector<float>(s.N * s.C, 2));        // (N, C)
      Tensor b = test::tensor_from(arena, {s.OC}, random_vector<float>(s.OC, 3));                 // (OC)
      Tensor d_out = test::tensor_from(arena, {s.N, s.OC}, random_vector<float>(s.N * s.OC, 4));  // (N, OC)
      const double atol = 2e-6 * s.C + 1e-6;
      EXPECT_TRUE(all_close("linear_nobias", test::to_vector(linear_nobias(x, w.bf16)),
                            test::to_vector(linear_nobias(x, w.f32)), atol, 1e-5));
      Tensor out = linear(x, w.bf16, b);  // (N, OC)
      EXPECT_TRUE(all_close("linear", test::to_vector(out), test::to_vector(linear(x, w.f32, b)), atol, 1e-5));
      // Input and bias gradients, accumulated into ones; the weight's is not asked for.
      Tensor dx = test::tensor_from(arena, {s.N, s.C}, std::vector<float>(s.N * s.C, 1.0f));
      Tensor dx_ref = test::tensor_from(arena, {s.N, s.C}, std::vector<float>(s.N * s.C, 1.0f));
      Tensor db = arena.zeros({s.OC}, "db"), db_ref = arena.zeros({s.OC}, "db_ref");
      linear_pullback(x, w.bf16, b, out, d_out, &dx, nullptr, &db);
      linear_pullback(x, w.f32, b, out, d_out, &dx_ref, nullptr, &db_ref);
      EXPECT_TRUE(all_close("d_x", test::to_vector(dx), test::to_vector(dx_ref), 2e-6 * s.OC + 1e-6, 1e-5));
      EXPECT_TRUE(all_close("d_b", test::to_vector(db), test::to_vector(db_ref), 1e-6, 1e-6));
      // A first contribution with its zeros pending is written.
      Tensor dx3 = test::tensor_from(arena, {s.N, s.C}, std::vector<float>(s.N * s.C, 5.0f));
      dx3.mark_zero_pending();
      linear_nobias_pullback(x, w.bf16, out, d_out, &dx3, nullptr);
      std::vector<float> expect = test::to_vector(dx_ref);
      for (float& e : expect) e -= 1.0f;
      EXPECT_TRUE(all_close("d_x pending", test::to_vector(dx3), expect, 2e-6 * s.OC + 1e-6, 1e-5));
    }
  }
  set_kernel_mode(KernelMode::Fast);
}

TEST(Bf16WeightApi, LoraLinearReadsTheWeightAsItsF32Values) {
  Arena arena(std::size_t{64} << 20);
  ArenaScope scope(arena);
  const int R = 4;
  for (const Size& s : kSizes) {
    SCOPED_TRACE(label(s));
    const RoundedWeight w(arena, {s.OC, s.C}, 1);
    Tensor x = test::tensor_from(arena, {s.N, s.C}, random_vector<float>(s.N * s.C, 2));        // (N, C)
    Tensor a = test::tensor_from(arena, {R, s.C}, random_vector<float>(R * s.C, 3));            // (R, C)
    Tensor b = test::tensor_from(arena, {s.OC, R}, random_vector<float>(s.OC * R, 4));          // (OC, R)
    Tensor d_out = test::tensor_from(arena, {s.N, s.OC}, random_vector<float>(s.N * s.OC, 5));  // (N, OC)
    LoraLinearSaved saved, saved_ref;
    Tensor out = lora_linear_fwd(x, w.bf16, a, b, 0.5f, saved);         // (N, OC)
    Tensor out_ref = lora_linear_fwd(x, w.f32, a, b, 0.5f, saved_ref);  // (N, OC)
    EXPECT_TRUE(all_close("out", test::to_vector(out), test::to_vector(out_ref), 2e-6 * s.C + 1e-6, 1e-5));
    Tensor dx = arena.zeros({s.N, s.C}, "dx"), da = arena.zeros({R, s.C}, "da"), dbb = arena.zeros({s.OC, R}, "db");
    Tensor dx_ref = arena.zeros({s.N, s.C}, "dx"), da_ref = arena.zeros({R, s.C}, "da"),
           db_ref = arena.zeros({s.OC, R}, "db");
    lora_linear_pullback(x, w.bf16, a, b, 0.5f, out, saved, d_out, &dx, nullptr, &da, &dbb);
    lora_linear_pullback(x, w.f32, a, b, 0.5f, out_ref, saved_ref, d_out, &dx_ref, nullptr, &da_ref, &db_ref);
    EXPECT_TRUE(all_close("d_x", test::to_vector(dx), test::to_vector(dx_ref), 2e-6 * s.OC + 1e-6, 1e-5));
    EXPECT_TRUE(all_close("d_a", test::to_vector(da), test::to_vector(da_ref), 1e-6, 1e-6));
    EXPECT_TRUE(all_close("d_b", test::to_vector(dbb), test::to_vector(db_ref), 1e-6, 1e-6));
  }
}

TEST(Bf16WeightApi, EmbeddingGathersTheWidenedRows) {
  Arena arena(std::size_t{1} << 22);
  ArenaScope scope(arena);
  const RoundedWeight table(arena, {11, 24}, 7);     // (V, C)
  const RoundedWeight positions(arena, {5, 24}, 8);  // (maxT, C)
  const std::vector<std::int32_t> ids = {3, 0, 10, 3, 7, 1};
  const Tokens idx(ids.data(), 2, 3);
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    set_kernel_mode(mode);
    EXPECT_EQ(test::to_vector(token_embedding(idx, table.bf16)), test::to_vector(token_embedding(idx, table.f32)));
    // GPT-2's encoder with either table in bf16, or both: the sums of the f32 values.
    const std::vector<float> want = test::to_vector(token_position_embedding(idx, table.f32, positions.f32));
    EXPECT_EQ(test::to_vector(token_position_embedding(idx, table.bf16, positions.f32)), want);
    EXPECT_EQ(test::to_vector(token_position_embedding(idx, table.f32, positions.bf16)), want);
    EXPECT_EQ(test::to_vector(token_position_embedding(idx, table.bf16, positions.bf16)), want);
  }
  set_kernel_mode(KernelMode::Fast);
}

TEST(Bf16WeightApi, AGradientOfABf16WeightIsRefusedByName) {
  Arena arena(std::size_t{1} << 22);
  ArenaScope scope(arena);
  const RoundedWeight w(arena, {5, 4}, 1);
  Tensor x = arena.zeros({3, 4}, "x"), d_out = arena.zeros({3, 5}, "d_out"), d_w = arena.zeros({5, 4}, "d_w");
  Tensor a = arena.zeros({2, 4}, "a"), b = arena.zeros({5, 2}, "b");
  Tensor out = linear_nobias(x, w.bf16);
  EXPECT_TRUE(test::throws_error([&] { linear_nobias_pullback(x, w.bf16, out, d_out, nullptr, &d_w); },
                                 {"[linear_nobias]", "w is stored in bf16", "no gradient"}));
  LoraLinearSaved saved;
  Tensor lo = lora_linear_fwd(x, w.bf16, a, b, 1.0f, saved);
  EXPECT_TRUE(test::throws_error(
      [&] { lora_linear_pullback(x, w.bf16, a, b, 1.0f, lo, saved, d_out, nullptr, &d_w, nullptr, nullptr); },
      {"[lora_linear]", "w is stored in bf16"}));
  const std::vector<std::int32_t> ids = {1, 2, 3};
  Tensor e = token_embedding(Tokens(ids.data(), 1, 3), w.bf16);
  Tensor d_e = arena.zeros({1, 3, 4}, "d_e");
  EXPECT_TRUE(test::throws_error([&] { token_embedding_pullback(Tokens(ids.data(), 1, 3), w.bf16, e, d_e, &d_w); },
                                 {"[token_embedding]", "wte is stored in bf16"}));
  Tensor wte = arena.zeros({5, 4}, "wte");
  Tensor pe = token_position_embedding(Tokens(ids.data(), 1, 3), wte, w.bf16);
  EXPECT_TRUE(test::throws_error(
      [&] { token_position_embedding_pullback(Tokens(ids.data(), 1, 3), wte, w.bf16, pe, d_e, nullptr, &d_w); },
      {"[token_position_embedding]", "wpe is stored in bf16"}));
  token_position_embedding_pullback(Tokens(ids.data(), 1, 3), wte, w.bf16, pe, d_e, &d_w, nullptr);  // wte's only
  // An activation in bf16 is still refused: only weights may be.
  std::vector<std::uint16_t> xb(12, 0);
  Tensor x16(xb.data(), {3, 4}, DType::BF16);
  EXPECT_TRUE(test::throws_error([&] { (void)linear_nobias(x16, w.f32); }, {"[linear_nobias]", "x has dtype bf16"}));
}

}  // namespace
}  // namespace llmcc
