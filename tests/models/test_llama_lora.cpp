// LoRA on Llama (models/lora.h, llama_lora_loss): adapters start as the base model; adgen's
// gradient of every adapter matches central finite differences and the chain rule through the
// merged matrix (dL/dB = s dL/dW' A^T, dL/dA = s B^T dL/dW' with W' = W + s B A, from the full
// model's own generated gradient); the base gets no gradient and is not changed; merging gives the
// adapted model's loss; bad configurations are refused by name. Shapes other than the small
// model tests': 3 layers, 6 query heads over 2 kv heads, an MLP of 20, rank 3, alpha 5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/train/grad_check.h"
#include "lora_chain_rule.h"
#include "models/llama/llama.h"
#include "models/llama/llama_weights.h"
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::Tensor;
using llmcc::Tokens;
using llmcc::models::LlamaLora;
using llmcc::models::LoraConfig;

llmcc::models::LlamaConfig config(bool tied) {
  llmcc::models::LlamaConfig c;
  c.vocab_size = 29;
  c.max_seq_len = 16;
  c.n_layer = 3;
  c.n_head = 6;
  c.n_kv_head = 2;
  c.n_embd = 12;
  c.hidden_dim = 20;
  c.rope_theta = 100.0f;
  c.tie_embeddings = tied;
  return c;
}

LoraConfig all_maps() {
  LoraConfig c;
  c.rank = 3;
  c.alpha = 5.0f;
  c.targets = {"q", "k", "v", "o", "gate", "up", "down"};
  return c;
}

// A base with weights N(0, 0.3) (norm weights around one) so that every path carries signal.
llmcc::models::LlamaWeights base_model(bool tied) {
  auto w = llmcc::models::make_llama(config(tied));
  llmcc::Rng rng(21);
  llmcc::for_each_parameter(w.model, [&](const std::string&, Tensor& t) {
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), t.ndim() == 1 ? 1.0f : 0.0f, 0.3f);
  });
  return w;
}

struct Adapters {
  LlamaLora lora;
  llmcc::ParameterStore params;
};

// Adapters with PEFT's initialisation, or all drawn N(0, 0.1) (B zero would make A's gradient zero).
Adapters adapters(const llmcc::models::Llama& base, const LoraConfig& cfg, bool trained) {
  Adapters a{llmcc::models::llama_lora(base, cfg), {}};
  a.params = llmcc::bind_parameters(a.lora);
  llmcc::models::llama_lora_init(a.lora, 31);
  if (trained) {
    llmcc::Rng rng(32);
    rng.fill_normal(a.params.data(), a.params.size(), 0.0f, 0.1f);
  }
  return a;
}

TEST(LlamaLora, AdaptersNameTheirMapsAndStartAsTheBaseModel) {
  auto w = base_model(false);
  LoraConfig cfg = all_maps();
  cfg.targets = {"q", "down"};
  Adapters a = adapters(w.model, cfg, false);
  std::vector<std::string> names;
  llmcc::for_each_parameter(a.lora,
                            [&](const std::string& name, Tensor& t) { names.push_back(name + " " + t.shape().str()); });
  ASSERT_EQ(names.size(), 3u * 4u);
  EXPECT_EQ(names[0], "layers.0.wq.lora_A.weight (3, 12)");
  EXPECT_EQ(names[1], "layers.0.wq.lora_B.weight (12, 3)");
  EXPECT_EQ(names[2], "layers.0.w2.lora_A.weight (3, 20)");
  EXPECT_EQ(names[3], "layers.0.w2.lora_B.weight (12, 3)");
  // PEFT's initialisation: A within +-1/sqrt(in), not all zero; B zero.
  const Tensor A = a.lora.layers[1].wq[0].a, B = a.lora.layers[1].wq[0].b;
  float largest = 0.0f;
  for (std::int64_t i = 0; i < A.numel(); ++i) largest = std::max(largest, std::abs(A.f32()[i]));
  EXPECT_GT(largest, 0.0f);
  EXPECT_LE(largest, 1.0f / std::sqrt(12.0f));
  for (std::int64_t i = 0; i < B.numel(); ++i) ASSERT_EQ(B.f32()[i], 0.0f);
  EXPECT_EQ(a.lora.layers[0].wq[0].scale, 5.0f / 3.0f);

  const auto in = llmcc::test::random_ids(2 * 9, 29, 3), out = llmcc::test::random_ids(2 * 9, 29, 4);
  const Tokens idx(in.data(), 2, 9), targets(out.data(), 2, 9);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  EXPECT_EQ(llmcc::models::llama_lora_loss(a.lora, w.model, idx, targets),
            llmcc::models::llama_loss(w.model, idx, targets));
}

