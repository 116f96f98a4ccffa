// Forward mode: the jvp functions adgen defines (LLMCC_ADGEN_JVP) give the directional
// derivative that central differences of the function give, and losses holding jvps get, from
// one generated backward, the gradients that central differences of the loss give.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "adgen_test_util.h"
#include "jvp.grad.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"

namespace {

using llmcc::Tensor;

// A net of awkward sizes: H hidden channels, L hidden layers (the first takes the 2 inputs).
jvpm::Net make_net(int H, int L) {
  jvpm::Net net;
  net.hidden.resize(static_cast<std::size_t>(L));
  for (int i = 0; i < L; ++i) {
    net.hidden[static_cast<std::size_t>(i)].w = Tensor(nullptr, {H, i == 0 ? 2 : H});
    net.hidden[static_cast<std::size_t>(i)].b = Tensor(nullptr, {H});
  }
  net.gain = Tensor(nullptr, {H});
  net.w_out = Tensor(nullptr, {1, H});
  net.b_out = Tensor(nullptr, {1});
  return net;
}

// Richardson-extrapolated central differences of f along v at x (f: tensor -> tensor), element
// by element against `tangent`: |a - n| <= 2e-3 * (1 + max |n|).
::testing::AssertionResult tangent_matches(const std::string& name, const Tensor& tangent, const Tensor& x,
                                           const Tensor& v, const std::function<std::vector<float>()>& f) {
  float* xs = x.f32();
  const std::vector<float> x0(xs, xs + x.numel());
  auto diff = [&](double h) {
    std::vector<double> d;
    for (const double sgn : {1.0, -1.0}) {
      for (std::int64_t i = 0; i < x.numel(); ++i) xs[i] = x0[static_cast<std::size_t>(i)] + static_cast<float>(sgn * h) * v.f32()[i];
      const std::vector<float> y = f();
      if (d.empty()) d.assign(y.size(), 0.0);
      for (std::size_t k = 0; k < y.size(); ++k) d[k] += sgn * y[k] / (2.0 * h);
    }
    for (std::int64_t i = 0; i < x.numel(); ++i) xs[i] = x0[static_cast<std::size_t>(i)];
    return d;
  };
  const std::vector<double> d1 = diff(2e-2), d2 = diff(1e-2);
  if (static_cast<std::int64_t>(d1.size()) != tangent.numel())
    return ::testing::AssertionFailure() << name << ": tangent has " << tangent.numel() << " elements, value " << d1.size();
  double max_n = 0.0, worst = 0.0;
  std::vector<double> n(d1.size());
  for (std::size_t k = 0; k < d1.size(); ++k) {
    n[k] = (4.0 * d2[k] - d1[k]) / 3.0;
    max_n = std::max(max_n, std::fabs(n[k]));
  }
  for (std::size_t k = 0; k < d1.size(); ++k) {
    const double e = std::fabs(tangent.f32()[k] - n[k]);
    if (!(e <= 2e-3 * (1.0 + max_n)))
      return ::testing::AssertionFailure() << name << "[" << k << "]: adgen " << tangent.f32()[k] << ", numeric "
                                           << n[k] << " (max |numeric| " << max_n << ")";
    worst = std::max(worst, e);
  }
  return ::testing::AssertionSuccess() << name << ": max error " << worst;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

struct Sizes {
  int N, H, L;
};
class AdgenJvp : public ::testing::TestWithParam<Sizes> {};

TEST_P(AdgenJvp, TangentMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, vs;
  adgen_test::bind_random(net, params, 3, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 4);
  const Tensor v = adgen_test::random_tensor(vs, {N, 2}, 5);
  const llmcc::adgen::Dual r = jvpm::u_jvp(net, x, v);
  const std::vector<float> u0 = values(jvpm::u(net, x));
  ASSERT_EQ(r.value.numel(), N);
  for (int i = 0; i < N; ++i) EXPECT_EQ(r.value.f32()[i], u0[static_cast<std::size_t>(i)]) << "value " << i;
  EXPECT_TRUE(tangent_matches("u_jvp", r.tangent, x, v, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return values(jvpm::u(net, x));
  }));
}

// Second order: u_jvp_jvp's results against u_jvp's, and its last one (u''[v, w]) against central
// differences of u_jvp's tangent along w; u_jvp_full (along x and v) against differences moving both.
TEST_P(AdgenJvp, SecondOrderTangentsMatchFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, vs, ws, dvs;
  adgen_test::bind_random(net, params, 21, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 22);
  const Tensor v = adgen_test::random_tensor(vs, {N, 2}, 23);
  const Tensor w = adgen_test::random_tensor(ws, {N, 2}, 24);
  const Tensor dv = adgen_test::random_tensor(dvs, {N, 2}, 25);
  const llmcc::adgen::Dual2 r = jvpm::u_jvp_jvp(net, x, v, w);
  const llmcc::adgen::Dual first = jvpm::u_jvp(net, x, v);
  const llmcc::adgen::Dual along_w = jvpm::u_jvp(net, x, w);
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(r.value.value.f32()[i], first.value.f32()[i]) << i;
    EXPECT_EQ(r.value.tangent.f32()[i], first.tangent.f32()[i]) << i;
    EXPECT_NEAR(r.tangent.value.f32()[i], along_w.tangent.f32()[i], 1e-5f * (1.0f + std::fabs(along_w.tangent.f32()[i])));
  }
  EXPECT_TRUE(tangent_matches("u_jvp_jvp", r.tangent.tangent, x, w, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return values(jvpm::u_jvp(net, x, v).tangent);
  }));
  // Along x and v together: d/de u_jvp(x + e dx, v + e dv).tangent.
  std::vector<float> all(xs), dall(ws);
  all.insert(all.end(), vs.begin(), vs.end());
  dall.insert(dall.end(), dvs.begin(), dvs.end());
  const Tensor stacked(all.data(), {static_cast<std::int64_t>(all.size())});
  const Tensor dstacked(dall.data(), {static_cast<std::int64_t>(dall.size())});
  const llmcc::adgen::Dual2 full = jvpm::u_jvp_full(net, x, v, w, dv);
  EXPECT_TRUE(tangent_matches("u_jvp_full", full.tangent.tangent, stacked, dstacked, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return values(jvpm::u_jvp(net, Tensor(all.data(), {N, 2}), Tensor(all.data() + 2 * N, {N, 2})).tangent);
  }));
}

