// Llama generation with a KV cache (src/models/llama/llama_generate.h): grouped-query single-query attention
// equals the fused attention's last row, the cached logits equal Llama::forward at every step
// (GQA and plain MHA, fast and reference kernels), the cached sampler draws the same tokens as
// the uncached one (greedy and seeded top-k, across the sliding window), the context limit stops
// or slides, bad input is a clear error, and a decode step allocates nothing of its own. The
// tests GPT-2's generation shares are generate_suite.h's.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "allocation_counter.h"
#include "generate_suite.h"
#include "kernels/cpu/bf16.h"
#include "llmcc/decode_weights.h"
#include "llmcc/arena.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/rope.h"
#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"
#include "models/llama/llama.h"
#include "models/llama/llama_generate.h"
#include "models/llama/llama_weights.h"
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::KernelMode;
using llmcc::Rng;
using llmcc::Tensor;
using llmcc::models::ContextFull;
using llmcc::models::LlamaConfig;
using llmcc::models::LlamaGenerator;
using llmcc::models::SamplingConfig;
using llmcc::test::random_ids;

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
llmcc::models::LlamaWeights small_model(std::uint64_t seed, int n_kv_head = 2, float std = 0.3f) {
  auto w = llmcc::models::make_llama(small_config(n_kv_head));
  Rng rng(seed);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, std);
  return w;
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

// The ops one decode step calls on (1, 1, C), run directly: the allocations they make themselves.
long op_allocations_per_step(const llmcc::models::Llama& m) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  const Tensor x = arena.zeros({1, 1, m.cfg.n_embd}, "x");  // (1, 1, C)
  const long before = llmcc::test::allocations();
  for (const llmcc::models::LlamaBlock& b : m.layers) {
    const auto& at = b.attention;
    const Tensor a = b.attention_norm.forward(x);  // (1, 1, C)
    (void)llmcc::rope(llmcc::linear_nobias(a, at.wq), at.n_head, at.rope_freqs, 3);
    (void)llmcc::rope(llmcc::linear_nobias(a, at.wk), at.n_kv_head, at.rope_freqs, 3);
    (void)llmcc::linear_nobias(a, at.wv);
    const Tensor h = x + llmcc::linear_nobias(a, at.wo);  // (1, 1, C)
    (void)(h + b.feed_forward.forward(b.ffn_norm.forward(h), m.no_adapters.layers[0]));
  }
  (void)llmcc::linear_nobias(m.norm.forward(x), m.output[0].w);
  return llmcc::test::allocations() - before;
}

// Llama for generate_suite.h. Its logits rows are vocab_size wide; the tolerance is the brief's
// ~1e-5 relative: |got - ref| <= 1e-5 * max|ref| + 1e-5 * |ref|.
struct LlamaGeneration {
  using Model = llmcc::models::Llama;
  using Generator = LlamaGenerator;
  static constexpr llmcc::test::ForwardTolerance kTolerance{1e-5, 1e-5};
  static std::int64_t logits_width(const Model& m) { return m.cfg.vocab_size; }
  static std::vector<std::int32_t> sample(const Model& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                          const SamplingConfig& cfg, Rng& rng) {
    return llmcc::models::llama_sample(m, prompt, max_new_tokens, cfg, rng);
  }
  static long op_allocations_per_step(const Model& m) { return ::op_allocations_per_step(m); }
};

