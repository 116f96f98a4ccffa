// Trains the PINN of model.h on the 2D Poisson problem with the exact solution
//   u*(x, y) = sin(pi x) sin(pi y),   f = 2 pi^2 sin(pi x) sin(pi y),   g = 0,
// and reports the relative L2 error of u against u* on a 101 x 101 grid of the square.
// Every step draws fresh collocation points: N in the interior, M on the edges.
//
//   pinn_poisson            train (default 6000 steps), printing progress and the error
//   pinn_poisson --check    gradient check on a small random network, then 150 steps that must
//                           lower the validation loss; exit 0 only if both pass
//   pinn_poisson --out run  also write checkpoints and run/log.jsonl
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
using Entry = pinn_poisson::poisson_loss_Entry;
using Batch = Entry::Inputs;  // (p, minus_f, ex, ey, pb, g, bc_weight)

constexpr double kPi = std::numbers::pi;
constexpr float kBcWeight = 100.0f;  // the boundary term against the residual's (f is up to 2 pi^2)

double exact(double x, double y) { return std::sin(kPi * x) * std::sin(kPi * y); }

// N interior points and M boundary points per batch; the buffers are allocated once and each
// batch overwrites them.
class Collocation {
 public:
  Collocation(int N, int M) : N_(N), M_(M), p_(2 * N), minus_f_(N), ex_(2 * N), ey_(2 * N), pb_(2 * M), g_(M, 0.0f) {
    for (int i = 0; i < N; ++i) {
      ex_[2 * i] = 1.0f;
      ey_[2 * i + 1] = 1.0f;
    }
  }
  void make(Batch& batch, llmcc::Rng& rng) {
    for (int i = 0; i < N_; ++i) {
      const double x = rng.uniform_f64(), y = rng.uniform_f64();
      p_[2 * i] = static_cast<float>(x);
      p_[2 * i + 1] = static_cast<float>(y);
      minus_f_[i] = static_cast<float>(-2.0 * kPi * kPi * exact(x, y));
    }
    for (int i = 0; i < M_; ++i) {  // a quarter of the points on each edge
      const float t = static_cast<float>(rng.uniform_f64());
      const int side = i % 4;
      pb_[2 * i] = side == 0 ? 0.0f : side == 1 ? 1.0f : t;
      pb_[2 * i + 1] = side == 2 ? 0.0f : side == 3 ? 1.0f : t;
    }
    batch = Batch(llmcc::Tensor(p_.data(), {N_, 2}), llmcc::Tensor(minus_f_.data(), {N_, 1}),
                  llmcc::Tensor(ex_.data(), {N_, 2}), llmcc::Tensor(ey_.data(), {N_, 2}),
                  llmcc::Tensor(pb_.data(), {M_, 2}), llmcc::Tensor(g_.data(), {M_, 1}), kBcWeight);
  }

 private:
  int N_, M_;
  std::vector<float> p_, minus_f_, ex_, ey_, pb_, g_;  // (N, 2), (N, 1), (N, 2), (N, 2), (M, 2), (M, 1)
};

// ||u - u*|| / ||u*|| over a G x G grid of the closed square.
double relative_l2(const Mlp& m, int G = 101) {
  llmcc::Arena arena(std::size_t{64} << 20);
  llmcc::ArenaScope scope(arena);
  std::vector<float> pts(2 * static_cast<std::size_t>(G) * G);
  for (int i = 0; i < G; ++i)
    for (int j = 0; j < G; ++j) {
      pts[2 * (static_cast<std::size_t>(i) * G + j)] = static_cast<float>(i) / (G - 1);
      pts[2 * (static_cast<std::size_t>(i) * G + j) + 1] = static_cast<float>(j) / (G - 1);
    }
  const llmcc::Tensor u = pinn::u(m, llmcc::Tensor(pts.data(), {G * G, 2}));  // (G*G, 1)
  double err = 0.0, norm = 0.0;
  for (int k = 0; k < G * G; ++k) {
    const double ref = exact(pts[2 * static_cast<std::size_t>(k)], pts[2 * static_cast<std::size_t>(k) + 1]);
    err += (u.f32()[k] - ref) * (u.f32()[k] - ref);
    norm += ref * ref;
  }
  return std::sqrt(err / norm);
}

// (a) of --check: the generated gradient (through the second derivatives) of a small random
// network at random points.
bool check_gradient(std::uint64_t seed) {
  const pinn::Config cfg{.H = 5, .layers = 2};
  Mlp m(cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(m);
  llmcc::Rng rng(seed);
  rng.fill_normal(params.data(), params.size(), 0.0f, 0.5f);
  std::printf("gradient check on a random network: %d tanh layers of %d, 6 interior and 4 boundary points\n",
              cfg.layers, cfg.H);
  Collocation points(6, 4);
  Batch batch;
  points.make(batch, rng);
  return llmcc::check_gradients<Entry>(m, batch, {.seed = seed + 1}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args = example::parse_args(argc, argv, "pinn_poisson", 6000);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (args.check) ok = check_gradient(args.seed);

    const pinn::Config cfg{.H = 32, .layers = 3};
    const int N = 1024, M = 256;
    Mlp model(cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(model);
    pinn::glorot_init(model, args.seed);
    std::printf("problem: -(u_xx + u_yy) = 2 pi^2 sin(pi x) sin(pi y) in (0, 1)^2, u = 0 on the edges\n");
    std::string shape = "2";
    for (int i = 0; i < cfg.layers; ++i) shape += "-" + std::to_string(cfg.H);
    std::printf("model: u a %s-1 tanh MLP, %lld parameters; %d interior and %d boundary points per step\n",
                shape.c_str(), static_cast<long long>(params.parameter_count()), N, M);

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
    o.name = "pinn_poisson";
    o.rate_unit = "pt";
    o.rate_field = "points_per_s";
    o.quiet = args.check;
    o.config = {{"H", std::to_string(cfg.H)},
                {"layers", std::to_string(cfg.layers)},
                {"N", std::to_string(N)},
                {"M", std::to_string(M)},
                {"seed", std::to_string(args.seed)}};
    llmcc::TrainerHooks hooks;
    hooks.metrics = [&](std::int64_t) {
      return std::vector<std::pair<std::string, double>>{{"relative_l2", relative_l2(model)}};
    };
    llmcc::Trainer<Entry> trainer(model, params, train, &val, o, hooks);
    const double before = trainer.evaluate(o.val_batches);
    const double err_before = relative_l2(model);
    const llmcc::TrainResult r = trainer.run();
    const double err_after = relative_l2(model);
    if (args.check) {
      ok = example::loss_fell("validation loss", before, r.val_loss, 0.5) && ok;
      std::printf("relative L2 error: %.4f -> %.4f\n", err_before, err_after);
      std::printf("check: %s (%.1f s)\n", ok ? "passed" : "FAILED", example::seconds_since(t0));
      return ok ? 0 : 1;
    }
    std::printf(
        "validation loss %.3e -> %.3e; relative L2 error against the exact solution %.2e -> %.2e after %lld "
        "steps (%.0f s)\n",
        before, r.val_loss, err_before, err_after, static_cast<long long>(o.steps), example::seconds_since(t0));
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "pinn_poisson: %s\n", e.what());
    return 1;
  }
}
