// cross_entropy: fast kernel vs the double reference (Kernel), reference backward vs finite
// differences (Grad), front-end validation, the all-ignored case and the pullback contract (Api).
#include "llmcc/ops/cross_entropy.h"

#include <cmath>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/ref/cross_entropy.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

struct ModeGuard {
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

// Logits (N, Vp) in [-4, 4) whose padded columns hold 1e4: a kernel that reads them gets an
// overflowing exp, so the comparison fails loudly.
std::vector<float> make_logits(std::int64_t N, std::int64_t V, std::int64_t Vp, std::uint64_t seed) {
  auto x = test::random_vector<float>(static_cast<std::size_t>(N * Vp), seed, -4.0, 4.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t v = V; v < Vp; ++v) x[n * Vp + v] = 1e4f;
  return x;
}

// Targets (N) in [0, V), with every third row set to ignore_index.
std::vector<std::int32_t> make_targets(std::int64_t N, std::int64_t V, std::int32_t ignore, std::uint64_t seed) {
  std::vector<std::int32_t> t(N);
  std::mt19937_64 rng(seed);
  for (std::int64_t n = 0; n < N; ++n) {
    t[n] = n % 3 == 1 ? ignore : static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(V));
  }
  return t;
}

TEST(CrossEntropyKernel, ForwardAndBackwardMatchDoubleReference) {
  const std::int32_t ignore = -100;
  test::for_each_thread_count([&](int) {
    for (std::int64_t N : {1, 7, 65}) {
      for (std::int64_t V : test::awkward_sizes()) {
        const std::int64_t Vp = V + V % 5;  // sometimes padded, sometimes not
        SCOPED_TRACE("N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp));
        const auto x = make_logits(N, V, Vp, 1 + N + V);   // (N, Vp)
        const auto t = make_targets(N, V, ignore, 2 + V);  // (N)
        const auto xd = test::cast_vector<double>(x);      // (N, Vp)

        std::vector<float> lse(N);       // (N)
        std::vector<double> lse_ref(N);  // (N)
        std::int64_t count = -1, count_ref = -2;
        const double loss = cpu::cross_entropy_forward(lse.data(), &count, x.data(), t.data(), N, V, Vp, ignore);
        const double loss_ref =
            ref::cross_entropy_forward(lse_ref.data(), &count_ref, xd.data(), t.data(), N, V, Vp, ignore);
        EXPECT_EQ(count, count_ref);
        EXPECT_NEAR(loss, loss_ref, 1e-5 * std::fabs(loss_ref) + 1e-6);
        EXPECT_TRUE(all_close("lse", lse, lse_ref, 1e-6, 1e-6));

        if (count_ref == 0) continue;
        const float scale = 0.75f / static_cast<float>(count_ref);
        auto d = test::random_vector<float>(static_cast<std::size_t>(N * Vp), 3);  // (N, Vp) pre-filled
        auto d_ref = test::cast_vector<double>(d);                                 // (N, Vp)
        cpu::cross_entropy_backward(d.data(), x.data(), lse.data(), t.data(), scale, N, V, Vp, ignore);
        ref::cross_entropy_backward(d_ref.data(), xd.data(), lse_ref.data(), t.data(), static_cast<double>(scale), N, V,
                                    Vp, ignore);
        // Padded columns and ignored rows are compared exactly through d_ref (left unchanged).
        EXPECT_TRUE(all_close("d_logits", d, d_ref, 2e-7, 1e-5));
      }
    }
  });
}

TEST(CrossEntropyKernel, LargeGpt2Vocab) {
  // One row of GPT-2's real size: 50257 of 50304 columns, wide logits so the max pass matters.
  const std::int64_t N = 3, V = 50257, Vp = 50304;
  const auto x = make_logits(N, V, Vp, 7);  // (N, Vp)
  const auto xd = test::cast_vector<double>(x);
  const std::vector<std::int32_t> t = {0, 50256, 123};  // (N)
  test::for_each_thread_count([&](int) {
    std::vector<float> lse(N);
    std::vector<double> lse_ref(N);
    std::int64_t c = 0, c_ref = 0;
    const double loss = cpu::cross_entropy_forward(lse.data(), &c, x.data(), t.data(), N, V, Vp, -1);
    const double loss_ref = ref::cross_entropy_forward(lse_ref.data(), &c_ref, xd.data(), t.data(), N, V, Vp, -1);
    EXPECT_EQ(c, 3);
    EXPECT_NEAR(loss, loss_ref, 1e-5 * std::fabs(loss_ref));
    std::vector<float> d(N * Vp, 0.0f);
    std::vector<double> d_ref(N * Vp, 0.0);
    cpu::cross_entropy_backward(d.data(), x.data(), lse.data(), t.data(), 1.0f / 3, N, V, Vp, -1);
    ref::cross_entropy_backward(d_ref.data(), xd.data(), lse_ref.data(), t.data(), 1.0 / 3, N, V, Vp, -1);
    EXPECT_TRUE(all_close("d_logits", d, d_ref, 1e-9, 1e-5));
  });
}

TEST(CrossEntropyGrad, ReferenceBackwardMatchesFiniteDifferences) {
  // Rows 1 and 4 ignored, rows 0 and 3 share a target; padded columns must get 0 (FD gives 0
  // because the forward never reads them).
  const std::int64_t N = 6, V = 7, Vp = 9;
  const std::int32_t ignore = -1;
  const std::vector<std::int32_t> t = {2, -1, 6, 2, -1, 0};     // (N)
  auto x = test::random_vector<double>(N * Vp, 21, -3.0, 3.0);  // (N, Vp)
  const double d_out = 0.8;
  auto loss = [&] {
    std::vector<double> lse(N);
    std::int64_t c = 0;
    return d_out * ref::cross_entropy_forward(lse.data(), &c, x.data(), t.data(), N, V, Vp, ignore);
  };
  std::vector<double> lse(N);
  std::int64_t count = 0;
  (void)ref::cross_entropy_forward(lse.data(), &count, x.data(), t.data(), N, V, Vp, ignore);
  ASSERT_EQ(count, 4);
  std::vector<double> d_x(N * Vp, 0.0);  // (N, Vp)
  ref::cross_entropy_backward(d_x.data(), x.data(), lse.data(), t.data(), d_out / count, N, V, Vp, ignore);
  EXPECT_TRUE(test::fd_check(loss, {{"logits", &x, &d_x}}));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t v = V; v < Vp; ++v) EXPECT_EQ(d_x[n * Vp + v], 0.0) << n << "," << v;
    if (t[n] == ignore) {
      for (std::int64_t v = 0; v < V; ++v) EXPECT_EQ(d_x[n * Vp + v], 0.0) << n << "," << v;
    }
  }
}

