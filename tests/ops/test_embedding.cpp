// token_embedding / token_position_embedding: fast kernels vs reference (Kernel), reference
// backward vs finite differences with repeated ids (Grad), front-end validation and the
// pullback contract (Api).
#include "llmcc/ops/embedding.h"

#include "kernels/cpu/embedding.h"
#include "kernels/ref/embedding.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

struct ModeGuard {
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

// (B * T) ids in [0, V); a small V makes ids repeat, so the scatter-add accumulates.
std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(V));
  return ids;
}

TEST(EmbeddingKernel, ForwardAndBackwardMatchReferenceExactly) {
  // The fast backward sums each element in the reference's (b, t) order, so the results are
  // bit-for-bit equal for every thread count: tolerance 0.
  const std::int64_t V = 50;
  const std::int64_t BT[][2] = {{1, 1}, {3, 7}, {2, 65}, {1, 197}, {4, 64}};
  test::for_each_thread_count([&](int) {
    for (const auto& bt : BT) {
      const std::int64_t B = bt[0], T = bt[1], maxT = T + 3;
      for (std::int64_t C : test::awkward_sizes()) {
        SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C));
        const auto ids = random_ids(B * T, V, 1 + T + C);             // (B, T)
        const auto wte = test::random_vector<float>(V * C, 2);        // (V, C)
        const auto wpe = test::random_vector<float>(maxT * C, 3);     // (maxT, C)
        const auto d_out = test::random_vector<float>(B * T * C, 4);  // (B, T, C)
        for (bool pos : {false, true}) {
          const float* p = pos ? wpe.data() : nullptr;
          std::vector<float> out(B * T * C), out_ref(B * T * C);  // (B, T, C)
          cpu::embedding_forward(out.data(), ids.data(), wte.data(), p, B, T, C);
          ref::embedding_forward(out_ref.data(), ids.data(), wte.data(), p, B, T, C);
          EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));
        }
        auto d_wte = test::random_vector<float>(V * C, 5);     // (V, C) pre-filled
        auto d_wpe = test::random_vector<float>(maxT * C, 6);  // (maxT, C) pre-filled
        auto d_wte_ref = d_wte, d_wpe_ref = d_wpe;
        cpu::embedding_backward(d_wte.data(), d_wpe.data(), d_out.data(), ids.data(), B, T, C);
        ref::embedding_backward(d_wte_ref.data(), d_wpe_ref.data(), d_out.data(), ids.data(), B, T, C);
        EXPECT_TRUE(all_close("d_wte", d_wte, d_wte_ref, 0.0, 0.0));
        EXPECT_TRUE(all_close("d_wpe", d_wpe, d_wpe_ref, 0.0, 0.0));
      }
    }
  });
}

TEST(EmbeddingKernel, BackwardAgainstDoubleReference) {
  // The exact comparison above shares the reference's float rounding; this one checks the sums
  // themselves against double, with GPT-2's C and many repeats of few ids.
  const std::int64_t B = 4, T = 64, C = 768, V = 5;
  const auto ids = random_ids(B * T, V, 9);
  const auto d_out = test::random_vector<float>(B * T * C, 10);
  test::for_each_thread_count([&](int) {
    std::vector<float> d_wte(V * C, 0.0f), d_wpe(T * C, 0.0f);
    std::vector<double> d_wte_ref(V * C, 0.0), d_wpe_ref(T * C, 0.0);
    cpu::embedding_backward(d_wte.data(), d_wpe.data(), d_out.data(), ids.data(), B, T, C);
    const auto d_out_d = test::cast_vector<double>(d_out);
    ref::embedding_backward(d_wte_ref.data(), d_wpe_ref.data(), d_out_d.data(), ids.data(), B, T, C);
    EXPECT_TRUE(all_close("d_wte", d_wte, d_wte_ref, 1e-5, 1e-5));
    EXPECT_TRUE(all_close("d_wpe", d_wpe, d_wpe_ref, 1e-6, 1e-6));
  });
}