// Decoding with low-precision weight copies (llmcc/decode_weights.h): from a one-token prompt
// every linear product has one row and reads the copies. With bf16 copies the logits of every step
// are those of the same model with its linear layers' matrices rounded to bf16 and computed in
// fp32 (the embedding lookup reads fp32 in both). Int8 products also round each row of inputs to
// int8 blocks (their exact values are checked in test_decode_weights.cpp and test_gemm.cpp). Both
// differ from the fp32 model's logits by the rounding only: bf16's relative 2^-9, int8's half a
// step of 1/127 of a block's largest value, on weights and inputs.
TEST(LlamaGenerate, WeightCopiesDecodeWithinTheirRounding) {
  for (const llmcc::DecodeDtype dtype : {llmcc::DecodeDtype::Bf16, llmcc::DecodeDtype::Int8}) {
    SCOPED_TRACE(llmcc::decode_dtype_name(dtype));
    const auto w = small_model(7);
    const llmcc::DecodeWeights copies(w.params, dtype);
    auto rounded = small_model(7);
    for (std::size_t i = 0; i < rounded.params.count(); ++i) {
      if (rounded.params.shape(i).ndim() != 2 || rounded.params.name(i) == "tok_embeddings.weight") continue;
      ASSERT_NE(copies.copy_of(w.params.tensor(i).f32(), w.params.shape(i)[0], w.params.shape(i)[1]), nullptr);
      const Tensor t = rounded.params.tensor(i);
      for (std::int64_t k = 0; k < t.numel(); ++k) t.f32()[k] = llmcc::cpu::round_to_bf16(t.f32()[k]);
    }
    const auto seq = random_ids(12, w.model.cfg.vocab_size, 5);  // (12)
    LlamaGenerator plain(w.model), reference(rounded.model), with_copies(w.model);
    double worst_vs_fp32 = 0.0;
    for (int t = 0; t < 12; ++t) {
      const auto grab = [](const Tensor& x) { return std::vector<float>(x.f32(), x.f32() + x.numel()); };
      std::vector<float> want, fp32, got;  // (V) each
      want = grab(t == 0 ? reference.prefill({seq.data(), 1}) : reference.step(seq[t]));
      fp32 = grab(t == 0 ? plain.prefill({seq.data(), 1}) : plain.step(seq[t]));
      {
        const llmcc::DecodeWeightsScope use(copies);  // only while with_copies runs
        got = grab(t == 0 ? with_copies.prefill({seq.data(), 1}) : with_copies.step(seq[t]));
      }
      if (dtype == llmcc::DecodeDtype::Bf16) {
        EXPECT_TRUE(llmcc::test::all_close(("step " + std::to_string(t)).c_str(), got, want, 1e-5, 1e-5));
      }
      for (std::size_t i = 0; i < got.size(); ++i)
        worst_vs_fp32 = std::max(worst_vs_fp32, std::abs(double(got[i]) - double(fp32[i])));
    }
    // Rounding shows (the copies were read), at the copies' scale: logits of size ~1 move by ~1e-2.
    EXPECT_GT(worst_vs_fp32, 1e-5);
    EXPECT_LT(worst_vs_fp32, 0.1);
  }
}

TEST(KvAttention, GroupedQueryMatchesFusedAttentionLastRow) {
  for (int NKV : {4, 2, 1}) {
    for (int n : {1, 2, 7, 33}) llmcc::test::single_query_matches_fused_attention_last_row(4, NKV, 10, n);
  }
}

TEST(LlamaGenerate, CachedLogitsEqualFullForwardAtEveryStep) {
  for (int n_kv_head : {2, 1, 4}) {
    SCOPED_TRACE("n_kv_head=" + std::to_string(n_kv_head));
    const auto w = small_model(1 + n_kv_head, n_kv_head);
    for_both_kernel_modes(
        [&] { llmcc::test::generate_cached_logits_equal_full_forward_at_every_step<LlamaGeneration>(w.model); });
  }
}

TEST(LlamaGenerate, PrefillAgainForgetsThePreviousSequence) {
  llmcc::test::generate_prefill_again_forgets_the_previous_sequence<LlamaGeneration>(small_model(3).model);
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
        const auto cached = llmcc::models::llama_sample(w.model, prompts[p], 2 * maxT, cfg, cached_rng,
                                                        [&](std::int32_t id) { seen.push_back(id); });
        const auto uncached = llmcc::models::llama_sample_uncached(w.model, prompts[p], 2 * maxT, cfg, uncached_rng);
        ASSERT_EQ(cached.size(), std::size_t(2 * maxT));
        EXPECT_EQ(cached, uncached);
        EXPECT_EQ(seen, cached);
        EXPECT_EQ(cached_rng.state(), uncached_rng.state());
      }
    }
  });
  // Top-k draws depend on the seed (the test would pass trivially if they did not).
  Rng a(1), b(2);
  EXPECT_NE(llmcc::models::llama_sample(w.model, {3}, 20, top_k, a),
            llmcc::models::llama_sample(w.model, {3}, 20, top_k, b));
}

