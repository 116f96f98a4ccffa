// Trains the encoder of model.h on a task it makes itself, where the order of the tokens decides
// the label: every sequence holds exactly one A and one B among filler tokens, and the label is
// whether the A comes before the B. Both classes hold the same tokens (one A, one B, fillers
// drawn alike), so a bag-of-tokens model, which sees which tokens occur but not where, scores
// 50%; the encoder has to relate the positions of two tokens, which its attention can.
//
//   encoder_classifier           train 600 steps, printing progress and validation accuracy
//   encoder_classifier --check   gradient check on a small random encoder, then 150 steps that
//                                must lower the validation loss; exit 0 only if both pass
//   encoder_classifier --out run also write checkpoints and run/log.jsonl
#include <algorithm>
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

using encoder::Encoder;
using Entry = encoder::encoder_loss_Entry;
using Batch = Entry::Inputs;  // (idx (B, T), label (B, 1))

constexpr std::int32_t kA = 0, kB = 1;  // the two marked tokens; ids 2..V-1 are fillers

// Sequences of the order task: one A and one B at distinct random positions, fillers elsewhere;
// label 1 when the A is first. The buffers are allocated once; each batch overwrites them.
class OrderTask {
 public:
  OrderTask(int B, int T, int V) : B_(B), T_(T), V_(V), idx_(static_cast<std::size_t>(B) * T), label_(B) {}
  void make(Batch& batch, llmcc::Rng& rng) {
    for (int b = 0; b < B_; ++b) {
      std::int32_t* row = idx_.data() + static_cast<std::size_t>(b) * T_;
      for (int t = 0; t < T_; ++t) row[t] = 2 + static_cast<std::int32_t>(rng.below(V_ - 2));
      const int a = static_cast<int>(rng.below(T_));
      int c = static_cast<int>(rng.below(T_ - 1));
      if (c >= a) ++c;  // distinct from a
      row[a] = kA;
      row[c] = kB;
      label_[b] = a < c ? 1 : 0;
    }
    batch = Batch(llmcc::Tokens(idx_.data(), B_, T_), llmcc::Tokens(label_.data(), B_, 1));
  }

 private:
  int B_, T_, V_;
  std::vector<std::int32_t> idx_;    // (B, T)
  std::vector<std::int32_t> label_;  // (B, 1)
};

// GPT-2's initialisation: weights and embeddings N(0, 0.02), the residual projections
// N(0, 0.02 / sqrt(2 L)), biases zero, layernorm gains one.
void init(Encoder& m, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  const float resid = 0.02f / std::sqrt(2.0f * static_cast<float>(m.cfg.L));
  llmcc::for_each_parameter(m, [&](const std::string& name, llmcc::Tensor& t) {
    const bool bias = name.ends_with(".bias"), gain = name.find("ln_") != std::string::npos;
    const bool residual = name.ends_with("attn.proj.weight") || name.ends_with("mlp.proj.weight");
    if (gain && !bias)
      std::fill(t.f32(), t.f32() + t.numel(), 1.0f);
    else if (!bias)
      rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), 0.0f, residual ? resid : 0.02f);
  });
}

// Fraction of `batches` batches of `source` (reset first) whose argmax class is the label.
double accuracy(const Encoder& m, llmcc::GeneratedBatches<Batch>& source, int batches) {
  llmcc::Arena arena(std::size_t{64} << 20);
  source.reset();
  std::int64_t right = 0, total = 0;
  for (int i = 0; i < batches; ++i) {
    const Batch& batch = source.next();
    llmcc::ArenaScope scope(arena);
    const llmcc::Tokens& label = std::get<1>(batch);
    const llmcc::Tensor logits = m.forward(std::get<0>(batch));  // (B, classes)
    const int K = m.cfg.classes;
    for (int b = 0; b < label.B(); ++b) {
      const float* z = logits.f32() + static_cast<std::int64_t>(b) * K;
      right += (std::max_element(z, z + K) - z) == label(b, 0);
      ++total;
    }
    arena.reset();
  }
  source.reset();
  return static_cast<double>(right) / static_cast<double>(total);
}

