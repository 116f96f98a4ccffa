// LoraModel<Traits>: a family's model with LoRA adapters (models/lora.h) as a Model (model.h),
// written once for every family that has adapters. Its parameters are the adapters; the base
// weights are frozen: the trainer's gradients, AdamW's moments and checkpoints hold the adapters
// only, and the generated backward (the family's LoRA entry) forms no base weight gradient.
//
// A family's Traits add, beside FamilyModel's:
//   using Lora = LlamaLora;                      // the adapter set, an adgen module
//   using LoraEntry = llama_lora_loss_Entry;     // Inputs: (base model, idx, targets)
//   static std::vector<std::string> lora_targets();        // the maps' short names
//   static Lora lora(const Model&, const LoraConfig&);     // declared adapters
//   static void lora_init(Lora&, std::uint64_t seed);
//   static std::vector<Adapter*> lora_adapters(Lora&);     // parameter list order
//   static void lora_merge(Model&, const Lora&);
//   static const PeftModuleNames& peft_modules();          // models/lora_peft.h
//   static std::vector<PeftSlot> peft_slots(const Model&, const Lora&);
//
// The base is identified by the path it was loaded from and a CRC-32 of its parameters' bytes
// (base_identity), which a LoRA checkpoint records so that it is only ever applied to the weights
// it was trained on.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "llmcc/error.h"
#include "llmcc/train/trainer.h"
#include "models/cached_generator.h"
#include "models/family_model.h"
#include "models/lora.h"
#include "models/lora_peft.h"
#include "models/model.h"

namespace llmcc::models {

// A base model M decoding with adapters L: the model CachedGenerator drives.
template <class M, class L>
struct AdaptedModel {
  const M& base;
  const L& lora;
  decltype(M::cfg) cfg;
  // What one layer's adapters allocate beyond the base's decode: each adapter's (rows, r)
  // intermediate x A^T (llmcc/ops/lora_linear.h), at the most rows a prefill runs.
  std::size_t layer_bytes = 0;
  Tensor decode(const Tokens& idx, KvCache& cache) const { return base.decode(idx, cache, lora); }
};
template <class M, class L>
KvCacheShape kv_cache_shape(const AdaptedModel<M, L>& m) {
  KvCacheShape shape = kv_cache_shape(m.base);
  shape.scratch_bytes += m.layer_bytes;
  return shape;
}
template <class M, class L>
GeneratorLabels generator_labels(const AdaptedModel<M, L>& m) {
  return generator_labels(m.base);
}

// Token batches with the base model in front: the inputs of a family's LoRA entry.
template <class Base>
class WithBase final : public BatchSource<std::tuple<Base, Tokens, Tokens>> {
 public:
  using Batch = std::tuple<Base, Tokens, Tokens>;
  WithBase(const Base& base, BatchSource<TokenPair>& tokens) : tokens_(tokens), batch_(base, {}, {}) {}
  const Batch& next() override {
    const TokenPair& p = tokens_.next();
    std::get<1>(batch_) = std::get<0>(p);
    std::get<2>(batch_) = std::get<1>(p);
    return batch_;
  }
  DataLoaderState state() const override { return tokens_.state(); }
  void set_state(const DataLoaderState& state) override { tokens_.set_state(state); }
  void reset() override { tokens_.reset(); }
  std::int64_t batches_per_epoch() const override { return tokens_.batches_per_epoch(); }
  double items_per_batch() const override { return tokens_.items_per_batch(); }

 private:
  BatchSource<TokenPair>& tokens_;
  Batch batch_;
};

template <class Traits>
class LoraModel final : public Model {
 public:
  using Weights = typename Traits::Weights;
  using Lora = typename Traits::Lora;
  using Entry = typename Traits::LoraEntry;
  using Base = std::remove_cvref_t<decltype(std::declval<Weights>().model)>;

  // Adapters of `cfg` over `base` (storage zeroed; init() draws them). `identity` is the base's
  // (base_identity).
  LoraModel(Weights base, const LoraConfig& cfg, LoraBase identity)
      : base_(std::move(base)),
        config_(Traits::config(base_.model.cfg)),
        lora_cfg_(cfg),
        identity_(std::move(identity)),
        lora_(Traits::lora(base_.model, cfg)),
        params_(bind_parameters(lora_)) {}

  LoraModel(const LoraModel&) = delete;
  LoraModel& operator=(const LoraModel&) = delete;

