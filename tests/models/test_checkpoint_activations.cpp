// Activation checkpointing per block (Model::set_checkpoint_activations, --checkpoint-activations):
// training steps give the same losses and weights, bit for bit, as without it (the re-run forward
// repeats the same ops on the same inputs), while the step arena holds far less; for GPT-2,
// Llama and Qwen3, with every weight trained and with LoRA adapters over a bf16 base.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "models/registry.h"

namespace {

using llmcc::models::Model;

// The preset with a vocabulary of 256, so that the blocks' activations, not the logits, fill the
// step arena.
std::unique_ptr<Model> model(const std::string& preset, bool lora) {
  llmcc::models::ModelConfig config = llmcc::models::model_preset(preset);
  config.set("vocab_size", 256);
  std::unique_ptr<Model> m = llmcc::models::make_model(config);
  m->init(3);
  if (!lora) return m;
  llmcc::models::LoraConfig cfg;
  cfg.rank = 4;
  cfg.targets = m->config().family().lora_targets();
  std::unique_ptr<Model> adapted = llmcc::models::add_lora(std::move(m), "(test base)", cfg);
  adapted->init(4);
  adapted->store_base_in_bf16();
  return adapted;
}

struct Case {
  const char* preset;
  bool lora;
};

class CheckpointActivations : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointActivations, SameBitsLessMemory) {
  const Case c = GetParam();
  std::unique_ptr<Model> plain = model(c.preset, c.lora), ckpt = model(c.preset, c.lora);
  ckpt->set_checkpoint_activations(true);
  const auto a = plain->bench_step(2, 32, 9), b = ckpt->bench_step(2, 32, 9);
  for (int step = 0; step < 3; ++step) EXPECT_EQ(a->step(), b->step()) << "step " << step;
  ASSERT_EQ(plain->params().size(), ckpt->params().size());
  for (std::size_t i = 0; i < plain->params().size(); ++i)
    ASSERT_EQ(plain->params().data()[i], ckpt->params().data()[i]) << "parameter value " << i;
  std::printf("%s%s: step arena %zu + %zu scratch bytes, with checkpointing %zu + %zu\n", c.preset,
              c.lora ? " LoRA" : "", a->arena_high_water(), a->scratch_high_water(), b->arena_high_water(),
              b->scratch_high_water());
  // What stays across the step: the blocks' inputs instead of their activations.
  EXPECT_LT(b->arena_high_water(), a->arena_high_water() / 4);
  // With the re-run's scratch memory too (one block's activations at a time), still less.
  EXPECT_LT(b->arena_high_water() + b->scratch_high_water(), a->arena_high_water() + a->scratch_high_water());
}

INSTANTIATE_TEST_SUITE_P(Families, CheckpointActivations,
                         ::testing::Values(Case{"gpt2-tiny", false}, Case{"llama-tiny", false},
                                           Case{"llama-tiny", true}, Case{"qwen3-tiny", true}),
                         [](const auto& info) {
                           std::string name = std::string(info.param.preset) + (info.param.lora ? "_lora" : "");
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
