// The Llama model: presets and parameter counts against llama2.c and Meta, configuration checks
// and round trip, initialisation, loss at initialisation, and that its adgen-generated gradient
// trains (a fixed batch is memorised) and matches central finite differences, with grouped-query
// attention (n_kv_head < n_head).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "model_family.h"
#include "nn/llama.h"
#include "nn/llama_generate.h"
#include "nn/llama_weights.h"
#include "test_support.h"

namespace {

using llmcc::nn::LlamaConfig;

// GQA (4 query heads over 2 key/value heads), head size 4 (two RoPE pairs), a SwiGLU width
// that is not a multiple of anything in particular, and a vocabulary of 37.
LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.hidden_dim = 24;
  c.rope_theta = 100.0f;  // small: positions 0..4 turn the pairs by visibly different angles
  return c;
}

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

std::int64_t declared_elements(const LlamaConfig& c) {
  llmcc::nn::Llama shapes(c);  // shapes only: no storage, so llama-3.2-1b builds anywhere
  std::int64_t n = 0;
  llmcc::for_each_parameter(shapes, [&](const std::string&, llmcc::Tensor& t) { n += t.numel(); });
  return n;
}

TEST(LlamaModel, Stories15mMatchesLlama2c) {
  const LlamaConfig c = llmcc::nn::llama_preset("stories15m");
  EXPECT_EQ(c.n_embd, 288);
  EXPECT_EQ(c.hidden_dim, llmcc::nn::llama_hidden_dim(288, 32));
  EXPECT_EQ(c.hidden_dim, 768);
  EXPECT_EQ(llmcc::nn::llama_preset("stories42m").hidden_dim, llmcc::nn::llama_hidden_dim(512, 32));
  EXPECT_EQ(llmcc::nn::llama_preset("stories42m").hidden_dim, 1376);
  EXPECT_EQ(llmcc::nn::llama_preset("llama-tiny").hidden_dim, llmcc::nn::llama_hidden_dim(128, 32));
  // llama2.c's stories15M has 15,191,712 parameters with its output head tied to the embedding;
  // ours is untied, one (V, C) matrix more.
  const std::int64_t head = std::int64_t{32000} * 288;
  EXPECT_EQ(c.parameter_count() - head, 15191712);
  EXPECT_EQ(c.parameter_count(), 24407712);
  EXPECT_EQ(declared_elements(c), c.parameter_count());
}

TEST(LlamaModel, Llama32OneBBuildsAndReportsItsPlan) {
  const LlamaConfig c = llmcc::nn::llama_preset("llama-3.2-1b");
  EXPECT_EQ(c.n_kv_head, 8);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  // Llama 3.2's config.json: rope_scaling llama3, factor 32, low 1, high 4, original 8192.
  EXPECT_EQ(c.rope_scaling.type, llmcc::RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llmcc::nn::llama_preset("stories15m").rope_scaling.type, llmcc::RopeScaling::Type::None);
  // Meta's Llama-3.2-1B: 1,235,814,400 parameters with the head tied to the embedding.
  const std::int64_t head = std::int64_t{128256} * 2048;
  EXPECT_EQ(c.parameter_count() - head, 1235814400);
  EXPECT_EQ(c.parameter_count(), 1498482688);
  EXPECT_EQ(declared_elements(c), c.parameter_count());
  // The memory plan the trainer prints (model_family.h): weights, gradients, AdamW's two moments,
  // and the step arena for one (1, 2048) micro-batch, which the trainer measures when it starts.
  const auto mc = llmcc::cli::ModelConfig::of(c);
  const llmcc::cli::MemoryPlan plan = llmcc::cli::memory_plan(mc, 1, 2048);
  std::printf("llama-3.2-1b: %s\n", llmcc::cli::describe(plan).c_str());
  EXPECT_EQ(plan.params_bytes, static_cast<std::size_t>(c.parameter_count()) * 4);
  EXPECT_EQ(plan.optimizer_bytes, 2 * plan.params_bytes);
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_NE(llmcc::cli::describe(plan).find("measured when training starts"), std::string::npos);
}

