// Fits the neural ODE of model.h to the Lotka-Volterra predator-prey system, which the example
// simulates itself:
//   dx/dt = alpha x - beta x y      (prey)
//   dy/dt = delta x y - gamma y     (predators)
// with alpha = beta = gamma = delta = 1: closed orbits around (1, 1), one period about 2 pi near
// it and longer further out. Each batch is B trajectories of S steps of dt from random starting
// states; the model sees only the observed states, never the equations. The validation metric
// is the error of a long rollout (three times the training horizon, beyond anything the model
// was fitted on) from held-out starting states.
//
//   neural_ode            train 2000 steps, printing progress and the rollout error
//   neural_ode --check    gradient check on a small random model, then 60 steps that must
//                         lower the validation loss; exit 0 only if both pass
//   neural_ode --out run  also write checkpoints and run/log.jsonl
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
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

using neural_ode::NeuralOde;
using Entry = neural_ode::ode_loss_Entry;
using Batch = Entry::Inputs;  // (x0 (B, D), traj (S, B, D))

constexpr int D = 2;  // (prey, predators)

// The true system, integrated in double by RK4 with `substeps` steps per dt.
std::array<double, D> lotka_volterra(std::array<double, D> s, double dt, int substeps) {
  auto rate = [](const std::array<double, D>& z) {
    return std::array<double, D>{z[0] - z[0] * z[1], z[0] * z[1] - z[1]};
  };
  const double h = dt / substeps;
  for (int i = 0; i < substeps; ++i) {
    auto at = [&](const std::array<double, D>& k, double c) {
      return std::array<double, D>{s[0] + c * k[0], s[1] + c * k[1]};
    };
    const auto k1 = rate(s), k2 = rate(at(k1, h / 2)), k3 = rate(at(k2, h / 2)), k4 = rate(at(k3, h));
    for (int d = 0; d < D; ++d) s[d] += h / 6 * (k1[d] + 2 * k2[d] + 2 * k3[d] + k4[d]);
  }
  return s;
}

// B trajectories of S steps from starting states drawn in [0.5, 2] x [0.5, 2]: x0 (B, D) and
// traj (S, B, D). The buffers are allocated once; each batch overwrites them.
class Trajectories {
 public:
  Trajectories(int B, int S, double dt)
      : B_(B), S_(S), dt_(dt), x0_(static_cast<std::size_t>(B) * D), traj_(static_cast<std::size_t>(S) * B * D) {}
  void make(Batch& batch, llmcc::Rng& rng) {
    for (int b = 0; b < B_; ++b) {
      std::array<double, D> s{0.5 + 1.5 * rng.uniform_f64(), 0.5 + 1.5 * rng.uniform_f64()};
      for (int d = 0; d < D; ++d) x0_[static_cast<std::size_t>(b) * D + d] = static_cast<float>(s[d]);
      for (int k = 0; k < S_; ++k) {
        s = lotka_volterra(s, dt_, 10);
        for (int d = 0; d < D; ++d) traj_[(static_cast<std::size_t>(k) * B_ + b) * D + d] = static_cast<float>(s[d]);
      }
    }
    batch = Batch(llmcc::Tensor(x0_.data(), {B_, D}), llmcc::Tensor(traj_.data(), {S_, B_, D}));
  }
  int steps() const { return S_; }

 private:
  int B_, S_;
  double dt_;
  std::vector<float> x0_;    // (B, D)
  std::vector<float> traj_;  // (S, B, D)
};

// f's tanh layers N(0, 1 / fan_in) (variance-preserving); the output layer small, so the first
// model barely moves and the fit starts from "nothing changes"; biases zero.
void init(NeuralOde& m, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  auto normal = [&](llmcc::Tensor& t, float std) {
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), 0.0f, std);
  };
  normal(m.f.fc1.w, 1.0f / std::sqrt(static_cast<float>(m.cfg.D)));
  normal(m.f.fc2.w, 1.0f / std::sqrt(static_cast<float>(m.cfg.H)));
  normal(m.f.out.w, 0.1f / std::sqrt(static_cast<float>(m.cfg.H)));
}

// Root mean squared error of the model's rollout over a batch of (long) trajectories, over every
// step and state component.
double rollout_rmse(const NeuralOde& m, const Batch& batch) {
  llmcc::Arena arena(std::size_t{64} << 20);
  llmcc::ArenaScope scope(arena);
  const llmcc::Tensor& traj = std::get<1>(batch);  // (S, B, D)
  llmcc::Tensor x = std::get<0>(batch);            // (B, D)
  const std::int64_t n = x.numel();
  double sum = 0.0;
  for (std::int64_t k = 0; k < traj.dim(0); ++k) {
    x = m.rk4_step(x);
    for (std::int64_t i = 0; i < n; ++i) {
      const double e = static_cast<double>(x.f32()[i]) - traj.f32()[k * n + i];
      sum += e * e;
    }
  }
  return std::sqrt(sum / static_cast<double>(n * traj.dim(0)));
}

