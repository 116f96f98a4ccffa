// FamilyModel<Traits>: a family's weights as a Model (model.h), written once for every family.
// A family's Traits (in models/<family>/<family>_family.cpp) name its types and functions:
//
//   struct Gpt2Traits {
//     using Entry = gpt2_loss_Entry;   // adgen's trait for the loss: Model, Grad, Saved, fwd, bwd
//     using Weights = Gpt2Weights;     // { Gpt2 model; ParameterStore params; }
//     static ModelConfig config(const Gpt2Config&);
//     static void init(Weights&, std::uint64_t seed);
//     static std::unique_ptr<Generator> generator(const Gpt2&, ContextFull);
//     static void save_as(const Gpt2&, const std::string& format, const std::string& path,
//                         const SafetensorsModelOptions& safetensors);
//   };
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "llmcc/adgen.h"
#include "llmcc/parameters.h"
#include "llmcc/train/trainer.h"
#include "models/model.h"

namespace llmcc::models {

// The mean loss of adgen's entry `Entry` on `in` (in *loss) and its gradient with respect to
// every parameter of `m`, in a store laid out as make_grad lays it out (the parameter list's
// order).
template <class Entry>
ParameterStore entry_gradient(const typename Entry::Model& m, const typename Entry::Inputs& in, float* loss) {
  auto g = adgen::make_grad(m);
  typename Entry::Saved saved;
  const float value = Entry::fwd(m, in, saved);
  Entry::bwd(m, in, saved, 1.0f, &g.grad);
  if (loss != nullptr) *loss = value;
  return std::move(g.store);
}

template <class Traits>
class FamilyModel final : public Model {
 public:
  using Weights = typename Traits::Weights;
  using Entry = typename Traits::Entry;

  explicit FamilyModel(Weights w) : w_(std::move(w)), config_(Traits::config(w_.model.cfg)) {}

  const ModelConfig& config() const override { return config_; }
  ParameterStore& params() override { return w_.params; }
  const ParameterStore& params() const override { return w_.params; }
  void init(std::uint64_t seed) override { Traits::init(w_, seed); }
  void set_checkpoint_activations(bool on) override { w_.model.checkpoint_blocks = on; }
  float loss(const Tokens& x, const Tokens& y) const override { return Entry::loss(w_.model, {x, y}); }
  Tensor logits(const Tokens& x) const override { return w_.model.forward(x); }
  ParameterStore gradient(const Tokens& x, const Tokens& y, float* loss) const override {
    return entry_gradient<Entry>(w_.model, {x, y}, loss);
  }
  std::unique_ptr<TrainLoop> make_trainer(BatchSource<TokenPair>& train, BatchSource<TokenPair>* val,
                                          TrainerOptions options, TrainerHooks hooks) override {
    return std::make_unique<Trainer<Entry>>(w_.model, w_.params, train, val, std::move(options), std::move(hooks));
  }
  std::unique_ptr<Generator> generator(ContextFull when_full) const override {
    return Traits::generator(w_.model, when_full);
  }
  GgufModelParts gguf_parts() const override {
    if constexpr (requires { Traits::gguf_parts(w_.model); })
      return Traits::gguf_parts(w_.model);
    else
      return Model::gguf_parts();
  }
  void save_as(const std::string& format, const std::string& path,
               const SafetensorsModelOptions& safetensors) const override {
    Traits::save_as(w_.model, format, path, safetensors);
  }

  const Weights& weights() const { return w_; }
  Weights take_weights() && { return std::move(w_); }

 private:
  Weights w_;
  ModelConfig config_;
};

}  // namespace llmcc::models
