// The Llama model: presets and parameter counts against llama2.c and Meta, configuration checks
// and round trip, initialisation, loss at initialisation, and that its adgen-generated gradient
// trains (a fixed batch is memorised) and matches central finite differences, with grouped-query
// attention (n_kv_head < n_head); the tests GPT-2's model shares are model_suite.h's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "models/registry.h"
#include "model_suite.h"
#include "models/llama/llama.h"
#include "models/llama/llama_generate.h"
#include "models/llama/llama_weights.h"
#include "test_support.h"

namespace {

using llmcc::models::LlamaConfig;

// GQA (4 query heads over 2 key/value heads), head size 4 (two RoPE pairs), a SwiGLU width
// that is not a multiple of anything in particular, and a vocabulary of 37; the head its own
// matrix or tied to the embedding.
LlamaConfig small_config(bool tied = false) {
  LlamaConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.hidden_dim = 24;
  c.rope_theta = 100.0f;  // small: positions 0..4 turn the pairs by visibly different angles
  c.tie_embeddings = tied;
  return c;
}

std::int64_t declared_elements(const LlamaConfig& c) {
  llmcc::models::Llama shapes(c);  // shapes only: no storage, so llama-3.2-1b builds anywhere
  std::int64_t n = 0;
  llmcc::for_each_parameter(shapes, [&](const std::string&, llmcc::Tensor& t) { n += t.numel(); });
  return n;
}

// Llama for model_suite.h.
struct LlamaFamily {
  using Config = LlamaConfig;
  using Weights = llmcc::models::LlamaWeights;
  static constexpr const char* kName = "llama";
  static Weights make(const Config& c) { return llmcc::models::make_llama(c); }
  static void init(Weights& w, std::uint64_t seed) { llmcc::models::llama_init(w.model, seed); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::llama_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::llama_loss_grad(w.model, idx, targets, grad);
  }
  static std::int64_t real_elements(const std::string&, const llmcc::Tensor& t, const Config&) { return t.numel(); }
};

TEST(LlamaModel, Stories15mMatchesLlama2c) {
  const LlamaConfig c = llmcc::models::llama_preset("stories15m");
  EXPECT_EQ(c.n_embd, 288);
  EXPECT_EQ(c.hidden_dim, llmcc::models::llama_hidden_dim(288, 32));
  EXPECT_EQ(c.hidden_dim, 768);
  EXPECT_EQ(llmcc::models::llama_preset("stories42m").hidden_dim, llmcc::models::llama_hidden_dim(512, 32));
  EXPECT_EQ(llmcc::models::llama_preset("stories42m").hidden_dim, 1376);
  EXPECT_EQ(llmcc::models::llama_preset("llama-tiny").hidden_dim, llmcc::models::llama_hidden_dim(128, 32));
  // llama2.c's stories15M has 15,191,712 parameters with its output head tied to the embedding;
  // ours is untied, one (V, C) matrix more.
  const std::int64_t head = std::int64_t{32000} * 288;
  EXPECT_EQ(c.parameter_count() - head, 15191712);
  EXPECT_EQ(c.parameter_count(), 24407712);
  EXPECT_EQ(declared_elements(c), c.parameter_count());
}

TEST(LlamaModel, Llama32OneBBuildsWithItsShape) {
  const LlamaConfig c = llmcc::models::llama_preset("llama-3.2-1b");
  EXPECT_EQ(c.n_kv_head, 8);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  // Llama 3.2's config.json: rope_scaling llama3, factor 32, low 1, high 4, original 8192.
  EXPECT_EQ(c.rope_scaling.type, llmcc::RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llmcc::models::llama_preset("stories15m").rope_scaling.type, llmcc::RopeScaling::Type::None);
  // Meta's Llama-3.2-1B: 1,235,814,400 parameters with the head tied to the embedding.
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.parameter_count(), 1235814400);
  EXPECT_EQ(declared_elements(c), c.parameter_count());
  LlamaConfig untied = c;
  untied.tie_embeddings = false;
  EXPECT_EQ(untied.parameter_count(), 1235814400 + std::int64_t{128256} * 2048);
  EXPECT_EQ(declared_elements(untied), untied.parameter_count());
  EXPECT_NE(c.str().find(" tied"), std::string::npos);
  EXPECT_EQ(untied.str().find("tied"), std::string::npos);
  // What the trainer prints about it: MemoryPlan.Llama32OneB (tests/cli/test_train_flags.cpp).
}

