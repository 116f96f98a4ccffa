// rmsnorm: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api).
#include "llmcc/ops/rmsnorm.h"

#include "kernels/cpu/rmsnorm.h"
#include "kernels/ref/rmsnorm.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

constexpr float kEps = 1e-5f;  // Llama 2's rms_norm_eps

// Restores the kernel mode a test changed.
struct ModeGuard {
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

TEST(RmsNormKernel, ForwardAndBackwardMatchDoubleReference) {
  Arena arena(1 << 20);  // the fast backward's per-thread partials
  ArenaScope scope(arena);
  test::for_each_thread_count([&](int) {
    for (int N : test::awkward_sizes()) {
      for (int C : test::awkward_sizes()) {
        SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
        arena.reset();
        const std::size_t NC = static_cast<std::size_t>(N) * C;
        const auto x = test::random_vector<float>(NC, 1), d_out = test::random_vector<float>(NC, 4);  // (N, C)
        const auto w = test::random_vector<float>(C, 2);                                              // (C)
        std::vector<float> out(NC), rstd(N);                                                          // (N, C), (N)
        cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kEps, N, C);

        const auto xd = test::cast_vector<double>(x), wd = test::cast_vector<double>(w);
        const auto d_outd = test::cast_vector<double>(d_out);
        std::vector<double> out_ref(NC), rstd_ref(N);
        ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), xd.data(), wd.data(), double{kEps}, N, C);
        EXPECT_TRUE(all_close("out", out, out_ref, 1e-5, 1e-5));
        EXPECT_TRUE(all_close("rstd", rstd, rstd_ref, 1e-6, 1e-5));

        // Pre-filled adjoints: both kernels accumulate.
        auto d_x = test::random_vector<float>(NC, 5), d_w = test::random_vector<float>(C, 6);
        auto d_x_ref = test::cast_vector<double>(d_x), d_w_ref = test::cast_vector<double>(d_w);
        cpu::rmsnorm_backward(d_x.data(), d_w.data(), d_out.data(), x.data(), w.data(), rstd.data(), N, C);
        ref::rmsnorm_backward(d_x_ref.data(), d_w_ref.data(), d_outd.data(), xd.data(), wd.data(), rstd_ref.data(), N,
                              C);
        EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-4, 1e-4));
        EXPECT_TRUE(all_close("d_w", d_w, d_w_ref, 1e-4, 1e-4));
      }
    }
  });
}

TEST(RmsNormKernel, ForwardWithoutSavedMatchesAndBackwardIsDeterministic) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int N = 197, C = 768;  // large enough to run in parallel
  const std::size_t NC = static_cast<std::size_t>(N) * C;
  const auto x = test::random_vector<float>(NC, 1), d_out = test::random_vector<float>(NC, 4);  // (N, C)
  const auto w = test::random_vector<float>(C, 2);                                              // (C)
  test::for_each_thread_count([&](int) {
    std::vector<float> out(NC), out2(NC), rstd(N);
    cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kEps, N, C);
    cpu::rmsnorm_forward(out2.data(), nullptr, x.data(), w.data(), kEps, N, C);
    EXPECT_TRUE(all_close("out without saved", out2, out, 0.0, 0.0));
    std::vector<float> d_w1(C, 0.0f), d_w2(C, 0.0f);
    cpu::rmsnorm_backward(nullptr, d_w1.data(), d_out.data(), x.data(), w.data(), rstd.data(), N, C);
    cpu::rmsnorm_backward(nullptr, d_w2.data(), d_out.data(), x.data(), w.data(), rstd.data(), N, C);
    EXPECT_TRUE(all_close("d_w rerun", d_w2, d_w1, 0.0, 0.0));
  });
}

TEST(RmsNormGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 5, C = 7;
  const double eps = 1e-5;
  auto x = test::random_vector<double>(N * C, 21);          // (N, C)
  auto w = test::random_vector<double>(C, 22);              // (C)
  const auto wts = test::random_vector<double>(N * C, 24);  // adjoint of out (N, C)
  std::vector<double> rstd(N), out(N * C);
  auto loss = [&] {
    ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), eps, N, C);
    return test::weighted_sum(out, wts);
  };
  (void)loss();  // rstd of the unperturbed x
  std::vector<double> d_x(N * C, 0.0), d_w(C, 0.0);
  ref::rmsnorm_backward(d_x.data(), d_w.data(), wts.data(), x.data(), w.data(), rstd.data(), N, C);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}, {"w", &w, &d_w}}));
}