  const ModelConfig& config() const override { return config_; }
  ParameterStore& params() override { return params_; }
  const ParameterStore& params() const override { return params_; }
  void init(std::uint64_t seed) override { Traits::lora_init(lora_, seed); }
  void set_checkpoint_activations(bool on) override { base_.model.checkpoint_blocks = on; }
  float loss(const Tokens& x, const Tokens& y) const override { return Entry::loss(lora_, {base_.model, x, y}); }
  Tensor logits(const Tokens& x) const override { return base_.model.forward(x, lora_); }
  ParameterStore gradient(const Tokens& x, const Tokens& y, float* loss) const override {
    return entry_gradient<Entry>(lora_, {base_.model, x, y}, loss);
  }
  // One trainer at a time: the sources that put the base in front of each batch live here.
  std::unique_ptr<TrainLoop> make_trainer(BatchSource<TokenPair>& train, BatchSource<TokenPair>* val,
                                          TrainerOptions options, TrainerHooks hooks) override {
    train_ = std::make_unique<WithBase<Base>>(base_.model, train);
    val_ = val != nullptr ? std::make_unique<WithBase<Base>>(base_.model, *val) : nullptr;
    if (lora_cfg_.dropout > 0.0f) {
      // Dropout in the training steps' forwards only, a mask of its own per micro-batch.
      hooks.training = [this, outer = std::move(hooks.training)](bool on, std::uint64_t draw) {
        set_dropout(on ? lora_cfg_.dropout : 0.0f, draw);
        if (outer) outer(on, draw);
      };
    }
    return std::make_unique<Trainer<Entry>>(lora_, params_, *train_, val_.get(), std::move(options), std::move(hooks));
  }
  std::unique_ptr<Generator> generator(ContextFull when_full) const override {
    return std::make_unique<CachedGenerator<AdaptedModel<Base, Lora>>>(adapted_, when_full);
  }
  // The merged model (a copy of the base with every adapter added in) in the family's format.
  void save_as(const std::string& format, const std::string& path,
               const SafetensorsModelOptions& safetensors) const override {
    Weights merged = merged_copy();
    Traits::save_as(merged.model, format, path, safetensors);
  }
  const LoraInfo* lora() const override { return &info_; }
  double flops_per_step(int B, int T) const override {
    const double tokens = static_cast<double>(B) * T;
    return config_.flops_per_step(B, T) - 2.0 * config_.matmul_weights() * tokens +
           6.0 * static_cast<double>(params_.parameter_count()) * tokens;
  }
  void save_peft(const std::string& dir) const override {
    write_peft_adapter(dir, info_, Traits::peft_modules(), Traits::peft_slots(base_.model, lora_),
                       config_.family().lora_hf_conv1d());
  }
  void load_peft(const std::string& dir) override { read_peft_adapter(dir, Traits::peft_slots(base_.model, lora_)); }
  std::unique_ptr<Model> merged() const override { return std::make_unique<FamilyModel<Traits>>(merged_copy()); }
  std::size_t store_base_in_bf16() override {
    if (!bf16_.empty()) return 0;
    std::vector<Tensor*> matrices;
    std::size_t index = 0;
    llmcc::for_each_parameter(base_.model, [&](const std::string&, Tensor& t) {
      if (t.ndim() == 2) {
        matrices.push_back(&t);
        bf16_matrices_.push_back(index);
      }
      ++index;
    });
    bf16_.store(matrices);
    std::size_t released = 0;
    for (std::size_t k = 0; k < matrices.size(); ++k) {
      base_.params.release_values(bf16_matrices_[k]);
      released += static_cast<std::size_t>(matrices[k]->numel()) * sizeof(float);
    }
    return released;
  }

 private:
  // AdaptedModel::layer_bytes: the most adapters a layer has (the adapters, spread over the
  // layers, rounded up) times one (max_seq_len, rank) intermediate.
  std::size_t adapter_layer_bytes() {
    const auto layers = static_cast<std::size_t>(std::max(base_.model.cfg.n_layer, 1));
    const std::size_t per_layer = (Traits::lora_adapters(lora_).size() + layers - 1) / layers;
    return per_layer * arena_floats_bytes(std::int64_t{config_.max_seq_len()} * lora_cfg_.rank);
  }

  // Every adapter's dropout: probability p, masks of draw `draw` (lora_dropout).
  void set_dropout(float p, std::uint64_t draw) {
    std::uint64_t k = 0;
    for (auto* adapter : Traits::lora_adapters(lora_)) adapter->dropout = lora_dropout(p, draw, k++);
  }

  // A copy of the base's values (matrices stored in bf16 widened back) with every adapter added.
  Weights merged_copy() const {
    Weights merged = Traits::make(base_.model.cfg);
    std::memcpy(merged.params.data(), base_.params.data(), base_.params.size() * sizeof(float));
    for (std::size_t k = 0; k < bf16_matrices_.size(); ++k)
      bf16_.widen_into(k, merged.params.tensor(bf16_matrices_[k]));
    Traits::lora_merge(merged.model, lora_);
    return merged;
  }

  Weights base_;
  ModelConfig config_;
  LoraConfig lora_cfg_;
  LoraBase identity_;
  Lora lora_;
  ParameterStore params_;
  AdaptedModel<Base, Lora> adapted_{base_.model, lora_, base_.model.cfg, adapter_layer_bytes()};
  LoraInfo info_{lora_cfg_, identity_};
  std::unique_ptr<WithBase<Base>> train_, val_;
  // With the base's matrices in bf16 (store_base_in_bf16): their values and parameter indices.
  Bf16Matrices bf16_;
  std::vector<std::size_t> bf16_matrices_;
};

// Family::with_lora for a family whose Traits have adapters.
template <class Traits>
std::unique_ptr<Model> lora_model_of(std::unique_ptr<Model> base, LoraBase identity, const LoraConfig& cfg) {
  auto* plain = dynamic_cast<FamilyModel<Traits>*>(base.get());
  if (plain == nullptr)
    fail("LoRA", "adapters go on a model of the family's own weights, not on a model that has adapters already");
  return std::make_unique<LoraModel<Traits>>(std::move(*plain).take_weights(), cfg, std::move(identity));
}

}  // namespace llmcc::models
