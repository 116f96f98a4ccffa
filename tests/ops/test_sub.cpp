// sub, neg and rsub (a - b, -x, s - x): fast kernels vs reference (Kernel), reference backward
// vs finite differences (Grad), front-end validation and pullback contract (Api).
#include "llmcc/ops/sub.h"

#include "kernels/cpu/sub.h"
#include "kernels/ref/sub.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(SubKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto a = test::random_vector<float>(n2, 1), b = test::random_vector<float>(n2, 2);
        const auto d_out = test::random_vector<float>(n2, 3);
        std::vector<float> out(n2), out_ref(n2);
        cpu::sub_forward(out.data(), a.data(), b.data(), n2);
        ref::sub_forward(out_ref.data(), a.data(), b.data(), n2);
        EXPECT_TRUE(all_close("sub out", out, out_ref, 0.0, 0.0));
        cpu::neg_forward(out.data(), a.data(), n2);
        ref::neg_forward(out_ref.data(), a.data(), n2);
        EXPECT_TRUE(all_close("neg out", out, out_ref, 0.0, 0.0));
        cpu::rsub_forward(out.data(), 0.75f, a.data(), n2);
        ref::rsub_forward(out_ref.data(), 0.75f, a.data(), n2);
        EXPECT_TRUE(all_close("rsub out", out, out_ref, 0.0, 0.0));

        // Accumulating, then overwriting (a fresh adjoint whose zeros were pending).
        for (bool overwrite : {false, true}) {
          SCOPED_TRACE(overwrite ? "overwrite" : "accumulate");
          const auto start_a = test::random_vector<float>(n2, 4), start_b = test::random_vector<float>(n2, 5);
          auto d_a = start_a, d_b = start_b;
          auto d_a_ref = overwrite ? std::vector<float>(n2, 0.0f) : start_a;
          auto d_b_ref = overwrite ? std::vector<float>(n2, 0.0f) : start_b;
          cpu::sub_backward(d_a.data(), d_b.data(), d_out.data(), n2, overwrite, overwrite);
          ref::sub_backward(d_a_ref.data(), d_b_ref.data(), d_out.data(), n2);
          EXPECT_TRUE(all_close("sub d_a", d_a, d_a_ref, 0.0, 0.0));
          EXPECT_TRUE(all_close("sub d_b", d_b, d_b_ref, 0.0, 0.0));

          d_a = start_a;
          d_a_ref = overwrite ? std::vector<float>(n2, 0.0f) : start_a;
          cpu::neg_backward(d_a.data(), d_out.data(), n2, overwrite);
          ref::neg_backward(d_a_ref.data(), d_out.data(), n2);
          EXPECT_TRUE(all_close("neg d_x", d_a, d_a_ref, 0.0, 0.0));

          d_a = start_a;
          d_a_ref = overwrite ? std::vector<float>(n2, 0.0f) : start_a;
          float d_s = 0.5f, d_s_ref = 0.5f;
          cpu::rsub_backward(&d_s, d_a.data(), d_out.data(), n2, overwrite);
          ref::rsub_backward(&d_s_ref, d_a_ref.data(), d_out.data(), n2);
          EXPECT_TRUE(all_close("rsub d_x", d_a, d_a_ref, 0.0, 0.0));
          // Both sum in double; the fast one in fixed chunks, so only the last float bit may differ.
          EXPECT_NEAR(d_s, d_s_ref, 1e-6 * (1.0 + std::abs(d_s_ref)));
        }
        // Null adjoints are skipped.
        auto d_b = test::random_vector<float>(n2, 6);
        const auto d_b_before = d_b;
        cpu::sub_backward(nullptr, d_b.data(), d_out.data(), n2);
        for (int i = 0; i < n2; ++i) ASSERT_EQ(d_b[i], d_b_before[i] - d_out[i]);
        cpu::rsub_backward(nullptr, nullptr, d_out.data(), n2);
      }
    }
  });
}

TEST(SubKernel, TheSumOfRsubIsTheSameOnEveryThreadCount) {
  const int n = 3 * (1 << 14) + 17;  // several chunks of the ordered sum
  const auto d_out = test::random_vector<float>(n, 9);
  std::vector<float> sums;
  test::for_each_thread_count([&](int) {
    float d_s = 0.0f;
    cpu::rsub_backward(&d_s, nullptr, d_out.data(), n);
    sums.push_back(d_s);
  });
  for (float s : sums) EXPECT_EQ(s, sums.front());
}