// Tangents along x, y and the float s together: the differences move all three.
TEST_P(AdgenJvp, TangentOfSeveralArgumentsMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, ys, dxs, dys;
  adgen_test::bind_random(net, params, 6, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 7);
  const Tensor y = adgen_test::random_tensor(ys, {N, H}, 8);
  const Tensor dx = adgen_test::random_tensor(dxs, {N, 2}, 9);
  const Tensor dy = adgen_test::random_tensor(dys, {N, H}, 10);
  const float s = 0.8f, ds = -0.6f;
  const llmcc::adgen::Dual r = jvpm::mix_jvp(net, x, y, s, dx, dy, ds);
  // One input of (N*2 + N*H + 1) values stacked, moved along (dx, dy, ds).
  std::vector<float> all(xs), dall(dxs);
  all.insert(all.end(), ys.begin(), ys.end());
  dall.insert(dall.end(), dys.begin(), dys.end());
  all.push_back(s);
  dall.push_back(ds);
  const Tensor stacked(all.data(), {static_cast<std::int64_t>(all.size())});
  const Tensor dstacked(dall.data(), {static_cast<std::int64_t>(dall.size())});
  EXPECT_TRUE(tangent_matches("mix_jvp", r.tangent, stacked, dstacked, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    const Tensor xx(all.data(), {N, 2});
    const Tensor yy(all.data() + 2 * N, {N, H});
    return values(jvpm::mix(net, xx, yy, all.back()));
  }));
}

// Nested: the gradient of a loss holding u's tangent (twice, the second along a direction that
// depends on the parameters), for every parameter, the points and the direction.
TEST_P(AdgenJvp, GradientThroughTangentsMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, ts;
  adgen_test::bind_random(net, params, 11, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 12);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 13);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 14, 0.3f);
  auto g = llmcc::adgen::make_grad(net);
  Tensor d_x, d_dir, d_target;
  const float value = jvpm::residual_loss_grad(net, x, dir, target, g.grad, &d_x, &d_dir, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::residual_loss(net, x, dir, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  adgen_test::expect_grad_matches_fd(net, g.grad, loss);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss));
  EXPECT_TRUE(adgen_test::fd_matches("dir", dir, d_dir, loss));
  EXPECT_TRUE(adgen_test::fd_matches("target", target, d_target, loss));
}

