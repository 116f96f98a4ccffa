// The run-time checks of the nested-differentiation fuzzer (gen_nested.py): for one program at
// two size sets, the jvps' values against the function's, their tangents (first and second order)
// against Richardson central differences of the function (or of the first-order jvp), and the
// gradients of the four entries against central differences of the loss, along random
// directions and at single elements of every parameter and argument.
//
// A difference counts only where it settles (the two step sizes agree to 10%: the loss is smooth
// at that scale); one that disagrees at the step 1e-2 is taken again at 1e-3 and 3e-4
// (compare_differences) before it fails; a NaN always fails. Output: `FAIL seed=S program=i
// kind=<check> ...` lines, then `nested: P programs, C checks (U unsettled), F failed`; exit 1
// if anything failed.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/parameters.h"
#include "llmcc/runtime.h"

// The functions of program k in namespace ns, in check_sizes' order.
#define NESTED_FUNCS(ns, k)                                                                                   \
  [](auto&&... a) { return ns::f##k(a...); }, [](auto&&... a) { return ns::f##k##_jvp(a...); },             \
      [](auto&&... a) { return ns::f##k##_jx(a...); }, [](auto&&... a) { return ns::f##k##_jxx(a...); },    \
      [](auto&&... a) { return ns::loss_first##k(a...); },                                                   \
      [](auto&&... a) { return ns::loss_first##k##_grad(a...); },                                            \
      [](auto&&... a) { return ns::loss_taylor##k(a...); },                                                  \
      [](auto&&... a) { return ns::loss_taylor##k##_grad(a...); },                                           \
      [](auto&&... a) { return ns::loss_mixed##k(a...); },                                                   \
      [](auto&&... a) { return ns::loss_mixed##k##_grad(a...); },                                            \
      [](auto&&... a) { return ns::f##k##_jvpx(a...); }, [](auto&&... a) { return ns::loss_partial##k(a...); }, \
      [](auto&&... a) { return ns::loss_partial##k##_grad(a...); },                                          \
      [](auto&&... a) { return ns::loss_shared##k(a...); },                                                  \
      [](auto&&... a) { return ns::loss_shared##k##_grad(a...); }

namespace nested {

using llmcc::Tensor;

struct Report {
  int programs = 0, checks = 0, unsettled = 0, failed = 0;
  int seed = 0, program = 0;
  std::string sizes;
  void fail(const std::string& kind, const std::string& what) {
    ++failed;
    std::printf("FAIL seed=%d program=%d kind=%s %s: %s\n", seed, program, kind.c_str(), sizes.c_str(), what.c_str());
  }
  int finish() const {
    std::printf("nested: %d programs, %d checks (%d unsettled), %d failed\n", programs, checks, unsettled, failed);
    return failed == 0 ? 0 : 1;
  }
};

// An owned tensor of random values.
struct Buf {
  std::vector<float> v;
  Tensor t;
  Buf(const llmcc::Shape& shape, std::mt19937& rng, float scale) : v(static_cast<std::size_t>(shape.numel())) {
    std::uniform_real_distribution<float> d(-scale, scale);
    for (auto& x : v) x = d(rng);
    t = Tensor(v.data(), shape);
  }
};

// Richardson central differences of g(e) (a vector) at e = 0, with the step h; `settled` is false
// where the steps h and h/2 disagree by more than 10% of the larger (the function is not smooth
// at that scale).
inline std::vector<double> derivative(const std::function<std::vector<double>(double)>& g, double h,
                                      std::vector<bool>& settled) {
  auto central = [&](double step) {
    const std::vector<double> up = g(step), down = g(-step);
    std::vector<double> d(up.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = (up[i] - down[i]) / (2 * step);
    return d;
  };
  const std::vector<double> a = central(h), b = central(h / 2);
  std::vector<double> r(a.size());
  settled.assign(a.size(), true);
  double scale = 0;
  for (double x : b) scale = std::max(scale, std::fabs(x));
  for (std::size_t i = 0; i < a.size(); ++i) {
    r[i] = (4 * b[i] - a[i]) / 3;
    settled[i] = std::fabs(a[i] - b[i]) <= 0.1 * std::max({std::fabs(a[i]), std::fabs(b[i]), 1e-3 * scale});
  }
  return r;
}

inline std::vector<double> values(const Tensor& t) { return std::vector<double>(t.f32(), t.f32() + t.numel()); }

// The first element where `got` and the differences `numeric` disagree (beyond rtol, 2e-3 of
// the differences' scale and `noise`: the differences' resolution, a float function's rounding
// divided by the step), or -1; elements whose differences did not settle are skipped and counted.
inline long first_mismatch(const std::vector<double>& got, const std::vector<double>& numeric,
                           const std::vector<bool>& settled, double rtol, double noise, int& unsettled) {
  double scale = 0;
  for (double x : numeric) scale = std::max(scale, std::fabs(x));
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return static_cast<long>(i);
    if (!settled[i]) {
      ++unsettled;
      continue;
    }
    const double err = std::fabs(got[i] - numeric[i]);
    if (err > rtol * std::max(std::fabs(got[i]), std::fabs(numeric[i])) + 2e-3 * (1 + scale) + noise)
      return static_cast<long>(i);
  }
  return -1;
}

inline void compare(Report& rep, const std::string& kind, const std::vector<double>& got,
                    const std::vector<double>& numeric, const std::vector<bool>& settled, double rtol = 2e-2,
                    double noise = 0.0) {
  rep.checks += static_cast<int>(got.size());
  const long i = first_mismatch(got, numeric, settled, rtol, noise, rep.unsettled);
  if (i < 0) return;
  const auto k = static_cast<std::size_t>(i);
  rep.fail(kind, "element " + std::to_string(i) + ": adgen " + std::to_string(got[k]) + ", numeric " +
                     std::to_string(numeric[k]) + " (noise " + std::to_string(noise) + ")");
}

// Differences of g at the step 1e-2 against `got`; where they disagree, again at 1e-3 and then
// 3e-4, the noise floor (given for 1e-2) grown as the step shrinks. A function that is stiff at
// the scale of the step (layernorm over two channels whose values nearly meet is a smoothed
// sign) has differences that settle on its derivative only at small steps; a wrong derivative
// disagrees at every step, and the last step's disagreement is reported.
inline void compare_differences(Report& rep, const std::string& kind, const std::vector<double>& got,
                                const std::function<std::vector<double>(double)>& g, double rtol = 2e-2,
                                double noise = 0.0) {
  for (const double h : {1e-2, 1e-3, 3e-4}) {
    std::vector<bool> ok;
    const std::vector<double> n = derivative(g, h, ok);
    if (h == 3e-4) return compare(rep, kind, got, n, ok, rtol, noise * 1e-2 / h);
    int unsettled = 0;
    if (first_mismatch(got, n, ok, rtol, noise * 1e-2 / h, unsettled) < 0) {
      rep.checks += static_cast<int>(got.size());
      rep.unsettled += unsettled;
      return;
    }
  }
}

// Equal up to float rounding of the same operations (the jvps' values are the function's).
inline void same(Report& rep, const std::string& kind, const Tensor& a, const Tensor& b) {
  ++rep.checks;
  if (a.numel() != b.numel()) return rep.fail(kind, "sizes differ");
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (!(std::fabs(a.f32()[i] - b.f32()[i]) <= 1e-5f * (1.0f + std::fabs(b.f32()[i]))))
      return rep.fail(kind, "element " + std::to_string(i) + ": " + std::to_string(a.f32()[i]) + " vs " +
                                std::to_string(b.f32()[i]));
}

template <class Net, class F, class FJvp, class FJx, class FJxx, class L1, class G1, class L2, class G2, class L3,
          class G3, class FJvpx, class L4, class G4, class L5, class G5>
void check_sizes(Report& rep, unsigned seed, int N, int C, int D, int L, bool squash, F f, FJvp f_jvp, FJx f_jx,
                 FJxx f_jxx, L1 loss_first, G1 loss_first_grad, L2 loss_taylor, G2 loss_taylor_grad, L3 loss_mixed,
                 G3 loss_mixed_grad, FJvpx f_jvpx, L4 loss_partial, G4 loss_partial_grad, L5 loss_shared,
                 G5 loss_shared_grad) {
  rep.sizes = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " D=" + std::to_string(D) +
              " L=" + std::to_string(L) + (squash ? " squash" : "");
  std::mt19937 rng(seed);
  llmcc::Arena arena(std::size_t{64} << 20);
  llmcc::ArenaScope scope(arena);
  Net net;
  net.w_in = Tensor(nullptr, {C, 2});
  net.b_in = Tensor(nullptr, {C});
  net.layers.resize(static_cast<std::size_t>(L));
  for (auto& l : net.layers) {
    l.w = Tensor(nullptr, {C, C});
    l.b = Tensor(nullptr, {C});
    l.g = Tensor(nullptr, {C});
  }
  net.w_out = Tensor(nullptr, {D, C});
  net.squash = squash;
  llmcc::ParameterStore params = llmcc::bind_parameters(net);
  {
    std::uniform_real_distribution<float> d(-0.6f, 0.6f);
    for (std::size_t i = 0; i < params.size(); ++i) params.data()[i] = d(rng);
  }
  Buf x({N, 2}, rng, 1.0f), y({N, C}, rng, 0.5f), dx({N, 2}, rng, 1.0f), dy({N, C}, rng, 1.0f), ex({N, 2}, rng, 1.0f);
  Buf t({N, D}, rng, 0.3f);
  float s = 0.8f;
  const float ds = 0.5f * s;  // loss_first passes 0.5 s as the float's tangent

  auto scoped = [&](auto&& body) {
    llmcc::Arena a(std::size_t{64} << 20);
    llmcc::ArenaScope sc(a);
    return body();
  };
  // ---- tangents -------------------------------------------------------------------------------
  {
    const llmcc::adgen::Dual r = f_jvp(net, x.t, y.t, s, dx.t, dy.t, ds);
    same(rep, "jvp-value", r.value, f(net, x.t, y.t, s));
    auto moved = [&](double e) {
      return scoped([&] {
        std::vector<float> xv(x.v), yv(y.v);
        for (std::size_t i = 0; i < xv.size(); ++i) xv[i] += static_cast<float>(e) * dx.v[i];
        for (std::size_t i = 0; i < yv.size(); ++i) yv[i] += static_cast<float>(e) * dy.v[i];
        return values(f(net, Tensor(xv.data(), {N, 2}), Tensor(yv.data(), {N, C}), s + static_cast<float>(e) * ds));
      });
    };
    compare_differences(rep, "jvp-tangent", values(r.tangent), moved);
  }
  {
    const llmcc::adgen::Dual r = f_jx(net, x.t, y.t, s, dx.t);
    const llmcc::adgen::Dual2 q = f_jxx(net, x.t, y.t, s, dx.t, ex.t);
    const llmcc::adgen::Dual2 qq = f_jxx(net, x.t, y.t, s, dx.t, dx.t);
    same(rep, "jxx-value", q.value.value, r.value);
    same(rep, "jxx-first", q.value.tangent, r.tangent);
    same(rep, "jxx-other-direction", q.tangent.value, f_jx(net, x.t, y.t, s, ex.t).tangent);
    for (const auto* dir : {&ex, &dx}) {
      auto moved = [&](double e) {
        return scoped([&] {
          std::vector<float> xv(x.v);
          for (std::size_t i = 0; i < xv.size(); ++i) xv[i] += static_cast<float>(e) * dir->v[i];
          return values(f_jx(net, Tensor(xv.data(), {N, 2}), y.t, s, dx.t).tangent);
        });
      };
      compare_differences(rep, dir == &ex ? "second-mixed" : "second-same",
                          values(dir == &ex ? q.tangent.tangent : qq.tangent.tangent), moved);
    }
  }
  {
    // The jvp along x of the jvp along every argument, dx as both x directions: a second
    // derivative along (dx, dy, ds) then (dx, 0, 0), which the Taylor plan does not compute.
    const llmcc::adgen::Dual2 q = f_jvpx(net, x.t, y.t, s, dx.t, dy.t, ds, dx.t);
    auto moved = [&](double e) {
      return scoped([&] {
        std::vector<float> xv(x.v);
        for (std::size_t i = 0; i < xv.size(); ++i) xv[i] += static_cast<float>(e) * dx.v[i];
        return values(f_jvp(net, Tensor(xv.data(), {N, 2}), y.t, s, dx.t, dy.t, ds).tangent);
      });
    };
    compare_differences(rep, "second-partial", values(q.tangent.tangent), moved);
  }
  // ---- gradients of the entries -----------------------------------------------------------------
  auto check_grad = [&](const std::string& kind, const std::function<double()>& loss, auto&& grad_call,
                        std::vector<std::pair<std::string, Buf*>> args) {
    auto g = llmcc::adgen::make_grad(net);
    std::vector<Tensor> d(args.size());
    float d_s = 0;
    grad_call(g.grad, d, d_s);
    // The loss's rounding over the step h / 2 of the finer difference: 16 float roundings of its
    // value, or four times the fast and reference kernels' disagreement on it, whichever is larger
    // (a loss holding second derivatives rounds at many more places than its last operation).
    const double l_fast = scoped([&] { return loss(); });
    llmcc::set_kernel_mode(llmcc::KernelMode::Reference);
    const double l_ref = scoped([&] { return loss(); });
    llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
    const double noise = std::max(16.0 * std::fabs(l_fast) * 1.1920929e-7, 4.0 * std::fabs(l_fast - l_ref)) / 1e-2;
    auto check_vec = [&](const std::string& name, float* data, std::size_t n, const float* gdata) {
      if (gdata == nullptr) return rep.fail(kind, name + ": no gradient");
      std::normal_distribution<float> nd;
      for (int k = 0; k < 4; ++k) {
        std::vector<float> dir(n, 0.0f);
        if (k < 2) {
          for (auto& v : dir) v = nd(rng);
        } else {
          dir[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)] = 1.0f;
        }
        double analytic = 0;
        for (std::size_t i = 0; i < n; ++i) analytic += static_cast<double>(dir[i]) * gdata[i];
        std::vector<float> saved(data, data + n);
        auto at = [&](double e) {
          for (std::size_t i = 0; i < n; ++i) data[i] = saved[i] + static_cast<float>(e) * dir[i];
          const double v = scoped([&] { return loss(); });
          for (std::size_t i = 0; i < n; ++i) data[i] = saved[i];
          return std::vector<double>{v};
        };
        double dir_norm = 0;
        for (float v : dir) dir_norm = std::max(dir_norm, static_cast<double>(std::fabs(v)));
        compare_differences(rep, kind + "/" + name, {analytic}, at, 3e-2, noise * dir_norm);
      }
    };
    g.grad.for_each_pair(net, "", [&](const std::string& name, const Tensor& p, Tensor& gp) {
      check_vec(name, p.f32(), static_cast<std::size_t>(p.numel()), gp.defined() ? gp.f32() : nullptr);
    });
    for (std::size_t a = 0; a < args.size(); ++a)
      check_vec(args[a].first, args[a].second->v.data(), args[a].second->v.size(),
                d[a].defined() ? d[a].f32() : nullptr);
    // the float s
    const float saved = s;
    auto at = [&](double e) {
      s = saved + static_cast<float>(e);
      const double v = scoped([&] { return loss(); });
      s = saved;
      return std::vector<double>{v};
    };
    compare_differences(rep, kind + "/s", {static_cast<double>(d_s)}, at, 3e-2, noise);
  };
  check_grad(
      "loss_first", [&] { return static_cast<double>(loss_first(net, x.t, y.t, s, dx.t, dy.t, t.t)); },
      [&](auto& g, std::vector<Tensor>& d, float& d_s) {
        loss_first_grad(net, x.t, y.t, s, dx.t, dy.t, t.t, g, &d[0], &d[1], &d_s, &d[2], &d[3], &d[4]);
      },
      {{"x", &x}, {"y", &y}, {"dx", &dx}, {"dy", &dy}, {"t", &t}});
  check_grad(
      "loss_taylor", [&] { return static_cast<double>(loss_taylor(net, x.t, y.t, s, dx.t, t.t)); },
      [&](auto& g, std::vector<Tensor>& d, float& d_s) {
        loss_taylor_grad(net, x.t, y.t, s, dx.t, t.t, g, &d[0], &d[1], &d_s, &d[2], &d[3]);
      },
      {{"x", &x}, {"y", &y}, {"dx", &dx}, {"t", &t}});
  check_grad(
      "loss_mixed", [&] { return static_cast<double>(loss_mixed(net, x.t, y.t, s, dx.t, ex.t, t.t)); },
      [&](auto& g, std::vector<Tensor>& d, float& d_s) {
        loss_mixed_grad(net, x.t, y.t, s, dx.t, ex.t, t.t, g, &d[0], &d[1], &d_s, &d[2], &d[3], &d[4]);
      },
      {{"x", &x}, {"y", &y}, {"dx", &dx}, {"ex", &ex}, {"t", &t}});
  check_grad(
      "loss_partial", [&] { return static_cast<double>(loss_partial(net, x.t, y.t, s, dx.t, dy.t, t.t)); },
      [&](auto& g, std::vector<Tensor>& d, float& d_s) {
        loss_partial_grad(net, x.t, y.t, s, dx.t, dy.t, t.t, g, &d[0], &d[1], &d_s, &d[2], &d[3], &d[4]);
      },
      {{"x", &x}, {"y", &y}, {"dx", &dx}, {"dy", &dy}, {"t", &t}});
  check_grad(
      "loss_shared", [&] { return static_cast<double>(loss_shared(net, x.t, y.t, s, dx.t, ex.t, t.t)); },
      [&](auto& g, std::vector<Tensor>& d, float& d_s) {
        loss_shared_grad(net, x.t, y.t, s, dx.t, ex.t, t.t, g, &d[0], &d[1], &d_s, &d[2], &d[3], &d[4]);
      },
      {{"x", &x}, {"y", &y}, {"dx", &dx}, {"ex", &ex}, {"t", &t}});
}

// One program at two size sets drawn from awkward values.
template <class Net, class... Fns>
void check_program(Report& rep, int seed, int index, Fns... fns) {
  rep.seed = seed;
  rep.program = index;
  ++rep.programs;
  std::mt19937 rng(static_cast<unsigned>(seed * 7919 + index));
  const int sizes[] = {1, 2, 3, 5, 7, 8, 9};
  for (int run = 0; run < 2; ++run) {
    auto pick = [&] { return sizes[std::uniform_int_distribution<int>(0, 6)(rng)]; };
    const int N = pick(), C = pick(), D = 1 + pick() % 3, L = 1 + pick() % 3;
    const int failed_before = rep.failed;
    check_sizes<Net>(rep, rng(), N, C, D, L, run == 1, fns...);
    if (rep.failed > failed_before) return;
  }
}

}  // namespace nested