// (a) of --check: the generated gradient of a small random encoder on random sequences.
bool check_gradient(std::uint64_t seed) {
  const encoder::Config cfg{.V = 7, .T = 5, .C = 8, .n_head = 2, .L = 2, .classes = 3};
  const int B = 3;
  Encoder m(cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(m);
  llmcc::Rng rng(seed);
  rng.fill_normal(params.data(), params.size(), 0.0f, 0.5f);  // gains and biases too: all random
  std::vector<std::int32_t> idx(B * cfg.T), label(B);
  for (auto& t : idx) t = static_cast<std::int32_t>(rng.below(cfg.V));
  for (auto& t : label) t = static_cast<std::int32_t>(rng.below(cfg.classes));
  std::printf("gradient check on a random encoder: V %d, T %d, C %d, %d heads, %d blocks, %d classes, batch %d\n",
              cfg.V, cfg.T, cfg.C, cfg.n_head, cfg.L, cfg.classes, B);
  const Batch batch(llmcc::Tokens(idx.data(), B, cfg.T), llmcc::Tokens(label.data(), B, 1));
  return llmcc::check_gradients<Entry>(m, batch, {.seed = seed + 1}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args = example::parse_args(argc, argv, "encoder_classifier", 600);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (args.check) ok = check_gradient(args.seed);

    const encoder::Config cfg{.V = 8, .T = 16, .C = 64, .n_head = 4, .L = 2, .classes = 2};
    const int B = 64;
    Encoder model(cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(model);
    init(model, args.seed);
    std::printf(
        "task: is the A before the B? sequences of %d tokens over %d (one A, one B, %d fillers); a "
        "bag of tokens scores 50%%\n",
        cfg.T, cfg.V, cfg.V - 2);
    std::printf(
        "model: %d blocks, %d channels, %d heads, bidirectional attention, mean pooling; %lld "
        "parameters; batch %d\n",
        cfg.L, cfg.C, cfg.n_head, static_cast<long long>(params.parameter_count()), B);

    OrderTask train_task(B, cfg.T, cfg.V), val_task(B, cfg.T, cfg.V);
    llmcc::GeneratedBatches<Batch> train(args.seed + 100, [&](Batch& b, llmcc::Rng& r) { train_task.make(b, r); }, B);
    llmcc::GeneratedBatches<Batch> val(args.seed + 200, [&](Batch& b, llmcc::Rng& r) { val_task.make(b, r); }, B);
    const int val_batches = 16;  // 1024 sequences, the same ones at every validation

    llmcc::TrainerOptions o;
    o.steps = args.check ? 150 : args.steps;
    o.schedule = {.max_lr = 2e-3, .min_lr = 2e-4, .warmup_steps = std::min<std::int64_t>(100, o.steps / 10)};
    o.val_every = args.check ? 0 : 250;
    o.val_batches = val_batches;
    o.out_dir = args.out_dir;
    o.name = "encoder_classifier";
    o.rate_unit = "seq";
    o.rate_field = "sequences_per_s";
    o.quiet = args.check;
    o.config = {{"V", std::to_string(cfg.V)}, {"T", std::to_string(cfg.T)},
                {"C", std::to_string(cfg.C)}, {"n_head", std::to_string(cfg.n_head)},
                {"L", std::to_string(cfg.L)}, {"classes", std::to_string(cfg.classes)},
                {"B", std::to_string(B)},     {"seed", std::to_string(args.seed)}};
    llmcc::TrainerHooks hooks;
    hooks.metrics = [&](std::int64_t) {
      return std::vector<std::pair<std::string, double>>{{"val_accuracy", accuracy(model, val, val_batches)}};
    };
    llmcc::Trainer<Entry> trainer(model, params, train, &val, o, hooks);
    const double before = trainer.evaluate(val_batches);
    const double acc_before = accuracy(model, val, val_batches);
    const llmcc::TrainResult r = trainer.run();
    const double acc_after = accuracy(model, val, val_batches);
    if (args.check) {
      ok = example::loss_fell("validation loss", before, r.val_loss, 0.9) && ok;
      std::printf("validation accuracy %.1f%% -> %.1f%%\n", 100 * acc_before, 100 * acc_after);
      std::printf("check: %s (%.1f s)\n", ok ? "passed" : "FAILED", example::seconds_since(t0));
      return ok ? 0 : 1;
    }
    std::printf("validation loss %.4f -> %.4f, accuracy %.1f%% -> %.1f%% in %lld steps (a bag of tokens: 50%%)\n",
                before, r.val_loss, 100 * acc_before, 100 * acc_after, static_cast<long long>(r.step));
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "encoder_classifier: %s\n", e.what());
    return 1;
  }
}
