// Trains the PINN of model.h on the viscous Burgers problem
//   u_t + u u_x = nu u_xx,   u(x, 0) = -sin(pi x),   u(-1, t) = u(1, t) = 0,
// and reports the relative L2 error of u against the reference solution on a 201 x 101 grid of
// (x, t) in [-1, 1] x [0, 1]. The reference comes from the Cole-Hopf transform, which turns the
// equation into the heat equation and gives
//   u(x, t) = - int sin(pi (x - e)) F(x - e) exp(-e^2 / (4 nu t)) de / int F(x - e) exp(-e^2 / (4 nu t)) de
// with F(y) = exp(-cos(pi y) / (2 pi nu)); the integrals are taken in double by the trapezoid rule
// on e = sqrt(4 nu t) z, z in [-8, 8] (the rule converges spectrally on this smooth, decaying
// integrand). Every step draws fresh points: N in the domain, M on the initial line and the edges.
//
//   pinn_burgers            train (default 8000 steps), printing progress and the error
//   pinn_burgers --check    gradient check on a small random network, then 150 steps that must
//                           lower the validation loss; exit 0 only if both pass
//   pinn_burgers --out run  also write checkpoints and run/log.jsonl
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "example.h"
#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/train/grad_check.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"
#include "model.grad.h"

namespace {

using pinn::Mlp;
using Entry = pinn_burgers::burgers_loss_Entry;
using Batch = Entry::Inputs;  // (p, ex, et, zero, pd, gd, nu, data_weight)

constexpr double kPi = std::numbers::pi;
// The viscosity: the front at x = 0 steepens to a width of about nu / 2 (the classic benchmark's
// 0.01 / pi makes it a near-shock that Adam alone resolves slowly).
constexpr float kNu = 0.05f;
constexpr float kDataWeight = 10.0f;

// The Cole-Hopf solution (see the top of the file).
double reference(double x, double t, double nu) {
  if (t <= 0.0) return -std::sin(kPi * x);
  const double s = std::sqrt(4.0 * nu * t);
  constexpr int K = 1601;
  constexpr double L = 8.0;
  std::vector<double> a(K), y(K);
  double top = -1e300;
  for (int k = 0; k < K; ++k) {
    const double z = -L + 2.0 * L * k / (K - 1);
    y[k] = x - s * z;
    a[k] = -std::cos(kPi * y[k]) / (2.0 * kPi * nu) - z * z;
    top = std::max(top, a[k]);
  }
  double num = 0.0, den = 0.0;
  for (int k = 0; k < K; ++k) {
    const double w = std::exp(a[k] - top) * (k == 0 || k == K - 1 ? 0.5 : 1.0);
    num += std::sin(kPi * y[k]) * w;
    den += w;
  }
  return -num / den;
}

// N collocation points and M points where u is given (half on t = 0, a quarter on each edge)
// per batch; the buffers are allocated once and each batch overwrites them.
class Collocation {
 public:
  Collocation(int N, int M) : N_(N), M_(M), p_(2 * N), ex_(2 * N), et_(2 * N), zero_(N, 0.0f), pd_(2 * M), gd_(M) {
    for (int i = 0; i < N; ++i) {
      ex_[2 * i] = 1.0f;
      et_[2 * i + 1] = 1.0f;
    }
  }
  void make(Batch& batch, llmcc::Rng& rng) {
    for (int i = 0; i < N_; ++i) {
      p_[2 * i] = static_cast<float>(2.0 * rng.uniform_f64() - 1.0);
      p_[2 * i + 1] = static_cast<float>(rng.uniform_f64());
    }
    for (int i = 0; i < M_; ++i) {
      const double r = rng.uniform_f64();
      const bool initial = i % 2 == 0;
      const double x = initial ? 2.0 * r - 1.0 : (i % 4 == 1 ? -1.0 : 1.0);
      pd_[2 * i] = static_cast<float>(x);
      pd_[2 * i + 1] = initial ? 0.0f : static_cast<float>(r);
      gd_[i] = initial ? static_cast<float>(-std::sin(kPi * x)) : 0.0f;
    }
    batch = Batch(llmcc::Tensor(p_.data(), {N_, 2}), llmcc::Tensor(ex_.data(), {N_, 2}),
                  llmcc::Tensor(et_.data(), {N_, 2}), llmcc::Tensor(zero_.data(), {N_, 1}),
                  llmcc::Tensor(pd_.data(), {M_, 2}), llmcc::Tensor(gd_.data(), {M_, 1}), kNu, kDataWeight);
  }