TEST(EmbeddingGrad, ReferenceBackwardMatchesFiniteDifferences) {
  // V = 4 for 10 positions: every id repeats. maxT = 7 > T = 5: rows 5, 6 of wpe get 0.
  const std::int64_t B = 2, T = 5, C = 3, V = 4, maxT = 7;
  const std::vector<std::int32_t> ids = {0, 2, 2, 3, 0, 1, 2, 0, 0, 3};  // (B, T)
  auto wte = test::random_vector<double>(V * C, 1);                      // (V, C)
  auto wpe = test::random_vector<double>(maxT * C, 2);                   // (maxT, C)
  const auto w = test::random_vector<double>(B * T * C, 3);              // adjoint of out
  for (bool pos : {false, true}) {
    SCOPED_TRACE(pos ? "token_position_embedding" : "token_embedding");
    auto loss = [&] {
      std::vector<double> out(B * T * C);  // (B, T, C)
      ref::embedding_forward(out.data(), ids.data(), wte.data(), pos ? wpe.data() : nullptr, B, T, C);
      return test::weighted_sum(out, w);
    };
    std::vector<double> d_wte(V * C, 0.0), d_wpe(maxT * C, 0.0);
    ref::embedding_backward(d_wte.data(), pos ? d_wpe.data() : nullptr, w.data(), ids.data(), B, T, C);
    if (pos) {
      EXPECT_TRUE(test::fd_check(loss, {{"wte", &wte, &d_wte}, {"wpe", &wpe, &d_wpe}}));
    } else {
      EXPECT_TRUE(test::fd_check(loss, {{"wte", &wte, &d_wte}}));
    }
    // Id 0 appears 4 times: its gradient row is the sum of 4 rows of w, which FD agrees with
    // only if the accumulation is right; spell one element out as a sanity anchor.
    EXPECT_NEAR(d_wte[0], w[0] + w[4 * C] + w[7 * C] + w[8 * C], 1e-15);
  }
}

TEST(EmbeddingApi, ForwardAndPullbackAccumulateSkipNullsAndModesAgree) {
  Arena arena(8 << 20);
  ArenaScope scope(arena);
  const int B = 3, T = 65, C = 96, V = 11, maxT = 80;
  const auto ids = random_ids(B * T, V, 7);
  const Tokens idx(ids.data(), B, T);
  Tensor wte = test::tensor_from(arena, {V, C}, test::random_vector<float>(V * C, 1));        // (V, C)
  Tensor wpe = test::tensor_from(arena, {maxT, C}, test::random_vector<float>(maxT * C, 2));  // (maxT, C)
  Tensor d_out = test::tensor_from(arena, {B, T, C}, test::random_vector<float>(B * T * C, 3));
  const std::vector<float> pre_te(V * C, 1.0f), pre_pe(maxT * C, -1.0f);

  std::vector<float> outs[2], d_tes[2], d_pes[2];
  const KernelMode modes[2] = {KernelMode::Reference, KernelMode::Fast};
  for (int k = 0; k < 2; ++k) {
    ModeGuard guard;
    set_kernel_mode(modes[k]);
    Tensor out = token_position_embedding(idx, wte, wpe);  // (B, T, C)
    ASSERT_EQ(out.shape(), Shape({B, T, C}));
    outs[k] = test::to_vector(out);
    Tensor d_wte = test::tensor_from(arena, {V, C}, pre_te);     // (V, C) pre-filled
    Tensor d_wpe = test::tensor_from(arena, {maxT, C}, pre_pe);  // (maxT, C) pre-filled
    token_position_embedding_pullback(idx, wte, wpe, out, d_out, &d_wte, &d_wpe);
    token_position_embedding_pullback(idx, wte, wpe, out, d_out, nullptr, nullptr);  // no-op
    d_tes[k] = test::to_vector(d_wte);
    d_pes[k] = test::to_vector(d_wpe);

    // token_embedding alone: out is wte's row; d_wpe skipped means only d_wte moves.
    Tensor out2 = token_embedding(idx, wte);  // (B, T, C)
    EXPECT_EQ(out2.f32()[(1 * T + 4) * C + 5], wte.f32()[ids[1 * T + 4] * C + 5]);
    Tensor d_wte2 = test::tensor_from(arena, {V, C}, pre_te);
    token_embedding_pullback(idx, wte, out2, d_out, &d_wte2);
    EXPECT_TRUE(all_close("token_embedding d_wte", test::to_vector(d_wte2), d_tes[k], 0.0, 0.0));
    token_embedding_pullback(idx, wte, out2, d_out, nullptr);  // skipped, no throw
  }
  EXPECT_TRUE(all_close("out", outs[1], outs[0], 0.0, 0.0));
  EXPECT_TRUE(all_close("d_wte", d_tes[1], d_tes[0], 0.0, 0.0));
  EXPECT_TRUE(all_close("d_wpe", d_pes[1], d_pes[0], 0.0, 0.0));
  // Accumulated on the pre-fill: a position's d_wpe row is pre + sum over the batch; rows
  // t >= T keep the pre-fill.
  const float* g = d_out.f32();
  EXPECT_NEAR(d_pes[0][2 * C + 1], -1.0f + g[(0 * T + 2) * C + 1] + g[(1 * T + 2) * C + 1] + g[(2 * T + 2) * C + 1],
              1e-6);
  for (int i = T * C; i < maxT * C; ++i) ASSERT_EQ(d_pes[0][i], -1.0f) << i;
  EXPECT_EQ(outs[0][(2 * T + 9) * C + 7], wte.f32()[ids[2 * T + 9] * C + 7] + wpe.f32()[9 * C + 7]);
}

