// A loss mask's meaning for the gradient: with targets of -1 at untrained positions (what
// DataLoader gives for chat data's prompt tokens), the loss and every parameter gradient of a
// Llama equal the mean over the trained positions alone of each position's own loss and
// gradient. So untrained positions add nothing, and the average is over trained tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/arena.h"
#include "models/llama/llama.h"
#include "models/llama/llama_weights.h"
#include "random_ids.h"

namespace {

TEST(MaskedLoss, UntrainedPositionsAddNoLossAndNoGradient) {
  llmcc::models::LlamaConfig c;
  c.vocab_size = 23;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.hidden_dim = 24;
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 3);
  const int B = 2, T = 7;
  const auto idx = llmcc::test::random_ids(B * T, c.vocab_size, 4);
  auto targets = llmcc::test::random_ids(B * T, c.vocab_size, 5);
  // The prompt: positions 0..3 of row 0 and 0..1 of row 1 are not trained.
  for (int p : {0, 1, 2, 3, 7, 8}) targets[p] = -1;
  std::vector<int> trained;
  for (int p = 0; p < B * T; ++p)
    if (targets[p] >= 0) trained.push_back(p);

  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(w.model);
  g.zero();
  const float loss = llmcc::models::llama_loss_grad(w.model, llmcc::Tokens(idx.data(), B, T),
                                                    llmcc::Tokens(targets.data(), B, T), g.grad);
  // Each trained position alone.
  std::vector<double> sum(g.store.size(), 0.0);
  double loss_sum = 0.0;
  for (const int p : trained) {
    std::vector<std::int32_t> one(targets.size(), -1);
    one[static_cast<std::size_t>(p)] = targets[static_cast<std::size_t>(p)];
    auto gp = llmcc::adgen::make_grad(w.model);
    gp.zero();
    loss_sum += llmcc::models::llama_loss_grad(w.model, llmcc::Tokens(idx.data(), B, T),
                                               llmcc::Tokens(one.data(), B, T), gp.grad);
    for (std::size_t i = 0; i < gp.store.size(); ++i) sum[i] += gp.store.data()[i];
    arena.reset();
  }
  const double n = static_cast<double>(trained.size());
  EXPECT_NEAR(loss, loss_sum / n, 1e-5 * loss);
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < sum.size(); ++i) {
    worst = std::max(worst, std::abs(double(g.store.data()[i]) - sum[i] / n));
    scale = std::max(scale, std::abs(sum[i] / n));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 1e-5 * scale) << "worst " << worst << " of " << scale;
}

}  // namespace