// Nested to the second order: the parameters' gradient of a residual holding u''[d, d].
TEST_P(AdgenJvp, GradientThroughSecondOrderMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, others, ts;
  adgen_test::bind_random(net, params, 26, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 27);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 28);
  const Tensor other = adgen_test::random_tensor(others, {N, 2}, 30);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 29, 0.3f);
  auto g = llmcc::adgen::make_grad(net);
  Tensor d_x, d_dir, d_other, d_target;
  const float value =
      jvpm::second_order_loss_grad(net, x, dir, other, target, g.grad, &d_x, &d_dir, &d_other, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::second_order_loss(net, x, dir, other, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  // A second derivative in the loss curves it more: steps of 1e-2 leave differences off by a few
  // percent on the larger sizes (they shrink as h^2 with the step), 5e-3 does not.
  constexpr double h = 5e-3;
  adgen_test::expect_grad_matches_fd(net, g.grad, loss, h);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("dir", dir, d_dir, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("other", other, d_other, loss, h));
}

// Calls of u and of its jvps at the same points, merged into one call (u's statements once): the
// gradient with respect to the parameters, the points and both directions.
TEST_P(AdgenJvp, GradientThroughMergedCallsMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, others, ts;
  adgen_test::bind_random(net, params, 61, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 62);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 63);
  const Tensor other = adgen_test::random_tensor(others, {N, 2}, 64);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 65, 0.3f);
  auto g = llmcc::adgen::make_grad(net);
  Tensor d_x, d_dir, d_other, d_target;
  const float value = jvpm::shared_loss_grad(net, x, dir, other, target, g.grad, &d_x, &d_dir, &d_other, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::shared_loss(net, x, dir, other, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  constexpr double h = 5e-3;  // second derivatives in the loss, as in the test above
  adgen_test::expect_grad_matches_fd(net, g.grad, loss, h);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("dir", dir, d_dir, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("other", other, d_other, loss, h));
}

// The merged calls compute what the separate calls do: the same loss bit for bit (the same ops on
// the same tensors), and the same gradient up to the order its contributions are summed in.
TEST_P(AdgenJvp, MergedCallsGiveTheSeparateCallsGradient) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, others, ts;
  adgen_test::bind_random(net, params, 71, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 72);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 73);
  const Tensor other = adgen_test::random_tensor(others, {N, 2}, 74);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 75, 0.3f);
  std::vector<std::vector<float>> copies(3, xs);
  const Tensor x1(copies[0].data(), {N, 2}), x2(copies[1].data(), {N, 2}), x3(copies[2].data(), {N, 2});
  auto merged = llmcc::adgen::make_grad(net);
  auto separate = llmcc::adgen::make_grad(net);
  Tensor d_x, d_dir, d_other, s_x0, s_x1, s_x2, s_x3, s_dir, s_other;
  const float merged_value =
      jvpm::shared_loss_grad(net, x, dir, other, target, merged.grad, &d_x, &d_dir, &d_other, nullptr);
  const float separate_value = jvpm::unshared_loss_grad(net, x, x1, x2, x3, dir, other, target, separate.grad, &s_x0,
                                                        &s_x1, &s_x2, &s_x3, &s_dir, &s_other, nullptr);
  EXPECT_EQ(merged_value, separate_value);
  auto near = [](const std::string& name, const float* a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < b.size(); ++i)
      if (!(std::fabs(a[i] - b[i]) <= 1e-5f * (1.0f + std::fabs(b[i]))))
        return ::testing::AssertionFailure() << name << "[" << i << "]: merged " << a[i] << ", separate " << b[i];
    return ::testing::AssertionSuccess();
  };
  std::vector<std::pair<std::string, std::pair<Tensor, Tensor>>> params_of;
  merged.grad.for_each_pair(net, "", [&](const std::string& name, const Tensor&, Tensor& g) {
    params_of.push_back({name, {g, Tensor()}});
  });
  std::size_t k = 0;
  separate.grad.for_each_pair(net, "",
                              [&](const std::string&, const Tensor&, Tensor& g) { params_of[k++].second.second = g; });
  ASSERT_EQ(k, params_of.size());
  for (const auto& [name, pair] : params_of) EXPECT_TRUE(near(name, pair.first.f32(), values(pair.second)));
  std::vector<float> sum_x(xs.size());
  for (std::size_t i = 0; i < sum_x.size(); ++i)
    sum_x[i] = ((s_x0.f32()[i] + s_x1.f32()[i]) + s_x2.f32()[i]) + s_x3.f32()[i];
  EXPECT_TRUE(near("x", d_x.f32(), sum_x));
  EXPECT_TRUE(near("dir", d_dir.f32(), values(s_dir)));
  EXPECT_TRUE(near("other", d_other.f32(), values(s_other)));
}

