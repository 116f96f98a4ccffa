// GPT-2 parity with PyTorch: logits, loss, every parameter gradient and a 10-step AdamW loss
// curve against the fixtures that scripts/gpt2_reference.py writes (tests/fixtures/gpt2/,
// format in its README.md), with the fast and the reference kernels, on 1 and 2 threads; the
// checks Llama's parity shares are model_parity_suite.h's.
//
// Tolerances: for the logits and for every parameter gradient, the max abs error
// relative to that tensor's max magnitude is at most 1e-4; each AdamW loss within 1e-4.
// Each layer's c_attn (3C, C) weight and (3C) bias are measured as three parts, the q, k and v
// rows, each against its own max magnitude: the q and k weight gradients are about 1e-4 of the
// largest at GPT-2's initialisation and would hide under v's scale in one c_attn tensor.
// One gradient is zero in exact arithmetic: attention's key bias (adding a vector to every key
// shifts each query's scores by a constant, which softmax ignores). Its reference is ~1e-17 and
// ours is float rounding (~1e-11 here), so each part's scale has a floor of 1e-5 of the largest
// gradient magnitude in the model; every other part's max magnitude is far above that floor
// (the smallest, the query and key weights, about 1e-4 of it), which the test checks too.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/gpt2/gpt2_weights.h"
#include "model_parity_suite.h"
#include "parity.h"

namespace {

using llmcc::models::Gpt2Weights;
using llmcc::test::GradientPart;

const llmcc::test::FixtureDir kFx{std::string(LLMCC_SOURCE_DIR) + "/tests/fixtures/gpt2/", "scripts/gpt2_reference.py"};
const std::string kDir = kFx.dir;

// GPT-2 for model_parity_suite.h: llm.c-layout model.bin and grads.bin, from PyTorch.
struct Gpt2ParityFamily {
  using Weights = Gpt2Weights;
  static constexpr const char* kReference = "PyTorch";
  static const llmcc::test::FixtureDir& fixtures() { return kFx; }
  static Weights load_model() { return llmcc::models::load_gpt2(kDir + "model.bin"); }  // llm.c fp32, via load_gpt2
  static Weights load_grads() { return llmcc::models::load_gpt2_llmc(kDir + "grads.bin"); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::gpt2_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::gpt2_loss_grad(w.model, idx, targets, grad);
  }
};

// What the gradient check measures: whole tensors, except c_attn's split into its q, k and v rows.
std::vector<GradientPart> gradient_parts(const llmcc::ParameterStore& store) {
  std::vector<GradientPart> parts;
  for (std::size_t i = 0; i < store.count(); ++i) {
    const std::string& name = store.name(i);
    const std::int64_t n = store.tensor(i).numel();
    if (name.find("attn.c_attn.") == std::string::npos) {
      parts.push_back({name, i, 0, n});
      continue;
    }
    EXPECT_EQ(store.tensor(i).dim(0) % 3, 0) << name << " has " << store.tensor(i).dim(0) << " rows";
    for (int r = 0; r < 3; ++r) parts.push_back({name + "[" + "qkv"[r] + " rows]", i, r * n / 3, n / 3});
  }
  return parts;
}

class Gpt2Parity : public llmcc::test::ModelParity<Gpt2ParityFamily> {};

TEST_P(Gpt2Parity, ModelFileHasTheReferenceShape) {
  const Gpt2Weights w = Gpt2ParityFamily::load_model();
  const auto want = llmcc::models::gpt2_config_from_kv(fx_.ref.kv, kDir + "reference.txt");
  EXPECT_EQ(w.model.cfg.str(), want.str());
  EXPECT_EQ(fx_.grads.model.cfg.str(), want.str());
  EXPECT_EQ(fx_.logits.size(),
            std::size_t(fx_.batch.B) * std::size_t(fx_.batch.T) * std::size_t(want.padded_vocab_size));
  EXPECT_LE(fx_.batch.T, want.max_seq_len);
  EXPECT_EQ(fx_.batch.B, int(fx_.number("batch.B")));
  EXPECT_EQ(fx_.batch.T, int(fx_.number("batch.T")));
}

TEST_P(Gpt2Parity, LogitsLossAndEveryGradient) {
  llmcc::test::GradientReport report;
  logits_loss_and_gradient_match(gradient_parts, 1e-5, &report);
  if (HasFatalFailure()) return;
  // The floor only matters for the key biases (zero in exact arithmetic); every other part is
  // measured against its own max magnitude.
  int key_biases = 0;
  for (std::size_t i = 0; i < report.parts.size(); ++i) {
    const GradientPart& p = report.parts[i];
    const bool key_bias = p.name.find("attn.c_attn.bias[k rows]") != std::string::npos;
    if (key_bias) {
      ++key_biases;
      EXPECT_LT(report.own_scale[i], 1e-9 * report.global) << p.name << " should be zero in exact arithmetic";
    } else {
      EXPECT_GT(report.own_scale[i], report.floor) << p.name << " is under the floor; the floor hides nothing else";
    }
  }
  EXPECT_EQ(key_biases, fx_.grads.model.cfg.n_layer);
}

TEST_P(Gpt2Parity, TenAdamWStepsMatchPyTorch) { ten_adamw_steps_match_reference(); }

INSTANTIATE_TEST_SUITE_P(Modes, Gpt2Parity, llmcc::test::kParityModes, llmcc::test::parity_mode_name);

}  // namespace