// With dropout on every adapter's input too: the masks are fixed by their seeds, so the loss is a
// function of the adapters that finite differences can check.
TEST(LlamaLora, GradientMatchesFiniteDifferences) {
  for (const float dropout : {0.0f, 0.3f})
    for (const bool tied : {false, true}) {
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + " dropout " + std::to_string(dropout));
      const auto w = base_model(tied);
      Adapters a = adapters(w.model, all_maps(), true);
      const auto in = llmcc::test::random_ids(2 * 7, 29, 5), out = llmcc::test::random_ids(2 * 7, 29, 6);
      const llmcc::models::llama_lora_loss_Entry::Inputs inputs{w.model, Tokens(in.data(), 2, 7),
                                                                Tokens(out.data(), 2, 7)};
      if (dropout > 0.0f) {
        llmcc::Arena arena(64 << 20);
        llmcc::ArenaScope scope(arena);
        const float plain = llmcc::models::llama_lora_loss(a.lora, w.model, std::get<1>(inputs), std::get<2>(inputs));
        std::uint64_t k = 0;
        for (auto* adapter : llmcc::models::llama_lora_adapters(a.lora))
          adapter->dropout = llmcc::models::lora_dropout(dropout, 5, k++);
        EXPECT_NE(llmcc::models::llama_lora_loss(a.lora, w.model, std::get<1>(inputs), std::get<2>(inputs)), plain);
      }
      llmcc::GradCheckOptions options;
      options.per_tensor = 4;
      options.rtol = 5e-3;
      const llmcc::GradCheckReport r =
          llmcc::check_gradients<llmcc::models::llama_lora_loss_Entry>(a.lora, inputs, options);
      EXPECT_TRUE(r.ok()) << r.failed() << " adapter tensors failed";
      EXPECT_EQ(r.tensors.size(), 3u * 7u * 2u);
    }
}

TEST(LlamaLora, GradientIsTheChainRuleThroughTheMergedMatrixAndTheBaseStaysAsItWas) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto w = base_model(tied);
    const std::vector<float> base_before(w.params.data(), w.params.data() + w.params.size());
    Adapters a = adapters(w.model, all_maps(), true);
    const auto in = llmcc::test::random_ids(3 * 5, 29, 7), out = llmcc::test::random_ids(3 * 5, 29, 8);
    const Tokens idx(in.data(), 3, 5), targets(out.data(), 3, 5);
    llmcc::Arena arena(64 << 20);
    llmcc::ArenaScope scope(arena);
    auto g = llmcc::adgen::make_grad(a.lora);
    g.zero();
    const float loss = llmcc::models::llama_lora_loss_grad(a.lora, w.model, idx, targets, g.grad);
    EXPECT_EQ(std::memcmp(base_before.data(), w.params.data(), base_before.size() * sizeof(float)), 0);

    // The merged model's own gradient dL/dW' for every adapted matrix.
    auto merged = llmcc::models::make_llama(config(tied));
    std::memcpy(merged.params.data(), w.params.data(), w.params.size() * sizeof(float));
    llmcc::models::llama_lora_merge(merged.model, a.lora);
    auto gm = llmcc::adgen::make_grad(merged.model);
    gm.zero();
    const float merged_loss = llmcc::models::llama_loss_grad(merged.model, idx, targets, gm.grad);
    EXPECT_NEAR(merged_loss, loss, 1e-5 * std::abs(loss));

    for (int l = 0; l < 3; ++l) {
      const auto& al = a.lora.layers[l];
      const auto& gl = g.grad.layers[l];
      const auto& dw = gm.grad.layers[l];
      const std::tuple<const char*, const llmcc::models::LlamaLoraAdapter*, const llmcc::models::LlamaLoraAdapter_Grad*,
                       const Tensor*>
          maps[] = {
              {"wq", &al.wq[0], &gl.wq[0], &dw.attention.wq},    {"wk", &al.wk[0], &gl.wk[0], &dw.attention.wk},
              {"wv", &al.wv[0], &gl.wv[0], &dw.attention.wv},    {"wo", &al.wo[0], &gl.wo[0], &dw.attention.wo},
              {"w1", &al.w1[0], &gl.w1[0], &dw.feed_forward.w1}, {"w2", &al.w2[0], &gl.w2[0], &dw.feed_forward.w2},
              {"w3", &al.w3[0], &gl.w3[0], &dw.feed_forward.w3}};
      for (const auto& [name, adapter, grad, dW] : maps) {
        SCOPED_TRACE("layer " + std::to_string(l) + " " + name);
        llmcc::test::expect_chain_rule(adapter->a, adapter->b, adapter->scale, grad->a, grad->b, *dW);
      }
    }
  }
}

TEST(LlamaLora, BadConfigurationsAreRefusedByName) {
  const auto w = base_model(false);
  const auto refused = [&](LoraConfig c, const std::string& what) {
    try {
      (void)llmcc::models::llama_lora(w.model, c);
      ADD_FAILURE() << "accepted, expected: " << what;
    } catch (const llmcc::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  LoraConfig c = all_maps();
  c.targets = {"q", "qkv"};
  refused(c, "unknown target map 'qkv'; this family's are q, k, v, o, gate, up, down");
  c.targets = {"q", "v", "q"};
  refused(c, "target map 'q' is named twice");
  c.targets = {};
  refused(c, "no target maps");
  c = all_maps();
  c.rank = 0;
  refused(c, "the rank is 0, expected at least 1");
  c = all_maps();
  c.alpha = -2.0f;
  refused(c, "alpha is -2.000000, expected a positive number");
  c.alpha = std::nanf("");
  refused(c, "expected a positive number");
}

}  // namespace