TEST(LlamaModel, PresetsAndValidation) {
  EXPECT_TRUE(llmcc::test::throws_error([] { llmcc::models::llama_preset("llama-9"); }, {"llama-9", "stories15m"}));
  LlamaConfig bad = small_config();
  bad.n_kv_head = 3;
  EXPECT_TRUE(
      llmcc::test::throws_error([&] { llmcc::models::Llama m(bad); }, {"n_kv_head (3)", "divisor of n_head (4)"}));
  bad = small_config();
  bad.n_embd = 12;  // head size 3: RoPE needs pairs
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::Llama m(bad); }, {"head size", "even"}));
  bad = small_config();
  bad.rope_theta = 0.0f;
  EXPECT_TRUE(llmcc::test::throws_error([&] { bad.validate(); }, {"rope_theta"}));
}

TEST(LlamaModel, ConfigRoundTripsThroughKeyValues) {
  LlamaConfig c = llmcc::models::llama_preset("llama-3.2-1b");
  c.norm_eps = 1e-6f;
  llmcc::KeyValues kv;
  llmcc::models::llama_config_to_kv(c, kv);
  EXPECT_EQ(kv.at("model.family"), "llama");
  const LlamaConfig back = llmcc::models::llama_config_from_kv(kv, "test");
  EXPECT_EQ(back.n_kv_head, c.n_kv_head);
  EXPECT_EQ(back.hidden_dim, c.hidden_dim);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.norm_eps, c.norm_eps);
  EXPECT_EQ(back.rope_scaling, c.rope_scaling);
  EXPECT_TRUE(back.tie_embeddings);
  // An untied model writes no tie key, as checkpoints did before tied heads.
  llmcc::KeyValues untied_kv;
  llmcc::models::llama_config_to_kv(small_config(false), untied_kv);
  EXPECT_EQ(untied_kv.count("model.tie_embeddings"), 0u);
  EXPECT_FALSE(llmcc::models::llama_config_from_kv(untied_kv, "test").tie_embeddings);
  EXPECT_STREQ(llmcc::models::model_config_from_kv(kv, "test").family_name(), "llama");
  kv.erase("model.n_kv_head");
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::llama_config_from_kv(kv, "f.bin"); },
                                        {"f.bin", "model.n_kv_head"}));
  kv["model.family"] = "gpt2";
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::llama_config_from_kv(kv, "f.bin"); }, {"'gpt2' model"}));
}

TEST(LlamaModel, InitialisationFollowsLlama2c) {
  LlamaConfig c = small_config();
  c.n_embd = 64;
  c.hidden_dim = 128;
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 1234);
  using llmcc::test::standard_deviation;
  EXPECT_NEAR(standard_deviation(w.model.tok_embeddings), 0.02, 0.002);
  EXPECT_NEAR(standard_deviation(w.model.layers[0].attention.wq), 0.02, 0.002);
  EXPECT_NEAR(standard_deviation(w.model.layers[0].feed_forward.w1), 0.02, 0.002);
  EXPECT_NEAR(standard_deviation(w.model.output[0].w), 0.02, 0.002);
  EXPECT_NEAR(standard_deviation(w.model.layers[1].attention.wo), 0.02 / std::sqrt(4.0), 0.002);
  EXPECT_NEAR(standard_deviation(w.model.layers[1].feed_forward.w2), 0.02 / std::sqrt(4.0), 0.002);
  for (std::int64_t i = 0; i < c.n_embd; ++i) {
    ASSERT_EQ(w.model.layers[0].attention_norm.w.f32()[i], 1.0f);
    ASSERT_EQ(w.model.norm.w.f32()[i], 1.0f);
  }
  auto w2 = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w2.model, 1234);
  EXPECT_EQ(0, std::memcmp(w.params.data(), w2.params.data(), w.params.size() * sizeof(float)));
}

TEST(LlamaModel, LossAtInitialisationIsLogVocab) {
  llmcc::test::model_loss_at_initialisation_is_log_vocab<LlamaFamily>(llmcc::models::llama_preset("llama-tiny"), 32000);
}

TEST(LlamaModel, GeneratedGradientMemorisesABatch) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    llmcc::test::model_generated_gradient_memorises_a_batch<LlamaFamily>(small_config(tied));
  }
}

// Weights drawn larger than Llama's 0.02 so that every path carries signal.
TEST(LlamaModel, GeneratedGradientMatchesFiniteDifferences) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto w = llmcc::models::make_llama(small_config(tied));
    llmcc::models::llama_init(w.model, 11);
    llmcc::Rng rng(12);
    llmcc::for_each_parameter(w.model, [&](const std::string&, llmcc::Tensor& t) {
      // RMSNorm weights around one (their role), matrices N(0, 0.3).
      rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), t.ndim() == 1 ? 1.0f : 0.0f, 0.3f);
    });
    // Measured worst |adgen - fd| / max|fd|: 7.7e-4 (untied).
    llmcc::test::model_generated_gradient_matches_finite_differences<LlamaFamily>(w, {9, 5e-3, 150});
  }
}