TEST(LlamaGenerate, StopsAtTheContextLimit) {
  llmcc::test::generate_stops_at_the_context_limit<LlamaGeneration>(small_model(12).model);
}

TEST(LlamaGenerate, SlidingWindowEqualsForwardOverTheLastMaxTTokens) {
  llmcc::test::generate_sliding_window_equals_forward_over_the_last_max_t_tokens<LlamaGeneration>(
      small_model(15).model);
}

TEST(LlamaGenerate, StopsAtEndOfTextAndStartsFromIt) {
  const auto w = small_model(18);
  llmcc::test::generate_stops_at_end_of_text_and_starts_from_it<LlamaGeneration>(w.model);
  // The document start (SentencePiece data's bos between documents) ends it as well, and an
  // empty prompt starts from Llama's eot.
  SamplingConfig sc;
  sc.temperature = 0.0f;
  sc.eot = 1;
  Rng rng(1);
  const auto first = llmcc::models::llama_sample(w.model, {4, 5}, 5, sc, rng);  // (5)
  ASSERT_EQ(first.size(), 5u);
  sc.stop_at_eot = true;
  sc.document_start = first[0];
  EXPECT_EQ(llmcc::models::llama_sample(w.model, {4, 5}, 5, sc, rng), std::vector<std::int32_t>{first[0]});
  sc.document_start = -1;
  sc.stop_at_eot = false;
  EXPECT_EQ(llmcc::models::llama_sample(w.model, {}, 4, sc, rng),
            llmcc::models::llama_sample(w.model, {sc.eot}, 4, sc, rng));
}

TEST(LlamaGenerate, BadInputIsAClearError) {
  const auto w = small_model(19);
  llmcc::test::generate_bad_input_is_a_clear_error<LlamaGeneration>(w.model, "llama generate");
  SamplingConfig sc;
  Rng rng(1);
  // A bad id anywhere in a long prompt, even in the part cropped away, and with 0 new tokens.
  std::vector<std::int32_t> long_prompt(20, 2);  // (20)
  long_prompt[0] = 99;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::llama_sample(w.model, long_prompt, 0, sc, rng); },
                                        {"99", "[0, 37)"}));
  llmcc::models::Llama unbound(small_config());
  EXPECT_TRUE(llmcc::test::throws_error([&] { LlamaGenerator g(unbound); }, {"no weights bound"}));
}

TEST(LlamaGenerate, ADecodeStepAllocatesNothingBeyondItsOps) {
  llmcc::test::generate_a_decode_step_allocates_nothing_beyond_its_ops<LlamaGeneration>(small_model(20).model);
}

// The planned arenas hold a full-length prefill and the last decode step of the largest shapes
// a preset has here (an arena overflow throws, so running them is the check).
TEST(LlamaGenerate, PlannedMemoryHoldsAFullContext) {
  LlamaConfig c = llmcc::models::llama_preset("llama-tiny");
  c.max_seq_len = 64;
  auto w = llmcc::models::make_llama(c);
  llmcc::models::llama_init(w.model, 1);
  LlamaGenerator gen(w.model, ContextFull::Slide);
  gen.prefill(random_ids(64, c.vocab_size, 3));
  gen.step(5);  // a slide: a prefill of 63, then a decode at position 63
  EXPECT_EQ(gen.length(), 64);
  EXPECT_GT(gen.planned_bytes(), std::size_t{2} * 4 * 64 * 64 * 4);  // at least the K and V caches
}

}  // namespace
