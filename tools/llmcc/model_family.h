// The model families the command line trains, evaluates and samples (GPT-2, Llama) behind one
// small interface, so that the trainer, eval, generate and bench are written once.
//
//   ModelConfig c = flags.config();                        // a preset's family and shape
//   std::unique_ptr<Model> m = make_model(c);              // storage zeroed; m->init(seed)
//   std::unique_ptr<Model> m = load_model(path);           // a checkpoint of either family
//   float loss = m->loss_and_grad(x, y, 1.0f);             // forward + adgen's backward
//
// Each family adds: its config (nn::*Config), its forward (src/nn/<family>.h), the adgen entry
// point's generated <family>_loss_fwd/_bwd, a struct in model_traits.h that wires them (as
// Gpt2Family, LlamaFamily), and its case in make_model and load_model (model_family.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/parameters.h"
#include "llmcc/tensor.h"
#include "llmcc/train/checkpoint.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"
#include "nn/gpt2_config.h"
#include "nn/gpt2_generate.h"
#include "nn/llama_config.h"

namespace llmcc::cli {

enum class Family { Gpt2, Llama };

// One family's configuration; the other member is unused.
struct ModelConfig {
  Family family = Family::Gpt2;
  nn::Gpt2Config gpt2;
  nn::LlamaConfig llama;

  static ModelConfig of(const nn::Gpt2Config& c);
  static ModelConfig of(const nn::LlamaConfig& c);

  const char* family_name() const;   // "gpt2" | "llama" (the checkpoint's model.family)
  const char* display_name() const;  // "GPT-2" | "Llama"
  int vocab_size() const;            // ids the model predicts and reads
  int max_seq_len() const;
  std::int64_t parameter_count() const;
  double flops_per_step(int B, int T) const;
  std::string str() const;  // the family's str(): "L12 H12 C768 ..."
  void validate() const;
  void to_kv(KeyValues& kv) const;
};

// The family named by "model.family" (absent: gpt2, as checkpoints written before Llama), then
// that family's keys. Throws llmcc::Error naming `where` and the key.
ModelConfig model_config_from_kv(const KeyValues& kv, const std::string& where);

// Where a preset name belongs; throws llmcc::Error listing every family's presets.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// What training a model takes in memory: fp32 weights, their gradients, AdamW's two moments and
// the step arena for one (B, T) micro-batch, which the trainer measures with a planning step
// (arena_bytes 0: not measured yet).
struct MemoryPlan {
  std::int64_t parameters = 0;
  std::size_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, arena_bytes = 0;
  int B = 0, T = 0;
  std::size_t total() const { return params_bytes + grads_bytes + optimizer_bytes + arena_bytes; }
};
MemoryPlan memory_plan(const ModelConfig& config, int B, int T);
// "1.50G parameters: weights 5.58 GiB + gradients 5.58 GiB + AdamW 11.2 GiB + step arena 3.1 GiB
// (B 1 x T 2048) = 25.5 GiB"; without a measured arena, "... + step arena (B 1 x T 2048, measured
// when training starts)".
std::string describe(const MemoryPlan& plan);

// A model with its parameters and, once asked for, a gradient store of the same layout.
class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual ParameterStore& params() = 0;
  // The gradient store (allocated and zeroed on the first call; accumulates across calls).
  virtual ParameterStore& grads() = 0;
  // The family's initialisation (gpt2_init, llama_init) from `seed`.
  virtual void init(std::uint64_t seed) = 0;
  // Forward and generated backward of the mean cross-entropy on (x, y), both (B, T): adds
  // d_loss * dL/dparams into grads() and returns L. Ops allocate from the current arena; the
  // adgen record is kept across calls, so a warm call allocates nothing.
  virtual float loss_and_grad(const Tokens& x, const Tokens& y, float d_loss) = 0;
  // The forward alone.
  virtual float loss(const Tokens& x, const Tokens& y) const = 0;
  // A Trainer (llmcc/train/trainer.h) for the family's adgen entry over these weights: the
  // weights are shared, the Trainer owns its gradients and record.
  virtual std::unique_ptr<train::TrainLoop> make_trainer(train::BatchSource<train::TokenPair>& train,
                                                         train::BatchSource<train::TokenPair>* val,
                                                         train::TrainerOptions options, train::TrainerHooks hooks) = 0;
  // New tokens after `prompt` (empty: starts from cfg.eot), each family with its KV cache:
  // GPT-2 (nn::gpt2_sample, which calls on_token after the last), Llama (nn::llama_sample, which
  // calls on_token with each id as it is drawn). The window slides when the context fills.
  virtual std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                           const nn::SamplingConfig& cfg, Rng& rng,
                                           const std::function<void(std::int32_t)>& on_token = {}) const = 0;
};

// A warning on stderr ("<cmd>: warning: <path> holds N non-finite weights, the first in
// <tensor>; ...") when `params` holds a NaN or an infinity; nothing otherwise. Returns N.
std::int64_t warn_nonfinite_weights(const ParameterStore& params, const std::string& path, const char* cmd);

// Parameters declared and zeroed (not initialised).
std::unique_ptr<Model> make_model(const ModelConfig& config);
// The family of the model in `path`: an llmcc checkpoint's model.family, GPT-2 for anything else
// (an llm.c file; load_gpt2 then says what is wrong with a file that is neither).
Family checkpoint_family(const std::string& path);
// The weights of an llmcc checkpoint of either family (its config's model.family decides), or of
// an llm.c GPT-2 model file.
std::unique_ptr<Model> load_model(const std::string& path);

// Throws llmcc::Error("[where] <flag>: ...") unless `path` is something load_model reads: a
// file (an llmcc checkpoint, an llm.c GPT-2 file, a .safetensors beside its config.json) or a
// Hugging Face model directory (config.json + model.safetensors).
void check_model_path(const std::string& path, const std::string& flag, const std::string& where);

}  // namespace llmcc::cli