// A tied head is the embedding used twice: its gradient is the untied model's embedding gradient
// plus its head gradient, when the untied head holds the same values. Shapes other than the
// small config's: 3 layers, 6 heads over 3 kv heads, vocabulary 53, a batch of 3 x 7.
TEST(LlamaModel, TiedGradientIsTheSumOfTheUntiedEmbeddingAndHeadGradients) {
  LlamaConfig c = small_config(false);
  c.n_layer = 3;
  c.n_head = 6;
  c.n_kv_head = 3;
  c.n_embd = 24;
  c.hidden_dim = 40;
  c.vocab_size = 53;
  auto untied = llmcc::models::make_llama(c);
  llmcc::models::llama_init(untied.model, 5);
  c.tie_embeddings = true;
  auto tied = llmcc::models::make_llama(c);
  // The tied model takes the untied one's values; the untied head becomes the embedding.
  llmcc::for_each_parameter(tied.model, [&](const std::string& name, llmcc::Tensor& t) {
    llmcc::for_each_parameter(untied.model, [&](const std::string& other, llmcc::Tensor& u) {
      if (other == name) std::copy_n(u.f32(), t.numel(), t.f32());
    });
  });
  std::copy_n(untied.model.tok_embeddings.f32(), untied.model.tok_embeddings.numel(), untied.model.output[0].w.f32());
  const int B = 3, T = 7;
  const auto in = llmcc::test::random_ids(B * T, c.vocab_size, 8),
             out = llmcc::test::random_ids(B * T, c.vocab_size, 9);
  const llmcc::Tokens idx(in.data(), B, T), targets(out.data(), B, T);
  auto gu = llmcc::adgen::make_grad(untied.model);
  auto gt = llmcc::adgen::make_grad(tied.model);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  gu.zero();
  gt.zero();
  const float lu = llmcc::models::llama_loss_grad(untied.model, idx, targets, gu.grad);
  const float lt = llmcc::models::llama_loss_grad(tied.model, idx, targets, gt.grad);
  EXPECT_EQ(lu, lt);
  const float* e_untied = gu.grad.tok_embeddings.f32();
  const float* h_untied = gu.grad.output[0].w.f32();
  const float* e_tied = gt.grad.tok_embeddings.f32();
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < tied.model.tok_embeddings.numel(); ++i) {
    worst = std::max(worst, std::abs(double(e_tied[i]) - (double(e_untied[i]) + double(h_untied[i]))));
    scale = std::max(scale, std::abs(double(e_tied[i])));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 1e-6 * scale) << "worst difference " << worst << " of " << scale;
  EXPECT_TRUE(gt.grad.output.empty());
}

TEST(LlamaModel, SamplerDrawsFromTheLastRow) {
  const LlamaConfig c = small_config();
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 21);
  llmcc::models::SamplingConfig cfg;
  cfg.temperature = 0.0f;  // greedy: the argmax of Llama::forward's last row
  cfg.eot = 1;
  llmcc::Rng rng(1);
  const std::vector<std::int32_t> prompt = {3, 5, 7};
  // Longer than max_seq_len (16): the window slides.
  const auto out = llmcc::models::llama_sample(w.model, prompt, 20, cfg, rng);
  ASSERT_EQ(out.size(), 20u);
  std::vector<std::int32_t> seq = prompt;
  llmcc::Arena arena(16 << 20);
  for (const std::int32_t id : out) {
    const std::size_t start = seq.size() > 16 ? seq.size() - 16 : 0;
    const int T = static_cast<int>(seq.size() - start);
    arena.reset();
    llmcc::ArenaScope scope(arena);
    const llmcc::Tensor logits = w.model.forward(llmcc::Tokens(seq.data() + start, 1, T));
    const float* row = logits.f32() + static_cast<std::size_t>(T - 1) * c.vocab_size;
    const std::int32_t best = static_cast<std::int32_t>(std::max_element(row, row + c.vocab_size) - row);
    ASSERT_EQ(id, best);
    seq.push_back(id);
  }
  EXPECT_TRUE(
      llmcc::test::throws_error([&] { llmcc::models::llama_sample(w.model, {40}, 1, cfg, rng); }, {"40", "[0, 37)"}));
}

}  // namespace
