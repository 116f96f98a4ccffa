// Model::gradient (models/model.h) for every registered family and for LoRA adapters over each,
// with nothing here naming a family: the store has params()'s names and shapes, the loss is
// Model::loss's, the parameters are left as they were, a second call gives the same bits, and
// the gradient's derivative along itself, tensor by tensor, matches central differences of the
// loss. (transformers' gradient at sizes drawn per run: tests/hf/test_hf_gradients.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/train/rng.h"
#include "models/lora.h"
#include "models/model.h"
#include "models/registry.h"
#include "smallest_preset.h"

namespace {

using llmcc::ParameterStore;
using llmcc::models::Model;

// The family's preset with the fewest parameters, shrunk to 2 layers and 61 token ids.
llmcc::models::ModelConfig small_config(const llmcc::models::Family& f) {
  llmcc::models::ModelConfig c = f.preset(llmcc::test::smallest_preset(f));
  c.set("n_layer", 2);
  c.set("vocab_size", 61);
  return c;
}

double sum_of_squares(const llmcc::Tensor& t) {
  double s = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) s += double(t.f32()[i]) * double(t.f32()[i]);
  return s;
}

// Checks Model::gradient on a batch of 2 x 9 tokens (one target ignored).
void check_gradient(Model& m, const std::string& what) {
  SCOPED_TRACE(what);
  const int B = 2, T = 9, V = m.config().vocab_size();
  std::vector<std::int32_t> idx(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) idx[i] = (7 * i + 3) % V, targets[i] = (5 * i + 1) % V;
  targets[4] = -1;
  const llmcc::Tokens x(idx.data(), B, T), y(targets.data(), B, T);

  llmcc::Arena arena(std::size_t{1} << 30);
  llmcc::ArenaScope scope(arena);
  ParameterStore& p = m.params();
  std::vector<float> before;
  for (std::size_t i = 0; i < p.count(); ++i) {
    const llmcc::Tensor t = p.tensor(i);
    before.insert(before.end(), t.f32(), t.f32() + t.numel());
  }
  float loss = 0.0f;
  const ParameterStore g = m.gradient(x, y, &loss);
  arena.reset();
  ASSERT_EQ(g.count(), p.count());
  for (std::size_t i = 0; i < p.count(); ++i) {
    EXPECT_EQ(g.name(i), p.name(i));
    EXPECT_EQ(g.shape(i), p.shape(i)) << p.name(i);
  }
  EXPECT_EQ(loss, m.loss(x, y));
  arena.reset();
  std::size_t at = 0;
  for (std::size_t i = 0; i < p.count(); ++i) {
    const llmcc::Tensor t = p.tensor(i);
    EXPECT_EQ(std::memcmp(t.f32(), before.data() + at, static_cast<std::size_t>(t.numel()) * sizeof(float)), 0)
        << p.name(i) << " changed";
    at += static_cast<std::size_t>(t.numel());
  }
  float again_loss = 0.0f;
  const ParameterStore again = m.gradient(x, y, &again_loss);
  arena.reset();
  EXPECT_EQ(again_loss, loss);
  for (std::size_t i = 0; i < g.count(); ++i)
    EXPECT_EQ(std::memcmp(again.tensor(i).f32(), g.tensor(i).f32(),
                          static_cast<std::size_t>(g.tensor(i).numel()) * sizeof(float)),
              0)
        << g.name(i) << " differs between two calls";

  // Along u = g_i / |g_i| (one tensor at a time) the loss changes at the rate |g_i|: checked by
  // central differences in fp32, where the step h moves the loss by about h |g_i|.
  double largest = 0;
  for (std::size_t i = 0; i < g.count(); ++i) largest = std::max(largest, std::sqrt(sum_of_squares(g.tensor(i))));
  int checked = 0;
  for (std::size_t i = 0; i < g.count(); ++i) {
    const llmcc::Tensor gi = g.tensor(i), pi = p.tensor(i);
    const double norm = std::sqrt(sum_of_squares(gi));
    if (norm < 1e-2 * largest) continue;  // too flat for fp32 differences of the loss
    const double h = 1e-2 / norm;         // moves the loss by about 1e-2
    const std::vector<float> saved(pi.f32(), pi.f32() + pi.numel());
    auto loss_at = [&](double step) {
      for (std::int64_t k = 0; k < pi.numel(); ++k) pi.f32()[k] = static_cast<float>(saved[k] + step * gi.f32()[k]);
      const float l = m.loss(x, y);
      arena.reset();
      return double(l);
    };
    const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
    std::memcpy(pi.f32(), saved.data(), saved.size() * sizeof(float));
    EXPECT_NEAR(fd / norm, norm, 0.02 * norm) << p.name(i) << ": the loss's rate along its gradient";
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST(ModelGradient, EveryFamilyAndItsLoraAdapters) {
  for (const llmcc::models::Family* f : llmcc::models::model_families()) {
    std::unique_ptr<Model> m = llmcc::models::make_model(small_config(*f));
    m->init(5);
    check_gradient(*m, f->name());
    if (f->lora_targets().empty()) continue;
    llmcc::models::LoraConfig cfg;
    cfg.rank = 3;
    cfg.targets = f->lora_targets();
    std::unique_ptr<Model> lora = llmcc::models::add_lora(std::move(m), "", cfg);
    // Both of each adapter's matrices nonzero, so that both get a gradient; small, so that the
    // adapted model stays as smooth as the base for the differences above.
    llmcc::Rng rng(9);
    for (std::size_t i = 0; i < lora->params().count(); ++i) {
      const llmcc::Tensor t = lora->params().tensor(i);
      rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), 0.0f, 0.02f);
    }
    check_gradient(*lora, std::string(f->name()) + " with LoRA adapters");
  }
}

}  // namespace
