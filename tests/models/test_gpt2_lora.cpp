// LoRA on GPT-2 (models/lora.h, gpt2_lora_loss): adapters on c_attn, c_proj (the attention's and
// the MLP's, as PEFT's "c_proj" names both) and c_fc, each map keeping its bias; they start as the
// base model; adgen's gradient of every adapter matches central finite differences, with and
// without dropout, and the chain rule through the merged matrix (from the full model's own
// generated gradient); the base gets no gradient and is not changed; merging gives the adapted
// model's loss; bad configurations are refused by name. Shapes other than the presets': 3 layers,
// 2 heads of 5 channels, rank 3, alpha 5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/train/grad_check.h"
#include "lora_chain_rule.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_weights.h"
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::Tensor;
using llmcc::Tokens;
using llmcc::models::Gpt2Lora;
using llmcc::models::LoraConfig;

constexpr int kVocab = 29;

llmcc::models::Gpt2Config config() {
  llmcc::models::Gpt2Config c;
  c.vocab_size = kVocab;
  c.padded_vocab_size = 32;
  c.max_seq_len = 16;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 10;
  return c;
}

LoraConfig all_maps() {
  LoraConfig c;
  c.rank = 3;
  c.alpha = 5.0f;
  c.targets = {"c_attn", "c_proj", "c_fc"};
  return c;
}

// A base with weights N(0, 0.3) (layernorm weights around one, biases too) so that every path
// carries signal.
llmcc::models::Gpt2Weights base_model() {
  auto w = llmcc::models::make_gpt2(config());
  llmcc::Rng rng(21);
  llmcc::for_each_parameter(w.model, [&](const std::string& name, Tensor& t) {
    const bool norm_weight = name.find("ln_") != std::string::npos && name.ends_with(".weight");
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), norm_weight ? 1.0f : 0.0f, 0.3f);
  });
  return w;
}

struct Adapters {
  Gpt2Lora lora;
  llmcc::ParameterStore params;
};

// Adapters with PEFT's initialisation, or all drawn N(0, 0.1) (B zero would make A's gradient zero).
Adapters adapters(const llmcc::models::Gpt2& base, const LoraConfig& cfg, bool trained) {
  Adapters a{llmcc::models::gpt2_lora(base, cfg), {}};
  a.params = llmcc::bind_parameters(a.lora);
  llmcc::models::gpt2_lora_init(a.lora, 31);
  if (trained) {
    llmcc::Rng rng(32);
    rng.fill_normal(a.params.data(), a.params.size(), 0.0f, 0.1f);
  }
  return a;
}

