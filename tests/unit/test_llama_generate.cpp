// Llama generation with a KV cache (src/nn/llama_generate.h): grouped-query single-query attention
// equals the fused attention's last row, the cached logits equal Llama::forward at every step
// (GQA and plain MHA, fast and reference kernels), the cached sampler draws the same tokens as
// the uncached one (greedy and seeded top-k, across the sliding window), the context limit stops
// or slides, bad input is a clear error, and a decode step allocates nothing of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/rope.h"
#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"
#include "nn/kv_attention.h"
#include "nn/llama.h"
#include "nn/llama_generate.h"
#include "nn/llama_weights.h"
#include "test_support.h"

// Counts heap allocations of this process, to check that a decode step makes none of its own
// (as test_gpt2_generate.cpp; the same GCC warning is switched off for the same reason).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using llmcc::KernelMode;
using llmcc::Rng;
using llmcc::Tensor;
using llmcc::nn::ContextFull;
using llmcc::nn::LlamaConfig;
using llmcc::nn::LlamaGenerator;
using llmcc::nn::SamplingConfig;

// HS = 10: not a multiple of the SIMD width, so the kernels' tails run. n_kv_head 2 of 4 heads:
// grouped-query attention.
LlamaConfig small_config(int n_kv_head = 2) {
  LlamaConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = n_kv_head;
  c.n_embd = 40;
  c.hidden_dim = 56;
  c.rope_theta = 100.0f;  // a small base: even the slowest pair turns visibly over 16 positions
  return c;
}

// Weights with std 0.3 (not 0.02) so that attention is far from uniform and every path changes
// the logits.
llmcc::nn::LlamaWeights small_model(std::uint64_t seed, int n_kv_head = 2, float std = 0.3f) {
  auto w = llmcc::nn::make_llama(small_config(n_kv_head));
  Rng rng(seed);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, std);
  return w;
}

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

// Llama::forward over all of `ids`; the logits (V) of the last position.
std::vector<float> full_forward_last(const llmcc::nn::Llama& m, const std::vector<std::int32_t>& ids) {
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  const int T = static_cast<int>(ids.size());
  const Tensor logits = m.forward(llmcc::Tokens(ids.data(), 1, T));  // (1, T, V)
  const std::int64_t V = logits.dim(-1);
  const float* last = logits.f32() + (T - 1) * V;
  return std::vector<float>(last, last + V);
}

// |got - ref| <= 1e-5 * max|ref| + 1e-5 * |ref| (the brief's ~1e-5 relative).
::testing::AssertionResult close_to_forward(const std::string& what, const Tensor& got, const std::vector<float>& ref) {
  double max_ref = 0;
  for (float r : ref) max_ref = std::max(max_ref, std::fabs(double(r)));
  EXPECT_EQ(static_cast<std::size_t>(got.numel()), ref.size());
  return llmcc::test::all_close(what.c_str(), got.f32(), ref.data(), ref.size(), 1e-5 * max_ref, 1e-5);
}

// Runs `body` with the fast kernels, then with the reference kernels; restores the mode.
template <class F>
void for_both_kernel_modes(F&& body) {
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    SCOPED_TRACE(mode == KernelMode::Fast ? "fast kernels" : "reference kernels");
    llmcc::set_kernel_mode(mode);
    body();
  }
  llmcc::set_kernel_mode(KernelMode::Fast);
}

