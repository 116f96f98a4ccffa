// What every model family offers behind one face, so that the command line, benchmarks and
// tests are written once for all of them (models/registry.h lists the families).
//
//   const Family& f = model_family("llama");          // registry.h
//   ModelConfig c = f.preset("llama-tiny");            // a family's config, type-erased
//   c.set("n_layer", 2);                               // a config key (the CLI's --n-layer)
//   std::unique_ptr<Model> m = f.make(c);              // storage zeroed; m->init(seed)
//   float loss = m->loss(x, y);                        // the forward's mean cross-entropy
//   auto trainer = m->make_trainer(train, val, opts, hooks);   // adgen's backward, AdamW, ...
//   auto gen = m->generator(ContextFull::Stop);        // the KV-cache decoder (generate.h)
//
// A family implements FamilyConfig for its config struct and Family; FamilyModel<Traits>
// (family_model.h) turns its forward, generated backward and decoder into a Model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "llmcc/parameters.h"
#include "llmcc/tensor.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"
#include "models/bench_step.h"
#include "models/generate.h"
#include "models/gguf_export.h"
#include "models/lora.h"
#include "models/lora_peft.h"

namespace llmcc::models {

class Family;
class Model;

// A value of a family's config that users set by name: the command line's flag (--n-layer for
// "n_layer"), a preset's field. Families share a key when it means the same thing.
struct ConfigKey {
  const char* name;  // "n_layer"
  const char* help;  // one line for --help, without the family's name
  bool is_float = false;
};

// One family's config struct (Gpt2Config, LlamaConfig) behind ModelConfig.
class FamilyConfig {
 public:
  virtual ~FamilyConfig() = default;
  virtual const Family& family() const = 0;
  virtual std::unique_ptr<FamilyConfig> clone() const = 0;
  virtual int vocab_size() const = 0;  // ids the model predicts and reads
  virtual int max_seq_len() const = 0;
  virtual std::int64_t parameter_count() const = 0;
  virtual double flops_per_step(int B, int T) const = 0;  // forward + backward over B x T tokens
  virtual double matmul_weights() const = 0;              // weights in matrix products, per token
  virtual std::string str() const = 0;                    // "L12 H12 C768 ..."
  virtual void validate() const = 0;                      // throws llmcc::Error naming the field
  virtual void to_kv(KeyValues& kv) const = 0;            // model.family and its model.* keys
  // The value of one of family().config_keys(); nullopt for a key the family does not have.
  virtual std::optional<double> get(std::string_view key) const = 0;
  // Sets one of family().config_keys() (an integer key gets an integral value; the caller
  // checks), with what follows from it (GPT-2's vocab_size also sets its padded vocabulary).
  virtual void set(std::string_view key, double value) = 0;
};

// A model's configuration, whatever its family: a value (copies share the config until one is
// changed with set()).
class ModelConfig {
 public:
  ModelConfig() = default;  // empty: family() must not be called
  explicit ModelConfig(std::unique_ptr<FamilyConfig> c) : c_(std::move(c)) {}

  bool empty() const { return c_ == nullptr; }
  const Family& family() const { return c_->family(); }
  const char* family_name() const;   // "gpt2", the checkpoint's model.family
  const char* display_name() const;  // "GPT-2"
  int vocab_size() const { return c_->vocab_size(); }
  int max_seq_len() const { return c_->max_seq_len(); }
  std::int64_t parameter_count() const { return c_->parameter_count(); }
  double flops_per_step(int B, int T) const { return c_->flops_per_step(B, T); }
  double matmul_weights() const { return c_->matmul_weights(); }
  std::string str() const { return c_->str(); }
  void validate() const { c_->validate(); }
  void to_kv(KeyValues& kv) const { c_->to_kv(kv); }
  std::optional<double> get(std::string_view key) const { return c_->get(key); }
  // Throws llmcc::Error for a key the family does not have.
  void set(std::string_view key, double value);

  // The family's own struct: as<Gpt2Config>() where the family is known.
  template <class C>
  const C& as() const;

