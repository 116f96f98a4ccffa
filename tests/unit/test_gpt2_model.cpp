// The GPT-2 model: parameter layout and count, initialisation, loss at initialisation, and that
// its adgen-generated gradient trains (a fixed batch is memorised) and matches finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "nn/gpt2.h"
#include "nn/gpt2_weights.h"
#include "test_support.h"

namespace {

using llmcc::nn::Gpt2Config;

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

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

TEST(Gpt2Model, ParameterCountMatchesLlmc) {
  // llm.c reports 124,475,904 parameters for GPT-2 124M with the padded vocabulary.
  const Gpt2Config c = llmcc::nn::gpt2_preset("gpt2");
  EXPECT_EQ(c.parameter_count(), 124475904);
  llmcc::nn::Gpt2 shapes(c);
  std::int64_t n = 0, count = 0;
  llmcc::for_each_parameter(shapes, [&](const std::string&, llmcc::Tensor& t) {
    n += t.numel();
    ++count;
  });
  EXPECT_EQ(n, c.parameter_count());
  EXPECT_EQ(count, 2 + 12 * 12 + 2);  // wte, wpe; 12 per layer (c_attn fused); ln_f
}

TEST(Gpt2Model, PresetsAndValidation) {
  EXPECT_EQ(llmcc::nn::gpt2_preset("gpt2-medium").n_layer, 24);
  EXPECT_TRUE(llmcc::test::throws_error([] { llmcc::nn::gpt2_preset("gpt3"); }, {"gpt3", "gpt2-medium"}));
  Gpt2Config bad = small_config();
  bad.n_embd = 15;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::Gpt2 m(bad); }, {"n_embd", "n_head"}));
  EXPECT_EQ(llmcc::nn::padded_vocab(50257), 50304);
}

TEST(Gpt2Model, InitialisationFollowsGpt2) {
  Gpt2Config c = small_config();
  c.n_embd = 64;
  auto w = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w.model, 1234);
  auto stddev = [](const llmcc::Tensor& t) {
    double s = 0, s2 = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) s += t.f32()[i], s2 += double(t.f32()[i]) * t.f32()[i];
    const double mean = s / t.numel();
    return std::sqrt(s2 / t.numel() - mean * mean);
  };
  EXPECT_NEAR(stddev(w.model.h[0].mlp.c_fc.w), 0.02, 0.002);
  EXPECT_NEAR(stddev(w.model.h[0].attn.c_attn.w), 0.02, 0.002);  // q, k and v rows alike
  EXPECT_NEAR(stddev(w.model.h[1].attn.c_proj.w), 0.02 / std::sqrt(4.0), 0.002);
  EXPECT_EQ(w.model.h[0].ln_1.w.f32()[3], 1.0f);
  for (std::int64_t i = 0; i < w.model.h[0].attn.c_attn.b.numel(); ++i)
    ASSERT_EQ(w.model.h[0].attn.c_attn.b.f32()[i], 0.0f) << i;
  // Padded vocabulary rows are zero.
  for (std::int64_t i = std::int64_t{c.vocab_size} * c.n_embd; i < w.model.wte.numel(); ++i)
    ASSERT_EQ(w.model.wte.f32()[i], 0.0f) << i;
  // Same seed, same model.
  auto w2 = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w2.model, 1234);
  EXPECT_EQ(0, std::memcmp(w.params.data(), w2.params.data(), w.params.size() * sizeof(float)));
}

TEST(Gpt2Model, LossAtInitialisationIsLogVocab) {
  const Gpt2Config c = llmcc::nn::gpt2_preset("gpt2-tiny");
  auto w = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w.model, 7);
  const int B = 2, T = 32;
  const auto idx = random_ids(B * T, c.vocab_size, 1), tgt = random_ids(B * T, c.vocab_size, 2);
  llmcc::Arena arena(256 << 20);
  llmcc::ArenaScope scope(arena);
  const float loss = llmcc::nn::gpt2_loss(w.model, llmcc::Tokens(idx.data(), B, T), llmcc::Tokens(tgt.data(), B, T));
  EXPECT_NEAR(loss, std::log(50257.0), 0.05);
}

TEST(Gpt2Model, GeneratedGradientMemorisesABatch) {
  const Gpt2Config c = small_config();
  auto w = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w.model, 3);
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
    last = gpt2_loss_grad(w.model, x, y, g.grad);
    if (step == 0) first = last;
    opt.step(w.params, g.store, 1e-2f);
  }
  EXPECT_NEAR(first, std::log(67.0), 0.1);
  EXPECT_LT(last, 0.3f) << "from " << first;
}

TEST(Gpt2Model, GeneratedGradientMatchesFiniteDifferences) {
  const Gpt2Config c = small_config();
  auto w = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w.model, 11);
  // Larger weights than GPT-2's 0.02 so every path carries signal.
  llmcc::Rng rng(12);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, 0.3f);
  const int B = 2, T = 5;
  auto idx = random_ids(B * T, c.vocab_size, 13), tgt = random_ids(B * T, c.vocab_size, 14);
  tgt[3] = -1;  // an ignored position
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  auto g = llmcc::adgen::make_grad(w.model);
  llmcc::Arena arena(16 << 20);
  {
    llmcc::ArenaScope scope(arena);
    gpt2_loss_grad(w.model, x, y, g.grad);
  }
  auto loss = [&] {
    arena.reset();
    llmcc::ArenaScope scope(arena);
    return static_cast<double>(llmcc::nn::gpt2_loss(w.model, x, y));
  };
  // Float forward: central differences with a large step, checked on a spread of elements of
  // every parameter (the PyTorch parity test in tests/model is the tight check).
  std::size_t checked = 0;
  for (std::size_t i = 0; i < w.params.count(); ++i) {
    float* p = w.params.tensor(i).f32();
    const float* d = g.store.tensor(i).f32();
    const std::int64_t n = w.params.tensor(i).numel();
    double max_ref = 0;
    std::vector<std::pair<double, double>> pairs;
    for (std::int64_t k = 0; k < n; k += std::max<std::int64_t>(1, n / 7)) {
      if (w.params.name(i) == "wte" && k >= std::int64_t{c.vocab_size} * c.n_embd) break;
      const float saved = p[k];
      const float h = 1e-2f;
      p[k] = saved + h;
      const double up = loss();
      p[k] = saved - h;
      const double down = loss();
      p[k] = saved;
      const double numeric = (up - down) / (2.0 * h);
      pairs.emplace_back(d[k], numeric);
      max_ref = std::max(max_ref, std::fabs(numeric));
    }
    for (const auto& [a, num] : pairs) {
      EXPECT_NEAR(a, num, 2e-2 * std::max(max_ref, 1e-2)) << w.params.name(i);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