TEST(KvAttention, GroupedQueryMatchesFusedAttentionLastRow) {
  const int NH = 4, HS = 10;
  for (int NKV : {4, 2, 1}) {
    const int Cq = NH * HS, Ckv = NKV * HS;
    for (int n : {1, 2, 7, 33}) {
      SCOPED_TRACE("NKV=" + std::to_string(NKV) + " n=" + std::to_string(n));
      llmcc::Arena arena(1 << 20);
      llmcc::ArenaScope scope(arena);
      const Tensor q = llmcc::test::tensor_from(arena, {1, n, Cq}, llmcc::test::random_vector<float>(n * Cq, 1, -2, 2));
      const Tensor k =
          llmcc::test::tensor_from(arena, {1, n, Ckv}, llmcc::test::random_vector<float>(n * Ckv, 2, -2, 2));
      const Tensor v = llmcc::test::tensor_from(arena, {1, n, Ckv}, llmcc::test::random_vector<float>(n * Ckv, 3));
      const Tensor ref = llmcc::attention(q, k, v, NH, NKV);  // (1, n, NH * HS)
      std::vector<float> out(Cq), scores(NH * n);
      llmcc::test::for_each_thread_count([&](int) {
        llmcc::nn::attention_single_query(out.data(), q.f32() + (n - 1) * Cq, k.f32(), v.f32(), n, NH, NKV, HS, Ckv,
                                          scores.data());
        EXPECT_TRUE(llmcc::test::all_close("out", out.data(), ref.f32() + (n - 1) * Cq, Cq, 1e-6, 1e-5));
      });
    }
  }
}

TEST(LlamaGenerate, CachedLogitsEqualFullForwardAtEveryStep) {
  for (int n_kv_head : {2, 1, 4}) {
    SCOPED_TRACE("n_kv_head=" + std::to_string(n_kv_head));
    auto w = small_model(1 + n_kv_head, n_kv_head);
    const int maxT = w.model.cfg.max_seq_len;
    const auto seq = random_ids(maxT, w.model.cfg.vocab_size, 2);
    for_both_kernel_modes([&] {
      for (int prompt_len : {1, 5, maxT}) {
        SCOPED_TRACE("prompt_len=" + std::to_string(prompt_len));
        LlamaGenerator gen(w.model);
        std::vector<std::int32_t> ids(seq.begin(), seq.begin() + prompt_len);
        Tensor logits = gen.prefill(ids);
        ASSERT_EQ(logits.numel(), w.model.cfg.vocab_size);
        EXPECT_TRUE(close_to_forward("prefill", logits, full_forward_last(w.model, ids)));
        for (int t = prompt_len; t < maxT; ++t) {
          ids.push_back(seq[t]);
          logits = gen.step(seq[t]);
          EXPECT_EQ(gen.length(), t + 1);
          EXPECT_TRUE(close_to_forward("step " + std::to_string(t), logits, full_forward_last(w.model, ids)));
        }
        EXPECT_TRUE(gen.full());
        EXPECT_EQ(gen.tokens(), ids);
      }
    });
  }
}

TEST(LlamaGenerate, PrefillAgainForgetsThePreviousSequence) {
  auto w = small_model(3);
  LlamaGenerator gen(w.model);
  gen.prefill(random_ids(9, 37, 4));
  gen.step(5);
  const auto ids = random_ids(4, 37, 5);
  const Tensor logits = gen.prefill(ids);
  EXPECT_EQ(gen.length(), 4);
  EXPECT_TRUE(close_to_forward("second prefill", logits, full_forward_last(w.model, ids)));
}

// The cached sampler draws exactly the uncached one's tokens: greedy and seeded top-k, for
// several prompts, past the context (the window slides), fast and reference kernels.
TEST(LlamaGenerate, CachedSamplerDrawsTheUncachedTokens) {
  auto w = small_model(6, 2, 0.1f);  // a flatter distribution, so that top-k draws vary
  const int maxT = w.model.cfg.max_seq_len;
  SamplingConfig greedy;
  greedy.temperature = 0.0f;
  SamplingConfig top_k;
  top_k.temperature = 0.9f;
  top_k.top_k = 5;
  const std::vector<std::vector<std::int32_t>> prompts = {
      {3}, random_ids(5, 37, 7), random_ids(maxT, 37, 8), random_ids(maxT + 4, 37, 9)};
  for_both_kernel_modes([&] {
    for (const SamplingConfig& cfg : {greedy, top_k}) {
      for (std::size_t p = 0; p < prompts.size(); ++p) {
        SCOPED_TRACE("prompt " + std::to_string(p) + (cfg.top_k ? ", top-k" : ", greedy"));
        Rng cached_rng(40 + p), uncached_rng(40 + p);
        std::vector<std::int32_t> seen;
        const auto cached = llmcc::nn::llama_sample(w.model, prompts[p], 2 * maxT, cfg, cached_rng,
                                                    [&](std::int32_t id) { seen.push_back(id); });
        const auto uncached = llmcc::nn::llama_sample_uncached(w.model, prompts[p], 2 * maxT, cfg, uncached_rng);
        ASSERT_EQ(cached.size(), std::size_t(2 * maxT));
        EXPECT_EQ(cached, uncached);
        EXPECT_EQ(seen, cached);
        EXPECT_EQ(cached_rng.state(), uncached_rng.state());
      }
    }
  });
  // Top-k draws depend on the seed (the test would pass trivially if they did not).
  Rng a(1), b(2);
  EXPECT_NE(llmcc::nn::llama_sample(w.model, {3}, 20, top_k, a), llmcc::nn::llama_sample(w.model, {3}, 20, top_k, b));
}