TEST(CrossEntropyApi, UniformLogitsGiveLogV) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const int V = 50, Vp = 64;
  Tensor x = arena.zeros({2, 3, Vp}, "logits");                // (B, T, Vp); padded columns 0 too
  const std::vector<std::int32_t> t = {0, 49, 7, -100, 3, 3};  // (B, T)
  CrossEntropySaved saved;
  const float loss = cross_entropy_fwd(x, Tokens(t.data(), 2, 3), V, -100, saved);
  EXPECT_NEAR(loss, std::log(50.0), 1e-6);  // log 64 if the padding were counted
  EXPECT_EQ(saved.count, 5);
  ASSERT_EQ(saved.lse.shape(), Shape({6}));
}

TEST(CrossEntropyApi, AllIgnoredGivesZeroLossAndNoGradient) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const std::vector<std::int32_t> t(4, -1);                                        // (1, 4), all ignored
  Tensor x = test::tensor_from(arena, {4, 8}, test::random_vector<float>(32, 1));  // (N, Vp)
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    ModeGuard guard;
    set_kernel_mode(mode);
    CrossEntropySaved saved;
    const float loss = cross_entropy_fwd(x, Tokens(t.data(), 1, 4), 6, -1, saved);
    EXPECT_EQ(loss, 0.0f);
    EXPECT_EQ(saved.count, 0);
    EXPECT_EQ(cross_entropy(x, Tokens(t.data(), 1, 4), 6, -1), 0.0f);
    Tensor d = test::tensor_from(arena, {4, 8}, std::vector<float>(32, 2.0f));  // (N, Vp)
    cross_entropy_pullback(x, Tokens(t.data(), 1, 4), 6, -1, loss, saved, 1.0f, &d);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(d.f32()[i], 2.0f) << i;  // no NaN from 1/0
  }
}

