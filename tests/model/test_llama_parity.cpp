// Llama parity with Hugging Face transformers' LlamaForCausalLM: logits, loss, every parameter
// gradient and a 10-step AdamW loss curve against the fixtures that scripts/llama_reference.py
// writes (tests/fixtures/llama/, format in its README.md), with the fast and the reference
// kernels, on 1 and 2 threads. The gradient is adgen's (generated/llama.grad.*).
//
// The model is a small grouped-query Llama (4 query heads sharing 2 key/value heads, rotary
// theta and RMSNorm epsilon that are nobody's default) stored as transformers writes it:
// config.json and model.safetensors in Hugging Face names, with q_proj and k_proj in
// transformers' half-split rotary row order. llmcc reads it through its Hugging Face import
// (nn/llama_hf.h), so the rotary permutation and the config.json reader are under test too; the
// gradients (grads.safetensors, same names and layout) come in through the same import.
//
// Tolerances, as GPT-2's (tests/model/test_gpt2_parity.cpp): for the logits and for every
// parameter gradient, the max abs error relative to that tensor's max magnitude is at most 1e-4;
// each AdamW loss within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/safetensors.h"
#include "nn/llama.h"
#include "nn/llama_hf.h"
#include "nn/llama_weights.h"
#include "parity.h"
#include "temp_dir.h"

namespace {

using llmcc::nn::LlamaConfig;
using llmcc::nn::LlamaWeights;
using llmcc::test::Deviation;
using llmcc::test::deviation;

constexpr double kTol = 1e-4;
const llmcc::test::FixtureDir kFx{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/llama/",
                                  "scripts/llama_reference.py"};

// Everything the script wrote.
struct Fixtures {
  llmcc::test::Reference ref;
  llmcc::test::Batch batch;
  std::vector<float> logits;  // (B, T, V)
  LlamaWeights grads;         // grads.safetensors read as a model: llmcc's names and row order

  static const Fixtures& get() {
    static const Fixtures f = [] {
      Fixtures x;
      x.ref = llmcc::test::Reference::read(kFx);
      x.batch = llmcc::test::Batch::read(kFx);
      x.logits = kFx.array<float>("logits.bin");
      x.grads = llmcc::nn::load_llama_hf(kFx.path("grads.safetensors"));
      return x;
    }();
    return f;
  }
  double number(const std::string& key) const { return ref.number(key); }
};

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
  return llmcc::nn::llama_config_from_kv(Fixtures::get().ref.kv, kFx.path("reference.txt"));
}

TEST(LlamaParityFixtures, TransformersFilesHaveTheReferenceShape) {
  const Fixtures& fx = Fixtures::get();
  const LlamaConfig want = reference_config();
  EXPECT_LT(want.n_kv_head, want.n_head) << "the fixture must exercise grouped-query attention";
  EXPECT_NE(want.rope_theta, LlamaConfig{}.rope_theta) << "a dropped rope_theta must show";
  EXPECT_NE(want.norm_eps, LlamaConfig{}.norm_eps) << "a dropped rms_norm_eps must show";
  expect_same_config(llmcc::nn::load_llama_hf(kFx.dir).model.cfg, want, "model.safetensors + config.json");
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
  const LlamaWeights w = llmcc::nn::load_llama_hf(kFx.dir);
  llmcc::test::TempDir tmp;
  llmcc::nn::save_llama_hf(w.model, tmp.path.string());
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
  expect_same_config(llmcc::nn::llama_config_from_hf(tmp.file("config.json")), reference_config(),
                     "llmcc's exported config.json");
}

class LlamaParity : public llmcc::test::ParityTest {
 protected:
  const Fixtures& fx_ = Fixtures::get();
  llmcc::Tokens idx() const { return fx_.batch.idx_tokens(); }
  llmcc::Tokens targets() const { return fx_.batch.target_tokens(); }
  llmcc::Arena arena_{64 << 20};
};

