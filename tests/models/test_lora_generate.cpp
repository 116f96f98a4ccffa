// Generation through LoRA adapters (Model::generator of a model with adapters): for every family
// with adapters, a prompt as long as the context and then one more token (the window slides) run
// through adapters of a large rank, whose per-map intermediates (rows x rank) the decoder's
// scratch must hold besides the base's, and give the logits of the merged model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/train/rng.h"
#include "models/generate.h"
#include "models/registry.h"

namespace {

using llmcc::models::LoraConfig;
using llmcc::models::Model;

// The largest difference of two logit rows' first V values, against the reference's largest.
double rel_diff(const llmcc::Tensor& got, const llmcc::Tensor& want, int V) {
  double worst = 0.0, scale = 0.0;
  for (int i = 0; i < V; ++i) {
    worst = std::max(worst, std::abs(double(got.f32()[i]) - double(want.f32()[i])));
    scale = std::max(scale, std::abs(double(want.f32()[i])));
  }
  return worst / scale;
}

class LoraGenerate : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraGenerate, AFullWindowThroughHighRankAdaptersIsTheMergedModels) {
  llmcc::models::ModelConfig config = llmcc::models::model_preset(GetParam());
  config.set("n_layer", 2);
  config.set("max_seq_len", 96);
  config.set("vocab_size", 300);
  std::unique_ptr<Model> base = llmcc::models::make_model(config);
  base->init(3);
  LoraConfig cfg;
  cfg.rank = 192;  // more than the channels: the intermediates are wider than the maps' outputs
  cfg.alpha = 16.0f;
  cfg.targets = base->config().family().lora_targets();
  std::unique_ptr<Model> adapted = llmcc::models::add_lora(std::move(base), "(test base)", cfg);
  adapted->init(4);
  llmcc::Rng rng(5);  // B drawn too, so that the adapters change the logits
  rng.fill_normal(adapted->params().data(), adapted->params().size(), 0.0f, 0.02f);
  const std::unique_ptr<Model> merged = adapted->merged();

  const int T = adapted->config().max_seq_len(), V = adapted->config().vocab_size();
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) prompt[static_cast<std::size_t>(t)] = (7 * t + 3) % V;
  const auto a = adapted->generator(llmcc::models::ContextFull::Slide);
  const auto m = merged->generator(llmcc::models::ContextFull::Slide);
  EXPECT_LT(rel_diff(a->prefill(prompt), m->prefill(prompt), V), 1e-4);
  EXPECT_LT(rel_diff(a->step(11), m->step(11), V), 1e-4);
  EXPECT_EQ(a->slides(), 1);
}

INSTANTIATE_TEST_SUITE_P(EveryFamilyWithAdapters, LoraGenerate,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "qwen3-tiny"));

}  // namespace