TEST(LlamaGenerate, StopsAtTheContextLimit) {
  auto w = small_model(12);
  const int maxT = w.model.cfg.max_seq_len;
  LlamaGenerator gen(w.model, ContextFull::Stop);
  SamplingConfig cfg;
  Rng rng(1);
  const auto st = llmcc::nn::generate(gen, random_ids(5, 37, 13), 100, cfg, rng);
  // The last token is predicted from a full context of maxT tokens but never fed back.
  EXPECT_TRUE(st.stopped_at_limit);
  EXPECT_EQ(st.new_tokens, maxT - 5 + 1);
  EXPECT_TRUE(gen.full());
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.step(1); }, {"16 tokens", "context", "Slide"}));
  const auto st2 = llmcc::nn::generate(gen, random_ids(maxT, 37, 14), 100, cfg, rng);
  EXPECT_EQ(st2.new_tokens, 1);
}

TEST(LlamaGenerate, SlidingWindowEqualsForwardOverTheLastMaxTTokens) {
  auto w = small_model(15);
  const int maxT = w.model.cfg.max_seq_len;
  const auto seq = random_ids(maxT + 3, 37, 16);
  LlamaGenerator gen(w.model, ContextFull::Slide);
  gen.prefill(std::vector<std::int32_t>(seq.begin(), seq.begin() + maxT));
  for (int t = maxT; t < maxT + 3; ++t) {
    const Tensor logits = gen.step(seq[t]);
    const std::vector<std::int32_t> window(seq.begin() + (t + 1 - maxT), seq.begin() + t + 1);
    EXPECT_EQ(gen.tokens(), window);
    EXPECT_TRUE(close_to_forward("slide at " + std::to_string(t), logits, full_forward_last(w.model, window)));
  }
  EXPECT_EQ(gen.slides(), 3);
}

TEST(LlamaGenerate, StopsAtEndOfTextAndStartsFromIt) {
  auto w = small_model(18);
  SamplingConfig sc;
  sc.temperature = 0.0f;
  sc.eot = 1;
  Rng rng(1);
  const auto first = llmcc::nn::llama_sample(w.model, {4, 5}, 5, sc, rng);
  ASSERT_EQ(first.size(), 5u);
  sc.stop_at_eot = true;
  sc.eot = first[0];
  EXPECT_EQ(llmcc::nn::llama_sample(w.model, {4, 5}, 5, sc, rng), std::vector<std::int32_t>{first[0]});
  // The document start (SentencePiece data's bos between documents) ends it as well.
  sc.eot = 1;
  sc.document_start = first[0];
  EXPECT_EQ(llmcc::nn::llama_sample(w.model, {4, 5}, 5, sc, rng), std::vector<std::int32_t>{first[0]});
  sc.document_start = -1;
  sc.stop_at_eot = false;
  EXPECT_EQ(llmcc::nn::llama_sample(w.model, {}, 4, sc, rng), llmcc::nn::llama_sample(w.model, {sc.eot}, 4, sc, rng));
}

