// Scalar functions: adgen's derivative of a float function made of arithmetic, locals, if and
// maths calls matches finite differences in double, and its gelu derivative matches the
// hand-written gelu pullback of the tensor library.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adgen_test_util.h"
#include "llmcc/arena.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/silu.h"
#include "scalar.grad.h"

namespace {

// The same functions in double, for finite differences free of float round-off.
double gelu_d(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
double zoo_d(double x, double y) {
  double r = std::sqrt(x * x + 1.0) + std::log(1.0 + y * y);
  if (x > 0.3)
    r = r * std::pow(std::fabs(y) + 1.0, 1.5);
  else
    r = r - std::exp(0.5 * x) * y;
  const double t = std::tanh(r / 4.0);
  return t * t + r;
}

TEST(AdgenScalar, GeluMatchesFiniteDifferences) {
  for (double x = -4.0; x <= 4.0; x += 0.37) {
    float d = 0.0f;
    const float v = scal::gelu_grad(static_cast<float>(x), &d);
    const double h = 1e-6;
    const double fd = (gelu_d(x + h) - gelu_d(x - h)) / (2 * h);
    EXPECT_NEAR(v, gelu_d(x), 1e-5);
    EXPECT_NEAR(d, fd, 1e-5 + 1e-5 * std::fabs(fd)) << "x=" << x;
  }
}

TEST(AdgenScalar, GeluMatchesHandWrittenPullback) {
  std::vector<float> xs;
  for (float x = -6.0f; x <= 6.0f; x += 0.05f) xs.push_back(x);
  const auto n = static_cast<std::int64_t>(xs.size());
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  llmcc::Tensor x(xs.data(), {n});
  llmcc::Tensor out = llmcc::gelu(x);
  std::vector<float> ones(xs.size(), 1.0f), dx(xs.size(), 0.0f);
  llmcc::Tensor d_out(ones.data(), {n}), d_x(dx.data(), {n});
  llmcc::gelu_pullback(x, out, d_out, &d_x);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    float d = 0.0f;
    scal::gelu_grad(xs[i], &d);
    EXPECT_NEAR(d, dx[i], 2e-5f + 2e-5f * std::fabs(dx[i])) << "x=" << xs[i];
  }
}

TEST(AdgenScalar, SiluMatchesHandWrittenPullback) {
  std::vector<float> xs;
  for (float x = -8.0f; x <= 8.0f; x += 0.05f) xs.push_back(x);
  const auto n = static_cast<std::int64_t>(xs.size());
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  llmcc::Tensor x(xs.data(), {n});
  llmcc::Tensor out = llmcc::silu(x);
  std::vector<float> ones(xs.size(), 1.0f), dx(xs.size(), 0.0f);
  llmcc::Tensor d_out(ones.data(), {n}), d_x(dx.data(), {n});
  llmcc::silu_pullback(x, out, d_out, &d_x);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    float d = 0.0f;
    scal::silu_grad(xs[i], &d);
    EXPECT_NEAR(d, dx[i], 2e-5f + 2e-5f * std::fabs(dx[i])) << "x=" << xs[i];
  }
}

TEST(AdgenScalar, MathsCallsLocalsAndIfMatchFiniteDifferences) {
  for (double x : {-1.3, -0.2, 0.1, 0.7, 1.9})
    for (double y : {-1.1, -0.4, 0.3, 1.2}) {
      float dx = 0.0f, dy = 0.0f;
      const float v = scal::zoo_grad(static_cast<float>(x), static_cast<float>(y), &dx, &dy);
      const double h = 1e-6;
      const double fx = (zoo_d(x + h, y) - zoo_d(x - h, y)) / (2 * h);
      const double fy = (zoo_d(x, y + h) - zoo_d(x, y - h)) / (2 * h);
      EXPECT_NEAR(v, zoo_d(x, y), 1e-4);
      EXPECT_NEAR(dx, fx, 1e-4 + 1e-4 * std::fabs(fx)) << x << "," << y;
      EXPECT_NEAR(dy, fy, 1e-4 + 1e-4 * std::fabs(fy)) << x << "," << y;
    }
}