TEST(CrossEntropyApi, PullbackAccumulatesSkipsNullsAndModesAgree) {
  Arena arena(16 << 20);
  ArenaScope scope(arena);
  const int B = 2, T = 5, V = 1000, Vp = 1024;
  const auto xv = make_logits(B * T, V, Vp, 31);
  Tensor x = test::tensor_from(arena, {B, T, Vp}, xv);  // (B, T, Vp)
  const auto t = make_targets(B * T, V, -100, 32);      // (B, T)
  const Tokens tok(t.data(), B, T);
  const auto pre = test::random_vector<float>(B * T * Vp, 33);  // prior adjoint contents
  float loss[2];
  std::vector<float> grad[2];
  const KernelMode modes[2] = {KernelMode::Reference, KernelMode::Fast};
  for (int k = 0; k < 2; ++k) {
    ModeGuard guard;
    set_kernel_mode(modes[k]);
    CrossEntropySaved saved;
    loss[k] = cross_entropy_fwd(x, tok, V, -100, saved);
    EXPECT_EQ(loss[k], cross_entropy(x, tok, V, -100));
    Tensor d = test::tensor_from(arena, {B, T, Vp}, pre);  // (B, T, Vp)
    cross_entropy_pullback(x, tok, V, -100, loss[k], saved, 1.5f, &d);
    cross_entropy_pullback(x, tok, V, -100, loss[k], saved, 1.5f, nullptr);  // skipped
    grad[k] = test::to_vector(d);
  }
  EXPECT_NEAR(loss[0], loss[1], 1e-5 * std::fabs(loss[0]));
  EXPECT_TRUE(all_close("fast vs reference d_logits", grad[1], grad[0], 1e-7, 1e-5));
  // The gradient was added to `pre`: rows sum to zero over the real vocab (softmax minus
  // one-hot), padded columns and ignored rows keep `pre` exactly.
  for (int n = 0; n < B * T; ++n) {
    double row = 0.0;
    for (int v = 0; v < Vp; ++v) {
      const float g = grad[0][n * Vp + v], p = pre[n * Vp + v];
      if (v >= V || t[n] == -100) {
        EXPECT_EQ(g, p) << n << "," << v;
      } else {
        row += static_cast<double>(g) - p;
      }
    }
    EXPECT_NEAR(row, 0.0, 1e-6) << "row " << n;
  }
  // d_out / count scaling: the target column of a kept row moves by 1.5/count * (p - 1) < 0.
  EXPECT_LT(grad[0][0 * Vp + t[0]], pre[0 * Vp + t[0]]);
}

TEST(CrossEntropyApi, RejectsBadShapesTargetsAndSaved) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const std::vector<std::int32_t> t = {1, 2, 3, -1, 0, 4};  // (2, 3)
  const Tokens tok(t.data(), 2, 3);
  Tensor x3 = arena.zeros({2, 3, 8}, "x");                          // (B, T, Vp)
  Tensor x2 = arena.zeros({6, 8}, "x");                             // (N, Vp)
  EXPECT_NEAR(cross_entropy(x2, tok, 5, -1), std::log(5.0), 1e-6);  // (N, Vp) with (B, T) targets
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(arena.zeros({48}, "x"), tok, 5, -1); },
                                 {"[cross_entropy]", "logits has shape (48)", "(B, T, Vp)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(arena.zeros({3, 2, 8}, "x"), tok, 5, -1); },
                                 {"[cross_entropy]", "dim 0 is 3, expected 2", "targets (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(arena.zeros({2, 4, 8}, "x"), tok, 5, -1); },
                                 {"[cross_entropy]", "dim 1 is 4, expected 3"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(arena.zeros({7, 8}, "x"), tok, 5, -1); },
                                 {"[cross_entropy]", "dim 0 is 7, expected 6", "B * T"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(x3, tok, 9, -1); },
                                 {"[cross_entropy]", "vocab_size is 9", "<= Vp = 8"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(x3, tok, 0, -1); }, {"[cross_entropy]", "vocab_size is 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(x3, Tokens(), 5, -1); },
                                 {"[cross_entropy]", "targets has no storage"}));
  // Target 4 at (1, 2) is out of [0, 4); -1 is fine only while it is the ignore_index.
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(x3, tok, 4, -1); },
                                 {"[cross_entropy]", "targets[1, 2] (row 5) is 4", "[0, 4)", "ignore_index -1"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy(x3, tok, 5, -100); },
                                 {"[cross_entropy]", "targets[1, 0] (row 3) is -1"}));

  CrossEntropySaved saved;
  const float loss = cross_entropy_fwd(x3, tok, 5, -1, saved);
  Tensor d_bad = arena.zeros({6, 8}, "d");
  EXPECT_TRUE(test::throws_error([&] { cross_entropy_pullback(x3, tok, 5, -1, loss, saved, 1.0f, &d_bad); },
                                 {"[cross_entropy]", "d_logits has shape (6, 8)", "expected (2, 3, 8)"}));
  CrossEntropySaved wrong = saved;
  wrong.count = 6;
  EXPECT_TRUE(test::throws_error([&] { cross_entropy_pullback(x3, tok, 5, -1, loss, wrong, 1.0f, nullptr); },
                                 {"[cross_entropy]", "saved.count is 6, expected 5"}));
  wrong = saved;
  wrong.lse = arena.zeros({5}, "lse");
  EXPECT_TRUE(test::throws_error([&] { cross_entropy_pullback(x3, tok, 5, -1, loss, wrong, 1.0f, nullptr); },
                                 {"[cross_entropy]", "saved.lse has shape (5)", "expected 6"}));
  EXPECT_TRUE(
      test::throws_error([&] { cross_entropy_pullback(x3, tok, 5, -1, loss, CrossEntropySaved{}, 1.0f, nullptr); },
                         {"[cross_entropy]", "saved.lse has no storage"}));
}

}  // namespace
}  // namespace llmcc
