// bidirectional_attention: fast kernel vs reference (Kernel), reference backward vs finite
// differences in double (Grad), front-end validation, pullback contract and the difference from
// causal attention (Api).
#include "llmcc/ops/bidirectional_attention.h"

#include <cmath>

#include "kernels/cpu/bidirectional_attention.h"
#include "kernels/ref/bidirectional_attention.h"
#include "llmcc/ops/attention.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

struct Case {
  int B, T, NH, HS;
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " HS=" + std::to_string(HS);
  }
  std::size_t n() const { return std::size_t(B) * T * NH * HS; }  // q, k, v, out: (B, T, NH*HS)
  std::size_t nlse() const { return std::size_t(B) * NH * T; }    // lse: (B, NH, T)
};

// Fast forward and backward on float, with 1 and 2 threads, against the reference in double.
void expect_fast_matches_reference(const Case& c) {
  SCOPED_TRACE(c.str());
  const auto q = test::random_vector<float>(c.n(), 1, -2.0, 2.0);  // (B, T, NH*HS)
  const auto k = test::random_vector<float>(c.n(), 2, -2.0, 2.0);  // (B, T, NH*HS)
  const auto v = test::random_vector<float>(c.n(), 3);             // (B, T, NH*HS)
  const auto d_out = test::random_vector<float>(c.n(), 4);         // (B, T, NH*HS)
  const auto qd = test::cast_vector<double>(q), kd = test::cast_vector<double>(k), vd = test::cast_vector<double>(v),
             dod = test::cast_vector<double>(d_out);
  std::vector<double> out_ref(c.n()), lse_ref(c.nlse());
  ref::bidirectional_attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), c.B, c.T, c.NH,
                                       c.HS);
  // Adjoints start non-zero: the kernels must accumulate.
  const auto d_q0 = test::random_vector<float>(c.n(), 5), d_k0 = test::random_vector<float>(c.n(), 6),
             d_v0 = test::random_vector<float>(c.n(), 7);
  auto d_q_ref = test::cast_vector<double>(d_q0), d_k_ref = test::cast_vector<double>(d_k0),
       d_v_ref = test::cast_vector<double>(d_v0);
  ref::bidirectional_attention_backward(d_q_ref.data(), d_k_ref.data(), d_v_ref.data(), dod.data(), qd.data(),
                                        kd.data(), vd.data(), out_ref.data(), lse_ref.data(), c.B, c.T, c.NH, c.HS);
  test::for_each_thread_count([&](int) {
    std::vector<float> out(c.n()), lse(c.nlse());
    std::vector<float> d_q = d_q0, d_k = d_k0, d_v = d_v0;
    cpu::bidirectional_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.HS);
    cpu::bidirectional_attention_backward(d_q.data(), d_k.data(), d_v.data(), d_out.data(), q.data(), k.data(),
                                          v.data(), out.data(), lse.data(), c.B, c.T, c.NH, c.HS);
    EXPECT_TRUE(all_close("out", out, out_ref, 2e-6, 2e-5));
    EXPECT_TRUE(all_close("lse", lse, lse_ref, 2e-6, 2e-6));
    EXPECT_TRUE(all_close("d_q", d_q, d_q_ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close("d_k", d_k, d_k_ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close("d_v", d_v, d_v_ref, 1e-5, 1e-4));
  });
}

TEST(BidirectionalAttentionKernel, FastMatchesReferenceOverAwkwardSizes) {
  for (int T : {1, 3, 7, 64, 65, 197}) {
    for (int HS : {1, 3, 8, 24, 64}) {
      for (int NH : {1, 4}) {
        const int B = T <= 65 ? 2 : 1;  // keeps the double reference fast at T = 197
        expect_fast_matches_reference({B, T, NH, HS});
      }
    }
  }
}