TEST(EmbeddingApi, AliasedAdjointsSum) {
  // wte and wpe the same (V == maxT == 8) tensor, one adjoint for both: it gets both sums.
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const int B = 2, T = 6, C = 40, V = 8;
  const auto ids = random_ids(B * T, V, 5);
  const Tokens idx(ids.data(), B, T);
  Tensor w = test::tensor_from(arena, {V, C}, test::random_vector<float>(V * C, 1));  // (V, C)
  Tensor d_out = test::tensor_from(arena, {B, T, C}, test::random_vector<float>(B * T * C, 2));
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    ModeGuard guard;
    set_kernel_mode(mode);
    Tensor out = token_position_embedding(idx, w, w);
    Tensor d_both = arena.zeros({V, C}, "d"), d_te = arena.zeros({V, C}, "d"), d_pe = arena.zeros({V, C}, "d");
    token_position_embedding_pullback(idx, w, w, out, d_out, &d_both, &d_both);
    token_position_embedding_pullback(idx, w, w, out, d_out, &d_te, &d_pe);
    std::vector<float> sum(V * C);
    for (int i = 0; i < V * C; ++i) sum[i] = d_te.f32()[i] + d_pe.f32()[i];
    EXPECT_TRUE(all_close("d_wte + d_wpe", test::to_vector(d_both), sum, 1e-6, 1e-6));
  }
}

TEST(EmbeddingApi, RejectsBadIdsAndShapes) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  std::vector<std::int32_t> ids = {0, 1, 2, 3, 4, 5};  // (2, 3)
  const Tokens idx(ids.data(), 2, 3);
  Tensor wte = arena.zeros({6, 4}, "wte");  // (V, C)
  Tensor wpe = arena.zeros({3, 4}, "wpe");  // (maxT, C)
  Tensor d_out = arena.zeros({2, 3, 4}, "d_out");
  Tensor out = token_position_embedding(idx, wte, wpe);

  ids[4] = 6;  // idx[1, 1]
  EXPECT_TRUE(test::throws_error([&] { (void)token_embedding(idx, wte); },
                                 {"[token_embedding]", "idx[1, 1] is 6", "[0, 6)", "rows of wte (6, 4)"}));
  EXPECT_TRUE(
      test::throws_error([&] { token_position_embedding_pullback(idx, wte, wpe, out, d_out, nullptr, nullptr); },
                         {"[token_position_embedding]", "idx[1, 1] is 6"}));
  ids[4] = -2;
  EXPECT_TRUE(test::throws_error([&] { token_embedding_pullback(idx, wte, out, d_out, nullptr); },
                                 {"[token_embedding]", "idx[1, 1] is -2"}));
  ids[4] = 4;

  EXPECT_TRUE(
      test::throws_error([&] { (void)token_embedding(Tokens(), wte); }, {"[token_embedding]", "idx has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)token_embedding(idx, arena.zeros({24}, "w")); },
                                 {"[token_embedding]", "wte has shape (24)", "(V, C)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)token_position_embedding(idx, wte, arena.zeros({2, 4}, "wpe")); },
                                 {"[token_position_embedding]", "T = 3", "maxT = 2"}));
  EXPECT_TRUE(test::throws_error([&] { (void)token_position_embedding(idx, wte, arena.zeros({3, 5}, "wpe")); },
                                 {"[token_position_embedding]", "wpe has shape (3, 5)", "dim 1 is 5, expected 4"}));
  EXPECT_TRUE(test::throws_error([&] { (void)token_position_embedding(idx, wte, Tensor()); },
                                 {"[token_position_embedding]", "wpe has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { token_embedding_pullback(idx, wte, out, arena.zeros({2, 3, 5}, "d"), nullptr); },
                                 {"[token_embedding]", "d_out has shape (2, 3, 5)", "expected 4"}));
  EXPECT_TRUE(test::throws_error([&] { token_embedding_pullback(idx, wte, out, arena.zeros({3, 2, 4}, "d"), nullptr); },
                                 {"[token_embedding]", "d_out has shape (3, 2, 4)", "B of idx"}));
  Tensor d_bad = arena.zeros({4, 6}, "d");
  EXPECT_TRUE(test::throws_error([&] { token_embedding_pullback(idx, wte, out, d_out, &d_bad); },
                                 {"[token_embedding]", "d_wte has shape (4, 6)", "expected (6, 4)"}));
  EXPECT_TRUE(test::throws_error([&] { token_position_embedding_pullback(idx, wte, wpe, out, d_out, nullptr, &d_bad); },
                                 {"[token_position_embedding]", "d_wpe has shape (4, 6)", "expected (3, 4)"}));
}

}  // namespace
}  // namespace llmcc