TEST(LlamaModel, PresetsAndValidation) {
  EXPECT_TRUE(llmcc::test::throws_error([] { llmcc::nn::llama_preset("llama-9"); }, {"llama-9", "stories15m"}));
  LlamaConfig bad = small_config();
  bad.n_kv_head = 3;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::Llama m(bad); }, {"n_kv_head (3)", "divisor of n_head (4)"}));
  bad = small_config();
  bad.n_embd = 12;  // head size 3: RoPE needs pairs
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::Llama m(bad); }, {"head size", "even"}));
  bad = small_config();
  bad.rope_theta = 0.0f;
  EXPECT_TRUE(llmcc::test::throws_error([&] { bad.validate(); }, {"rope_theta"}));
}

TEST(LlamaModel, ConfigRoundTripsThroughKeyValues) {
  LlamaConfig c = llmcc::nn::llama_preset("llama-3.2-1b");
  c.norm_eps = 1e-6f;
  llmcc::KeyValues kv;
  llmcc::nn::llama_config_to_kv(c, kv);
  EXPECT_EQ(kv.at("model.family"), "llama");
  const LlamaConfig back = llmcc::nn::llama_config_from_kv(kv, "test");
  EXPECT_EQ(back.n_kv_head, c.n_kv_head);
  EXPECT_EQ(back.hidden_dim, c.hidden_dim);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.norm_eps, c.norm_eps);
  EXPECT_EQ(back.rope_scaling, c.rope_scaling);
  EXPECT_EQ(llmcc::cli::model_config_from_kv(kv, "test").family, llmcc::cli::Family::Llama);
  kv.erase("model.n_kv_head");
  EXPECT_TRUE(
      llmcc::test::throws_error([&] { llmcc::nn::llama_config_from_kv(kv, "f.bin"); }, {"f.bin", "model.n_kv_head"}));
  kv["model.family"] = "gpt2";
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::llama_config_from_kv(kv, "f.bin"); }, {"'gpt2' model"}));
}

TEST(LlamaModel, InitialisationFollowsLlama2c) {
  LlamaConfig c = small_config();
  c.n_embd = 64;
  c.hidden_dim = 128;
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 1234);
  auto stddev = [](const llmcc::Tensor& t) {
    double s = 0, s2 = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) s += t.f32()[i], s2 += double(t.f32()[i]) * t.f32()[i];
    const double mean = s / t.numel();
    return std::sqrt(s2 / t.numel() - mean * mean);
  };
  EXPECT_NEAR(stddev(w.model.tok_embeddings), 0.02, 0.002);
  EXPECT_NEAR(stddev(w.model.layers[0].attention.wq), 0.02, 0.002);
  EXPECT_NEAR(stddev(w.model.layers[0].feed_forward.w1), 0.02, 0.002);
  EXPECT_NEAR(stddev(w.model.output), 0.02, 0.002);
  EXPECT_NEAR(stddev(w.model.layers[1].attention.wo), 0.02 / std::sqrt(4.0), 0.002);
  EXPECT_NEAR(stddev(w.model.layers[1].feed_forward.w2), 0.02 / std::sqrt(4.0), 0.002);
  for (std::int64_t i = 0; i < c.n_embd; ++i) {
    ASSERT_EQ(w.model.layers[0].attention_norm.w.f32()[i], 1.0f);
    ASSERT_EQ(w.model.norm.w.f32()[i], 1.0f);
  }
  auto w2 = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w2.model, 1234);
  EXPECT_EQ(0, std::memcmp(w.params.data(), w2.params.data(), w.params.size() * sizeof(float)));
}

TEST(LlamaModel, LossAtInitialisationIsLogVocab) {
  const LlamaConfig c = llmcc::nn::llama_preset("llama-tiny");
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 7);
  const int B = 2, T = 32;
  const auto idx = random_ids(B * T, c.vocab_size, 1), tgt = random_ids(B * T, c.vocab_size, 2);
  llmcc::Arena arena(256 << 20);
  llmcc::ArenaScope scope(arena);
  const float loss = llmcc::nn::llama_loss(w.model, llmcc::Tokens(idx.data(), B, T), llmcc::Tokens(tgt.data(), B, T));
  EXPECT_NEAR(loss, std::log(32000.0), 0.05);
}