TEST(BidirectionalAttentionKernel, FastForwardIsStableForLargeScores) {
  // Scores around 1e3 overflow exp() unless the row max is subtracted.
  const Case c{1, 70, 2, 4};
  const auto q = test::random_vector<float>(c.n(), 8, 20.0, 30.0);  // (B, T, NH*HS)
  const auto k = test::random_vector<float>(c.n(), 9, 20.0, 30.0);  // (B, T, NH*HS)
  const auto v = test::random_vector<float>(c.n(), 10);             // (B, T, NH*HS)
  std::vector<float> out(c.n()), lse(c.nlse());
  std::vector<double> out_ref(c.n()), lse_ref(c.nlse());
  cpu::bidirectional_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.HS);
  const auto qd = test::cast_vector<double>(q), kd = test::cast_vector<double>(k), vd = test::cast_vector<double>(v);
  ref::bidirectional_attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), c.B, c.T, c.NH,
                                       c.HS);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  // Float scores near 1250 are spaced 1.2e-4 apart: probabilities are off by ~1e-4 relative.
  EXPECT_TRUE(all_close("out", out, out_ref, 2e-4, 0.0));
  EXPECT_TRUE(all_close("lse", lse, lse_ref, 1e-3, 1e-6));
}

TEST(BidirectionalAttentionGrad, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Case c : {Case{2, 5, 2, 3}, Case{1, 4, 3, 2}, Case{1, 1, 1, 2}}) {
    SCOPED_TRACE(c.str());
    auto q = test::random_vector<double>(c.n(), 21), k = test::random_vector<double>(c.n(), 22),
         v = test::random_vector<double>(c.n(), 23);        // (B, T, NH*HS) each
    const auto w = test::random_vector<double>(c.n(), 24);  // adjoint of out
    std::vector<double> out(c.n()), lse(c.nlse());
    auto loss = [&] {
      ref::bidirectional_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.HS);
      return test::weighted_sum(out, w);
    };
    loss();  // out and lse at the unperturbed point, which the backward reads
    const auto out0 = out, lse0 = lse;
    std::vector<double> d_q(c.n(), 0.0), d_k(c.n(), 0.0), d_v(c.n(), 0.0);
    ref::bidirectional_attention_backward(d_q.data(), d_k.data(), d_v.data(), w.data(), q.data(), k.data(), v.data(),
                                          out0.data(), lse0.data(), c.B, c.T, c.NH, c.HS);
    EXPECT_TRUE(test::fd_check(loss, {{"q", &q, &d_q}, {"k", &k, &d_k}, {"v", &v, &d_v}}));
  }
}

TEST(BidirectionalAttentionGrad, AliasedAdjointsOfSelfAttentionMatchFiniteDifferences) {
  // out = attention(x, x, x): one adjoint receives all three contributions.
  const Case c{2, 4, 2, 3};
  auto x = test::random_vector<double>(c.n(), 31);        // (B, T, NH*HS)
  const auto w = test::random_vector<double>(c.n(), 32);  // adjoint of out
  std::vector<double> out(c.n()), lse(c.nlse());
  auto loss = [&] {
    ref::bidirectional_attention_forward(out.data(), lse.data(), x.data(), x.data(), x.data(), c.B, c.T, c.NH, c.HS);
    return test::weighted_sum(out, w);
  };
  loss();
  const auto out0 = out, lse0 = lse;
  std::vector<double> d_x(c.n(), 0.0);
  ref::bidirectional_attention_backward(d_x.data(), d_x.data(), d_x.data(), w.data(), x.data(), x.data(), x.data(),
                                        out0.data(), lse0.data(), c.B, c.T, c.NH, c.HS);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
  // The fast kernel with the same aliasing, in float, against the reference.
  const auto xf = test::cast_vector<float>(x), wf = test::cast_vector<float>(w);
  std::vector<float> outf(c.n()), lsef(c.nlse()), d_xf(c.n(), 0.0f);
  cpu::bidirectional_attention_forward(outf.data(), lsef.data(), xf.data(), xf.data(), xf.data(), c.B, c.T, c.NH, c.HS);
  cpu::bidirectional_attention_backward(d_xf.data(), d_xf.data(), d_xf.data(), wf.data(), xf.data(), xf.data(),
                                        xf.data(), outf.data(), lsef.data(), c.B, c.T, c.NH, c.HS);
  EXPECT_TRUE(all_close("d_x", d_xf, d_x, 1e-5, 1e-4));
}

