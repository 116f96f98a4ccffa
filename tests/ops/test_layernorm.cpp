// layernorm: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api).
#include "llmcc/ops/layernorm.h"

#include "kernels/cpu/layernorm.h"
#include "kernels/ref/layernorm.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

// Restores the kernel mode a test changed.
struct ModeGuard {
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

// Rows with a non-zero mean so that the centring matters: x in [-0.5, 1.5].
std::vector<float> rows(std::size_t n, std::uint64_t seed) { return test::random_vector<float>(n, seed, -0.5, 1.5); }

TEST(LayerNormKernel, ForwardAndBackwardMatchDoubleReference) {
  Arena arena(1 << 20);  // the fast backward's per-thread partials
  ArenaScope scope(arena);
  test::for_each_thread_count([&](int) {
    for (int N : test::awkward_sizes()) {
      for (int C : test::awkward_sizes()) {
        SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
        arena.reset();
        const std::size_t NC = static_cast<std::size_t>(N) * C;
        const auto x = rows(NC, 1), d_out = test::random_vector<float>(NC, 4);                  // (N, C)
        const auto w = test::random_vector<float>(C, 2), b = test::random_vector<float>(C, 3);  // (C)
        std::vector<float> out(NC), mean(N), rstd(N);                                           // (N, C), (N), (N)
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);

        const auto xd = test::cast_vector<double>(x), wd = test::cast_vector<double>(w);
        const auto bd = test::cast_vector<double>(b), d_outd = test::cast_vector<double>(d_out);
        std::vector<double> out_ref(NC), mean_ref(N), rstd_ref(N);
        ref::layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), xd.data(), wd.data(), bd.data(), N, C);
        EXPECT_TRUE(all_close("out", out, out_ref, 1e-5, 1e-5));
        EXPECT_TRUE(all_close("mean", mean, mean_ref, 1e-6, 1e-5));
        EXPECT_TRUE(all_close("rstd", rstd, rstd_ref, 1e-6, 1e-5));

        // Pre-filled adjoints: both kernels accumulate.
        auto d_x = test::random_vector<float>(NC, 5);                                         // (N, C)
        auto d_w = test::random_vector<float>(C, 6), d_b = test::random_vector<float>(C, 7);  // (C)
        auto d_x_ref = test::cast_vector<double>(d_x), d_w_ref = test::cast_vector<double>(d_w);
        auto d_b_ref = test::cast_vector<double>(d_b);
        cpu::layernorm_backward(d_x.data(), d_w.data(), d_b.data(), d_out.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
        ref::layernorm_backward(d_x_ref.data(), d_w_ref.data(), d_b_ref.data(), d_outd.data(), xd.data(), wd.data(),
                                mean_ref.data(), rstd_ref.data(), N, C);
        EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-4, 1e-4));
        EXPECT_TRUE(all_close("d_w", d_w, d_w_ref, 1e-4, 1e-4));
        EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, 1e-4, 1e-4));
      }
    }
  });
}