 private:
  std::shared_ptr<FamilyConfig> c_;
};

// A format a family's weights are written in besides llmcc's checkpoint (which every family
// has): "safetensors" (a Hugging Face directory), GPT-2's "llmc" and "llmc-bf16".
struct ExportFormat {
  const char* name;
  const char* help;
};

// A model with its parameters: its family's weights (model struct + ParameterStore), or a
// family's weights frozen under LoRA adapters whose parameters are the adapters (lora_model.h).
class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual ParameterStore& params() = 0;
  virtual const ParameterStore& params() const = 0;
  // The family's initialisation (gpt2_init, llama_init) from `seed`.
  virtual void init(std::uint64_t seed) = 0;
  // The forward's mean cross-entropy on (x, y), both (B, T). Ops allocate from the current arena.
  virtual float loss(const Tokens& x, const Tokens& y) const = 0;
  // The forward's logits on x (B, T): (B, T, rows of the LM head), which may be more than
  // vocab_size() (GPT-2's padded vocabulary). Ops allocate from the current arena.
  virtual Tensor logits(const Tokens& x) const = 0;
  // The forward's mean cross-entropy on (x, y) in *loss, and its gradient with respect to every
  // parameter from the generated backward, as a training step computes it (without LoRA
  // dropout): a store with params()'s names, order and shapes. Ops allocate from the current
  // arena.
  virtual ParameterStore gradient(const Tokens& x, const Tokens& y, float* loss) const = 0;
  // A Trainer (llmcc/train/trainer.h) for the family's adgen entry over these weights: the
  // weights are shared, the Trainer owns its gradients and record.
  virtual std::unique_ptr<TrainLoop> make_trainer(BatchSource<TokenPair>& train, BatchSource<TokenPair>* val,
                                                  TrainerOptions options, TrainerHooks hooks) = 0;
  // The family's KV-cache decoder over these weights (they must outlive it).
  virtual std::unique_ptr<Generator> generator(ContextFull when_full) const = 0;
  // New tokens after `prompt` (empty: starts from cfg.eot) on generator(Slide): on_token sees
  // each id as it is drawn.
  std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                   const SamplingConfig& cfg, Rng& rng,
                                   const std::function<void(std::int32_t)>& on_token = {}) const;
  // Writes the weights in one of the family's export formats (family().export_formats()).
  // `safetensors` (the dtype and the shard size) applies to the format of that name.
  virtual void save_as(const std::string& format, const std::string& path,
                       const SafetensorsModelOptions& safetensors = {}) const = 0;
  // The model as llama.cpp's architecture for the family reads it (models/gguf_export.h). Throws
  // llmcc::Error for a family llama.cpp has no architecture for, and for a model with LoRA
  // adapters (merged() first).
  virtual GgufModelParts gguf_parts() const;
  // `llmcc bench`'s step over these weights (bench_step.h): a Trainer's step on one fixed batch
  // of (B, T) random tokens drawn from `seed`. Throws llmcc::Error for B or T out of range.
  std::unique_ptr<BenchStep> bench_step(int B, int T, std::uint64_t seed) {
    return std::make_unique<BenchStep>(*this, B, T, seed);
  }
  // FLOPs of one training step over B x T tokens: the config's (every weight trained), or with
  // LoRA adapters the base's forward and input gradients (no weight gradients: 4 FLOPs per
  // matrix weight per token instead of 6) plus the adapters' 6 per weight.
  virtual double flops_per_step(int B, int T) const { return config().flops_per_step(B, T); }
  // The adapters' configuration and base when this is a model with LoRA adapters, else null.
  virtual const LoraInfo* lora() const { return nullptr; }
  // A model with LoRA adapters: a model of the base's family whose weights are the base's with
  // every adapter added in. Null for a model without adapters.
  virtual std::unique_ptr<Model> merged() const { return nullptr; }
  // A model with LoRA adapters: writes them in PEFT's layout (models/lora_peft.h), or reads them
  // from it. Throws llmcc::Error for a model without adapters.
  virtual void save_peft(const std::string& dir) const;
  virtual void load_peft(const std::string& dir);
  // A model with LoRA adapters: stores the frozen base's matrices (its 2-D weights: the maps,
  // the embedding, the head) in bf16, rounded once, and gives their fp32 values' memory back;
  // the products widen them a block at a time (llmcc/ops/linear.h). Returns the bytes given
  // back. Throws llmcc::Error for a model without adapters.
  virtual std::size_t store_base_in_bf16();
  // Activation checkpointing per block (adgen's checkpoint): training steps save each block's
  // input only and run the block's forward again in the backward.
  virtual void set_checkpoint_activations(bool on) = 0;
};

