// What the examples share: the command line, the finite-difference check of a generated
// gradient, and the "did training lower the loss" verdict of --check.
//
//   example::Args args = example::parse_args(argc, argv, "char_mlp", 3000);
//   bool ok = example::check_gradients<char_mlp_loss_Entry>(model, batch, seed);  // --check (a)
//   ok = example::loss_fell("validation loss", before, after, 0.9) && ok;        // --check (b)
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"

namespace example {

struct Args {
  bool check = false;       // --check: gradient check and a short training, exit 0 only if both pass
  std::int64_t steps = 0;   // --steps N (default: the example's)
  std::string out_dir;      // --out DIR: checkpoints and log.jsonl (default: none)
  std::uint64_t seed = 1;   // --seed S: initialisation and data
  int threads = 1;          // --threads N
};

[[noreturn]] inline void usage(const char* name, std::int64_t default_steps, int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s [--check] [--steps N] [--out DIR] [--seed S] [--threads N]\n"
               "  --check      check the generated gradient against finite differences, train briefly\n"
               "               and check that the loss falls; exit 0 only if both pass\n"
               "  --steps N    optimizer steps (default %lld)\n"
               "  --out DIR    write checkpoints and log.jsonl to DIR\n"
               "  --seed S     seed of the initialisation and the data (default 1)\n"
               "  --threads N  threads of the kernels (default 1: the ops of models this small are short,\n"
               "               and a thread team synchronising in each can cost more than it saves)\n",
               name, static_cast<long long>(default_steps));
  std::exit(code);
}

inline Args parse_args(int argc, char** argv, const char* name, std::int64_t default_steps) {
  Args a;
  a.steps = default_steps;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", name, arg.c_str());
        usage(name, default_steps, 2);
      }
      return argv[++i];
    };
    auto number = [&](const std::string& text) {
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || v < 0) {
        std::fprintf(stderr, "%s: %s expects a non-negative integer, got '%s'\n", name, arg.c_str(), text.c_str());
        usage(name, default_steps, 2);
      }
      return v;
    };
    if (arg == "--check") {
      a.check = true;
    } else if (arg == "--steps") {
      a.steps = number(value());
      if (a.steps == 0) {
        std::fprintf(stderr, "%s: --steps must be at least 1\n", name);
        std::exit(2);
      }
    } else if (arg == "--out") {
      a.out_dir = value();
    } else if (arg == "--seed") {
      a.seed = static_cast<std::uint64_t>(number(value()));
    } else if (arg == "--threads") {
      a.threads = static_cast<int>(number(value()));
      if (a.threads == 0) {
        std::fprintf(stderr, "%s: --threads must be at least 1\n", name);
        std::exit(2);
      }
    } else if (arg == "-h" || arg == "--help") {
      usage(name, default_steps, 0);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", name, arg.c_str());
      usage(name, default_steps, 2);
    }
  }
  llmcc::set_num_threads(a.threads);
  return a;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the gradient check ----------------------------------------------------------------------
//
// For every parameter tensor, a few elements: adgen's gradient (Entry::fwd + Entry::bwd, as the
// Trainer runs them) against central differences of the forward loss (Entry::loss), taken in
// double from the float loss. The elements are drawn at random among those whose gradient is at
// least a tenth of the tensor's largest, so the comparison is relative to a gradient that
// matters (a wrong one is off by its own size; an element with a tiny gradient would only test
// round-off). A tensor whose gradient is all zero gets random elements, whose differences must
// then be zero within the noise.
//
// The differences are taken at steps h and h/2 (h = 1e-2 * max(1, |p|)). An element passes when
//   |analytic - numeric(h/2)| <= noise + rtol * max(|analytic|, |numeric(h/2)|)
// with noise = 16 * |loss| * 2^-23 / h (eight float roundings of the loss, differenced at step
// h/2) and rtol 1e-2. Float forward passes (about 1e-7 relative) differenced at h ~ 1e-2 keep
// about four digits, and the truncation error of the central difference, O(h^2), is below that
// for these smooth models; |numeric(h) - numeric(h/2)| is printed as its estimate, and the raw
// relative error |analytic - numeric| / max(|analytic|, |numeric|) as what was achieved.
struct FdResult {
  int checked = 0;
  int failed = 0;
};

