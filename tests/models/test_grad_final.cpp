// The generated backward's gradient-final notifications (llmcc::adgen::GradFinalListener) for
// GPT-2, Llama and Qwen3 (tied and untied): every parameter gradient is notified exactly once per gradient call,
// holding its final value when notified (also when gradients accumulate over a second call), and each block's are
// notified in backward order, as soon as its backward is done: the last block's before the first block's and the
// embeddings' (so data-parallel training reduces them while the blocks below run).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2.grad.h"
#include "grad_final_check.h"
#include "llama.grad.h"
#include "llmcc/arena.h"
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
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::test::expect_each_final_once;
using llmcc::test::notified_span;
using llmcc::test::random_ids;
using llmcc::test::RecordingListener;

// Runs `grad_call` twice into one store without zeroing it between (gradient accumulation), with a
// recording listener each time, and checks each call's notifications. Returns the first call's
// order (store indices).
template <class Model, class GradCall>
std::vector<std::size_t> check_two_calls(const Model& model, GradCall grad_call, const std::string& what) {
  auto g = llmcc::adgen::make_grad(model);
  llmcc::Arena arena(64 << 20);
  std::vector<std::size_t> first;
  for (int call = 0; call < 2; ++call) {
    arena.reset();
    llmcc::ArenaScope scope(arena);
    RecordingListener listener;
    {
      llmcc::adgen::GradFinalScope notify(&listener);
      grad_call(model, g.grad);
    }
    const auto order = expect_each_final_once(listener, g.store, what + " call " + std::to_string(call + 1));
    if (call == 0) first = order;
  }
  // A null listener in a scope turns notifications off.
  RecordingListener outer;
  llmcc::adgen::GradFinalScope notify(&outer);
  {
    llmcc::adgen::GradFinalScope off(nullptr);
    arena.reset();
    llmcc::ArenaScope scope(arena);
    grad_call(model, g.grad);
  }
  EXPECT_TRUE(outer.notes.empty());
  return first;
}

// check_two_calls on a batch of 2 x 16 random tokens; returns the first call's order.
template <class Model, class LossGrad>
std::vector<std::size_t> notified_order(const Model& model, int vocab, LossGrad loss_grad, const std::string& what) {
  const int B = 2, T = 16;
  const auto idx = random_ids(B * T, vocab, 4), tgt = random_ids(B * T, vocab, 5);
  const llmcc::Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  return check_two_calls(model, [&](const auto& m, auto& grad) { loss_grad(m, x, y, grad); }, what);
}

// Each block's gradients (names `block`K.) are notified together, right after its backward:
// block k's before block k-1's, and block 0's before the embedding's.
void expect_blocks_last_to_first(const std::vector<std::size_t>& order, const llmcc::ParameterStore& store,
                                 const std::string& block, int n_layer, const std::string& embedding) {
  ASSERT_GE(n_layer, 2);
  for (int k = n_layer - 1; k > 0; --k) {
    const auto upper = notified_span(order, store, block + std::to_string(k) + ".");
    const auto lower = notified_span(order, store, block + std::to_string(k - 1) + ".");
    EXPECT_LT(upper.second, lower.first) << "block " << k;
  }
  EXPECT_LT(notified_span(order, store, block + "0.").second, notified_span(order, store, embedding).first);
}

TEST(GradFinal, Gpt2EachGradientOnceFinalInBackwardOrder) {
  llmcc::models::Gpt2Config c = llmcc::models::gpt2_preset("gpt2-tiny");
  c.vocab_size = 256;
  c.padded_vocab_size = 256;
  auto w = llmcc::models::make_gpt2(c);
  llmcc::models::gpt2_init(w.model, 3);
  const auto order = notified_order(
      w.model, c.vocab_size, [](const auto& m, auto x, auto y, auto& g) { llmcc::models::gpt2_loss_grad(m, x, y, g); },
      "gpt2");
  ASSERT_EQ(order.size(), w.params.count());
  expect_blocks_last_to_first(order, w.params, "h.", c.n_layer, "wte");
  EXPECT_LT(notified_span(order, w.params, "h.0.").second, notified_span(order, w.params, "wpe").first);
}

TEST(GradFinal, LlamaEachGradientOnceFinalInBackwardOrder) {
  llmcc::models::LlamaConfig c = llmcc::models::llama_preset("llama-tiny");
  c.vocab_size = 256;
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 3);
  const auto order = notified_order(
      w.model, c.vocab_size, [](const auto& m, auto x, auto y, auto& g) { llmcc::models::llama_loss_grad(m, x, y, g); },
      "llama");
  ASSERT_EQ(order.size(), w.params.count());
  expect_blocks_last_to_first(order, w.params, "layers.", c.n_layer, "tok_embeddings");
}

TEST(GradFinal, Qwen3EachGradientOnceFinalInBackwardOrder) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    llmcc::models::Qwen3Config c = llmcc::models::qwen3_preset("qwen3-tiny");
    c.vocab_size = 256;
    c.tie_embeddings = tied;
    auto w = llmcc::models::make_qwen3(c);
    llmcc::models::qwen3_init(w.model, 3);
    const auto order = notified_order(
        w.model, c.vocab_size,
        [](const auto& m, auto x, auto y, auto& g) { llmcc::models::qwen3_loss_grad(m, x, y, g); }, "qwen3");
    ASSERT_EQ(order.size(), w.params.count());
    expect_blocks_last_to_first(order, w.params, "model.layers.", c.n_layer, "model.embed_tokens");
  }
}

// Scopes nest: the inner listener gets the notifications, the outer one is restored after.
TEST(GradFinal, ScopesRestoreThePreviousListener) {
  RecordingListener outer, inner;
  llmcc::Tensor t(nullptr, llmcc::Shape{1});
  float v = 1.0f;
  t.bind(&v);
  {
    llmcc::adgen::GradFinalScope a(&outer);
    {
      llmcc::adgen::GradFinalScope b(&inner);
      llmcc::adgen::grad_final(t);
    }
    llmcc::adgen::grad_final(t);
    {
      llmcc::adgen::GradFinalScope off(nullptr);
      llmcc::adgen::grad_final(t);
    }
  }
  llmcc::adgen::grad_final(t);
  EXPECT_EQ(inner.notes.size(), 1u);
  EXPECT_EQ(outer.notes.size(), 1u);
}

}  // namespace
