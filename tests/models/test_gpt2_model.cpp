// The GPT-2 model: parameter layout and count, initialisation, loss at initialisation, and that
// its adgen-generated gradient trains (a fixed batch is memorised) and matches finite differences;
// the tests Llama's model shares are model_suite.h's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_weights.h"
#include "model_suite.h"
#include "test_support.h"

namespace {

using llmcc::models::Gpt2Config;

Gpt2Config small_config() {
  Gpt2Config c;
  c.vocab_size = 67;
  c.padded_vocab_size = 128;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

// GPT-2 for model_suite.h.
struct Gpt2Family {
  using Config = Gpt2Config;
  using Weights = llmcc::models::Gpt2Weights;
  static constexpr const char* kName = "gpt2";
  static Weights make(const Config& c) { return llmcc::models::make_gpt2(c); }
  static void init(Weights& w, std::uint64_t seed) { llmcc::models::gpt2_init(w.model, seed); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::gpt2_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::gpt2_loss_grad(w.model, idx, targets, grad);
  }
  // wte's padding rows (vocab_size..padded_vocab_size) are never used.
  static std::int64_t real_elements(const std::string& name, const llmcc::Tensor& t, const Config& c) {
    return name == "wte" ? std::int64_t{c.vocab_size} * c.n_embd : t.numel();
  }
};

TEST(Gpt2Model, ParameterCountMatchesLlmc) {
  // llm.c reports 124,475,904 parameters for GPT-2 124M with the padded vocabulary.
  const Gpt2Config c = llmcc::models::gpt2_preset("gpt2");
  EXPECT_EQ(c.parameter_count(), 124475904);
  llmcc::models::Gpt2 shapes(c);
  std::int64_t n = 0, count = 0;
  llmcc::for_each_parameter(shapes, [&](const std::string&, llmcc::Tensor& t) {
    n += t.numel();
    ++count;
  });
  EXPECT_EQ(n, c.parameter_count());
  EXPECT_EQ(count, 2 + 12 * 12 + 2);  // wte, wpe; 12 per layer (c_attn fused); ln_f
}

TEST(Gpt2Model, PresetsAndValidation) {
  EXPECT_EQ(llmcc::models::gpt2_preset("gpt2-medium").n_layer, 24);
  EXPECT_TRUE(llmcc::test::throws_error([] { llmcc::models::gpt2_preset("gpt3"); }, {"gpt3", "gpt2-medium"}));
  Gpt2Config bad = small_config();
  bad.n_embd = 15;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::Gpt2 m(bad); }, {"n_embd", "n_head"}));
  EXPECT_EQ(llmcc::models::padded_vocab(50257), 50304);
}

TEST(Gpt2Model, InitialisationFollowsGpt2) {
  Gpt2Config c = small_config();
  c.n_embd = 64;
  auto w = llmcc::models::make_gpt2(c);
  llmcc::models::gpt2_init(w.model, 1234);
  using llmcc::test::standard_deviation;
  EXPECT_NEAR(standard_deviation(w.model.h[0].mlp.c_fc.w), 0.02, 0.002);
  EXPECT_NEAR(standard_deviation(w.model.h[0].attn.c_attn.w), 0.02, 0.002);  // q, k and v rows alike
  EXPECT_NEAR(standard_deviation(w.model.h[1].attn.c_proj.w), 0.02 / std::sqrt(4.0), 0.002);
  EXPECT_EQ(w.model.h[0].ln_1.w.f32()[3], 1.0f);
  for (std::int64_t i = 0; i < w.model.h[0].attn.c_attn.b.numel(); ++i)
    ASSERT_EQ(w.model.h[0].attn.c_attn.b.f32()[i], 0.0f) << i;
  // Padded vocabulary rows are zero.
  for (std::int64_t i = std::int64_t{c.vocab_size} * c.n_embd; i < w.model.wte.numel(); ++i)
    ASSERT_EQ(w.model.wte.f32()[i], 0.0f) << i;
  // Same seed, same model.
  auto w2 = llmcc::models::make_gpt2(c);
  llmcc::models::gpt2_init(w2.model, 1234);
  EXPECT_EQ(0, std::memcmp(w.params.data(), w2.params.data(), w.params.size() * sizeof(float)));
}

TEST(Gpt2Model, LossAtInitialisationIsLogVocab) {
  llmcc::test::model_loss_at_initialisation_is_log_vocab<Gpt2Family>(llmcc::models::gpt2_preset("gpt2-tiny"), 50257);
}

TEST(Gpt2Model, GeneratedGradientMemorisesABatch) {
  llmcc::test::model_generated_gradient_memorises_a_batch<Gpt2Family>(small_config());
}

TEST(Gpt2Model, GeneratedGradientMatchesFiniteDifferences) {
  auto w = llmcc::models::make_gpt2(small_config());
  llmcc::models::gpt2_init(w.model, 11);
  // Larger weights than GPT-2's 0.02 so every path carries signal.
  llmcc::Rng rng(12);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, 0.3f);
  llmcc::test::model_generated_gradient_matches_finite_differences<Gpt2Family>(w, {7, 2e-2, 100});
}

}  // namespace