// (a) of --check: the generated gradient of a small random model on a random "trajectory".
bool check_gradient(std::uint64_t seed) {
  const neural_ode::Config cfg{.D = D, .H = 5, .dt = 0.1f};
  const int B = 3, S = 4;
  NeuralOde m(cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(m);
  llmcc::Rng rng(seed);
  rng.fill_normal(params.data(), params.size(), 0.0f, 0.5f);
  std::vector<float> x0(B * D), traj(S * B * D);
  rng.fill_normal(x0.data(), x0.size());
  rng.fill_normal(traj.data(), traj.size());
  std::printf("gradient check on a random model: D %d, H %d, dt %.2f, %d RK4 steps, batch %d\n", cfg.D, cfg.H,
              static_cast<double>(cfg.dt), S, B);
  const Batch batch(llmcc::Tensor(x0.data(), {B, D}), llmcc::Tensor(traj.data(), {S, B, D}));
  return llmcc::check_gradients<Entry>(m, batch, {.seed = seed + 1}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args = example::parse_args(argc, argv, "neural_ode", 2000);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (args.check) ok = check_gradient(args.seed);

    const neural_ode::Config cfg{.D = D, .H = 64, .dt = 0.1f};
    const int B = 32, S = 20;
    NeuralOde model(cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(model);
    init(model, args.seed);
    std::printf(
        "system: Lotka-Volterra (alpha = beta = gamma = delta = 1), dt %.2f, %d steps per trajectory, "
        "batch %d\n",
        static_cast<double>(cfg.dt), S, B);
    std::printf("model: dx/dt = f(x), f a %d-%d-%d-%d tanh MLP, RK4 in the forward; %lld parameters\n", D, cfg.H, cfg.H,
                D, static_cast<long long>(params.parameter_count()));

    Trajectories train_traj(B, S, cfg.dt), val_traj(B, S, cfg.dt), long_traj(64, 3 * S, cfg.dt);
    llmcc::GeneratedBatches<Batch> train(args.seed + 100, [&](Batch& b, llmcc::Rng& r) { train_traj.make(b, r); }, B);
    llmcc::GeneratedBatches<Batch> val(args.seed + 200, [&](Batch& b, llmcc::Rng& r) { val_traj.make(b, r); }, B);
    Batch long_batch;  // held-out starting states, 3x the training horizon
    llmcc::Rng long_rng(args.seed + 300);
    long_traj.make(long_batch, long_rng);

    llmcc::TrainerOptions o;
    o.steps = args.check ? 60 : args.steps;
    o.schedule = {.max_lr = 3e-3, .min_lr = 3e-4, .warmup_steps = std::min<std::int64_t>(50, o.steps / 10)};
    o.val_every = args.check ? 0 : 250;
    o.val_batches = 8;
    o.out_dir = args.out_dir;
    o.name = "neural_ode";
    o.rate_unit = "traj";
    o.rate_field = "trajectories_per_s";
    o.quiet = args.check;
    o.config = {{"D", std::to_string(cfg.D)}, {"H", std::to_string(cfg.H)}, {"dt", std::to_string(cfg.dt)},
                {"S", std::to_string(S)},     {"B", std::to_string(B)},     {"seed", std::to_string(args.seed)}};
    llmcc::TrainerHooks hooks;
    hooks.metrics = [&](std::int64_t) {
      return std::vector<std::pair<std::string, double>>{{"rollout_rmse", rollout_rmse(model, long_batch)}};
    };
    llmcc::Trainer<Entry> trainer(model, params, train, &val, o, hooks);
    const double before = trainer.evaluate(o.val_batches);
    const double rmse_before = rollout_rmse(model, long_batch);
    const llmcc::TrainResult r = trainer.run();
    const double rmse_after = rollout_rmse(model, long_batch);
    if (args.check) {
      ok = example::loss_fell("validation loss", before, r.val_loss, 0.5) && ok;
      std::printf("rollout RMSE over %d steps: %.4f -> %.4f\n", long_traj.steps(), rmse_before, rmse_after);
      std::printf("check: %s (%.1f s)\n", ok ? "passed" : "FAILED", example::seconds_since(t0));
      return ok ? 0 : 1;
    }
    std::printf("validation loss %.3e -> %.3e; rollout RMSE over %d steps (t = %.1f) %.4f -> %.4f\n", before,
                r.val_loss, long_traj.steps(), long_traj.steps() * static_cast<double>(cfg.dt), rmse_before,
                rmse_after);
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "neural_ode: %s\n", e.what());
    return 1;
  }
}