TEST_P(AdgenJvp, GradientThroughSeveralTangentsMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, ys, dxs, dys, ts;
  adgen_test::bind_random(net, params, 15, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 16);
  const Tensor y = adgen_test::random_tensor(ys, {N, H}, 17);
  const Tensor dx = adgen_test::random_tensor(dxs, {N, 2}, 18);
  const Tensor dy = adgen_test::random_tensor(dys, {N, H}, 19);
  const Tensor target = adgen_test::random_tensor(ts, {N, H}, 20, 0.3f);
  float s = 0.7f;
  auto g = llmcc::adgen::make_grad(net);
  Tensor d_x, d_y, d_dx, d_dy, d_target;
  float d_s = 0.0f;
  jvpm::mix_loss_grad(net, x, y, s, dx, dy, target, g.grad, &d_x, &d_y, &d_s, &d_dx, &d_dy, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return static_cast<double>(jvpm::mix_loss(net, x, y, s, dx, dy, target));
  };
  adgen_test::expect_grad_matches_fd(net, g.grad, loss);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss));
  EXPECT_TRUE(adgen_test::fd_matches("y", y, d_y, loss));
  EXPECT_TRUE(adgen_test::fd_matches("dx", dx, d_dx, loss));
  EXPECT_TRUE(adgen_test::fd_matches("dy", dy, d_dy, loss));
  EXPECT_TRUE(adgen_test::fd_float_matches("s", s, d_s, loss));
}

jvpm::Norms make_norms(int C) {
  jvpm::Norms n;
  n.g = Tensor(nullptr, {C});
  n.lw = Tensor(nullptr, {C});
  n.lb = Tensor(nullptr, {C});
  return n;
}

// rmsnorm's and layernorm's tangents along the input and a weight (first order), and to the
// second order along both and along the input twice (the Taylor plan).
TEST_P(AdgenJvp, NormTangentsMatchFiniteDifferences) {
  const auto [N, C, L] = GetParam();
  (void)L;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Norms n = make_norms(C);
  std::vector<float> params, xs, ws, dxs, dws, ddxs, ddws;
  adgen_test::bind_random(n, params, 31, 1.0f);
  (void)adgen_test::random_tensor(xs, {N, C}, 32);
  (void)adgen_test::random_tensor(ws, {C}, 33);
  const Tensor dx = adgen_test::random_tensor(dxs, {N, C}, 34);
  const Tensor dw = adgen_test::random_tensor(dws, {C}, 35);
  const Tensor ddx = adgen_test::random_tensor(ddxs, {N, C}, 36);
  const Tensor ddw = adgen_test::random_tensor(ddws, {C}, 37);
  // x and w stacked in one input, so that one difference moves both.
  std::vector<float> all(xs), d1(dxs), d2(ddxs);
  all.insert(all.end(), ws.begin(), ws.end());
  d1.insert(d1.end(), dws.begin(), dws.end());
  d2.insert(d2.end(), ddws.begin(), ddws.end());
  const Tensor stacked(all.data(), {static_cast<std::int64_t>(all.size())});
  const Tensor dstacked(d1.data(), {static_cast<std::int64_t>(d1.size())});
  const Tensor ddstacked(d2.data(), {static_cast<std::int64_t>(d2.size())});
  const Tensor xx(all.data(), {N, C}), ww(all.data() + std::size_t(N) * C, {C});

  const llmcc::adgen::Dual r = jvpm::normed_jvp(n, xx, ww, dx, dw);
  EXPECT_EQ(values(r.value), values(jvpm::normed(n, xx, ww)));
  EXPECT_TRUE(tangent_matches("normed_jvp", r.tangent, stacked, dstacked, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::normed(n, xx, ww));
  }));
  const llmcc::adgen::Dual2 full = jvpm::normed_jvp_full(n, xx, ww, dx, dw, ddx, ddw);
  EXPECT_TRUE(tangent_matches("normed_jvp_full", full.tangent.tangent, stacked, ddstacked, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::normed_jvp(n, xx, ww, dx, dw).tangent);
  }));
  const llmcc::adgen::Dual2 xx2 = jvpm::normed_jvp_xx(n, xx, ww, dx, ddx);
  EXPECT_TRUE(tangent_matches("normed_jvp_xx", xx2.tangent.tangent, xx, ddx, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::normed_jvp_x(n, xx, ww, dx).tangent);
  }));
}

