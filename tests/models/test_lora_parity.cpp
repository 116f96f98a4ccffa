// LoRA parity with PEFT on transformers' LlamaForCausalLM: adapters of rank 3 and alpha 5 on
// every projection of the Llama parity model, written by peft's own save_pretrained, read through
// llmcc's PEFT import (models/lora_peft.h: names, the rotary row order of q's and k's B, the
// config's rank, alpha and targets); the loss and the gradient of every adapter tensor
// (llama_lora_loss, adgen's backward with the base frozen) against transformers + PEFT in float64
// (scripts/lora_reference.py writes tests/fixtures/lora/, README.md there), with the fast and the
// reference kernels on 1 and 2 threads. The adapter directory as a model path (load_model: its
// base is base_model_name_or_path, ../llama) gives the same loss, and its merged model too.
//
// Tolerances, as the Llama parity's: the loss within 1e-5 relative, each adapter gradient's max
// abs error relative to its largest magnitude at most 1e-4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "models/llama/llama.h"
#include "models/llama/llama_hf.h"
#include "models/lora_peft.h"
#include "models/registry.h"
#include "parity.h"

namespace {

const llmcc::test::FixtureDir kLlama{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/llama/",
                                     "scripts/llama_reference.py"};
const llmcc::test::FixtureDir kLora{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/lora/",
                                    "scripts/lora_reference.py"};

class LoraParity : public llmcc::test::ParityTest {};

TEST_P(LoraParity, LossAndEveryAdapterGradientMatchPeft) {
  const auto base = llmcc::models::load_llama_hf(kLlama.dir);
  const llmcc::models::PeftAdapterConfig cfg =
      llmcc::models::read_peft_adapter_config(kLora.dir, llmcc::models::llama_peft_modules());
  EXPECT_EQ(cfg.cfg.rank, 3);
  EXPECT_EQ(cfg.cfg.alpha, 5.0f);
  EXPECT_EQ(cfg.cfg.targets, llmcc::models::llama_lora_targets());  // every map, in the family's order
  EXPECT_EQ(cfg.base, "../llama");
  llmcc::models::LlamaLora lora = llmcc::models::llama_lora(base.model, cfg.cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(lora);
  llmcc::models::read_peft_adapter(kLora.dir, llmcc::models::llama_peft_slots(base.model, lora));
  llmcc::models::LlamaLora want = llmcc::models::llama_lora(base.model, cfg.cfg);
  llmcc::ParameterStore want_store = llmcc::bind_parameters(want);
  llmcc::models::read_peft_tensors(kLora.path("grads.safetensors"), llmcc::models::llama_peft_slots(base.model, want));

  const auto batch = llmcc::test::Batch::read(kLlama);
  const auto ref = llmcc::test::Reference::read(kLora);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(lora);
  g.zero();
  const float loss =
      llmcc::models::llama_lora_loss_grad(lora, base.model, batch.idx_tokens(), batch.target_tokens(), g.grad);
  EXPECT_NEAR(loss, ref.number("loss"), 1e-5 * ref.number("loss"));
  ASSERT_EQ(g.store.count(), want_store.count());
  ASSERT_EQ(g.store.count(), 2u * 7u * 2u);
  for (std::size_t i = 0; i < g.store.count(); ++i) {
    const llmcc::Tensor got = g.store.tensor(i), w = want_store.tensor(i);
    const llmcc::test::Deviation d = llmcc::test::deviation(got.f32(), w.f32(), got.numel());
    EXPECT_LE(d.rel, 1e-4) << g.store.name(i) << ": max error " << d.abs << " at " << d.at << " of scale " << d.scale;
    EXPECT_GT(d.scale, 0.0) << g.store.name(i) << " has no gradient in the reference";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LoraParity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

// The adapter directory as users pass it: llmcc eval --ckpt tests/fixtures/lora.
TEST(LoraParityFixtures, AdapterDirectoryLoadsWithItsBaseAndMergesToTheSameLoss) {
  const auto batch = llmcc::test::Batch::read(kLlama);
  const double want = llmcc::test::Reference::read(kLora).number("loss");
  const std::unique_ptr<llmcc::models::Model> m = llmcc::models::load_model(kLora.dir);
  ASSERT_NE(m->lora(), nullptr);
  EXPECT_EQ(m->lora()->cfg.rank, 3);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  EXPECT_NEAR(m->loss(batch.idx_tokens(), batch.target_tokens()), want, 1e-5 * want);
  const std::unique_ptr<llmcc::models::Model> merged = m->merged();
  EXPECT_EQ(merged->lora(), nullptr);
  EXPECT_NEAR(merged->loss(batch.idx_tokens(), batch.target_tokens()), want, 1e-5 * want);
}

}  // namespace