TEST(LayerNormKernel, ForwardWithoutSavedMatchesAndBackwardIsDeterministic) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int N = 197, C = 768;  // large enough to run in parallel
  const std::size_t NC = static_cast<std::size_t>(N) * C;
  const auto x = rows(NC, 1), d_out = test::random_vector<float>(NC, 4);                  // (N, C)
  const auto w = test::random_vector<float>(C, 2), b = test::random_vector<float>(C, 3);  // (C)
  test::for_each_thread_count([&](int) {
    std::vector<float> out(NC), out2(NC), mean(N), rstd(N);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    cpu::layernorm_forward(out2.data(), nullptr, nullptr, x.data(), w.data(), b.data(), N, C);
    EXPECT_TRUE(all_close("out without saved", out2, out, 0.0, 0.0));

    // Same thread count, same bits; d_x alone leaves the partial reduction out entirely.
    std::vector<float> d_w1(C, 0.0f), d_b1(C, 0.0f), d_w2(C, 0.0f), d_b2(C, 0.0f);
    cpu::layernorm_backward(nullptr, d_w1.data(), d_b1.data(), d_out.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
    cpu::layernorm_backward(nullptr, d_w2.data(), d_b2.data(), d_out.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
    EXPECT_TRUE(all_close("d_w rerun", d_w2, d_w1, 0.0, 0.0));
    EXPECT_TRUE(all_close("d_b rerun", d_b2, d_b1, 0.0, 0.0));

    // d_w and d_b aliasing one buffer receive the sum of both contributions.
    std::vector<float> d_wb(C, 0.0f), d_wb_expected(C);
    for (int i = 0; i < C; ++i) d_wb_expected[i] = d_w1[i] + d_b1[i];
    cpu::layernorm_backward(nullptr, d_wb.data(), d_wb.data(), d_out.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
    EXPECT_TRUE(all_close("aliased d_w/d_b", d_wb, d_wb_expected, 1e-6, 1e-6));
  });
}

TEST(LayerNormGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 5, C = 7;
  auto x = test::random_vector<double>(N * C, 21, -0.5, 1.5);                           // (N, C)
  auto w = test::random_vector<double>(C, 22), b = test::random_vector<double>(C, 23);  // (C)
  const auto wts = test::random_vector<double>(N * C, 24);                              // adjoint of out (N, C)
  std::vector<double> mean(N), rstd(N), out(N * C);
  auto loss = [&] {
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return test::weighted_sum(out, wts);
  };
  (void)loss();  // mean, rstd of the unperturbed x
  std::vector<double> d_x(N * C, 0.0), d_w(C, 0.0), d_b(C, 0.0);
  ref::layernorm_backward(d_x.data(), d_w.data(), d_b.data(), wts.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}, {"w", &w, &d_w}, {"b", &b, &d_b}}));
}