TEST_P(LlamaParity, LogitsLossAndEveryGradient) {
  const LlamaWeights w = llmcc::nn::load_llama_hf(kFx.dir);
  llmcc::ArenaScope scope(arena_);

  // Logits: Llama::forward, (B, T, V).
  const llmcc::Tensor logits = w.model.forward(idx());
  ASSERT_EQ(std::size_t(logits.numel()), fx_.logits.size());
  const Deviation dl = deviation(logits.f32(), fx_.logits.data(), logits.numel());
  EXPECT_LE(dl.rel, kTol) << "logits: max abs error " << dl.abs << " at " << dl.at << ", max |ref| " << dl.scale;

  // Loss and gradient: the adgen-generated llama_loss_grad.
  arena_.reset();
  auto g = llmcc::adgen::make_grad(w.model);
  const float loss = llmcc::nn::llama_loss_grad(w.model, idx(), targets(), g.grad);
  EXPECT_NEAR(loss, fx_.number("loss"), kTol);

  const llmcc::ParameterStore& ref = fx_.grads.params;
  ASSERT_EQ(g.store.count(), ref.count());
  double global = 0;
  for (std::size_t i = 0; i < ref.count(); ++i) {
    ASSERT_EQ(g.store.name(i), ref.name(i));
    ASSERT_EQ(g.store.shape(i), ref.shape(i)) << ref.name(i);
    global = std::max(global, deviation(ref.tensor(i).f32(), ref.tensor(i).f32(), ref.tensor(i).numel()).scale);
  }
  std::size_t worst = 0;
  std::vector<Deviation> devs;
  std::ostringstream table;
  for (std::size_t i = 0; i < ref.count(); ++i) {
    devs.push_back(deviation(g.store.tensor(i).f32(), ref.tensor(i).f32(), ref.tensor(i).numel()));
    if (devs[i].rel > devs[worst].rel) worst = i;
    table << "\n  " << ref.name(i) << ": rel " << devs[i].rel << " (abs " << devs[i].abs << ", scale " << devs[i].scale
          << ")";
    // A gradient near zero would make its relative error meaningless; the weights are chosen so
    // that every parameter moves the loss.
    EXPECT_GT(devs[i].scale, 1e-3 * global) << ref.name(i) << " has a negligible reference gradient";
  }
  EXPECT_LE(devs[worst].rel, kTol) << "worst gradient: " << ref.name(worst) << " element " << devs[worst].at
                                   << ", all:" << table.str();
  std::printf("[parity] logits rel %.3g, loss err %.3g, worst gradient %s rel %.3g\n", dl.rel,
              std::fabs(loss - fx_.number("loss")), ref.name(worst).c_str(), devs[worst].rel);
}

TEST_P(LlamaParity, TenAdamWStepsMatchTransformers) {
  LlamaWeights w = llmcc::nn::load_llama_hf(kFx.dir);
  const std::vector<double> want = fx_.ref.list("adamw.losses");
  ASSERT_EQ(want.size(), 10u);
  const float lr = float(fx_.number("adamw.lr"));
  llmcc::AdamW opt(w.params, fx_.ref.adamw());  // weight decay on ndim >= 2 only, as the script
  auto g = llmcc::adgen::make_grad(w.model);
  std::ostringstream curve;
  double worst = 0;
  for (std::size_t step = 0; step < want.size(); ++step) {
    arena_.reset();
    llmcc::ArenaScope scope(arena_);
    g.zero();
    const float loss = llmcc::nn::llama_loss_grad(w.model, idx(), targets(), g.grad);
    opt.step(w.params, g.store, lr);
    worst = std::max(worst, std::fabs(loss - want[step]));
    curve << "\n  step " << step << ": " << loss << " (transformers " << want[step] << ")";
    EXPECT_NEAR(loss, want[step], kTol) << "AdamW step " << step;
  }
  arena_.reset();
  llmcc::ArenaScope scope(arena_);
  const float final_loss = llmcc::nn::llama_loss(w.model, idx(), targets());
  EXPECT_NEAR(final_loss, fx_.number("adamw.final_loss"), kTol) << "after 10 steps" << curve.str();
  worst = std::max(worst, std::fabs(final_loss - fx_.number("adamw.final_loss")));
  std::printf("[parity] AdamW losses: worst error %.3g over 10 steps and the final loss\n", worst);
}

INSTANTIATE_TEST_SUITE_P(Modes, LlamaParity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

}  // namespace