TEST(LlamaGenerate, BadInputIsAClearError) {
  auto w = small_model(19);
  LlamaGenerator gen(w.model);
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>(17, 1)); },
                                        {"llama generate", "17 tokens", "context of 16"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{}); }, {"empty"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{1, 37}); }, {"37", "[0, 37)"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{-1}); }, {"-1"}));
  gen.prefill(std::vector<std::int32_t>{1});
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.step(100); }, {"100", "vocabulary"}));
  SamplingConfig sc;
  Rng rng(1);
  // A bad id anywhere in a long prompt, even in the part cropped away, and with 0 new tokens.
  std::vector<std::int32_t> long_prompt(20, 2);
  long_prompt[0] = 99;
  EXPECT_TRUE(
      llmcc::test::throws_error([&] { llmcc::nn::llama_sample(w.model, long_prompt, 0, sc, rng); }, {"99", "[0, 37)"}));
  sc.top_k = -2;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::llama_sample(w.model, {1}, 3, sc, rng); }, {"top_k"}));
  llmcc::nn::Llama unbound(small_config());
  EXPECT_TRUE(llmcc::test::throws_error([&] { LlamaGenerator g(unbound); }, {"no weights bound"}));
}

// The ops one decode step calls on (1, 1, C), run directly: the allocations they make themselves.
long op_allocations_per_step(const llmcc::nn::Llama& m) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  const Tensor x = arena.zeros({1, 1, m.cfg.n_embd}, "x");  // (1, 1, C)
  const long before = g_allocations.load();
  for (const llmcc::nn::LlamaBlock& b : m.layers) {
    const auto& at = b.attention;
    const Tensor a = b.attention_norm.forward(x);
    (void)llmcc::rope(llmcc::linear_nobias(a, at.wq), at.n_head, at.rope_freqs, 3);
    (void)llmcc::rope(llmcc::linear_nobias(a, at.wk), at.n_kv_head, at.rope_freqs, 3);
    (void)llmcc::linear_nobias(a, at.wv);
    const Tensor h = x + llmcc::linear_nobias(a, at.wo);
    (void)(h + b.feed_forward.forward(b.ffn_norm.forward(h)));
  }
  (void)llmcc::linear_nobias(m.norm.forward(x), m.output);
  return g_allocations.load() - before;
}

TEST(LlamaGenerate, ADecodeStepAllocatesNothingBeyondItsOps) {
  // As GPT-2's test: library allocations inside the ops (GEMM packing, thread teams) are counted
  // by running the same ops directly and subtracted; the generator itself adds nothing.
  auto w = small_model(20);
  LlamaGenerator gen(w.model);
  llmcc::nn::Sampler sampler(w.model.cfg.vocab_size);
  SamplingConfig sc;
  sc.top_k = 5;
  Rng rng(1);
  Tensor logits = gen.prefill(std::vector<std::int32_t>{1, 2, 3});
  logits = gen.step(sampler.sample(logits, sc, rng));  // warm-up
  const long ops = op_allocations_per_step(w.model);
  while (!gen.full()) {
    const long before = g_allocations.load();
    logits = gen.step(sampler.sample(logits, sc, rng));
    ASSERT_EQ(g_allocations.load() - before, ops) << "at position " << gen.length() - 1;
  }
  std::printf("allocations per decode step made by the ops' front ends: %ld\n", ops);
}

// The planned arenas hold a full-length prefill and the last decode step of the largest shapes
// a preset has here (an arena overflow throws, so running them is the check).
TEST(LlamaGenerate, PlannedMemoryHoldsAFullContext) {
  LlamaConfig c = llmcc::nn::llama_preset("llama-tiny");
  c.max_seq_len = 64;
  auto w = llmcc::nn::make_llama(c);
  llmcc::nn::llama_init(w.model, 1);
  LlamaGenerator gen(w.model, ContextFull::Slide);
  gen.prefill(random_ids(64, c.vocab_size, 3));
  gen.step(5);  // a slide: a prefill of 63, then a decode at position 63
  EXPECT_EQ(gen.length(), 64);
  EXPECT_GT(gen.planned_bytes(), std::size_t{2} * 4 * 64 * 64 * 4);  // at least the K and V caches
}

}  // namespace
