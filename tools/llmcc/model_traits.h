// Each model family's wiring, written once: its types, how its weights are made and initialised,
// and its forward, adgen-generated backward, loss and sampler. The command line's Model
// (model_family.cpp: FamilyModel<Gpt2Family>) and the bench step (bench_step.h:
// TrainBenchStep<Gpt2Family>) are both built on these; what differs between them (the arena size,
// the optimizer) stays with them.
//
//   Gpt2Family::Weights w = Gpt2Family::make(config);   // shapes declared, storage zeroed
//   Gpt2Family::init(w, seed);                           // gpt2_init
//   float loss = Gpt2Family::fwd(w, x, y, saved);        // gpt2_loss_fwd, filling the Saved record
//   Gpt2Family::bwd(w, x, y, saved, 1.0f, &grad);        // gpt2_loss_bwd: adds d_loss * dL/dparams
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gpt2.grad.h"
#include "llama.grad.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "nn/gpt2_config.h"
#include "nn/gpt2_generate.h"
#include "nn/gpt2_weights.h"
#include "nn/llama_config.h"
#include "nn/llama_generate.h"
#include "nn/llama_weights.h"

namespace llmcc::cli {

struct Gpt2Family {
  using Entry = nn::gpt2_loss_Entry;  // adgen's trait, what llmcc::train::Trainer takes
  using Config = nn::Gpt2Config;
  using Weights = nn::Gpt2Weights;
  using Grad = nn::Gpt2_Grad;
  using Saved = nn::gpt2_loss_Saved;

  static Weights make(const Config& config) { return nn::make_gpt2(config); }
  static void init(Weights& w, std::uint64_t seed) { nn::gpt2_init(w.model, seed); }
  static float fwd(const Weights& w, const Tokens& x, const Tokens& y, Saved& s) {
    return nn::gpt2_loss_fwd(w.model, x, y, s);
  }
  static void bwd(const Weights& w, const Tokens& x, const Tokens& y, const Saved& s, float d_loss, Grad* g) {
    nn::gpt2_loss_bwd(w.model, x, y, s, d_loss, g);
  }
  static float loss(const Weights& w, const Tokens& x, const Tokens& y) { return nn::gpt2_loss(w.model, x, y); }
  // gpt2_sample returns the ids at the end; on_token sees each of them after the last is drawn.
  static std::vector<std::int32_t> sample(const Weights& w, const std::vector<std::int32_t>& prompt, int n,
                                          const nn::SamplingConfig& cfg, Rng& rng,
                                          const std::function<void(std::int32_t)>& on_token) {
    std::vector<std::int32_t> ids = nn::gpt2_sample(w.model, prompt, n, cfg, rng);
    if (on_token)
      for (const std::int32_t id : ids) on_token(id);
    return ids;
  }
};

struct LlamaFamily {
  using Entry = nn::llama_loss_Entry;
  using Config = nn::LlamaConfig;
  using Weights = nn::LlamaWeights;
  using Grad = nn::Llama_Grad;
  using Saved = nn::llama_loss_Saved;

  static Weights make(const Config& config) { return nn::make_llama(config); }
  static void init(Weights& w, std::uint64_t seed) { nn::llama_init(w.model, seed); }
  static float fwd(const Weights& w, const Tokens& x, const Tokens& y, Saved& s) {
    return nn::llama_loss_fwd(w.model, x, y, s);
  }
  static void bwd(const Weights& w, const Tokens& x, const Tokens& y, const Saved& s, float d_loss, Grad* g) {
    nn::llama_loss_bwd(w.model, x, y, s, d_loss, g);
  }
  static float loss(const Weights& w, const Tokens& x, const Tokens& y) { return nn::llama_loss(w.model, x, y); }
  // llama_sample calls on_token with each id as it is drawn.
  static std::vector<std::int32_t> sample(const Weights& w, const std::vector<std::int32_t>& prompt, int n,
                                          const nn::SamplingConfig& cfg, Rng& rng,
                                          const std::function<void(std::int32_t)>& on_token) {
    return nn::llama_sample(w.model, prompt, n, cfg, rng, on_token);
  }
};

}  // namespace llmcc::cli
