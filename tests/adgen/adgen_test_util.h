// Helpers for adgen's execution tests: bind random parameters to a test model, and compare a
// generated gradient with central finite differences of the float forward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "test_support.h"

namespace adgen_test {

using llmcc::Tensor;

// Binds every parameter of `m` (shapes already declared) to `storage`, filled uniformly in
// [-scale, scale]. Uses the generated Grad mirror's for_each_pair to find the parameters.
template <class Model>
void bind_random(Model& m, std::vector<float>& storage, unsigned seed, float scale = 0.5f) {
  llmcc::adgen::grad_t<Model> shapes;
  shapes.shape_like(m);
  std::size_t total = 0;
  shapes.for_each_pair(m, "", [&](const std::string&, const Tensor& p, Tensor&) { total += p.numel(); });
  storage.assign(total, 0.0f);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (auto& v : storage) v = dist(rng);
  std::size_t off = 0;
  shapes.for_each_pair(m, "", [&](const std::string&, const Tensor& p, Tensor&) {
    const_cast<Tensor&>(p).bind(storage.data() + off);
    off += p.numel();
  });
}

// Central differences of `loss` (float forward) for every element of `param`, against `grad`.
// Each element must satisfy |a - n| <= noise + max_rel * max(|a|, |n|), where noise is the
// finite-difference resolution of a float loss, 16 * |loss| * FLT_EPSILON / (2h), plus
// 1e-3 of the largest numeric element (so that round-off on ~0 elements does not dominate).
inline ::testing::AssertionResult fd_matches(const std::string& name, const Tensor& param, const Tensor& grad,
                                             const std::function<double()>& loss, double h = 1e-2,
                                             double max_rel = 2e-2) {
  if (!grad.defined()) return ::testing::AssertionFailure() << name << ": gradient not allocated";
  float* x = param.f32();
  const double l0 = loss();
  std::vector<double> numeric(static_cast<std::size_t>(param.numel()));
  double max_n = 0.0;
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    const float saved = x[i];
    x[i] = saved + static_cast<float>(h);
    const double up = loss();
    x[i] = saved - static_cast<float>(h);
    const double down = loss();
    x[i] = saved;
    numeric[static_cast<std::size_t>(i)] = (up - down) / (2.0 * h);
    max_n = std::max(max_n, std::fabs(numeric[static_cast<std::size_t>(i)]));
  }
  const double noise = 16.0 * std::fabs(l0) * 1.1920929e-7 / (2.0 * h) + 1e-3 * max_n;
  double worst = 0.0;
  std::int64_t bad = 0;  // elements beyond the limit, NaN ones included (NaN compares false)
  std::string first;
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    const double a = grad.f32()[i], n = numeric[static_cast<std::size_t>(i)];
    const double excess = std::fabs(a - n) - noise;
    const double rel = excess <= 0.0 ? 0.0 : excess / std::max(std::fabs(a), std::fabs(n));
    if (rel > worst) worst = rel;
    if (!(rel <= max_rel)) {
      ++bad;
      if (first.size() < 400)
        first += "\n    [" + std::to_string(i) + "] adgen " + std::to_string(a) + ", numeric " + std::to_string(n);
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess() << name << ": max rel error " << worst;
  return ::testing::AssertionFailure() << name << ": " << bad << " of " << param.numel()
                                       << " elements wrong (NaN included); max rel error " << worst << " beyond noise " << noise
                                       << " (limit " << max_rel << "), max |numeric| " << max_n << first;
}

// The same for a float argument `s` (changed for the differences, then restored).
inline ::testing::AssertionResult fd_float_matches(const std::string& name, float& s, float grad,
                                                   const std::function<double()>& loss, double h = 1e-2,
                                                   double max_rel = 2e-2) {
  const float saved = s;
  s = saved + static_cast<float>(h);
  const double up = loss();
  s = saved - static_cast<float>(h);
  const double down = loss();
  s = saved;
  const double numeric = (up - down) / (2.0 * h);
  if (std::fabs(grad - numeric) <= max_rel * std::fabs(numeric) + 1e-3)
    return ::testing::AssertionSuccess() << name << ": adgen " << grad << ", numeric " << numeric;
  return ::testing::AssertionFailure() << name << ": adgen " << grad << ", numeric " << numeric;
}

// Checks every parameter of `m` with fd_matches.
template <class Model>
void expect_grad_matches_fd(Model& m, llmcc::adgen::grad_t<Model>& g, const std::function<double()>& loss,
                            double h = 1e-2, double max_rel = 2e-2) {
  int checked = 0;
  g.for_each_pair(m, "", [&](const std::string& name, const Tensor& p, Tensor& d) {
    EXPECT_TRUE(fd_matches(name, p, d, loss, h, max_rel));
    ++checked;
  });
  EXPECT_GT(checked, 0);
}

inline Tensor random_tensor(std::vector<float>& storage, const llmcc::Shape& shape, unsigned seed,
                            float scale = 1.0f) {
  storage.resize(static_cast<std::size_t>(shape.numel()));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (auto& v : storage) v = dist(rng);
  return Tensor(storage.data(), shape);
}

}  // namespace adgen_test