// Nested through the norms: the gradient of a loss holding their second derivative.
TEST_P(AdgenJvp, GradientThroughNormTangentsMatchesFiniteDifferences) {
  const auto [N, C, L] = GetParam();
  (void)L;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Norms n = make_norms(C);
  std::vector<float> params, xs, ws, dirs, ts;
  adgen_test::bind_random(n, params, 41, 1.0f);
  const Tensor x = adgen_test::random_tensor(xs, {N, C}, 42);
  const Tensor w = adgen_test::random_tensor(ws, {C}, 43);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, C}, 44);
  const Tensor target = adgen_test::random_tensor(ts, {N, C}, 45, 0.3f);
  auto g = llmcc::adgen::make_grad(n);
  Tensor d_x, d_w, d_dir, d_target;
  const float value = jvpm::norm_loss_grad(n, x, w, dir, target, g.grad, &d_x, &d_w, &d_dir, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::norm_loss(n, x, w, dir, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  constexpr double h = 5e-3;  // a second derivative in the loss, as above
  adgen_test::expect_grad_matches_fd(n, g.grad, loss, h);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("w", w, d_w, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("dir", dir, d_dir, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("target", target, d_target, loss, h));
}

// rope, token_embedding and token_position_embedding: tangents along x and the tables (first
// order), and along x and wte again (second order), against differences moving all of them.
TEST_P(AdgenJvp, EmbeddingAndRopeTangentsMatchFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  const int B = L, T = N, V = 5, C = 4 * H;  // rope: 2 heads of 2H channels
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B) * T);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7 + 3) % V);
  const llmcc::Tokens idx(ids.data(), B, T);
  std::vector<float> vals, d1, d2;
  const std::size_t nx = std::size_t(B) * T * C, nte = std::size_t(V) * C, npe = std::size_t(T) * C;
  (void)adgen_test::random_tensor(vals, {static_cast<std::int64_t>(nx + nte + npe)}, 51);
  (void)adgen_test::random_tensor(d1, {static_cast<std::int64_t>(nx + nte + npe)}, 52);
  (void)adgen_test::random_tensor(d2, {static_cast<std::int64_t>(nx + nte + npe)}, 53);
  auto x = [&](std::vector<float>& v) { return Tensor(v.data(), {B, T, C}); };
  auto wte = [&](std::vector<float>& v) { return Tensor(v.data() + nx, {V, C}); };
  auto wpe = [&](std::vector<float>& v) { return Tensor(v.data() + nx + nte, {T, C}); };
  const Tensor all(vals.data(), {static_cast<std::int64_t>(vals.size())});
  const Tensor dall(d1.data(), {static_cast<std::int64_t>(d1.size())});
  auto value = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::embedded(x(vals), wte(vals), wpe(vals), idx));
  };

  const llmcc::adgen::Dual r = jvpm::embedded_jvp(x(vals), wte(vals), wpe(vals), idx, x(d1), wte(d1), wpe(d1));
  EXPECT_EQ(values(r.value), value());
  EXPECT_TRUE(tangent_matches("embedded_jvp", r.tangent, all, dall, value));
  // Along x and wte only (wpe's tangent is zero): the differences leave wpe where it is.
  std::vector<float> d1_xw(d1);
  std::fill(d1_xw.begin() + static_cast<std::ptrdiff_t>(nx + nte), d1_xw.end(), 0.0f);
  const Tensor dxw(d1_xw.data(), {static_cast<std::int64_t>(d1_xw.size())});
  const llmcc::adgen::Dual q = jvpm::embedded_jvp_xw(x(vals), wte(vals), wpe(vals), idx, x(d1), wte(d1));
  EXPECT_TRUE(tangent_matches("embedded_jvp_xw", q.tangent, all, dxw, value));
  std::vector<float> d2_xw(d2);
  std::fill(d2_xw.begin() + static_cast<std::ptrdiff_t>(nx + nte), d2_xw.end(), 0.0f);
  const Tensor exw(d2_xw.data(), {static_cast<std::int64_t>(d2_xw.size())});
  const llmcc::adgen::Dual2 r2 =
      jvpm::embedded_jvp2(x(vals), wte(vals), wpe(vals), idx, x(d1), wte(d1), x(d2), wte(d2));
  EXPECT_TRUE(tangent_matches("embedded_jvp2", r2.tangent.tangent, all, exw, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::embedded_jvp_xw(x(vals), wte(vals), wpe(vals), idx, x(d1), wte(d1)).tangent);
  }));
}

