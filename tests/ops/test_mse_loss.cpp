// mse_loss: fast kernel vs reference (Kernel), reference backward vs finite differences in
// double (Grad), front-end validation and pullback contract (Api).
#include "llmcc/ops/mse_loss.h"

#include "kernels/cpu/mse_loss.h"
#include "kernels/ref/mse_loss.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(MseLossKernel, ForwardAndBackwardMatchReference) {
  const float d_out = 0.7f;
  test::for_each_thread_count([&](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto p = test::random_vector<float>(n2, 1), t = test::random_vector<float>(n2, 2);
        const float loss = cpu::mse_loss_forward(p.data(), t.data(), n2);
        const float loss_ref = ref::mse_loss_forward(p.data(), t.data(), n2);
        EXPECT_TRUE(all_close("loss", &loss, &loss_ref, 1, 0.0, 1e-6));  // both sum in double

        auto d_p = test::random_vector<float>(n2, 3), d_t = test::random_vector<float>(n2, 4);
        auto d_p_ref = d_p, d_t_ref = d_t;  // pre-filled: the kernels add
        cpu::mse_loss_backward(d_p.data(), d_t.data(), p.data(), t.data(), d_out, n2, false, false);
        ref::mse_loss_backward(d_p_ref.data(), d_t_ref.data(), p.data(), t.data(), d_out, n2);
        EXPECT_TRUE(all_close("d_pred", d_p, d_p_ref, 1e-7, 1e-6));
        EXPECT_TRUE(all_close("d_target", d_t, d_t_ref, 1e-7, 1e-6));

        std::vector<float> w_p(n2, 5.0f), w_t(n2, 5.0f), z_p(n2, 0.0f), z_t(n2, 0.0f);
        cpu::mse_loss_backward(w_p.data(), w_t.data(), p.data(), t.data(), d_out, n2, true, true);
        ref::mse_loss_backward(z_p.data(), z_t.data(), p.data(), t.data(), d_out, n2);
        EXPECT_TRUE(all_close("d_pred (overwrite)", w_p, z_p, 1e-7, 1e-6));
        EXPECT_TRUE(all_close("d_target (overwrite)", w_t, z_t, 1e-7, 1e-6));
      }
    }
  });
}

TEST(MseLossKernel, SumIsAccumulatedInDouble) {
  // 151,301 squared errors of 0.1: a float accumulator drifts by ~1e-5 relative.
  test::for_each_thread_count([](int) {
    const int n = 768 * 197 + 5;
    const std::vector<float> p(n, 0.1f), t(n, 0.0f);
    const float loss = cpu::mse_loss_forward(p.data(), t.data(), n);
    const double exact = static_cast<double>(0.1f) * 0.1f;
    EXPECT_TRUE(all_close("loss", &loss, &exact, 1, 0.0, 1e-7));
  });
}

TEST(MseLossGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto p = test::random_vector<double>(n, 11), t = test::random_vector<double>(n, 12);  // (n)
  const double d_out = 1.3;
  auto loss = [&] { return d_out * ref::mse_loss_forward(p.data(), t.data(), n); };
  std::vector<double> d_p(n, 0.0), d_t(n, 0.0);
  ref::mse_loss_backward(d_p.data(), d_t.data(), p.data(), t.data(), d_out, n);
  EXPECT_TRUE(test::fd_check(loss, {{"pred", &p, &d_p}, {"target", &t, &d_t}}));
}

TEST(MseLossApi, ValueAccumulationPendingZerosAliasingAndNulls) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  Tensor p = test::tensor_from(arena, s, test::random_vector<float>(30, 1));
  Tensor t = test::tensor_from(arena, s, test::random_vector<float>(30, 2));
  double sum = 0.0;
  for (int i = 0; i < 30; ++i) sum += (double(p.f32()[i]) - t.f32()[i]) * (double(p.f32()[i]) - t.f32()[i]);
  const float loss = mse_loss(p, t);
  EXPECT_FLOAT_EQ(loss, static_cast<float>(sum / 30.0));
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    Tensor d_p = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));  // accumulates
    Tensor d_t = test::tensor_from(arena, s, std::vector<float>(30, 3.0f));
    d_t.mark_zero_pending();  // reads as zero: written
    mse_loss_pullback(p, t, loss, 2.0f, &d_p, &d_t);
    for (int i = 0; i < 30; ++i) {
      const float e = 2.0f * 2.0f / 30.0f * (p.f32()[i] - t.f32()[i]);
      EXPECT_FLOAT_EQ(d_p.f32()[i], 1.0f + e) << i;
      EXPECT_FLOAT_EQ(d_t.f32()[i], -e) << i;
    }
    // mse_loss(x, x): one adjoint for both arguments, pending; the contributions cancel.
    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(30, 3.0f));
    d_x.mark_zero_pending();
    mse_loss_pullback(p, p, 0.0f, 1.0f, &d_x, &d_x);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(d_x.f32()[i], 0.0f) << i;
  }
  mse_loss_pullback(p, t, loss, 1.0f, nullptr, nullptr);  // inactive: nothing to do
}

TEST(MseLossApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), b = arena.zeros({3, 2}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)mse_loss(a, b); },
                                 {"[mse_loss]", "target has shape (3, 2), expected (2, 3) (the shape of pred)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)mse_loss(Tensor(), a); }, {"[mse_loss]", "pred has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { mse_loss_pullback(a, a, 0.0f, 1.0f, &b, nullptr); },
                                 {"[mse_loss]", "d_pred has shape (3, 2), expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { mse_loss_pullback(a, a, 0.0f, 1.0f, nullptr, &b); },
                                 {"[mse_loss]", "d_target has shape (3, 2)"}));
}

}  // namespace
}  // namespace llmcc
