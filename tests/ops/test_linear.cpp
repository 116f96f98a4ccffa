// linear: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api). out = x @ w^T (+ b), w (OC, C).
#include "llmcc/ops/linear.h"

#include <array>

#include "kernels/cpu/linear.h"
#include "kernels/ref/linear.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;
using test::cast_vector;
using test::random_vector;

// Float fast kernel vs the reference in double; the tolerance grows with the reduction length
// K because fp32 rounding accumulates over it (any wrong term is off by ~0.1, far above this).
double atol_for(std::int64_t K) { return 2e-6 * static_cast<double>(K) + 1e-6; }

// Sizes (N, C, OC): each awkward size on each dim, the other two small and awkward.
std::vector<std::array<int, 3>> kernel_sizes() {
  std::vector<std::array<int, 3>> sizes;
  for (int s : test::awkward_sizes()) {
    sizes.push_back({s, 65, 7});
    sizes.push_back({7, s, 65});
    sizes.push_back({65, 7, s});
  }
  sizes.push_back({197, 768, 65});  // realistic C with an odd row count
  return sizes;
}

TEST(LinearKernel, ForwardMatchesReference) {
  test::for_each_thread_count([](int) {
    for (auto [N, C, OC] : kernel_sizes()) {
      for (bool bias : {true, false}) {
        SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                     " bias=" + std::to_string(bias));
        const auto x = random_vector<float>(N * C, 1);   // (N, C)
        const auto w = random_vector<float>(OC * C, 2);  // (OC, C)
        const auto b = random_vector<float>(OC, 3);      // (OC)
        std::vector<float> out(N * OC);                  // (N, OC)
        std::vector<double> out_ref(N * OC);             // (N, OC)
        const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), bd = cast_vector<double>(b);
        cpu::linear_forward(out.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
        ref::linear_forward(out_ref.data(), xd.data(), wd.data(), bias ? bd.data() : nullptr, N, C, OC);
        EXPECT_TRUE(all_close("out", out, out_ref, atol_for(C), 1e-5));
      }
    }
  });
}

TEST(LinearKernel, BackwardMatchesReferenceAndAccumulates) {
  test::for_each_thread_count([](int) {
    for (auto [N, C, OC] : kernel_sizes()) {
      SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC));
      const auto x = random_vector<float>(N * C, 1);       // (N, C)
      const auto w = random_vector<float>(OC * C, 2);      // (OC, C)
      const auto d_out = random_vector<float>(N * OC, 3);  // (N, OC)
      // Pre-filled adjoints: the kernels must add to them.
      auto d_x = random_vector<float>(N * C, 4);   // (N, C)
      auto d_w = random_vector<float>(OC * C, 5);  // (OC, C)
      auto d_b = random_vector<float>(OC, 6);      // (OC)
      auto d_x_ref = cast_vector<double>(d_x), d_w_ref = cast_vector<double>(d_w), d_b_ref = cast_vector<double>(d_b);
      const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), dod = cast_vector<double>(d_out);
      cpu::linear_backward(d_x.data(), d_w.data(), d_b.data(), d_out.data(), x.data(), w.data(), N, C, OC);
      ref::linear_backward(d_x_ref.data(), d_w_ref.data(), d_b_ref.data(), dod.data(), xd.data(), wd.data(), N, C, OC);
      EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, atol_for(OC), 1e-5));
      EXPECT_TRUE(all_close("d_w", d_w, d_w_ref, atol_for(N), 1e-5));
      EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, atol_for(N), 1e-5));
    }
  });
}

TEST(LinearKernel, BackwardSkipsNullAdjoints) {
  const int N = 65, C = 7, OC = 197;
  const auto x = random_vector<float>(N * C, 1), w = random_vector<float>(OC * C, 2);  // (N, C), (OC, C)
  const auto d_out = random_vector<float>(N * OC, 3);                                  // (N, OC)
  const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), dod = cast_vector<double>(d_out);
  // Only d_b: the two GEMMs are skipped, the sum still runs.
  std::vector<float> d_b(OC, 0.5f);
  std::vector<double> d_b_ref(OC, 0.5);
  cpu::linear_backward(nullptr, nullptr, d_b.data(), d_out.data(), x.data(), w.data(), N, C, OC);
  ref::linear_backward<double>(nullptr, nullptr, d_b_ref.data(), dod.data(), xd.data(), wd.data(), N, C, OC);
  EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, atol_for(N), 1e-5));
  // Only d_w.
  std::vector<float> d_w(OC * C, 0.0f);
  std::vector<double> d_w_ref(OC * C, 0.0);
  cpu::linear_backward(nullptr, d_w.data(), nullptr, d_out.data(), x.data(), w.data(), N, C, OC);
  ref::linear_backward<double>(nullptr, d_w_ref.data(), nullptr, dod.data(), xd.data(), wd.data(), N, C, OC);
  EXPECT_TRUE(all_close("d_w", d_w, d_w_ref, atol_for(N), 1e-5));
}

