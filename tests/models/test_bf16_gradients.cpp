// Gradients with bf16 matrix products against fp32 ones, for GPT-2, Llama and Qwen3 at the tiny
// presets' shapes: per parameter tensor, the cosine similarity of the two gradients is at least 0.999,
// and the loss agrees to bf16 precision. The figures are printed per model (the smallest cosine
// and its tensor).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpt2.grad.h"
#include "kernels/cpu/gemm_amx.h"
#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_config.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/llama/llama.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_weights.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3/qwen3_config.h"
#include "models/qwen3/qwen3_weights.h"
#include "qwen3.grad.h"
#include "test_support.h"

namespace {

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

double cosine(const float* a, const float* b, std::int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (std::int64_t i = 0; i < n; ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa == 0 && bb == 0 ? 1.0 : ab / std::sqrt(aa * bb);
}

// Runs loss_grad (one forward and backward into the zeroed gradient store of `w`) with fp32 and
// with bf16 matrix products and compares the two per tensor.
template <class Weights, class LossGrad>
void expect_bf16_gradients_close(const char* model, Weights& w, LossGrad loss_grad) {
  std::printf("[ note     ] bf16 GEMM kernel: %s\n", llmcc::cpu::gemm_bf16_kernel_name());
  auto g = llmcc::adgen::make_grad(w.model);
  llmcc::Arena arena(256 << 20);
  float loss[2];
  std::vector<std::vector<float>> grads[2];
  for (int run = 0; run < 2; ++run) {
    llmcc::set_matmul_dtype(run == 0 ? llmcc::MatmulDtype::Fp32 : llmcc::MatmulDtype::Bf16);
    arena.reset();
    llmcc::ArenaScope scope(arena);
    g.zero();
    loss[run] = loss_grad(w.model, g.grad);
    for (std::size_t i = 0; i < g.store.count(); ++i) {
      const llmcc::Tensor& t = g.store.tensor(i);
      grads[run].emplace_back(t.f32(), t.f32() + t.numel());
    }
  }
  llmcc::set_matmul_dtype(llmcc::MatmulDtype::Fp32);
  EXPECT_NEAR(loss[1], loss[0], 1e-2 * std::fabs(loss[0])) << model;
  // The bf16 products were used: some gradient differs in its bits.
  bool any_differs = false;
  for (std::size_t i = 0; i < g.store.count(); ++i) any_differs = any_differs || grads[0][i] != grads[1][i];
  EXPECT_TRUE(any_differs) << model << ": bf16 gradients are bit-identical to fp32 ones";
  double worst = 2;
  std::string worst_name;
  for (std::size_t i = 0; i < g.store.count(); ++i) {
    const double c = cosine(grads[0][i].data(), grads[1][i].data(), static_cast<std::int64_t>(grads[0][i].size()));
    EXPECT_GE(c, 0.999) << model << " " << w.params.name(i);
    if (c < worst) worst = c, worst_name = w.params.name(i);
  }
  std::printf("[ note     ] %s: loss fp32 %.8f, bf16 %.8f; smallest gradient cosine over %zu tensors %.6f (%s)\n",
              model, static_cast<double>(loss[0]), static_cast<double>(loss[1]), g.store.count(), worst,
              worst_name.c_str());
}

TEST(Bf16Gradients, Gpt2MatchesFp32PerTensor) {
  llmcc::models::Gpt2Config c = llmcc::models::gpt2_preset("gpt2-tiny");
  c.vocab_size = 512;
  c.padded_vocab_size = 512;
  auto w = llmcc::models::make_gpt2(c);
  llmcc::models::gpt2_init(w.model, 5);
  const int B = 4, T = 64;
  const auto idx = random_ids(B * T, c.vocab_size, 6), tgt = random_ids(B * T, c.vocab_size, 7);
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  expect_bf16_gradients_close("gpt2-tiny (vocab 512)", w,
                              [&](auto& model, auto& grad) { return gpt2_loss_grad(model, x, y, grad); });
}

TEST(Bf16Gradients, LlamaMatchesFp32PerTensor) {
  llmcc::models::LlamaConfig c = llmcc::models::llama_preset("llama-tiny");
  c.vocab_size = 512;
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 5);
  const int B = 4, T = 64;
  const auto idx = random_ids(B * T, c.vocab_size, 6), tgt = random_ids(B * T, c.vocab_size, 7);
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  expect_bf16_gradients_close("llama-tiny (vocab 512)", w,
                              [&](auto& model, auto& grad) { return llama_loss_grad(model, x, y, grad); });
}

TEST(Bf16Gradients, Qwen3MatchesFp32PerTensor) {
  llmcc::models::Qwen3Config c = llmcc::models::qwen3_preset("qwen3-tiny");
  c.vocab_size = 512;
  auto w = llmcc::models::make_qwen3(c);
  llmcc::models::qwen3_init(w.model, 5);
  const int B = 4, T = 64;
  const auto idx = random_ids(B * T, c.vocab_size, 6), tgt = random_ids(B * T, c.vocab_size, 7);
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  expect_bf16_gradients_close("qwen3-tiny (vocab 512)", w,
                              [&](auto& model, auto& grad) { return qwen3_loss_grad(model, x, y, grad); });
}

}  // namespace