TEST(LayerNormApi, ModesAgreeAndPullbackAccumulatesAndSkipsNulls) {
  ModeGuard guard;
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int B = 2, T = 3, C = 5;
  const Shape s{B, T, C};
  Tensor x = test::tensor_from(arena, s, rows(B * T * C, 1));                            // (B, T, C)
  Tensor w = test::tensor_from(arena, {C}, test::random_vector<float>(C, 2));            // (C)
  Tensor b = test::tensor_from(arena, {C}, test::random_vector<float>(C, 3));            // (C)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(B * T * C, 4));  // (B, T, C)

  std::vector<float> outs[2], d_xs[2], d_ws[2], d_bs[2];
  const KernelMode modes[2] = {KernelMode::Reference, KernelMode::Fast};
  for (int k = 0; k < 2; ++k) {
    set_kernel_mode(modes[k]);
    LayerNormSaved saved;
    Tensor out = layernorm_fwd(x, w, b, saved);
    ASSERT_EQ(out.shape(), s);
    ASSERT_EQ(saved.mean.shape(), Shape({B * T}));
    ASSERT_EQ(saved.rstd.shape(), Shape({B * T}));
    EXPECT_TRUE(
        all_close("layernorm vs layernorm_fwd", test::to_vector(layernorm(x, w, b)), test::to_vector(out), 0.0, 0.0));
    // One row by hand: mean 0 and variance ~1 before the affine map.
    double m = 0.0, v = 0.0;
    for (int i = 0; i < C; ++i) m += (out.f32()[i] - b.f32()[i]) / w.f32()[i];
    for (int i = 0; i < C; ++i) v += std::pow((out.f32()[i] - b.f32()[i]) / w.f32()[i] - m / C, 2);
    EXPECT_NEAR(m / C, 0.0, 1e-5);
    EXPECT_NEAR(v / C, 1.0, 1e-3);  // 1 - eps * rstd^2

    // Pre-filled with ones: the result is 1 + the gradient.
    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(B * T * C, 1.0f));
    Tensor d_w = test::tensor_from(arena, {C}, std::vector<float>(C, 1.0f));
    Tensor d_b = test::tensor_from(arena, {C}, std::vector<float>(C, 1.0f));
    layernorm_pullback(x, w, b, out, saved, d_out, &d_x, &d_w, &d_b);
    outs[k] = test::to_vector(out);
    d_xs[k] = test::to_vector(d_x);
    d_ws[k] = test::to_vector(d_w);
    d_bs[k] = test::to_vector(d_b);
    for (int i = 0; i < C; ++i) {
      float sum = 1.0f;  // d_b = 1 + sum over rows of d_out
      for (int n = 0; n < B * T; ++n) sum += d_out.f32()[n * C + i];
      EXPECT_NEAR(d_b.f32()[i], sum, 1e-5);
    }

    // Nulls are skipped: only d_w given, and it matches the d_w above.
    Tensor d_w_only = test::tensor_from(arena, {C}, std::vector<float>(C, 1.0f));
    layernorm_pullback(x, w, b, out, saved, d_out, nullptr, &d_w_only, nullptr);
    EXPECT_TRUE(all_close("d_w alone", test::to_vector(d_w_only), d_ws[k], 1e-6, 1e-6));
    Tensor d_x_only = test::tensor_from(arena, s, std::vector<float>(B * T * C, 1.0f));
    layernorm_pullback(x, w, b, out, saved, d_out, &d_x_only, nullptr, nullptr);
    EXPECT_TRUE(all_close("d_x alone", test::to_vector(d_x_only), d_xs[k], 1e-6, 1e-6));
  }
  EXPECT_TRUE(all_close("out fast vs ref", outs[1], outs[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_x fast vs ref", d_xs[1], d_xs[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_w fast vs ref", d_ws[1], d_ws[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close("d_b fast vs ref", d_bs[1], d_bs[0], 1e-5, 1e-5));
}

TEST(LayerNormApi, RejectsBadShapesAndMissingArena) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({4, 6}, "x"), w = arena.zeros({6}, "w"), b = arena.zeros({6}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x, w, b); }, {"[layernorm]", "ArenaScope"}));
  ArenaScope scope(arena);
  Tensor w5 = arena.zeros({5}, "w5"), w2d = arena.zeros({1, 6}, "w2d");
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x, w5, b); },
                                 {"[layernorm]", "w has shape (5)", "expected 6", "last dim of x"}));
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x, w, w5); }, {"[layernorm]", "b has shape (5)", "expected 6"}));
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x, w2d, b); },
                                 {"[layernorm]", "w has shape (1, 6)", "expected 1 dims (C)"}));
  Tensor x1 = arena.zeros({6}, "x1"), x4 = arena.zeros({1, 2, 2, 6}, "x4"), x0 = arena.zeros({4, 0}, "x0");
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x1, w, b); },
                                 {"[layernorm]", "x has shape (6)", "(N, C)", "(B, T, C)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x4, w, b); }, {"[layernorm]", "x has shape (1, 2, 2, 6)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(x0, w, b); }, {"[layernorm]", "C > 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)layernorm(Tensor(), w, b); }, {"[layernorm]", "x has no storage"}));

  LayerNormSaved saved;
  Tensor out = layernorm_fwd(x, w, b, saved);
  LayerNormSaved bad = saved;
  bad.rstd = arena.zeros({3}, "rstd");
  EXPECT_TRUE(test::throws_error([&] { layernorm_pullback(x, w, b, out, bad, out, nullptr, nullptr, nullptr); },
                                 {"[layernorm]", "saved.rstd has shape (3)", "expected 4", "rows of x"}));
  EXPECT_TRUE(
      test::throws_error([&] { layernorm_pullback(x, w, b, out, LayerNormSaved{}, out, nullptr, nullptr, nullptr); },
                         {"[layernorm]", "saved.mean has no storage"}));
  Tensor d_bad = arena.zeros({6, 4}, "d");
  EXPECT_TRUE(test::throws_error([&] { layernorm_pullback(x, w, b, out, saved, d_bad, nullptr, nullptr, nullptr); },
                                 {"[layernorm]", "d_out has shape (6, 4)", "expected (4, 6)"}));
  EXPECT_TRUE(test::throws_error([&] { layernorm_pullback(x, w, b, out, saved, out, &d_bad, nullptr, nullptr); },
                                 {"[layernorm]", "d_x has shape (6, 4)"}));
  EXPECT_TRUE(test::throws_error([&] { layernorm_pullback(x, w, b, out, saved, out, nullptr, nullptr, &w5); },
                                 {"[layernorm]", "d_b has shape (5)", "expected (6)"}));
}

}  // namespace
}  // namespace llmcc