// Sum(out * g) as a function of the inputs, through the double reference forward.
TEST(LinearGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 6, C = 5, OC = 4;                    // x (N, C) e.g. B=2, T=3
  auto x = random_vector<double>(N * C, 11);         // (N, C)
  auto w = random_vector<double>(OC * C, 12);        // (OC, C)
  auto b = random_vector<double>(OC, 13);            // (OC)
  const auto g = random_vector<double>(N * OC, 14);  // adjoint of out (N, OC)
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "linear" : "linear_nobias");
    auto loss = [&] {
      std::vector<double> out(N * OC);  // (N, OC)
      ref::linear_forward(out.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
      return test::weighted_sum(out, g);
    };
    std::vector<double> d_x(N * C, 0.0), d_w(OC * C, 0.0), d_b(OC, 0.0);
    ref::linear_backward(d_x.data(), d_w.data(), bias ? d_b.data() : nullptr, g.data(), x.data(), w.data(), N, C, OC);
    std::vector<test::FdInput> inputs = {{"x", &x, &d_x}, {"w", &w, &d_w}};
    if (bias) inputs.push_back({"b", &b, &d_b});
    EXPECT_TRUE(test::fd_check(loss, inputs));
  }
}

TEST(LinearApi, ForwardShapesAndPullbackAccumulateAndSkipNulls) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int B = 2, T = 3, C = 5, OC = 4;
  Tensor x = test::tensor_from(arena, {B, T, C}, random_vector<float>(B * T * C, 1));  // (B, T, C)
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));       // (OC, C)
  Tensor b = test::tensor_from(arena, {OC}, random_vector<float>(OC, 3));              // (OC)
  Tensor out = linear(x, w, b);                                                        // (B, T, OC)
  ASSERT_EQ(out.shape(), (Shape{B, T, OC}));
  // One element by hand: out[1, 2, 3] = b[3] + sum_c x[1, 2, c] w[3, c].
  double expect = b.f32()[3];
  for (int c = 0; c < C; ++c) expect += double(x.f32()[(1 * T + 2) * C + c]) * w.f32()[3 * C + c];
  EXPECT_NEAR(out.f32()[(1 * T + 2) * OC + 3], expect, 1e-5);

  // (N, C) input gives (N, OC); no bias gives the same minus b.
  Tensor x2 = test::tensor_from(arena, {B * T, C}, test::to_vector(x));  // (N, C)
  Tensor out2 = linear_nobias(x2, w);                                    // (N, OC)
  ASSERT_EQ(out2.shape(), (Shape{B * T, OC}));
  for (int i = 0; i < B * T * OC; ++i) EXPECT_NEAR(out2.f32()[i] + b.f32()[i % OC], out.f32()[i], 1e-5);

  // Pullback into pre-filled d_w and d_b, d_x null: matches the reference plus the old values.
  Tensor d_out = test::tensor_from(arena, {B, T, OC}, random_vector<float>(B * T * OC, 4));  // (B, T, OC)
  Tensor d_w = test::tensor_from(arena, {OC, C}, std::vector<float>(OC * C, 1.0f));          // (OC, C)
  Tensor d_b = test::tensor_from(arena, {OC}, std::vector<float>(OC, 2.0f));                 // (OC)
  linear_pullback(x, w, b, out, d_out, nullptr, &d_w, &d_b);
  std::vector<float> d_w_ref(OC * C, 1.0f), d_b_ref(OC, 2.0f);
  ref::linear_backward<float>(nullptr, d_w_ref.data(), d_b_ref.data(), d_out.f32(), x.f32(), w.f32(), B * T, C, OC);
  EXPECT_TRUE(all_close("d_w", test::to_vector(d_w), d_w_ref, 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_b", test::to_vector(d_b), d_b_ref, 1e-5, 1e-5));

  // nobias pullback: only d_x, accumulated.
  Tensor d_x = test::tensor_from(arena, {B, T, C}, std::vector<float>(B * T * C, -1.0f));  // (B, T, C)
  linear_nobias_pullback(x, w, out, d_out, &d_x, nullptr);
  std::vector<float> d_x_ref(B * T * C, -1.0f);
  ref::linear_backward<float>(d_x_ref.data(), nullptr, nullptr, d_out.f32(), x.f32(), w.f32(), B * T, C, OC);
  EXPECT_TRUE(all_close("d_x", test::to_vector(d_x), d_x_ref, 1e-5, 1e-5));
}

TEST(LinearApi, AliasedAdjointsAccumulateBoth) {
  // linear_nobias(x, x): x is both input and weight, so d_x gets both contributions.
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const int N = 4, C = 3;
  Tensor x = test::tensor_from(arena, {N, C}, random_vector<float>(N * C, 1));      // (N, C)
  Tensor out = linear_nobias(x, x);                                                 // (N, N)
  Tensor d_out = test::tensor_from(arena, {N, N}, random_vector<float>(N * N, 2));  // (N, N)
  Tensor d_x = arena.zeros({N, C}, "d_x");                                          // (N, C)
  linear_nobias_pullback(x, x, out, d_out, &d_x, &d_x);
  std::vector<float> a(N * C, 0.0f), b(N * C, 0.0f);
  ref::linear_backward<float>(a.data(), b.data(), nullptr, d_out.f32(), x.f32(), x.f32(), N, C, N);
  for (int i = 0; i < N * C; ++i) a[i] += b[i];
  EXPECT_TRUE(all_close("d_x", test::to_vector(d_x), a, 1e-5, 1e-5));
}

TEST(LinearApi, ReferenceAndFastModesAgree) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int B = 2, T = 65, C = 64, OC = 197;
  Tensor x = test::tensor_from(arena, {B, T, C}, random_vector<float>(B * T * C, 1));        // (B, T, C)
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));             // (OC, C)
  Tensor b = test::tensor_from(arena, {OC}, random_vector<float>(OC, 3));                    // (OC)
  Tensor d_out = test::tensor_from(arena, {B, T, OC}, random_vector<float>(B * T * OC, 4));  // (B, T, OC)
  std::vector<float> outs[2], dxs[2], dws[2], dbs[2];
  for (int m = 0; m < 2; ++m) {
    set_kernel_mode(m == 0 ? KernelMode::Reference : KernelMode::Fast);
    Tensor out = linear(x, w, b);  // (B, T, OC)
    Tensor d_x = arena.zeros({B, T, C}, "d_x"), d_w = arena.zeros({OC, C}, "d_w"), d_b = arena.zeros({OC}, "d_b");
    linear_pullback(x, w, b, out, d_out, &d_x, &d_w, &d_b);
    outs[m] = test::to_vector(out), dxs[m] = test::to_vector(d_x), dws[m] = test::to_vector(d_w),
    dbs[m] = test::to_vector(d_b);
  }
  set_kernel_mode(KernelMode::Fast);
  EXPECT_TRUE(all_close("out", outs[1], outs[0], atol_for(C), 1e-5));
  EXPECT_TRUE(all_close("d_x", dxs[1], dxs[0], atol_for(OC), 1e-5));
  EXPECT_TRUE(all_close("d_w", dws[1], dws[0], atol_for(B * T), 1e-5));
  EXPECT_TRUE(all_close("d_b", dbs[1], dbs[0], atol_for(B * T), 1e-5));
}

