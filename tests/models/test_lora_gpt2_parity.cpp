// LoRA parity with PEFT on transformers' GPT2LMHeadModel: adapters of rank 3 and alpha 5 on c_attn,
// c_proj (the attention's and the MLP's) and c_fc of the GPT-2 parity model, written by peft's own
// save_pretrained (fan_in_fan_out: transformers' GPT-2 maps are Conv1D layers), read through
// llmcc's PEFT import; the loss and the gradient of every adapter tensor (gpt2_lora_loss, adgen's
// backward with the base frozen, each map's bias included) against transformers + PEFT in float64
// (scripts/lora_gpt2_reference.py writes tests/fixtures/lora_gpt2/, README.md there), with the fast
// and the reference kernels on 1 and 2 threads. The adapter directory as a model path (its base is
// base_model_name_or_path, ../gpt2/model.bin) gives the same loss, and its merged model too.
//
// Tolerances, as the GPT-2 parity's: the loss within 1e-5 relative, each adapter gradient's max
// abs error relative to its largest magnitude at most 1e-4.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/lora_peft.h"
#include "models/registry.h"
#include "parity.h"

namespace {

const llmcc::test::FixtureDir kGpt2{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/gpt2/",
                                    "scripts/gpt2_reference.py"};
const llmcc::test::FixtureDir kLora{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/lora_gpt2/",
                                    "scripts/lora_gpt2_reference.py"};

class LoraGpt2Parity : public llmcc::test::ParityTest {};

TEST_P(LoraGpt2Parity, LossAndEveryAdapterGradientMatchPeft) {
  const auto base = llmcc::models::load_gpt2(kGpt2.path("model.bin"));
  const llmcc::models::PeftAdapterConfig cfg =
      llmcc::models::read_peft_adapter_config(kLora.dir, llmcc::models::gpt2_peft_modules(), true);
  EXPECT_EQ(cfg.cfg.rank, 3);
  EXPECT_EQ(cfg.cfg.alpha, 5.0f);
  EXPECT_EQ(cfg.cfg.targets, llmcc::models::gpt2_lora_targets());
  EXPECT_EQ(cfg.base, "../gpt2/model.bin");
  llmcc::models::Gpt2Lora lora = llmcc::models::gpt2_lora(base.model, cfg.cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(lora);
  llmcc::models::read_peft_adapter(kLora.dir, llmcc::models::gpt2_peft_slots(base.model, lora));
  llmcc::models::Gpt2Lora want = llmcc::models::gpt2_lora(base.model, cfg.cfg);
  llmcc::ParameterStore want_store = llmcc::bind_parameters(want);
  llmcc::models::read_peft_tensors(kLora.path("grads.safetensors"), llmcc::models::gpt2_peft_slots(base.model, want));

  const auto batch = llmcc::test::Batch::read(kGpt2);
  const auto ref = llmcc::test::Reference::read(kLora);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(lora);
  g.zero();
  const float loss =
      llmcc::models::gpt2_lora_loss_grad(lora, base.model, batch.idx_tokens(), batch.target_tokens(), g.grad);
  EXPECT_NEAR(loss, ref.number("loss"), 1e-5 * ref.number("loss"));
  EXPECT_GT(std::abs(ref.number("loss") - ref.number("base_loss")), 1e-3) << "the adapters change the loss";
  ASSERT_EQ(g.store.count(), want_store.count());
  ASSERT_EQ(g.store.count(), 2u * 4u * 2u);
  for (std::size_t i = 0; i < g.store.count(); ++i) {
    const llmcc::Tensor got = g.store.tensor(i), w = want_store.tensor(i);
    const llmcc::test::Deviation d = llmcc::test::deviation(got.f32(), w.f32(), got.numel());
    EXPECT_LE(d.rel, 1e-4) << g.store.name(i) << ": max error " << d.abs << " at " << d.at << " of scale " << d.scale;
    EXPECT_GT(d.scale, 0.0) << g.store.name(i) << " has no gradient in the reference";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LoraGpt2Parity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

// The adapter directory as users pass it: llmcc eval --ckpt tests/fixtures/lora_gpt2.
TEST(LoraGpt2ParityFixtures, AdapterDirectoryLoadsWithItsBaseAndMergesToTheSameLoss) {
  const auto batch = llmcc::test::Batch::read(kGpt2);
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
