// LoRA on Qwen3 (qwen3_lora_loss): adapters start as the base model; adgen's gradient of every
// adapter matches central finite differences, with head_dim independent of n_embd / n_head and
// the q/k norms between the adapted maps and RoPE; merging the adapters gives the adapted loss
// and the base gets no gradient. Shapes: 2 layers, 6 query heads over 3 kv heads of head_dim 6,
// n_embd 20, an MLP of 28, rank 2, alpha 3, on q, o and up only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/train/grad_check.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3/qwen3_weights.h"
#include "qwen3.grad.h"
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::Tensor;
using llmcc::Tokens;

llmcc::models::Qwen3Config config(bool tied) {
  llmcc::models::Qwen3Config c;
  c.vocab_size = 31;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 6;
  c.n_kv_head = 3;
  c.n_embd = 20;
  c.head_dim = 6;
  c.hidden_dim = 28;
  c.rope_theta = 100.0f;
  c.norm_eps = 1e-5f;
  c.tie_embeddings = tied;
  return c;
}

llmcc::models::LoraConfig some_maps() {
  llmcc::models::LoraConfig c;
  c.rank = 2;
  c.alpha = 3.0f;
  c.targets = {"q", "o", "up"};
  return c;
}

llmcc::models::Qwen3Weights base_model(bool tied) {
  auto w = llmcc::models::make_qwen3(config(tied));
  llmcc::Rng rng(41);
  llmcc::for_each_parameter(w.model, [&](const std::string&, Tensor& t) {
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), t.ndim() == 1 ? 1.0f : 0.0f, 0.3f);
  });
  return w;
}

TEST(Qwen3Lora, AdaptersStartAsTheBaseAndTheirGradientMatchesFiniteDifferences) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const auto w = base_model(tied);
    llmcc::models::Qwen3Lora lora = llmcc::models::qwen3_lora(w.model, some_maps());
    llmcc::ParameterStore params = llmcc::bind_parameters(lora);
    EXPECT_EQ(params.count(), 2u * 3u * 2u);
    EXPECT_EQ(params.name(0), "layers.0.q_proj.lora_A.weight");
    EXPECT_EQ(params.name(3), "layers.0.o_proj.lora_B.weight");
    llmcc::models::qwen3_lora_init(lora, 3);
    const auto in = llmcc::test::random_ids(2 * 6, 31, 5), out = llmcc::test::random_ids(2 * 6, 31, 6);
    const Tokens idx(in.data(), 2, 6), targets(out.data(), 2, 6);
    {
      llmcc::Arena arena(64 << 20);
      llmcc::ArenaScope scope(arena);
      EXPECT_EQ(llmcc::models::qwen3_lora_loss(lora, w.model, idx, targets),
                llmcc::models::qwen3_loss(w.model, idx, targets));
    }
    llmcc::Rng rng(7);
    rng.fill_normal(params.data(), params.size(), 0.0f, 0.1f);
    llmcc::GradCheckOptions options;
    options.per_tensor = 4;
    options.rtol = 5e-3;
    const auto r = llmcc::check_gradients<llmcc::models::qwen3_lora_loss_Entry>(lora, {w.model, idx, targets}, options);
    EXPECT_TRUE(r.ok()) << r.failed() << " adapter tensors failed";

    // Merged into a copy of the base: the same loss, and the base untouched by the gradient.
    const std::vector<float> base_before(w.params.data(), w.params.data() + w.params.size());
    llmcc::Arena arena(64 << 20);
    llmcc::ArenaScope scope(arena);
    auto g = llmcc::adgen::make_grad(lora);
    g.zero();
    const float adapted = llmcc::models::qwen3_lora_loss_grad(lora, w.model, idx, targets, g.grad);
    EXPECT_EQ(std::memcmp(base_before.data(), w.params.data(), base_before.size() * sizeof(float)), 0);
    auto merged = llmcc::models::make_qwen3(config(tied));
    std::memcpy(merged.params.data(), w.params.data(), w.params.size() * sizeof(float));
    llmcc::models::qwen3_lora_merge(merged.model, lora);
    EXPECT_NEAR(llmcc::models::qwen3_loss(merged.model, idx, targets), adapted, 1e-5 * std::abs(adapted));
  }
}

}  // namespace