TEST(RmsNormApi, ModesAgreeAndPullbackAccumulatesAndSkipsNulls) {
  ModeGuard guard;
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int B = 2, T = 3, C = 5;
  const Shape s{B, T, C};
  Tensor x = test::tensor_from(arena, s, test::random_vector<float>(B * T * C, 1));      // (B, T, C)
  Tensor w = test::tensor_from(arena, {C}, test::random_vector<float>(C, 2));            // (C)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(B * T * C, 4));  // (B, T, C)

  std::vector<float> outs[2], d_xs[2], d_ws[2];
  const KernelMode modes[2] = {KernelMode::Reference, KernelMode::Fast};
  for (int k = 0; k < 2; ++k) {
    set_kernel_mode(modes[k]);
    RmsNormSaved saved;
    Tensor out = rmsnorm_fwd(x, w, kEps, saved);
    ASSERT_EQ(out.shape(), s);
    ASSERT_EQ(saved.rstd.shape(), Shape({B * T}));
    EXPECT_TRUE(
        all_close("rmsnorm vs rmsnorm_fwd", test::to_vector(rmsnorm(x, w, kEps)), test::to_vector(out), 0.0, 0.0));
    // Row 0 by hand: out / w has mean square ~1.
    double ms = 0.0;
    for (int i = 0; i < C; ++i) ms += std::pow(out.f32()[i] / w.f32()[i], 2);
    EXPECT_NEAR(ms / C, 1.0, 1e-3);

    // Pre-filled with ones: the result is 1 + the gradient.
    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(B * T * C, 1.0f));
    Tensor d_w = test::tensor_from(arena, {C}, std::vector<float>(C, 1.0f));
    rmsnorm_pullback(x, w, kEps, out, saved, d_out, &d_x, &d_w);
    outs[k] = test::to_vector(out);
    d_xs[k] = test::to_vector(d_x);
    d_ws[k] = test::to_vector(d_w);
    for (int i = 0; i < C; ++i) {  // d_w = 1 + sum over rows of d_out * x * rstd
      double sum = 1.0;
      for (int n = 0; n < B * T; ++n) sum += d_out.f32()[n * C + i] * x.f32()[n * C + i] * saved.rstd.f32()[n];
      EXPECT_NEAR(d_w.f32()[i], sum, 1e-5);
    }

    // Nulls are skipped: each adjoint alone matches the one computed together.
    Tensor d_w_only = test::tensor_from(arena, {C}, std::vector<float>(C, 1.0f));
    rmsnorm_pullback(x, w, kEps, out, saved, d_out, nullptr, &d_w_only);
    EXPECT_TRUE(all_close("d_w alone", test::to_vector(d_w_only), d_ws[k], 1e-6, 1e-6));
    Tensor d_x_only = test::tensor_from(arena, s, std::vector<float>(B * T * C, 1.0f));
    rmsnorm_pullback(x, w, kEps, out, saved, d_out, &d_x_only, nullptr);
    EXPECT_TRUE(all_close("d_x alone", test::to_vector(d_x_only), d_xs[k], 1e-6, 1e-6));
  }
  EXPECT_TRUE(all_close("out fast vs ref", outs[1], outs[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_x fast vs ref", d_xs[1], d_xs[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_w fast vs ref", d_ws[1], d_ws[0], 1e-5, 1e-5));
}

TEST(RmsNormApi, RejectsBadShapesBadEpsAndMissingArena) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({4, 6}, "x"), w = arena.zeros({6}, "w");
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w, kEps); }, {"[rmsnorm]", "ArenaScope"}));
  ArenaScope scope(arena);
  Tensor w5 = arena.zeros({5}, "w5"), w2d = arena.zeros({6, 1}, "w2d");
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w5, kEps); },
                                 {"[rmsnorm]", "w has shape (5)", "expected 6", "last dim of x"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w2d, kEps); },
                                 {"[rmsnorm]", "w has shape (6, 1)", "expected 1 dims (C)"}));
  Tensor x1 = arena.zeros({6}, "x1"), x4 = arena.zeros({1, 2, 2, 6}, "x4"), x0 = arena.zeros({3, 0}, "x0");
  EXPECT_TRUE(
      test::throws_error([&] { (void)rmsnorm(x1, w, kEps); }, {"[rmsnorm]", "x has shape (6)", "(N, C)", "(B, T, C)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x4, w, kEps); }, {"[rmsnorm]", "x has shape (1, 2, 2, 6)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x0, w, kEps); }, {"[rmsnorm]", "C > 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w, 0.0f); }, {"[rmsnorm]", "eps is 0", "> 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w, -1e-5f); }, {"[rmsnorm]", "eps is -0.00001"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rmsnorm(x, w, std::nanf("")); }, {"[rmsnorm]", "eps is nan"}));

  RmsNormSaved saved;
  Tensor out = rmsnorm_fwd(x, w, kEps, saved);
  EXPECT_TRUE(test::throws_error([&] { rmsnorm_pullback(x, w, kEps, out, RmsNormSaved{}, out, nullptr, nullptr); },
                                 {"[rmsnorm]", "saved.rstd has no storage"}));
  RmsNormSaved bad{arena.zeros({5}, "rstd")};
  EXPECT_TRUE(test::throws_error([&] { rmsnorm_pullback(x, w, kEps, out, bad, out, nullptr, nullptr); },
                                 {"[rmsnorm]", "saved.rstd has shape (5)", "expected 4", "rows of x"}));
  Tensor d_bad = arena.zeros({2, 12}, "d");
  EXPECT_TRUE(test::throws_error([&] { rmsnorm_pullback(x, w, kEps, out, saved, d_bad, nullptr, nullptr); },
                                 {"[rmsnorm]", "d_out has shape (2, 12)", "expected (4, 6)"}));
  EXPECT_TRUE(test::throws_error([&] { rmsnorm_pullback(x, w, kEps, out, saved, out, &d_bad, nullptr); },
                                 {"[rmsnorm]", "d_x has shape (2, 12)"}));
  EXPECT_TRUE(test::throws_error([&] { rmsnorm_pullback(x, w, kEps, out, saved, out, nullptr, &w5); },
                                 {"[rmsnorm]", "d_w has shape (5)", "expected (6)"}));
}

}  // namespace
}  // namespace llmcc
