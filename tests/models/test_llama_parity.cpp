// Llama parity with Hugging Face transformers' LlamaForCausalLM: logits, loss, every parameter
// gradient and a 10-step AdamW loss curve against the fixtures that scripts/llama_reference.py
// writes (tests/fixtures/llama/, format in its README.md), with the fast and the reference
// kernels, on 1 and 2 threads. The gradient is adgen's (generated/llama.grad.*).
//
// The model is a small grouped-query Llama (4 query heads sharing 2 key/value heads, rotary
// theta and RMSNorm epsilon that are nobody's default) stored as transformers writes it:
// config.json and model.safetensors in Hugging Face names, with q_proj and k_proj in
// transformers' half-split rotary row order. llmcc reads it through its Hugging Face import
// (models/llama/llama_hf.h), so the rotary permutation and the config.json reader are under test too; the
// gradients (grads.safetensors, same names and layout) come in through the same import.
//
// Tolerances, as GPT-2's (tests/models/test_gpt2_parity.cpp): for the logits and for every
// parameter gradient, the max abs error relative to that tensor's max magnitude is at most 1e-4;
// each AdamW loss within 1e-4. The checks GPT-2's parity shares are model_parity_suite.h's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/io/safetensors.h"
#include "model_parity_suite.h"
#include "models/llama/llama.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_weights.h"
#include "parity.h"
#include "temp_dir.h"

namespace {

using llmcc::models::LlamaConfig;
using llmcc::models::LlamaWeights;

const llmcc::test::FixtureDir kFx{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/llama/",
                                  "scripts/llama_reference.py"};

// Llama for model_parity_suite.h: transformers' files, read through the Hugging Face import;
// grads.safetensors comes in as a model, in llmcc's names and row order.
struct LlamaParityFamily {
  using Weights = LlamaWeights;
  static constexpr const char* kReference = "transformers";
  static const llmcc::test::FixtureDir& fixtures() { return kFx; }
  static Weights load_model() { return llmcc::models::load_llama_hf(kFx.dir); }
  static Weights load_grads() { return llmcc::models::load_llama_hf(kFx.path("grads.safetensors")); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::llama_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::llama_loss_grad(w.model, idx, targets, grad);
  }
};
using Fixtures = llmcc::test::ParityFixtures<LlamaParityFamily>;

// Every field, so that a value config.json carries and the import drops shows by name.
void expect_same_config(const LlamaConfig& got, const LlamaConfig& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.max_seq_len, want.max_seq_len);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.n_head, want.n_head);
  EXPECT_EQ(got.n_kv_head, want.n_kv_head);
  EXPECT_EQ(got.n_embd, want.n_embd);
  EXPECT_EQ(got.hidden_dim, want.hidden_dim);
  EXPECT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.str(), want.str());  // and whatever else str() names (rope scaling)
}

LlamaConfig reference_config() {
  return llmcc::models::llama_config_from_kv(Fixtures::get().ref.kv, kFx.path("reference.txt"));
}

TEST(LlamaParityFixtures, TransformersFilesHaveTheReferenceShape) {
  const Fixtures& fx = Fixtures::get();
  const LlamaConfig want = reference_config();
  EXPECT_LT(want.n_kv_head, want.n_head) << "the fixture must exercise grouped-query attention";
  EXPECT_NE(want.rope_theta, LlamaConfig{}.rope_theta) << "a dropped rope_theta must show";
  EXPECT_NE(want.norm_eps, LlamaConfig{}.norm_eps) << "a dropped rms_norm_eps must show";
  expect_same_config(llmcc::models::load_llama_hf(kFx.dir).model.cfg, want, "model.safetensors + config.json");
  expect_same_config(fx.grads.model.cfg, want, "grads.safetensors + config.json");
  EXPECT_EQ(fx.logits.size(), std::size_t(fx.batch.B) * std::size_t(fx.batch.T) * std::size_t(want.vocab_size));
  EXPECT_LE(fx.batch.T, want.max_seq_len);
  EXPECT_EQ(fx.batch.B, int(fx.number("batch.B")));
  EXPECT_EQ(fx.batch.T, int(fx.number("batch.T")));
}

// llmcc's export of the model it imported is transformers' file again: the same tensor names
// and shapes, every value bit for bit (q_proj and k_proj permuted back), and a config.json that
// reads back to the same shape.
TEST(LlamaParityFixtures, ExportReproducesTransformersFile) {
  const LlamaWeights w = llmcc::models::load_llama_hf(kFx.dir);
  llmcc::test::TempDir tmp;
  llmcc::models::save_llama_hf(w.model, tmp.path.string());
  const llmcc::SafetensorsReader theirs(kFx.path("model.safetensors"));
  const llmcc::SafetensorsReader ours(tmp.file("model.safetensors"));
  ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
  for (const llmcc::SafetensorsEntry& e : theirs.tensors()) {
    SCOPED_TRACE(e.name);
    ASSERT_TRUE(ours.has(e.name));
    llmcc::TensorShape shape_ours, shape_theirs;
    const std::vector<float> a = ours.read_f32(e.name, &shape_ours);
    const std::vector<float> b = theirs.read_f32(e.name, &shape_theirs);
    EXPECT_EQ(shape_ours, shape_theirs);
    EXPECT_TRUE(a == b) << "values differ";
  }
  expect_same_config(llmcc::models::llama_config_from_hf(tmp.file("config.json")), reference_config(),
                     "llmcc's exported config.json");
}

class LlamaParity : public llmcc::test::ModelParity<LlamaParityFamily> {};

TEST_P(LlamaParity, LogitsLossAndEveryGradient) {
  llmcc::test::GradientReport report;
  logits_loss_and_gradient_match(llmcc::test::whole_tensor_parts, 0.0, &report);
  if (HasFatalFailure()) return;
  // A gradient near zero would make its relative error meaningless; the weights are chosen so
  // that every parameter moves the loss.
  for (std::size_t i = 0; i < report.parts.size(); ++i) {
    EXPECT_GT(report.devs[i].scale, 1e-3 * report.global)
        << report.parts[i].name << " has a negligible reference gradient";
  }
}

TEST_P(LlamaParity, TenAdamWStepsMatchTransformers) { ten_adamw_steps_match_reference(); }

INSTANTIATE_TEST_SUITE_P(Modes, LlamaParity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

}  // namespace