// A model family, described once (models/<family>/<family>_family.cpp) and listed in the
// registry (registry.cpp).
class Family {
 public:
  virtual ~Family() = default;
  virtual const char* name() const = 0;             // "gpt2": the checkpoint's model.family
  virtual const char* display_name() const = 0;     // "GPT-2"
  virtual const char* hf_model_type() const = 0;    // config.json's model_type: "gpt2", "llama"
  virtual const char* hf_architecture() const = 0;  // "GPT2LMHeadModel"
  virtual std::vector<std::string> preset_names() const = 0;
  // One of preset_names(); throws llmcc::Error otherwise.
  virtual ModelConfig preset(const std::string& name) const = 0;
  virtual const std::vector<ConfigKey>& config_keys() const = 0;
  // The config in a checkpoint's key-values (to_kv's keys); throws llmcc::Error naming `where`.
  virtual ModelConfig config_from_kv(const KeyValues& kv, const std::string& where) const = 0;
  // Parameters declared and zeroed (not initialised); throws for an invalid config.
  virtual std::unique_ptr<Model> make(const ModelConfig& config) const = 0;
  // The weights in an llmcc checkpoint of this family, a Hugging Face model of its model_type,
  // or a file of one of its own formats (owns_file).
  virtual std::unique_ptr<Model> load(const std::string& path) const = 0;
  // True for a file in a format only this family reads (GPT-2: an llm.c model file).
  virtual bool owns_file(const std::string& /*path*/) const { return false; }
  // What owns_file accepts, for help texts ("an llm.c GPT-2 model file (...)"); empty for none.
  virtual std::string own_files_help() const { return ""; }
  virtual std::vector<ExportFormat> export_formats() const = 0;
  // A Hugging Face folder of this family as llama.cpp reads it (gguf_export.h), its tensors read
  // from the files one at a time as the GGUF file is written, so the export never holds the whole
  // model; nullopt for a family that loads the model first (Model::gguf_parts). Throws
  // llmcc::Error for a folder load() would refuse.
  virtual std::optional<GgufModelParts> hf_gguf_parts(const std::string& /*path*/) const { return std::nullopt; }
  // The short names of the maps LoRA adapters can go on ("q", "k", ...); empty when the family
  // has no adapters.
  virtual std::vector<std::string> lora_targets() const { return {}; }
  // lora_targets()' Hugging Face module names ({"q", "q_proj"}, ...), for PEFT's adapter files.
  virtual PeftModuleNames lora_hf_modules() const { return {}; }
  // True when transformers' layers for those modules are Conv1D (weights stored (in, out); GPT-2),
  // which PEFT's adapter_config.json marks with fan_in_fan_out.
  virtual bool lora_hf_conv1d() const { return false; }
  // `base` (a model of this family without adapters) under new adapters of `cfg`, storage
  // zeroed (init() draws them). Throws llmcc::Error when the family has no adapters.
  virtual std::unique_ptr<Model> with_lora(std::unique_ptr<Model> base, LoraBase identity, const LoraConfig& cfg) const;
};

// One field of a family's config struct C that users set by name: its ConfigKey (name, help)
// and the int or float member it is.
template <class C>
struct ConfigField {
  constexpr ConfigField(const char* n, const char* h, int C::* m) : name(n), help(h), int_member(m) {}
  constexpr ConfigField(const char* n, const char* h, float C::* m) : name(n), help(h), float_member(m) {}
  const char* name;
  const char* help;
  int C::* int_member = nullptr;
  float C::* float_member = nullptr;
};

// Family::config_keys() of a family whose fields are `fields`.
template <class C, std::size_t N>
std::vector<ConfigKey> config_keys_of(const ConfigField<C> (&fields)[N]) {
  std::vector<ConfigKey> keys;
  for (const ConfigField<C>& f : fields) keys.push_back({f.name, f.help, f.float_member != nullptr});
  return keys;
}

// FamilyConfig for a family's config struct C, held by value. C has the members vocab_size and
// max_seq_len and the methods parameter_count(), flops_per_step(B, T), str() and validate(); the
// family names its settable fields (fields()) and gives family(), clone() and to_kv().
template <class C>
class FamilyConfigOf : public FamilyConfig {
 public:
  explicit FamilyConfigOf(C c) : value(std::move(c)) {}
  int vocab_size() const override { return value.vocab_size; }
  int max_seq_len() const override { return value.max_seq_len; }
  std::int64_t parameter_count() const override { return value.parameter_count(); }
  double flops_per_step(int B, int T) const override { return value.flops_per_step(B, T); }
  double matmul_weights() const override { return value.matmul_weights(); }
  std::string str() const override { return value.str(); }
  void validate() const override { value.validate(); }
  std::optional<double> get(std::string_view key) const override {
    for (const ConfigField<C>& f : fields()) {
      if (key == f.name) return f.int_member ? static_cast<double>(value.*f.int_member) : value.*f.float_member;
    }
    return std::nullopt;
  }
  void set(std::string_view key, double v) override {
    for (const ConfigField<C>& f : fields()) {
      if (key != f.name) continue;
      if (f.int_member)
        value.*f.int_member = static_cast<int>(v);
      else
        value.*f.float_member = static_cast<float>(v);
    }
  }
  C value;

 protected:
  virtual std::span<const ConfigField<C>> fields() const = 0;
};

// Throws std::bad_cast when the config is another family's.
template <class C>
const C& ModelConfig::as() const {
  return dynamic_cast<const FamilyConfigOf<C>&>(*c_).value;
}

}  // namespace llmcc::models