TEST(Gpt2Lora, AdaptersNameTheirMapsAndStartAsTheBaseModel) {
  auto w = base_model();
  LoraConfig cfg = all_maps();
  cfg.targets = {"c_proj"};
  Adapters a = adapters(w.model, cfg, false);
  std::vector<std::string> names;
  llmcc::for_each_parameter(a.lora,
                            [&](const std::string& name, Tensor& t) { names.push_back(name + " " + t.shape().str()); });
  ASSERT_EQ(names.size(), 3u * 4u);  // both c_proj maps of every layer, A and B
  EXPECT_EQ(names[0], "h.0.attn.c_proj.lora_A.weight (3, 10)");
  EXPECT_EQ(names[1], "h.0.attn.c_proj.lora_B.weight (10, 3)");
  EXPECT_EQ(names[2], "h.0.mlp.c_proj.lora_A.weight (3, 40)");
  EXPECT_EQ(names[3], "h.0.mlp.c_proj.lora_B.weight (10, 3)");
  const Adapters all = adapters(w.model, all_maps(), false);
  std::vector<std::string> all_names;
  llmcc::for_each_parameter(all.lora, [&](const std::string& name, const Tensor&) { all_names.push_back(name); });
  ASSERT_EQ(all_names.size(), 3u * 8u);
  EXPECT_EQ(all_names[0], "h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(all_names[4], "h.0.mlp.c_fc.lora_A.weight");
  EXPECT_EQ(llmcc::models::gpt2_lora_adapters(a.lora).size(), 6u);
  EXPECT_EQ(a.lora.h[1].attn.c_proj[0].scale, 5.0f / 3.0f);

  const auto in = llmcc::test::random_ids(2 * 9, kVocab, 3), out = llmcc::test::random_ids(2 * 9, kVocab, 4);
  const Tokens idx(in.data(), 2, 9), targets(out.data(), 2, 9);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  EXPECT_EQ(llmcc::models::gpt2_lora_loss(a.lora, w.model, idx, targets),
            llmcc::models::gpt2_loss(w.model, idx, targets));
}

// With dropout on every adapter's input too: the masks are fixed by their seeds, so the loss is a
// function of the adapters that finite differences can check.
TEST(Gpt2Lora, GradientMatchesFiniteDifferences) {
  for (const float dropout : {0.0f, 0.3f}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    const auto w = base_model();
    Adapters a = adapters(w.model, all_maps(), true);
    const auto in = llmcc::test::random_ids(2 * 7, kVocab, 5), out = llmcc::test::random_ids(2 * 7, kVocab, 6);
    const llmcc::models::gpt2_lora_loss_Entry::Inputs inputs{w.model, Tokens(in.data(), 2, 7),
                                                             Tokens(out.data(), 2, 7)};
    if (dropout > 0.0f) {
      llmcc::Arena arena(64 << 20);
      llmcc::ArenaScope scope(arena);
      const float plain = llmcc::models::gpt2_lora_loss(a.lora, w.model, std::get<1>(inputs), std::get<2>(inputs));
      std::uint64_t k = 0;
      for (auto* adapter : llmcc::models::gpt2_lora_adapters(a.lora))
        adapter->dropout = llmcc::models::lora_dropout(dropout, 5, k++);
      EXPECT_NE(llmcc::models::gpt2_lora_loss(a.lora, w.model, std::get<1>(inputs), std::get<2>(inputs)), plain);
    }
    llmcc::GradCheckOptions options;
    options.per_tensor = 4;
    options.rtol = 5e-3;
    const llmcc::GradCheckReport r =
        llmcc::check_gradients<llmcc::models::gpt2_lora_loss_Entry>(a.lora, inputs, options);
    EXPECT_TRUE(r.ok()) << r.failed() << " adapter tensors failed";
    EXPECT_EQ(r.tensors.size(), 3u * 4u * 2u);
  }
}

TEST(Gpt2Lora, GradientIsTheChainRuleThroughTheMergedMatrixAndTheBaseStaysAsItWas) {
  auto w = base_model();
  const std::vector<float> base_before(w.params.data(), w.params.data() + w.params.size());
  Adapters a = adapters(w.model, all_maps(), true);
  const auto in = llmcc::test::random_ids(3 * 5, kVocab, 7), out = llmcc::test::random_ids(3 * 5, kVocab, 8);
  const Tokens idx(in.data(), 3, 5), targets(out.data(), 3, 5);
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(a.lora);
  g.zero();
  const float loss = llmcc::models::gpt2_lora_loss_grad(a.lora, w.model, idx, targets, g.grad);
  EXPECT_EQ(std::memcmp(base_before.data(), w.params.data(), base_before.size() * sizeof(float)), 0);

  // The merged model's own gradient dL/dW' for every adapted matrix.
  auto merged = llmcc::models::make_gpt2(config());
  std::memcpy(merged.params.data(), w.params.data(), w.params.size() * sizeof(float));
  llmcc::models::gpt2_lora_merge(merged.model, a.lora);
  auto gm = llmcc::adgen::make_grad(merged.model);
  gm.zero();
  const float merged_loss = llmcc::models::gpt2_loss_grad(merged.model, idx, targets, gm.grad);
  EXPECT_NEAR(merged_loss, loss, 1e-5 * std::abs(loss));

  for (int l = 0; l < 3; ++l) {
    const auto& al = a.lora.h[l];
    const auto& gl = g.grad.h[l];
    const auto& dw = gm.grad.h[l];
    const std::tuple<const char*, const llmcc::models::Gpt2LoraAdapter*, const llmcc::models::Gpt2LoraAdapter_Grad*,
                     const Tensor*>
        maps[] = {{"attn.c_attn", &al.attn.c_attn[0], &gl.attn.c_attn[0], &dw.attn.c_attn.w},
                  {"attn.c_proj", &al.attn.c_proj[0], &gl.attn.c_proj[0], &dw.attn.c_proj.w},
                  {"mlp.c_fc", &al.mlp.c_fc[0], &gl.mlp.c_fc[0], &dw.mlp.c_fc.w},
                  {"mlp.c_proj", &al.mlp.c_proj[0], &gl.mlp.c_proj[0], &dw.mlp.c_proj.w}};
    for (const auto& [name, adapter, grad, dW] : maps) {
      SCOPED_TRACE("layer " + std::to_string(l) + " " + name);
      llmcc::test::expect_chain_rule(adapter->a, adapter->b, adapter->scale, grad->a, grad->b, *dW);
    }
  }
}

TEST(Gpt2Lora, BadConfigurationsAreRefusedByName) {
  const auto w = base_model();
  EXPECT_TRUE(llmcc::test::throws_error(
      [&] {
        LoraConfig c = all_maps();
        c.targets = {"q", "c_attn"};
        (void)llmcc::models::gpt2_lora(w.model, c);
      },
      {"unknown target map 'q'; this family's are c_attn, c_proj, c_fc"}));
  EXPECT_TRUE(llmcc::test::throws_error(
      [&] {
        LoraConfig c = all_maps();
        c.dropout = 1.0f;
        (void)llmcc::models::gpt2_lora(w.model, c);
      },
      {"dropout is 1.000000, expected a probability in [0, 1)"}));
}

}  // namespace