// Returns in every branch of a final if/else (a result local is assigned in each).
TEST(AdgenScalar, ReturnsInBranchesMatchFiniteDifferences) {
  auto leaky_d = [](double x, double slope) {
    if (x > 0.0) return x * x;
    if (x > -1.0) return slope * x;
    return -slope + 0.5 * (x + 1.0);
  };
  for (double x : {-2.5, -1.5, -0.6, -0.1, 0.2, 1.7})
    for (double slope : {0.1, 0.3}) {
      float dx = 0.0f, ds = 0.0f;
      const float v = scal::leaky_grad(static_cast<float>(x), static_cast<float>(slope), &dx, &ds);
      const double h = 1e-6;
      EXPECT_NEAR(v, leaky_d(x, slope), 1e-5);
      EXPECT_NEAR(dx, (leaky_d(x + h, slope) - leaky_d(x - h, slope)) / (2 * h), 1e-4) << x;
      EXPECT_NEAR(ds, (leaky_d(x, slope + h) - leaky_d(x, slope - h)) / (2 * h), 1e-4) << x;
    }
}

// An element-wise op defined from the scalar gelu and its generated derivative, through the
// rule contract, equals the library's hand-written gelu op and pullback.
llmcc::Tensor gelu_from_scalar(const llmcc::Tensor& x) { return llmcc::adgen::map_unary<scal::gelu>(x, "gelu_s"); }
void gelu_from_scalar_pullback(const llmcc::Tensor& x, const llmcc::Tensor& out, const llmcc::Tensor& d_out,
                               llmcc::Tensor* d_x) {
  (void)out;
  llmcc::adgen::map_unary_pullback<scal::gelu_grad>(x, d_out, d_x);
}

TEST(AdgenScalar, ElementwiseOpFromScalarFunctionMatchesLibraryGelu) {
  std::vector<float> xs, gs;
  for (float x = -5.0f; x <= 5.0f; x += 0.01f) {
    xs.push_back(x);
    gs.push_back(0.5f + 0.25f * std::sin(7.0f * x));
  }
  const auto n = static_cast<std::int64_t>(xs.size());
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  llmcc::Tensor x(xs.data(), {n}), d_out(gs.data(), {n});
  const llmcc::Tensor a = gelu_from_scalar(x), b = llmcc::gelu(x);
  std::vector<float> da(xs.size(), 0.25f), db(xs.size(), 0.25f);  // pre-filled: both accumulate
  llmcc::Tensor d_a(da.data(), {n}), d_b(db.data(), {n});
  gelu_from_scalar_pullback(x, a, d_out, &d_a);
  llmcc::gelu_pullback(x, b, d_out, &d_b);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(a.f32()[i], b.f32()[i], 2e-6f + 2e-6f * std::fabs(b.f32()[i])) << "x=" << xs[i];
    EXPECT_NEAR(da[i], db[i], 2e-5f) << "x=" << xs[i];
  }
  gelu_from_scalar_pullback(x, a, d_out, nullptr);  // a null adjoint is skipped
}

// map_unary<soft> inside a differentiated function: adgen generates soft_grad and the pullback
// call; the gradient matches central finite differences.
TEST(AdgenScalar, MapUnaryInAModelNeedsNoHandWrittenPullback) {
  constexpr int N = 3, V = 6;
  std::vector<float> xs;
  llmcc::Tensor x = adgen_test::random_tensor(xs, {N, V}, 31, 2.0f);
  std::vector<std::int32_t> tgt = {0, 5, 2};
  llmcc::Tokens targets(tgt.data(), 1, N);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  llmcc::Tensor dx;
  const float value = scal::soft_loss_grad(x, targets, &dx);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(scal::soft_loss(x, targets));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  EXPECT_TRUE(adgen_test::fd_matches("x", x, dx, loss));
}

}  // namespace