 private:
  int N_, M_;
  std::vector<float> p_, ex_, et_, zero_, pd_, gd_;  // (N, 2), (N, 2), (N, 2), (N, 1), (M, 2), (M, 1)
};

// The evaluation grid (x, t) and the reference there, computed once.
struct Grid {
  std::vector<float> pts;  // (X * T, 2)
  std::vector<double> ref;
  explicit Grid(int X = 201, int T = 101) {
    for (int j = 0; j < T; ++j)
      for (int i = 0; i < X; ++i) {
        const double x = -1.0 + 2.0 * i / (X - 1), t = static_cast<double>(j) / (T - 1);
        pts.push_back(static_cast<float>(x));
        pts.push_back(static_cast<float>(t));
        ref.push_back(reference(x, t, kNu));
      }
  }
  // ||u - u_ref|| / ||u_ref|| over the grid.
  double relative_l2(const Mlp& m) const {
    llmcc::Arena arena(std::size_t{64} << 20);
    llmcc::ArenaScope scope(arena);
    const auto n = static_cast<std::int64_t>(ref.size());
    const llmcc::Tensor u = pinn::u(m, llmcc::Tensor(const_cast<float*>(pts.data()), {n, 2}));  // (n, 1)
    double err = 0.0, norm = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
      err += (u.f32()[k] - ref[static_cast<std::size_t>(k)]) * (u.f32()[k] - ref[static_cast<std::size_t>(k)]);
      norm += ref[static_cast<std::size_t>(k)] * ref[static_cast<std::size_t>(k)];
    }
    return std::sqrt(err / norm);
  }
};

// (a) of --check: the generated gradient (through u_t, u_x and u_xx) of a small random network.
bool check_gradient(std::uint64_t seed) {
  const pinn::Config cfg{.H = 5, .layers = 2};
  Mlp m(cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(m);
  llmcc::Rng rng(seed);
  rng.fill_normal(params.data(), params.size(), 0.0f, 0.5f);
  std::printf("gradient check on a random network: %d tanh layers of %d, 6 collocation and 4 data points\n", cfg.layers,
              cfg.H);
  Collocation points(6, 4);
  Batch batch;
  points.make(batch, rng);
  return llmcc::check_gradients<Entry>(m, batch, {.seed = seed + 1}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args = example::parse_args(argc, argv, "pinn_burgers", 8000);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (args.check) ok = check_gradient(args.seed);

    const pinn::Config cfg{.H = 64, .layers = 3};
    const int N = 2048, M = 512;
    Mlp model(cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(model);
    pinn::glorot_init(model, args.seed);
    std::printf("problem: u_t + u u_x = %.3g u_xx on (-1, 1) x (0, 1], u(x, 0) = -sin(pi x), u(+-1, t) = 0\n",
                static_cast<double>(kNu));
    std::string shape = "2";
    for (int i = 0; i < cfg.layers; ++i) shape += "-" + std::to_string(cfg.H);
    std::printf("model: u a %s-1 tanh MLP, %lld parameters; %d collocation and %d data points per step\n",
                shape.c_str(), static_cast<long long>(params.parameter_count()), N, M);
    const Grid grid = args.check ? Grid(21, 11) : Grid();

    Collocation train_points(N, M), val_points(N, M);
    llmcc::GeneratedBatches<Batch> train(args.seed + 100, [&](Batch& b, llmcc::Rng& r) { train_points.make(b, r); }, N);
    llmcc::GeneratedBatches<Batch> val(args.seed + 200, [&](Batch& b, llmcc::Rng& r) { val_points.make(b, r); }, N);

    llmcc::TrainerOptions o;
    o.steps = args.check ? 150 : args.steps;
    o.schedule = {.max_lr = 2e-3, .min_lr = 2e-5, .warmup_steps = std::min<std::int64_t>(100, o.steps / 10)};
    o.adamw.weight_decay = 0.0f;
    o.grad_clip = 0.0;
    o.val_every = args.check ? 0 : 500;
    o.val_batches = 4;
    o.out_dir = args.out_dir;
    o.name = "pinn_burgers";
    o.rate_unit = "pt";
    o.rate_field = "points_per_s";
    o.quiet = args.check;
    o.config = {{"H", std::to_string(cfg.H)}, {"layers", std::to_string(cfg.layers)},
                {"N", std::to_string(N)},     {"M", std::to_string(M)},
                {"nu", std::to_string(kNu)},  {"seed", std::to_string(args.seed)}};
    llmcc::TrainerHooks hooks;
    hooks.metrics = [&](std::int64_t) {
      return std::vector<std::pair<std::string, double>>{{"relative_l2", grid.relative_l2(model)}};
    };
    llmcc::Trainer<Entry> trainer(model, params, train, &val, o, hooks);
    const double before = trainer.evaluate(o.val_batches);
    const double err_before = grid.relative_l2(model);
    const llmcc::TrainResult r = trainer.run();
    const double err_after = grid.relative_l2(model);
    if (args.check) {
      ok = example::loss_fell("validation loss", before, r.val_loss, 0.5) && ok;
      std::printf("relative L2 error: %.4f -> %.4f\n", err_before, err_after);
      std::printf("check: %s (%.1f s)\n", ok ? "passed" : "FAILED", example::seconds_since(t0));
      return ok ? 0 : 1;
    }
    std::printf(
        "validation loss %.3e -> %.3e; relative L2 error against the Cole-Hopf solution %.2e -> %.2e after "
        "%lld steps (%.0f s)\n",
        before, r.val_loss, err_before, err_after, static_cast<long long>(o.steps), example::seconds_since(t0));
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "pinn_burgers: %s\n", e.what());
    return 1;
  }
}
