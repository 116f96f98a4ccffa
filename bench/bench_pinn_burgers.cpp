// One training step of the Burgers PINN of examples/pinn_burgers (u_t, u_x and u_xx in the loss,
// the weights' gradient through them, an Adam update), timed step by step: the llmcc side of
// bench/pinn_compare.py, which runs PyTorch's variants of the same step beside it.
//
//   bench_pinn_burgers [--points N] [--data M] [--hidden H] [--layers L] [--steps K] [--warmup W]
//                      [--threads T] [--profile]
//
// Prints one JSON line: the median and best ms per step over K steps after W warm-up steps, the
// loss before and after, and the process's peak resident size (ru_maxrss).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>
#include <vector>

#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/rng.h"
#include "model.grad.h"

namespace {

struct Options {
  int points = 10000, data = 1000, hidden = 64, layers = 3, steps = 50, warmup = 5, threads = 2;
  bool profile = false;  // --profile: per-op times of the timed steps on stderr
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--profile") {
      o.profile = true;
      continue;
    }
    if (i + 1 >= argc) throw llmcc::Error("bench_pinn_burgers: " + a + " needs a value");
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v < 1) throw llmcc::Error("bench_pinn_burgers: " + a + " expects a positive integer");
    const int n = static_cast<int>(v);
    if (a == "--points")
      o.points = n;
    else if (a == "--data")
      o.data = n;
    else if (a == "--hidden")
      o.hidden = n;
    else if (a == "--layers")
      o.layers = n;
    else if (a == "--steps")
      o.steps = n;
    else if (a == "--warmup")
      o.warmup = n;
    else if (a == "--threads")
      o.threads = n;
    else
      throw llmcc::Error("bench_pinn_burgers: unknown flag '" + a + "'");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    llmcc::set_num_threads(o.threads);
    const int N = o.points, M = o.data;
    pinn::Mlp net({.H = o.hidden, .layers = o.layers});
    llmcc::ParameterStore params = llmcc::bind_parameters(net);
    llmcc::Rng rng(1337);
    for (auto& d : net.hidden) {
      const double fan = static_cast<double>(d.w.dim(0) + d.w.dim(1));
      rng.fill_normal(d.w.f32(), static_cast<std::size_t>(d.w.numel()), 0.0f, static_cast<float>(std::sqrt(2.0 / fan)));
    }
    rng.fill_normal(net.out.w.f32(), static_cast<std::size_t>(net.out.w.numel()), 0.0f,
                    static_cast<float>(std::sqrt(2.0 / (1.0 + o.hidden))));
    // One fixed batch, as the PyTorch side uses: N points in (-1, 1) x (0, 1), M where u is given.
    std::vector<float> p(2 * static_cast<std::size_t>(N)), ex(p.size(), 0.0f), et(p.size(), 0.0f), zero(N, 0.0f);
    std::vector<float> pd(2 * static_cast<std::size_t>(M)), gd(M);
    for (int i = 0; i < N; ++i) {
      p[2 * i] = static_cast<float>(2.0 * rng.uniform_f64() - 1.0);
      p[2 * i + 1] = static_cast<float>(rng.uniform_f64());
      ex[2 * i] = 1.0f;
      et[2 * i + 1] = 1.0f;
    }
    for (int i = 0; i < M; ++i) {
      const bool initial = i % 2 == 0;
      const double x = initial ? 2.0 * rng.uniform_f64() - 1.0 : (i % 4 == 1 ? -1.0 : 1.0);
      pd[2 * i] = static_cast<float>(x);
      pd[2 * i + 1] = initial ? 0.0f : static_cast<float>(rng.uniform_f64());
      gd[i] = initial ? static_cast<float>(-std::sin(std::numbers::pi * x)) : 0.0f;
    }
    const llmcc::Tensor tp(p.data(), {N, 2}), tex(ex.data(), {N, 2}), tet(et.data(), {N, 2}), tz(zero.data(), {N, 1});
    const llmcc::Tensor tpd(pd.data(), {M, 2}), tgd(gd.data(), {M, 1});
    const float nu = 0.05f, weight = 10.0f;

    auto g = llmcc::adgen::make_grad(net);
    llmcc::ParameterStore m = params.like(), v = params.like();
    m.zero();
    v.zero();
    const llmcc::AdamWConfig adam{.weight_decay = 0.0f};
    pinn_burgers::burgers_loss_Saved saved;
    llmcc::Arena arena(std::size_t{1} << 30);
    std::vector<double> ms;
    float first = 0.0f, last = 0.0f;
    for (int step = 1; step <= o.warmup + o.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      {
        llmcc::ArenaScope scope(arena);
        g.zero();
        last = pinn_burgers::burgers_loss_grad(net, tp, tex, tet, tz, tpd, tgd, nu, weight, g.grad, saved);
        llmcc::adamw_step(params, g.store, m, v, adam, 1e-3f, step);
      }
      arena.reset();
      if (step == 1) first = last;
      if (step == o.warmup && o.profile) llmcc::profile::enable(true);
      if (step > o.warmup)
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (o.profile) std::fputs(llmcc::profile::report().c_str(), stderr);
    std::sort(ms.begin(), ms.end());
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        "{\"impl\": \"llmcc\", \"points\": %d, \"data\": %d, \"hidden\": %d, \"layers\": %d, \"threads\": %d, "
        "\"steps\": %d, \"median_ms\": %.3f, \"best_ms\": %.3f, \"loss_first\": %.6g, \"loss_last\": %.6g, "
        "\"peak_rss_mib\": %.1f}\n",
        N, M, o.hidden, o.layers, o.threads, o.steps, ms[ms.size() / 2], ms.front(), static_cast<double>(first),
        static_cast<double>(last), static_cast<double>(ru.ru_maxrss) / 1024.0);
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
