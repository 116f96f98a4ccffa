// Qwen3 parity with Hugging Face transformers' Qwen3ForCausalLM: logits, loss, every parameter
// gradient and a 10-step AdamW loss curve against the fixtures that scripts/qwen3_reference.py
// writes (tests/fixtures/qwen3/ untied, tests/fixtures/qwen3_tied/ tied; format in
// tests/fixtures/qwen3/README.md), with the fast and the reference kernels, on 1 and 2 threads.
// The gradient is adgen's (generated/qwen3.grad.*).
//
// The model is a small grouped-query Qwen3 (4 query heads sharing 2 key/value heads, head_dim
// 16 where n_embd / n_head is 12, per-head q and k RMSNorm, rotary theta and RMSNorm epsilon that
// are nobody's default) stored as transformers writes it, read through llmcc's Hugging Face
// import (models/qwen3/qwen3_hf.h), so the rotary permutation of q_proj/k_proj rows and of the
// q/k norm gains and the config.json reader are under test too; the gradients come in through
// the same import. Tolerances are Llama's (tests/models/test_llama_parity.cpp): 1e-4 relative to
// each tensor's largest magnitude, each AdamW loss within 1e-4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "model_parity_suite.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3/qwen3_hf.h"
#include "models/qwen3/qwen3_weights.h"
#include "parity.h"
#include "qwen3.grad.h"
#include "temp_dir.h"

namespace {

using llmcc::models::Qwen3Config;
using llmcc::models::Qwen3Weights;

const llmcc::test::FixtureDir kUntied{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/qwen3/",
                                      "scripts/qwen3_reference.py"};
const llmcc::test::FixtureDir kTied{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/qwen3_tied/",
                                    "scripts/qwen3_reference.py"};

// Qwen3 for model_parity_suite.h, one fixture directory each.
template <const llmcc::test::FixtureDir& Fx>
struct Qwen3ParityFamily {
  using Weights = Qwen3Weights;
  static constexpr const char* kReference = "transformers";
  static const llmcc::test::FixtureDir& fixtures() { return Fx; }
  static Weights load_model() { return llmcc::models::load_qwen3_hf(Fx.dir); }
  static Weights load_grads() { return llmcc::models::load_qwen3_hf(Fx.path("grads.safetensors")); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::qwen3_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::qwen3_loss_grad(w.model, idx, targets, grad);
  }
};
using UntiedFamily = Qwen3ParityFamily<kUntied>;
using TiedFamily = Qwen3ParityFamily<kTied>;

// Every field, so that a value config.json carries and the import drops shows by name.
void expect_same_config(const Qwen3Config& got, const Qwen3Config& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.max_seq_len, want.max_seq_len);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.n_head, want.n_head);
  EXPECT_EQ(got.n_kv_head, want.n_kv_head);
  EXPECT_EQ(got.n_embd, want.n_embd);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.hidden_dim, want.hidden_dim);
  EXPECT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
}

template <class Family>
Qwen3Config reference_config() {
  return llmcc::models::qwen3_config_from_kv(llmcc::test::ParityFixtures<Family>::get().ref.kv,
                                             Family::fixtures().path("reference.txt"));
}

template <class Family>
void files_have_the_reference_shape(bool tied) {
  const auto& fx = llmcc::test::ParityFixtures<Family>::get();
  const Qwen3Config want = reference_config<Family>();
  EXPECT_EQ(want.tie_embeddings, tied);
  EXPECT_LT(want.n_kv_head, want.n_head) << "the fixture must exercise grouped-query attention";
  EXPECT_NE(want.head_dim * want.n_head, want.n_embd) << "head_dim must differ from n_embd / n_head";
  EXPECT_NE(want.rope_theta, Qwen3Config{}.rope_theta) << "a dropped rope_theta must show";
  EXPECT_NE(want.norm_eps, Qwen3Config{}.norm_eps) << "a dropped rms_norm_eps must show";
  expect_same_config(llmcc::models::load_qwen3_hf(Family::fixtures().dir).model.cfg, want,
                     "model.safetensors + config.json");
  expect_same_config(fx.grads.model.cfg, want, "grads.safetensors + config.json");
  EXPECT_EQ(fx.logits.size(), std::size_t(fx.batch.B) * std::size_t(fx.batch.T) * std::size_t(want.vocab_size));
  EXPECT_LE(fx.batch.T, want.max_seq_len);
}

TEST(Qwen3ParityFixtures, TransformersFilesHaveTheReferenceShape) {
  files_have_the_reference_shape<UntiedFamily>(false);
  files_have_the_reference_shape<TiedFamily>(true);
}

// llmcc's export of the model it imported is transformers' file again: the same tensor names
// and shapes, every value bit for bit (q/k rows and norm gains permuted back), and a config.json
// that reads back to the same shape.
template <class Family>
void export_reproduces_transformers_file() {
  const Qwen3Weights w = llmcc::models::load_qwen3_hf(Family::fixtures().dir);
  llmcc::test::TempDir tmp;
  llmcc::models::save_qwen3_hf(w.model, tmp.path.string());
  const llmcc::SafetensorsReader theirs(Family::fixtures().path("model.safetensors"));
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
  expect_same_config(llmcc::models::qwen3_config_from_hf(tmp.file("config.json")), reference_config<Family>(),
                     "llmcc's exported config.json");
}

TEST(Qwen3ParityFixtures, ExportReproducesTransformersFile) {
  export_reproduces_transformers_file<UntiedFamily>();
  export_reproduces_transformers_file<TiedFamily>();
}

template <class Family>
class Qwen3Parity : public llmcc::test::ModelParity<Family> {
 protected:
  void every_gradient_matches() {
    llmcc::test::GradientReport report;
    this->logits_loss_and_gradient_match(llmcc::test::whole_tensor_parts, 0.0, &report);
    if (this->HasFatalFailure()) return;
    // A gradient near zero would make its relative error meaningless; the weights are chosen so
    // that every parameter moves the loss.
    for (std::size_t i = 0; i < report.parts.size(); ++i)
      EXPECT_GT(report.devs[i].scale, 1e-3 * report.global)
          << report.parts[i].name << " has a negligible reference gradient";
  }
};

class Qwen3UntiedParity : public Qwen3Parity<UntiedFamily> {};
class Qwen3TiedParity : public Qwen3Parity<TiedFamily> {};

TEST_P(Qwen3UntiedParity, LogitsLossAndEveryGradient) { every_gradient_matches(); }
TEST_P(Qwen3UntiedParity, TenAdamWStepsMatchTransformers) { ten_adamw_steps_match_reference(); }
TEST_P(Qwen3TiedParity, LogitsLossAndEveryGradient) { every_gradient_matches(); }
TEST_P(Qwen3TiedParity, TenAdamWStepsMatchTransformers) { ten_adamw_steps_match_reference(); }

INSTANTIATE_TEST_SUITE_P(Modes, Qwen3UntiedParity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);
INSTANTIATE_TEST_SUITE_P(Modes, Qwen3TiedParity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

}  // namespace