template <class Entry>
FdResult check_gradients(const typename Entry::Model& model, const typename Entry::Inputs& inputs,
                         std::uint64_t seed, int per_tensor = 3, double rtol = 1e-2) {
  llmcc::Arena arena(std::size_t{256} << 20);  // address space; only what a step uses is touched
  llmcc::adgen::GradBuffer<typename Entry::Grad> grad = llmcc::adgen::make_grad(model);
  typename Entry::Saved saved;
  float loss0 = 0.0f;
  {
    llmcc::ArenaScope scope(arena);
    loss0 = Entry::fwd(model, inputs, saved);
    Entry::bwd(model, inputs, saved, 1.0f, &grad.grad);
  }
  arena.reset();
  auto loss = [&]() -> double {
    llmcc::ArenaScope scope(arena);
    const double l = Entry::loss(model, inputs);
    arena.reset();
    return l;
  };
  llmcc::Rng rng(seed);
  FdResult result;
  // The noise at step h is ulps16 / h.
  const double ulps16 = 16.0 * std::fabs(static_cast<double>(loss0)) * 0x1p-23;
  std::printf("gradient check: loss %.6f; per tensor, %d elements with |grad| >= 0.1 max |grad|; central "
              "differences fd at h and h/2 (h = 1e-2 max(1, |p|)); pass if |adgen - fd(h/2)| <= noise + %.0e "
              "max(|adgen|, |fd|), noise = 16 ulp(loss) / h <= %.1e\n",
              static_cast<double>(loss0), per_tensor, rtol, ulps16 / 1e-2);
  grad.grad.for_each_pair(model, "", [&](const std::string& name, const llmcc::Tensor& p, llmcc::Tensor& g) {
    const std::int64_t n = p.numel();
    const float* gd = g.f32();
    float* pd = p.f32();  // perturbed in place and restored
    double gmax = 0.0;
    bool finite = true;
    for (std::int64_t i = 0; i < n; ++i) {
      finite = finite && std::isfinite(gd[i]);
      gmax = std::max(gmax, std::fabs(static_cast<double>(gd[i])));
    }
    std::vector<std::int64_t> pool;  // elements with a gradient that matters
    for (std::int64_t i = 0; i < n; ++i)
      if (gmax == 0.0 || std::fabs(static_cast<double>(gd[i])) >= 0.1 * gmax) pool.push_back(i);
    double worst = 0.0, worst_raw = 0.0, worst_trunc = 0.0;
    int bad = 0;
    std::string first;
    const int count = std::min<int>(per_tensor, static_cast<int>(pool.size()));
    for (int c = 0; c < count; ++c) {
      const std::size_t pick = static_cast<std::size_t>(rng.below(pool.size()));
      const std::int64_t i = pool[pick];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
      const float p0 = pd[i];
      const double h = 1e-2 * std::max(1.0, std::fabs(static_cast<double>(p0)));
      auto diff = [&](double step) {
        // The perturbed values as float, and the step as it lands on them.
        const float up = static_cast<float>(p0 + step), down = static_cast<float>(p0 - step);
        pd[i] = up;
        const double l_up = loss();
        pd[i] = down;
        const double l_down = loss();
        pd[i] = p0;
        return (l_up - l_down) / (static_cast<double>(up) - static_cast<double>(down));
      };
      const double n1 = diff(h), n2 = diff(h / 2);
      const double a = gd[i];
      const double excess = std::fabs(a - n2) - ulps16 / h;
      const double scale = std::max(std::fabs(a), std::fabs(n2));
      const double rel = excess <= 0.0 ? 0.0 : excess / scale;
      worst = std::max(worst, rel);
      worst_raw = std::max(worst_raw, scale > 0.0 ? std::fabs(a - n2) / scale : 0.0);
      worst_trunc = std::max(worst_trunc, std::fabs(n1 - n2));
      if (!(rel <= rtol)) {
        ++bad;
        if (first.empty()) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "; first bad [%lld]: adgen %.6g, fd %.6g", static_cast<long long>(i), a, n2);
          first = buf;
        }
      }
    }
    if (!finite) {
      ++bad;
      first += "; the gradient has a non-finite element";
    }
    result.checked += 1;
    if (bad > 0) result.failed += 1;
    // A gradient below the noise everywhere (a key bias, which shifts a softmax row uniformly)
    // checks only that the differences vanish too.
    std::printf("  %-26s %-10s max|grad| %.2e, %d elements: |adgen - fd| / |fd| <= %.1e, beyond noise %.1e; "
                "|fd(h) - fd(h/2)| <= %.1e  %s%s%s\n",
                name.c_str(), p.shape().str().c_str(), gmax, count, worst_raw, worst, worst_trunc,
                bad == 0 ? "ok" : "FAIL", gmax < ulps16 / 1e-2 ? " (gradient ~0, below the noise: fd ~0 too)" : "",
                first.c_str());
  });
  std::printf("gradient check: %d of %d parameter tensors %s\n", result.checked - result.failed, result.checked,
              result.failed == 0 ? "match" : "match; the others do NOT");
  return result;
}

// --check (b): the loss after a short training must be below `factor` times the loss before.
inline bool loss_fell(const char* what, double before, double after, double factor) {
  const bool ok = std::isfinite(after) && after < factor * before;
  std::printf("training check: %s %.4f -> %.4f (%s: must fall below %.2f x the start, %.4f)\n", what, before, after,
              ok ? "ok" : "FAIL", factor, factor * before);
  return ok;
}

}  // namespace example
