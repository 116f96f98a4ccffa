// tanh's tangents (forward mode): the fast kernels against the reference run in double, the
// reference backward against central differences in double, and the front ends (shapes, null
// adjoints, accumulation, both kernel modes).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/tanh.h"
#include "kernels/ref/tanh.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/ops/tanh.h"
#include "llmcc/runtime.h"

namespace llmcc {
namespace {

std::vector<float> draw(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Sizes around the vector widths and the parallel threshold.
const std::vector<std::int64_t> kSizes{1, 7, 16, 33, 1000, 20001};

TEST(TanhTangentKernel, ForwardAndBackwardMatchDoubleReference) {
  for (const std::int64_t n : kSizes) {
    const auto un = static_cast<std::size_t>(n);
    const auto y = draw(un, 1, -1.0f, 1.0f), t = draw(un, 2, -3.0f, 3.0f), ty = draw(un, 3, -3.0f, 3.0f),
               tt = draw(un, 4, -3.0f, 3.0f), g = draw(un, 5, -1.0f, 1.0f);
    std::vector<float> out(un), out2(un);
    std::vector<double> ref(un), ref2(un);
    cpu::tanh_tangent_forward(out.data(), y.data(), t.data(), n);
    ref::tanh_tangent_forward(ref.data(), widen(y).data(), widen(t).data(), n);
    cpu::tanh_tangent2_forward(out2.data(), y.data(), t.data(), ty.data(), tt.data(), n);
    ref::tanh_tangent2_forward(ref2.data(), widen(y).data(), widen(t).data(), widen(ty).data(), widen(tt).data(), n);
    for (std::size_t i = 0; i < un; ++i) {
      EXPECT_NEAR(out[i], ref[i], 1e-6 + 1e-6 * std::fabs(ref[i])) << "n=" << n << " i=" << i;
      EXPECT_NEAR(out2[i], ref2[i], 1e-5 + 1e-6 * std::fabs(ref2[i])) << "n=" << n << " i=" << i;
    }
    // Backward, accumulating onto ones, with every adjoint and with some left out.
    for (int mask = 1; mask < 16; ++mask) {
      std::vector<std::vector<float>> d(4, std::vector<float>(un, 1.0f));
      std::vector<std::vector<double>> dr(4, std::vector<double>(un, 1.0));
      auto ptr = [&](int k) { return (mask >> k & 1) ? d[k].data() : nullptr; };
      auto rptr = [&](int k) { return (mask >> k & 1) ? dr[k].data() : nullptr; };
      cpu::tanh_tangent2_backward(ptr(0), ptr(1), ptr(2), ptr(3), y.data(), t.data(), ty.data(), tt.data(), g.data(),
                                  n);
      ref::tanh_tangent2_backward(rptr(0), rptr(1), rptr(2), rptr(3), widen(y).data(), widen(t).data(),
                                  widen(ty).data(), widen(tt).data(), widen(g).data(), n);
      for (int k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < un; ++i) ASSERT_NEAR(d[k][i], dr[k][i], 1e-5 + 1e-6 * std::fabs(dr[k][i]));
    }
    for (int mask = 1; mask < 4; ++mask) {
      std::vector<std::vector<float>> d(2, std::vector<float>(un, 1.0f));
      std::vector<std::vector<double>> dr(2, std::vector<double>(un, 1.0));
      cpu::tanh_tangent_backward((mask & 1) ? d[0].data() : nullptr, (mask & 2) ? d[1].data() : nullptr, y.data(),
                                 t.data(), g.data(), n);
      ref::tanh_tangent_backward((mask & 1) ? dr[0].data() : nullptr, (mask & 2) ? dr[1].data() : nullptr,
                                 widen(y).data(), widen(t).data(), widen(g).data(), n);
      for (int k = 0; k < 2; ++k)
        for (std::size_t i = 0; i < un; ++i) ASSERT_NEAR(d[k][i], dr[k][i], 1e-5 + 1e-6 * std::fabs(dr[k][i]));
    }
  }
}

// sum(g * f(inputs)) differentiated by central differences in double, per input element.
TEST(TanhTangentGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const std::int64_t n = 9;
  std::vector<std::vector<double>> in(4);
  for (int k = 0; k < 4; ++k) in[k] = widen(draw(9, 10 + k, -1.5f, 1.5f));
  const auto g = widen(draw(9, 20, -1.0f, 1.0f));
  auto value = [&](int arity) {
    std::vector<double> out(9);
    if (arity == 2)
      ref::tanh_tangent_forward(out.data(), in[0].data(), in[1].data(), n);
    else
      ref::tanh_tangent2_forward(out.data(), in[0].data(), in[1].data(), in[2].data(), in[3].data(), n);
    double s = 0.0;
    for (int i = 0; i < 9; ++i) s += g[i] * out[i];
    return s;
  };
  for (const int arity : {2, 4}) {
    std::vector<std::vector<double>> d(4, std::vector<double>(9, 0.0));
    if (arity == 2)
      ref::tanh_tangent_backward(d[0].data(), d[1].data(), in[0].data(), in[1].data(), g.data(), n);
    else
      ref::tanh_tangent2_backward(d[0].data(), d[1].data(), d[2].data(), d[3].data(), in[0].data(), in[1].data(),
                                  in[2].data(), in[3].data(), g.data(), n);
    for (int k = 0; k < arity; ++k)
      for (int i = 0; i < 9; ++i) {
        const double saved = in[k][i], h = 1e-6;
        in[k][i] = saved + h;
        const double up = value(arity);
        in[k][i] = saved - h;
        const double down = value(arity);
        in[k][i] = saved;
        EXPECT_NEAR(d[k][i], (up - down) / (2 * h), 1e-7) << "arity " << arity << " input " << k << " i " << i;
      }
  }
}

TEST(TanhTangentApi, ShapesNullAdjointsAndModes) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  auto y = draw(6, 30, -1.0f, 1.0f), t = draw(6, 31, -1.0f, 1.0f), ty = draw(6, 32, -1.0f, 1.0f),
       tt = draw(6, 33, -1.0f, 1.0f), other = draw(4, 34, -1.0f, 1.0f);
  const Tensor Y(y.data(), {2, 3}), T(t.data(), {2, 3}), TY(ty.data(), {2, 3}), TT(tt.data(), {2, 3});
  const Tensor bad(other.data(), {2, 2});
  EXPECT_THROW(tanh_tangent(Y, bad), Error);
  EXPECT_THROW(tanh_tangent2(Y, T, bad, TT), Error);
  const Tensor fast = tanh_tangent2(Y, T, TY, TT);
  set_kernel_mode(KernelMode::Reference);
  const Tensor slow = tanh_tangent2(Y, T, TY, TT);
  set_kernel_mode(KernelMode::Fast);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(fast.f32()[i], slow.f32()[i], 1e-6f);
  std::vector<float> ones(6, 1.0f), dy(6, 1.0f);
  const Tensor d_out(ones.data(), {2, 3});
  Tensor d_y(dy.data(), {2, 3});
  tanh_tangent_pullback(Y, T, fast, d_out, &d_y, nullptr);  // d_t left out
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(dy[i], 1.0f - 2.0f * y[i] * t[i], 1e-6f);
  std::vector<float> wrong(4, 0.0f);
  Tensor d_bad(wrong.data(), {2, 2});
  EXPECT_THROW(tanh_tangent_pullback(Y, T, fast, d_out, &d_bad, nullptr), Error);
}

}  // namespace
}  // namespace llmcc