// cross_entropy on the tangent's path: the tangent against differences, and the gradient of a
// loss holding it (the pullback of cross_entropy's tangent) against differences of the loss.
TEST_P(AdgenJvp, CrossEntropyTangentMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  const int B = L, T = N, Vp = 6 + H;  // 5 real classes, padded columns
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B) * T);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i % 3 == 2 ? -1 : static_cast<std::int32_t>((i * 3 + 1) % 5);
  const llmcc::Tokens targets(ids.data(), B, T);
  std::vector<float> zs, dzs, ts;
  const Tensor z = adgen_test::random_tensor(zs, {B, T, Vp}, 61, 1.5f);
  const Tensor dz = adgen_test::random_tensor(dzs, {B, T, Vp}, 62);
  const Tensor target = adgen_test::random_tensor(ts, {B, T, Vp}, 63, 0.3f);
  const llmcc::adgen::Dual r = jvpm::classified_jvp(z, targets, dz);
  EXPECT_TRUE(tangent_matches("classified_jvp", r.tangent, z, dz, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::classified(z, targets));
  }));
  Tensor d_z, d_dir, d_target;
  const float value = jvpm::classified_loss_grad(z, targets, dz, target, &d_z, &d_dir, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::classified_loss(z, targets, dz, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  EXPECT_TRUE(adgen_test::fd_matches("z", z, d_z, loss));
  EXPECT_TRUE(adgen_test::fd_matches("dir", dz, d_dir, loss));
  EXPECT_TRUE(adgen_test::fd_matches("target", target, d_target, loss));
}

// attention and attention_qkv on the tangent's path: the tangent along all three inputs against
// differences, and the gradient of a loss holding it (the tangent's pullback) against
// differences of the loss.
TEST_P(AdgenJvp, AttentionTangentMatchesFiniteDifferences) {
  const auto [N, H, L] = GetParam();
  const int B = L, T = N, HS = 1 + H % 3;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  const std::size_t nx = std::size_t(B) * T * 4 * HS, ny = std::size_t(B) * T * 2 * HS, nz = std::size_t(B) * T * 8 * HS;
  std::vector<float> vals, d1, ts;
  (void)adgen_test::random_tensor(vals, {static_cast<std::int64_t>(nx + ny + nz)}, 71);
  (void)adgen_test::random_tensor(d1, {static_cast<std::int64_t>(nx + ny + nz)}, 72);
  auto x = [&](std::vector<float>& v) { return Tensor(v.data(), {B, T, 4 * HS}); };
  auto y = [&](std::vector<float>& v) { return Tensor(v.data() + nx, {B, T, 2 * HS}); };
  auto z = [&](std::vector<float>& v) { return Tensor(v.data() + nx + ny, {B, T, 8 * HS}); };
  const Tensor all(vals.data(), {static_cast<std::int64_t>(vals.size())});
  const Tensor dall(d1.data(), {static_cast<std::int64_t>(d1.size())});
  const llmcc::adgen::Dual r = jvpm::attended_jvp(x(vals), y(vals), z(vals), x(d1), y(d1), z(d1));
  EXPECT_TRUE(tangent_matches("attended_jvp", r.tangent, all, dall, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::attended(x(vals), y(vals), z(vals)));
  }));
  const Tensor target = adgen_test::random_tensor(ts, {B, T, 4 * HS}, 73, 0.3f);
  const Tensor xx = x(vals), yy = y(vals), zz = z(vals), dx = x(d1);
  Tensor d_x, d_y, d_z, d_dx, d_target;
  const float value = jvpm::attended_loss_grad(xx, yy, zz, dx, target, &d_x, &d_y, &d_z, &d_dx, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope s(a);
    return static_cast<double>(jvpm::attended_loss(xx, yy, zz, dx, target));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  EXPECT_TRUE(adgen_test::fd_matches("x", xx, d_x, loss));
  EXPECT_TRUE(adgen_test::fd_matches("y", yy, d_y, loss));
  EXPECT_TRUE(adgen_test::fd_matches("z", zz, d_z, loss));
  EXPECT_TRUE(adgen_test::fd_matches("dx", dx, d_dx, loss));
}

