// The umbrella header compiles on its own and declares every op's forward and pullback.
#include "llmcc/ops.h"

#include <gtest/gtest.h>

TEST(OpsHeaderApi, DeclaresEveryRule) {
  using namespace llmcc;
  EXPECT_NE(&add_pullback, nullptr);
  EXPECT_NE(&attention_pullback, nullptr);
  EXPECT_NE(&attention_qkv_pullback, nullptr);
  EXPECT_NE(&bidirectional_attention_pullback, nullptr);
  EXPECT_NE(&cross_entropy_pullback, nullptr);
  EXPECT_NE(&token_embedding_pullback, nullptr);
  EXPECT_NE(&token_position_embedding_pullback, nullptr);
  EXPECT_NE(&gelu_pullback, nullptr);
  EXPECT_NE(&layernorm_pullback, nullptr);
  EXPECT_NE(&linear_pullback, nullptr);
  EXPECT_NE(&linear_nobias_pullback, nullptr);
  // lora_linear has three overloads: without dropout, with dropout, with dropout and a bias.
  using LoraPullback = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const Tensor&,
                                const LoraLinearSaved&, const Tensor&, Tensor*, Tensor*, Tensor*, Tensor*);
  using LoraDropoutPullback =
      void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const LoraDropout&, const Tensor&,
               const LoraLinearSaved&, const Tensor&, Tensor*, Tensor*, Tensor*, Tensor*);
  EXPECT_NE(static_cast<LoraPullback>(&lora_linear_pullback), nullptr);
  EXPECT_NE(static_cast<LoraDropoutPullback>(&lora_linear_pullback), nullptr);
  using LoraBiasPullback =
      void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const LoraDropout&,
               const Tensor&, const LoraLinearSaved&, const Tensor&, Tensor*, Tensor*, Tensor*, Tensor*, Tensor*);
  EXPECT_NE(static_cast<LoraBiasPullback>(&lora_linear_pullback), nullptr);
  EXPECT_NE(&mean_pool_pullback, nullptr);
  EXPECT_NE(&mse_loss_pullback, nullptr);
  EXPECT_NE(&mul_pullback, nullptr);
  EXPECT_NE(&rmsnorm_pullback, nullptr);
  // rope has two overloads: RopeConfig (base and scaling) and plain theta.
  EXPECT_NE(static_cast<void (*)(const Tensor&, int, const RopeConfig&, int, const Tensor&, const Tensor&, Tensor*)>(
                &rope_pullback),
            nullptr);
  EXPECT_NE(
      static_cast<void (*)(const Tensor&, int, float, int, const Tensor&, const Tensor&, Tensor*)>(&rope_pullback),
      nullptr);
  EXPECT_NE(&scale_pullback, nullptr);
  EXPECT_NE(&silu_pullback, nullptr);
  EXPECT_NE(&swiglu_pullback, nullptr);
  EXPECT_NE(&tanh_pullback, nullptr);
  EXPECT_NE(&view_pullback, nullptr);
}