TEST(BidirectionalAttentionApi, LastQueryMatchesCausalAttentionAndFirstDoesNot) {
  // The last query sees every key in both ops; the first sees only itself in the causal one.
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{2, 5, 8};  // (B, T, NH*HS), NH = 2
  Tensor q = test::tensor_from(arena, s, test::random_vector<float>(80, 1));
  Tensor k = test::tensor_from(arena, s, test::random_vector<float>(80, 2));
  Tensor v = test::tensor_from(arena, s, test::random_vector<float>(80, 3));
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    Tensor bi = bidirectional_attention(q, k, v, 2), causal = attention(q, k, v, 2, 2);
    ASSERT_EQ(bi.shape(), s);
    for (int b = 0; b < 2; ++b) {
      const float* last_bi = bi.f32() + (b * 5 + 4) * 8;
      const float* last_causal = causal.f32() + (b * 5 + 4) * 8;
      EXPECT_TRUE(all_close("last query", last_bi, last_causal, 8, 1e-6, 1e-5));
      double diff = 0.0;
      for (int d = 0; d < 8; ++d) diff += std::fabs(bi.f32()[b * 40 + d] - causal.f32()[b * 40 + d]);
      EXPECT_GT(diff, 1e-3) << "the first query must see all keys";
    }
  }
}

TEST(BidirectionalAttentionApi, PullbackAccumulatesFillsPendingZerosAndModesAgree) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{2, 7, 12};  // NH = 3, HS = 4
  const int n = 2 * 7 * 12;
  Tensor q = test::tensor_from(arena, s, test::random_vector<float>(n, 1));
  Tensor k = test::tensor_from(arena, s, test::random_vector<float>(n, 2));
  Tensor v = test::tensor_from(arena, s, test::random_vector<float>(n, 3));
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(n, 4));
  std::vector<std::vector<float>> results;
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    BidirectionalAttentionSaved saved;
    Tensor out = bidirectional_attention_fwd(q, k, v, 3, saved);
    ASSERT_EQ(saved.lse.shape(), (Shape{2, 3, 7}));
    Tensor d_q = test::tensor_from(arena, s, std::vector<float>(n, 1.0f));  // accumulates
    Tensor d_k = test::tensor_from(arena, s, std::vector<float>(n, 5.0f));
    d_k.mark_zero_pending();  // reads as zero
    bidirectional_attention_pullback(q, k, v, 3, out, saved, d_out, &d_q, &d_k, nullptr);
    Tensor d_q0 = arena.zeros(s, "d_q0");
    bidirectional_attention_pullback(q, k, v, 3, out, saved, d_out, &d_q0, nullptr, nullptr);
    for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(d_q.f32()[i], 1.0f + d_q0.f32()[i]) << i;
    results.push_back(test::to_vector(out));
    results.push_back(test::to_vector(d_k));
  }
  EXPECT_TRUE(all_close("out", results[0], results[2], 1e-6, 1e-5));
  EXPECT_TRUE(all_close("d_k", results[1], results[3], 1e-6, 1e-5));
}

TEST(BidirectionalAttentionApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 8}, "x");
  EXPECT_TRUE(test::throws_error([&] { (void)bidirectional_attention(x, x, x, 2); },
                                 {"[bidirectional_attention]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  const char* op = "[bidirectional_attention]";
  EXPECT_TRUE(test::throws_error([&] { (void)bidirectional_attention(x, x, x, 0); }, {op, "n_head is 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)bidirectional_attention(x, x, x, 3); },
                                 {op, "q has shape (2, 3, 8)", "positive multiple of n_head 3"}));
  Tensor flat = arena.zeros({6, 8}, "flat"), other = arena.zeros({2, 4, 8}, "other");
  EXPECT_TRUE(test::throws_error([&] { (void)bidirectional_attention(flat, flat, flat, 2); },
                                 {op, "q has shape (6, 8), expected 3 dims"}));
  EXPECT_TRUE(test::throws_error([&] { (void)bidirectional_attention(x, other, x, 2); },
                                 {op, "k has shape (2, 4, 8), expected (2, 3, 8)"}));
  BidirectionalAttentionSaved none;
  EXPECT_TRUE(
      test::throws_error([&] { bidirectional_attention_pullback(x, x, x, 2, x, none, x, nullptr, nullptr, nullptr); },
                         {op, "saved.lse", "did you run bidirectional_attention_fwd?"}));
  BidirectionalAttentionSaved saved;
  Tensor out = bidirectional_attention_fwd(x, x, x, 2, saved);
  EXPECT_TRUE(
      test::throws_error([&] { bidirectional_attention_pullback(x, x, x, 2, out, saved, x, &other, nullptr, nullptr); },
                         {op, "d_q has shape (2, 4, 8), expected (2, 3, 8)"}));
}

}  // namespace
}  // namespace llmcc