TEST(LlamaModel, GeneratedGradientMemorisesABatch) {
  const LlamaConfig c = small_config();
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 3);
  const int B = 2, T = 8;
  const auto idx = random_ids(B * T, c.vocab_size, 4), tgt = random_ids(B * T, c.vocab_size, 5);
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  auto g = llmcc::adgen::make_grad(w.model);
  llmcc::AdamW opt(w.params, {0.9f, 0.95f, 1e-8f, 0.0f});
  llmcc::Arena arena(64 << 20);
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    arena.reset();
    llmcc::ArenaScope scope(arena);
    g.zero();
    last = llama_loss_grad(w.model, x, y, g.grad);
    if (step == 0) first = last;
    opt.step(w.params, g.store, 1e-2f);
  }
  EXPECT_NEAR(first, std::log(37.0), 0.1);
  EXPECT_LT(last, 0.3f) << "from " << first;
}

// Central differences of the (float) forward, accumulated in double, on a spread of elements of
// every parameter; weights drawn larger than Llama's 0.02 so that every path carries signal.
TEST(LlamaModel, GeneratedGradientMatchesFiniteDifferences) {
  const LlamaConfig c = small_config();
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 11);
  llmcc::Rng rng(12);
  llmcc::for_each_parameter(w.model, [&](const std::string&, llmcc::Tensor& t) {
    // RMSNorm weights around one (their role), matrices N(0, 0.3).
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), t.ndim() == 1 ? 1.0f : 0.0f, 0.3f);
  });
  const int B = 2, T = 5;
  auto idx = random_ids(B * T, c.vocab_size, 13), tgt = random_ids(B * T, c.vocab_size, 14);
  tgt[3] = -1;  // an ignored position
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  auto g = llmcc::adgen::make_grad(w.model);
  llmcc::Arena arena(16 << 20);
  {
    llmcc::ArenaScope scope(arena);
    llama_loss_grad(w.model, x, y, g.grad);
  }
  auto loss = [&] {
    arena.reset();
    llmcc::ArenaScope scope(arena);
    return static_cast<double>(llmcc::nn::llama_loss(w.model, x, y));
  };
  std::size_t checked = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < w.params.count(); ++i) {
    float* p = w.params.tensor(i).f32();
    const float* d = g.store.tensor(i).f32();
    const std::int64_t n = w.params.tensor(i).numel();
    double max_ref = 0;
    std::vector<std::pair<double, double>> pairs;
    for (std::int64_t k = 0; k < n; k += std::max<std::int64_t>(1, n / 9)) {
      const float saved = p[k];
      const float h = 1e-2f;
      p[k] = saved + h;
      const double up = loss();
      p[k] = saved - h;
      const double down = loss();
      p[k] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      pairs.emplace_back(d[k], numeric);
      max_ref = std::max(max_ref, std::fabs(numeric));
    }
    ASSERT_GT(max_ref, 1e-4) << w.params.name(i) << ": no signal reaches this parameter";
    for (const auto& [a, num] : pairs) {
      const double scale = std::max(max_ref, 1e-2);
      EXPECT_NEAR(a, num, 5e-3 * scale) << w.params.name(i);  // measured worst: 7.7e-4
      worst = std::max(worst, std::fabs(a - num) / scale);
      ++checked;
    }
  }
  std::printf("llama finite differences: %zu elements of %zu tensors, worst |adgen - fd| / max|fd| = %.2e\n", checked,
              w.params.count(), worst);
  EXPECT_GT(checked, 150u);
}

TEST(LlamaModel, SamplerDrawsFromTheLastRow) {
  const LlamaConfig c = small_config();
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 21);
  llmcc::nn::SamplingConfig cfg;
  cfg.temperature = 0.0f;  // greedy: the argmax of Llama::forward's last row
  cfg.eot = 1;
  llmcc::Rng rng(1);
  const std::vector<std::int32_t> prompt = {3, 5, 7};
  // Longer than max_seq_len (16): the window slides.
  const auto out = llmcc::nn::llama_sample(w.model, prompt, 20, cfg, rng);
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
      llmcc::test::throws_error([&] { llmcc::nn::llama_sample(w.model, {40}, 1, cfg, rng); }, {"40", "[0, 37)"}));
}

}  // namespace