TEST(LinearApi, RejectsBadShapes) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 5}, "x"), w = arena.zeros({4, 5}, "w"), b = arena.zeros({4}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)linear(x, w, b); }, {"[linear]", "no arena"}));
  ArenaScope scope(arena);
  Tensor x1 = arena.zeros({5}, "x1"), w3 = arena.zeros({4, 6}, "w3"), w1 = arena.zeros({20}, "w1");
  Tensor b5 = arena.zeros({5}, "b5");
  EXPECT_TRUE(test::throws_error([&] { (void)linear(x1, w, b); },
                                 {"[linear]", "x has shape (5)", "(N, C) or 3 dims (B, T, C)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)linear(x, w3, b); },
                                 {"[linear]", "w has shape (4, 6)", "expected 5 (last dim of x)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)linear(x, w1, b); }, {"[linear]", "w has shape (20)", "(OC, C)"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)linear(x, w, b5); }, {"[linear]", "b has shape (5)", "expected 4 (dim 0 of w)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)linear(x, w, Tensor()); }, {"[linear]", "b has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)linear_nobias(x, w3); }, {"[linear_nobias]", "w has shape (4, 6)"}));

  Tensor out = linear(x, w, b);                     // (2, 3, 4)
  Tensor d_out_bad = arena.zeros({6, 4}, "d_out");  // flattened: wrong, out is (2, 3, 4)
  EXPECT_TRUE(test::throws_error([&] { linear_pullback(x, w, b, out, d_out_bad, nullptr, nullptr, nullptr); },
                                 {"[linear]", "d_out has shape (6, 4)", "expected (2, 3, 4)"}));
  Tensor d_out = arena.zeros({2, 3, 4}, "d_out"), d_w_bad = arena.zeros({5, 4}, "d_w");
  EXPECT_TRUE(test::throws_error([&] { linear_pullback(x, w, b, out, d_out, nullptr, &d_w_bad, nullptr); },
                                 {"[linear]", "d_w has shape (5, 4)", "expected (4, 5)"}));
  EXPECT_TRUE(test::throws_error([&] { linear_pullback(x, w, b, out, d_out, nullptr, nullptr, &b5); },
                                 {"[linear]", "d_b has shape (5)"}));
  EXPECT_TRUE(test::throws_error([&] { linear_nobias_pullback(x, w, out, d_out, &d_w_bad, nullptr); },
                                 {"[linear_nobias]", "d_x has shape (5, 4)", "expected (2, 3, 5)"}));
}

}  // namespace
}  // namespace llmcc
