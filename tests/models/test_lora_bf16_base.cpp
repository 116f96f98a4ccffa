// A LoRA model whose frozen base is stored in bf16 (Model::store_base_in_bf16, --base-dtype bf16)
// computes what the same model computes with an fp32 base holding the bf16-rounded values: the
// loss, training steps of the adapters (forward, generated backward, AdamW), generation and the
// merged model, for every family with adapters (GPT-2's tied head and position table, Llama's
// untied head, Qwen3); the fp32 memory of the matrices is given back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/train/rng.h"
#include "models/registry.h"
#include "smallest_preset.h"

namespace {

using llmcc::models::LoraConfig;
using llmcc::models::Model;

// The preset's model from `seed`, its matrices (2-D weights) rounded to bf16 in place when asked.
std::unique_ptr<Model> base(const std::string& preset, bool rounded) {
  std::unique_ptr<Model> m = llmcc::models::make_model(llmcc::models::model_preset(preset));
  m->init(7);
  if (rounded) {
    const llmcc::ParameterStore& p = m->params();
    for (std::size_t i = 0; i < p.count(); ++i)
      if (p.shape(i).ndim() == 2) llmcc::cpu::round_floats_to_bf16(p.tensor(i).f32(), p.shape(i).numel());
  }
  return m;
}

std::unique_ptr<Model> with_adapters(std::unique_ptr<Model> m) {
  LoraConfig cfg;
  cfg.rank = 4;
  cfg.alpha = 8.0f;
  cfg.targets = m->config().family().lora_targets();
  std::unique_ptr<Model> lora = llmcc::models::add_lora(std::move(m), "(test base)", cfg);
  lora->init(11);
  // B drawn too (PEFT starts it at zero, which would leave the base alone in the first loss).
  llmcc::Rng rng(12);
  rng.fill_normal(lora->params().data(), lora->params().size(), 0.0f, 0.05f);
  return lora;
}

class LoraBf16Base : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraBf16Base, TrainsAndGeneratesAsTheRoundedFp32Base) {
  const std::string preset = GetParam();
  std::unique_ptr<Model> ref = with_adapters(base(preset, true));
  std::unique_ptr<Model> bf16 = with_adapters(base(preset, false));
  const std::size_t released = bf16->store_base_in_bf16();
  const llmcc::models::ModelConfig& c = bf16->config();
  // The matrices are nearly all of the weights; the norms stay fp32.
  EXPECT_GT(static_cast<double>(released), 0.9 * 4.0 * static_cast<double>(c.parameter_count()));
  EXPECT_EQ(bf16->store_base_in_bf16(), 0u) << "a second call has nothing left to convert";

  const std::vector<std::int32_t> ids = {5, 1, 9, 3, 3, 7, 2, 8, 0, 4, 6, 1};
  const llmcc::Tokens x(ids.data(), 2, 5), y(ids.data() + 1, 2, 5);
  {
    // (x and y overlap by design: rows of 5 from one run of ids.)
    llmcc::Arena arena(std::size_t{64} << 20);
    llmcc::ArenaScope scope(arena);
    EXPECT_NEAR(bf16->loss(x, y), ref->loss(x, y), 1e-5);
  }

  // The merged model widens the bf16 matrices back: the rounded base's merge, exactly.
  const std::unique_ptr<Model> ma = ref->merged(), mb = bf16->merged();
  ASSERT_EQ(ma->params().size(), mb->params().size());
  for (std::size_t i = 0; i < ma->params().size(); ++i)
    ASSERT_EQ(mb->params().data()[i], ma->params().data()[i]) << "merged value " << i;

  // Adapter training steps: forward, the generated backward through the bf16 products, AdamW.
  const auto a = ref->bench_step(2, 16, 3), b = bf16->bench_step(2, 16, 3);
  for (int step = 0; step < 3; ++step) {
    const float la = a->step(), lb = b->step();
    EXPECT_NEAR(lb, la, 1e-5 * std::max(1.0f, std::fabs(la))) << "step " << step;
  }
  for (std::size_t i = 0; i < ref->params().size(); ++i)
    ASSERT_NEAR(bf16->params().data()[i], ref->params().data()[i], 1e-5) << "adapter value " << i;

  // Generation through the KV cache (one-row products on the bf16 rows).
  llmcc::Rng ra(1), rb(1);
  const llmcc::models::SamplingConfig greedy{0.0f, 0};
  EXPECT_EQ(bf16->sample({1, 2, 3}, 8, greedy, rb), ref->sample({1, 2, 3}, 8, greedy, ra));
}

// Every family with adapters, at its smallest preset.
std::vector<std::string> lora_family_presets() {
  std::vector<std::string> presets;
  for (const llmcc::models::Family* f : llmcc::models::model_families()) {
    if (!f->lora_targets().empty()) presets.push_back(llmcc::test::smallest_preset(*f));
  }
  return presets;
}

INSTANTIATE_TEST_SUITE_P(Families, LoraBf16Base, ::testing::ValuesIn(lora_family_presets()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(LoraBf16BaseApi, AModelWithoutAdaptersIsRefused) {
  std::unique_ptr<Model> m = base("llama-tiny", false);
  try {
    m->store_base_in_bf16();
    FAIL() << "no error";
  } catch (const llmcc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("only a model with LoRA adapters"), std::string::npos) << e.what();
  }
}

}  // namespace