// The outer jvp moves fewer arguments than the inner one: the same tensor as both x directions
// must not take the Taylor plan (which would move y and s twice). The value against the second
// derivative by differences, in the gradient's call and in the plain one; the gradient against
// differences of the loss.
TEST_P(AdgenJvp, OuterJvpAlongFewerArgumentsIsNotTaylor) {
  const auto [N, H, L] = GetParam();
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, ys, dxs, dys, ts;
  adgen_test::bind_random(net, params, 81, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 82);
  const Tensor y = adgen_test::random_tensor(ys, {N, H}, 83);
  const Tensor dx = adgen_test::random_tensor(dxs, {N, 2}, 84);
  const Tensor dy = adgen_test::random_tensor(dys, {N, H}, 85);
  const Tensor target = adgen_test::random_tensor(ts, {N, H}, 86, 0.3f);
  const float s = 0.7f;
  const llmcc::adgen::Dual2 r = jvpm::mix_jvp_jx(net, x, y, s, dx, dy, 0.5f * s, dx);
  EXPECT_TRUE(tangent_matches("mix_jvp_jx", r.tangent.tangent, x, dx, [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return values(jvpm::mix_jvp(net, x, y, s, dx, dy, 0.5f * s).tangent);
  }));
  auto g = llmcc::adgen::make_grad(net);
  Tensor d_x, d_y, d_dx, d_dy, d_target;
  float d_s = 0.0f, s2 = s;
  const float value =
      jvpm::mix_second_loss_grad(net, x, y, s2, dx, dy, target, g.grad, &d_x, &d_y, &d_s, &d_dx, &d_dy, &d_target);
  auto loss = [&] {
    llmcc::Arena a(1 << 20);
    llmcc::ArenaScope sc(a);
    return static_cast<double>(jvpm::mix_second_loss(net, x, y, s2, dx, dy, target));
  };
  EXPECT_NEAR(value, loss(), 1e-5 * (1.0 + std::fabs(loss())));
  constexpr double h = 5e-3;
  adgen_test::expect_grad_matches_fd(net, g.grad, loss, h);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, d_x, loss, h));
  EXPECT_TRUE(adgen_test::fd_matches("y", y, d_y, loss, h));
  EXPECT_TRUE(adgen_test::fd_float_matches("s", s2, d_s, loss));
}

// A plain call of a jvp of a jvp with the same tensor as both directions runs the Taylor plan:
// the same results as with a copy of the direction (the general plan), fewer products.
TEST(AdgenJvpTaylor, PlainCallWithOneDirectionTwiceTakesTheTaylorPlan) {
  constexpr int N = 5, H = 4, L = 3;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, vs;
  adgen_test::bind_random(net, params, 91, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 92);
  const Tensor v = adgen_test::random_tensor(vs, {N, 2}, 93);
  std::vector<float> copy(vs);
  const Tensor w(copy.data(), {N, 2});
  auto counted = [](const std::function<llmcc::adgen::Dual2()>& call, llmcc::adgen::Dual2& out) {
    llmcc::profile::reset();
    llmcc::profile::enable(true);
    out = call();
    llmcc::profile::enable(false);
    std::map<std::string, std::int64_t> calls;
    for (const auto& e : llmcc::profile::snapshot()) calls[e.name] = e.calls;
    return calls;
  };
  llmcc::adgen::Dual2 taylor, general;
  auto taylor_calls = counted([&] { return jvpm::u_jvp_jvp(net, x, v, v); }, taylor);
  auto general_calls = counted([&] { return jvpm::u_jvp_jvp(net, x, v, w); }, general);
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(taylor.value.value.f32()[i], general.value.value.f32()[i]) << i;
    EXPECT_NEAR(taylor.value.tangent.f32()[i], general.value.tangent.f32()[i], 1e-5f) << i;
    EXPECT_NEAR(taylor.tangent.value.f32()[i], general.tangent.value.f32()[i], 1e-5f) << i;
    EXPECT_NEAR(taylor.tangent.tangent.f32()[i], general.tangent.tangent.f32()[i],
                1e-4f * (1.0f + std::fabs(general.tangent.tangent.f32()[i])))
        << i;
  }
  // Three streams of products after the first layer instead of four.
  EXPECT_EQ(taylor_calls["linear_nobias.fwd"], 2 * (L + 1) - 1);
  EXPECT_EQ(general_calls["linear_nobias.fwd"], 3 * (L + 1) - 1);
  EXPECT_EQ(taylor_calls["linear.fwd"], L + 1);
  EXPECT_EQ(general_calls["linear.fwd"], L + 1);
}

