// mse_loss's tangent (forward mode): the fast kernels against the reference in double, the
// reference backward against central differences in double, and the front end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/mse_loss.h"
#include "kernels/ref/mse_loss.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/ops/mse_loss.h"
#include "llmcc/runtime.h"

namespace llmcc {
namespace {

std::vector<float> draw(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

TEST(MseLossTangentKernel, ForwardAndBackwardMatchDoubleReference) {
  for (const std::int64_t n : {1, 7, 33, 40001}) {
    const auto un = static_cast<std::size_t>(n);
    const auto p = draw(un, 1), t = draw(un, 2), tp = draw(un, 3), tt = draw(un, 4);
    const double ref =
        ref::mse_loss_tangent_forward(widen(p).data(), widen(t).data(), widen(tp).data(), widen(tt).data(), n);
    EXPECT_NEAR(cpu::mse_loss_tangent_forward(p.data(), t.data(), tp.data(), tt.data(), n), ref,
                1e-5 * (1 + std::fabs(ref)));
    for (int mask = 1; mask < 16; ++mask) {
      std::vector<std::vector<float>> d(4, std::vector<float>(un, 0.5f));
      std::vector<std::vector<double>> dr(4, std::vector<double>(un, 0.5));
      auto ptr = [&](int k) { return (mask >> k & 1) ? d[k].data() : nullptr; };
      auto rptr = [&](int k) { return (mask >> k & 1) ? dr[k].data() : nullptr; };
      cpu::mse_loss_tangent_backward(ptr(0), ptr(1), ptr(2), ptr(3), p.data(), t.data(), tp.data(), tt.data(), 1.5f, n);
      ref::mse_loss_tangent_backward(rptr(0), rptr(1), rptr(2), rptr(3), widen(p).data(), widen(t).data(),
                                     widen(tp).data(), widen(tt).data(), 1.5, n);
      for (int k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < un; ++i) ASSERT_NEAR(d[k][i], dr[k][i], 1e-6 + 1e-6 * std::fabs(dr[k][i]));
    }
  }
}

TEST(MseLossTangentGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const std::int64_t n = 6;
  std::vector<std::vector<double>> in(4);
  for (int k = 0; k < 4; ++k) in[k] = widen(draw(6, 10 + k));
  std::vector<std::vector<double>> d(4, std::vector<double>(6, 0.0));
  ref::mse_loss_tangent_backward(d[0].data(), d[1].data(), d[2].data(), d[3].data(), in[0].data(), in[1].data(),
                                 in[2].data(), in[3].data(), 0.7, n);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 6; ++i) {
      const double saved = in[k][i], h = 1e-6;
      in[k][i] = saved + h;
      const double up = ref::mse_loss_tangent_forward(in[0].data(), in[1].data(), in[2].data(), in[3].data(), n);
      in[k][i] = saved - h;
      const double down = ref::mse_loss_tangent_forward(in[0].data(), in[1].data(), in[2].data(), in[3].data(), n);
      in[k][i] = saved;
      EXPECT_NEAR(d[k][i], 0.7 * (up - down) / (2 * h), 1e-7) << "input " << k << " i " << i;
    }
}

TEST(MseLossTangentApi, RejectsShapesAndModesAgree) {
  auto a = draw(6, 20), b = draw(6, 21), c = draw(6, 22), e = draw(6, 23), f = draw(4, 24);
  const Tensor A(a.data(), {2, 3}), B(b.data(), {2, 3}), C(c.data(), {2, 3}), E(e.data(), {2, 3}), F(f.data(), {2, 2});
  EXPECT_THROW(mse_loss_tangent(A, B, C, F), Error);
  EXPECT_THROW(mse_loss_tangent(A, F, C, E), Error);
  const float fast = mse_loss_tangent(A, B, C, E);
  set_kernel_mode(KernelMode::Reference);
  const float slow = mse_loss_tangent(A, B, C, E);
  set_kernel_mode(KernelMode::Fast);
  EXPECT_NEAR(fast, slow, 1e-6f);
}

}  // namespace
}  // namespace llmcc