TEST(SubGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto a = test::random_vector<double>(n, 11), b = test::random_vector<double>(n, 12);
  const auto w = test::random_vector<double>(n, 13);  // adjoint of out
  std::vector<double> s{0.3};
  auto loss = [&] {
    std::vector<double> out(n), neg(n), rsub(n);
    ref::sub_forward(out.data(), a.data(), b.data(), n);
    ref::neg_forward(neg.data(), out.data(), n);
    ref::rsub_forward(rsub.data(), s[0], neg.data(), n);  // s - (-(a - b))
    return test::weighted_sum(rsub, w);
  };
  // Backward through the chain: rsub, then neg, then sub.
  std::vector<double> d_s(1, 0.0), d_neg(n, 0.0), d_diff(n, 0.0), d_a(n, 0.0), d_b(n, 0.0);
  ref::rsub_backward(d_s.data(), d_neg.data(), w.data(), n);
  ref::neg_backward(d_diff.data(), d_neg.data(), n);
  ref::sub_backward(d_a.data(), d_b.data(), d_diff.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"a", &a, &d_a}, {"b", &b, &d_b}, {"s", &s, &d_s}}));
}

TEST(SubApi, EverySpellingAndItsPullbackAccumulateAndSkipNulls) {
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    test::KernelModeScope kernels(mode);
    Arena arena(1 << 20);
    ArenaScope scope(arena);
    const Shape s{2, 3, 5};
    Tensor a = test::tensor_from(arena, s, test::random_vector<float>(30, 1));
    Tensor b = test::tensor_from(arena, s, test::random_vector<float>(30, 2));
    Tensor diff = a - b, negated = -a, one_minus = 1.0f - a;
    ASSERT_EQ(diff.shape(), s);
    ASSERT_EQ(negated.shape(), s);
    ASSERT_EQ(one_minus.shape(), s);
    for (int i = 0; i < 30; ++i) {
      EXPECT_EQ(diff.f32()[i], a.f32()[i] - b.f32()[i]);
      EXPECT_EQ(sub(a, b).f32()[i], diff.f32()[i]);
      EXPECT_EQ(negated.f32()[i], -a.f32()[i]);
      EXPECT_EQ(one_minus.f32()[i], 1.0f - a.f32()[i]);
    }

    Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(30, 3));
    double total = 0.0;
    for (int i = 0; i < 30; ++i) total += d_out.f32()[i];
    Tensor d_a = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));
    sub_pullback(a, b, diff, d_out, &d_a, nullptr);  // accumulates into d_a, skips d_b
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_a.f32()[i], 1.0f + d_out.f32()[i]);
    Tensor d_b = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));
    sub_pullback(a, b, diff, d_out, nullptr, &d_b);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_b.f32()[i], 1.0f - d_out.f32()[i]);
    Tensor d_same = test::tensor_from(arena, s, std::vector<float>(30, 2.0f));
    sub_pullback(a, a, diff, d_out, &d_same, &d_same);  // x - x: the two cancel
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_same.f32()[i], 2.0f);

    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));
    neg_pullback(a, negated, d_out, &d_x);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_x.f32()[i], 1.0f - d_out.f32()[i]);
    neg_pullback(a, negated, d_out, nullptr);

    float d_s = 0.25f;
    Tensor d_x2 = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));
    rsub_pullback(1.0f, a, one_minus, d_out, &d_s, &d_x2);
    EXPECT_NEAR(d_s, 0.25 + total, 1e-5);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_x2.f32()[i], 1.0f - d_out.f32()[i]);
    rsub_pullback(1.0f, a, one_minus, d_out, nullptr, nullptr);

    // A fresh adjoint whose zeros are pending is written, not added to.
    Tensor fresh = arena.zeros(s, "fresh");
    fresh.mark_zero_pending();
    neg_pullback(a, negated, d_out, &fresh);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(fresh.f32()[i], -d_out.f32()[i]);
  }
}

TEST(SubApi, RejectsMismatchedShapesAndMissingArena) {
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), b = arena.zeros({3, 2}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)sub(a, a); }, {"[sub]", "no arena", "ArenaScope"}));
  EXPECT_TRUE(test::throws_error([&] { (void)neg(a); }, {"[neg]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)sub(a, b); }, {"[sub]", "b has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)(a - Tensor()); }, {"[sub]", "no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)(-Tensor()); }, {"[neg]", "no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)(2.0f - Tensor()); }, {"[rsub]", "no storage"}));
  Tensor d_wrong = arena.zeros({6}, "d");
  EXPECT_TRUE(test::throws_error([&] { sub_pullback(a, a, a, a, &d_wrong, nullptr); }, {"[sub]", "d_a has shape (6)"}));
  EXPECT_TRUE(test::throws_error([&] { neg_pullback(a, a, b, &d_wrong); }, {"[neg]", "d_out has shape (3, 2)"}));
  EXPECT_TRUE(
      test::throws_error([&] { rsub_pullback(1.0f, a, a, a, nullptr, &d_wrong); }, {"[rsub]", "d_x has shape (6)"}));
}

}  // namespace
}  // namespace llmcc