// Forward mode runs each primal op once per jvp call, and the nested backward adds none: in the
// gradient of a loss holding u's second derivative along one direction, every linear and tanh of
// u runs once (the Taylor plan's value stream), the tangent products are linear_nobias (first and
// second derivative) and tanh's tangents one op each.
TEST(AdgenJvpCount, EachPrimalOpRunsOncePerGradientCall) {
  constexpr int N = 5, H = 4, L = 3;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, ts;
  adgen_test::bind_random(net, params, 31, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 32);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 33);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 34);
  auto g = llmcc::adgen::make_grad(net);
  llmcc::profile::reset();
  llmcc::profile::enable(true);
  jvpm::taylor_loss_grad(net, x, dir, target, g.grad);
  llmcc::profile::enable(false);
  std::map<std::string, std::int64_t> calls;
  for (const auto& e : llmcc::profile::snapshot()) calls[e.name] = e.calls;
  // u: L hidden linears + tanh, one output linear (with bias: `linear`), a gain mul and map_unary.
  EXPECT_EQ(calls["linear.fwd"], L + 1) << llmcc::profile::report();
  EXPECT_EQ(calls["tanh.fwd"], L);
  // First and second derivative streams, but the first layer's input direction is constant, so
  // its second derivative starts at its tanh (-2 y y' t, no product of a zero tensor).
  EXPECT_EQ(calls["linear_nobias.fwd"], 2 * (L + 1) - 1);
  EXPECT_EQ(calls["tanh_tangent.fwd"], L);
  EXPECT_EQ(calls["tanh_tangent2.fwd"], L - 1);
  EXPECT_EQ(calls["silu.fwd"], 1);
  // soft, its slope and the slope's slope; silu's tangents are map_unary of its scalar form's
  // slope and that slope's slope.
  EXPECT_EQ(calls["map_unary.fwd"], 5);
  // The backward: one pullback per forward op that got an adjoint (the value stream's linears too).
  EXPECT_EQ(calls["linear.bwd"], L + 1);
  EXPECT_EQ(calls["linear_nobias.bwd"], 2 * (L + 1) - 1);
}

// Calls of u and its jvps at the same points run u's primal ops once between them, forward and
// backward; at copies of the points (nothing to merge), once per call.
TEST(AdgenJvpCount, MergedCallsRunEachPrimalOpOnce) {
  constexpr int N = 5, H = 4, L = 3;
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  jvpm::Net net = make_net(H, L);
  std::vector<float> params, xs, dirs, others, ts;
  adgen_test::bind_random(net, params, 81, 0.7f);
  const Tensor x = adgen_test::random_tensor(xs, {N, 2}, 82);
  const Tensor dir = adgen_test::random_tensor(dirs, {N, 2}, 83);
  const Tensor other = adgen_test::random_tensor(others, {N, 2}, 84);
  const Tensor target = adgen_test::random_tensor(ts, {N, 1}, 85);
  std::vector<std::vector<float>> copies(3, xs);
  const Tensor x1(copies[0].data(), {N, 2}), x2(copies[1].data(), {N, 2}), x3(copies[2].data(), {N, 2});
  auto counted = [](const std::function<void()>& call) {
    llmcc::profile::reset();
    llmcc::profile::enable(true);
    call();
    llmcc::profile::enable(false);
    std::map<std::string, std::int64_t> calls;
    for (const auto& e : llmcc::profile::snapshot()) calls[e.name] = e.calls;
    return calls;
  };
  auto g = llmcc::adgen::make_grad(net);
  auto merged =
      counted([&] { jvpm::shared_loss_grad(net, x, dir, other, target, g.grad, nullptr, nullptr, nullptr, nullptr); });
  auto separate = counted([&] {
    jvpm::unshared_loss_grad(net, x, x1, x2, x3, dir, other, target, g.grad, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr);
  });
  // u: L hidden linears and tanhs, one output linear, one silu.
  EXPECT_EQ(merged["linear.fwd"], L + 1);
  EXPECT_EQ(merged["tanh.fwd"], L);
  EXPECT_EQ(merged["silu.fwd"], 1);
  EXPECT_EQ(merged["linear.bwd"], L + 1);
  EXPECT_EQ(merged["tanh.bwd"], L);
  EXPECT_EQ(separate["linear.fwd"], 4 * (L + 1));
  EXPECT_EQ(separate["tanh.fwd"], 4 * L);
  // Separately, the two calls whose value the loss does not read leave their output linear
  // without an adjoint.
  EXPECT_EQ(separate["linear.bwd"], 4 * (L + 1) - 2);
  // The tangent streams are each plan's own, merged or not.
  EXPECT_EQ(merged["linear_nobias.fwd"], separate["linear_nobias.fwd"]);
  EXPECT_EQ(merged["tanh_tangent.fwd"], separate["tanh_tangent.fwd"]);
  EXPECT_EQ(merged["tanh_tangent2.fwd"], separate["tanh_tangent2.fwd"]);
}

INSTANTIATE_TEST_SUITE_P(Sizes, AdgenJvp, ::testing::Values(Sizes{1, 1, 1}, Sizes{5, 3, 2}, Sizes{9, 7, 3}, Sizes{17, 16, 4}),
                         [](const auto& info) {
                           return "N" + std::to_string(info.param.N) + "_H" + std::to_string(info.param.H) + "_L" +
                                  std::to_string(info.param.L);
                         });

}  // namespace
