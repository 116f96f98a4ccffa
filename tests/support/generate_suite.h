// The generation tests GPT-2 and Llama share (src/models/<family>/<family>_generate.h): the cached logits equal the
// model's full forward at every step, a second prefill forgets the first, the context limit
// stops or slides, generation stops at end-of-text and starts from it, bad input is a clear
// error, and a decode step allocates nothing beyond what its ops do. A test file describes its
// family with a struct and calls one function per TEST:
//
//   struct Gpt2Generation {
//     using Model = llmcc::models::Gpt2;                // forward(Tokens) -> (B, T, logits_width)
//     using Generator = llmcc::models::Gpt2Generator;   // Generator(model, ContextFull)
//     static constexpr llmcc::test::ForwardTolerance kTolerance{1e-4, 0.0};
//     static std::int64_t logits_width(const Model&);  // the width of the logits rows
//     static std::vector<std::int32_t> sample(const Model&, prompt, max_new_tokens, cfg, rng);
//     static long op_allocations_per_step(const Model&);  // with allocation_counter.h
//   };
//   TEST(Gpt2Generate, StopsAtTheContextLimit) {
//     test::generate_stops_at_the_context_limit<Gpt2Generation>(small_model(12).model);
//   }
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "allocation_counter.h"
#include "llmcc/arena.h"
#include "llmcc/ops/attention.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "models/generate.h"
#include "models/kv_attention.h"
#include "random_ids.h"
#include "test_support.h"

namespace llmcc::test {

// How close cached logits must be to the full forward's: |got - ref| <= of_max * max|ref| +
// rtol * |ref|.
struct ForwardTolerance {
  double of_max, rtol;
};

// One query over n cached keys and values (attention_single_query) equals the last row of the
// fused causal attention over the same n positions, which sees every key: NH query heads over
// NKV key/value heads of size HS, on 1 and 2 threads.
inline void single_query_matches_fused_attention_last_row(int NH, int NKV, int HS, int n) {
  SCOPED_TRACE("NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV) + " HS=" + std::to_string(HS) +
               " n=" + std::to_string(n));
  const int Cq = NH * HS, Ckv = NKV * HS;
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Tensor q = tensor_from(arena, {1, n, Cq}, random_vector<float>(n * Cq, 1, -2, 2));    // (1, n, Cq)
  const Tensor k = tensor_from(arena, {1, n, Ckv}, random_vector<float>(n * Ckv, 2, -2, 2));  // (1, n, Ckv)
  const Tensor v = tensor_from(arena, {1, n, Ckv}, random_vector<float>(n * Ckv, 3));         // (1, n, Ckv)
  const Tensor ref = attention(q, k, v, NH, NKV);                                             // (1, n, Cq)
  std::vector<float> out(Cq), scores(NH * n);                                                 // (Cq), (NH, n)
  for_each_thread_count([&](int) {
    models::attention_single_query(out.data(), q.f32() + (n - 1) * Cq, k.f32(), v.f32(), n, NH, NKV, HS, Ckv,
                                   scores.data());
    EXPECT_TRUE(all_close("out", out.data(), ref.f32() + (n - 1) * Cq, Cq, 1e-6, 1e-5));
  });
}

// Model::forward over all of `ids`; the logits (width) of the last position.
template <class Model>
std::vector<float> full_forward_last(const Model& m, const std::vector<std::int32_t>& ids) {
  Arena arena(64 << 20);
  ArenaScope scope(arena);
  const int T = static_cast<int>(ids.size());
  const Tensor logits = m.forward(Tokens(ids.data(), 1, T));  // (1, T, width)
  const std::int64_t width = logits.dim(-1);
  const float* last = logits.f32() + (T - 1) * width;
  return std::vector<float>(last, last + width);
}

inline ::testing::AssertionResult close_to_forward(const std::string& what, const Tensor& got,
                                                   const std::vector<float>& ref, ForwardTolerance tol) {
  double max_ref = 0;
  for (float r : ref) max_ref = std::max(max_ref, std::fabs(double(r)));
  EXPECT_EQ(static_cast<std::size_t>(got.numel()), ref.size());
  return all_close(what.c_str(), got.f32(), ref.data(), ref.size(), tol.of_max * max_ref, tol.rtol);
}

// Prompts of 1, 5 and max_seq_len tokens, then one token at a time to the full context: the
// prefill's and every step's logits equal the full forward's last row.
template <class Family>
void generate_cached_logits_equal_full_forward_at_every_step(const typename Family::Model& m) {
  const int maxT = m.cfg.max_seq_len;
  const auto seq = random_ids(maxT, m.cfg.vocab_size, 2);  // (maxT)
  for (int prompt_len : {1, 5, maxT}) {
    SCOPED_TRACE("prompt_len=" + std::to_string(prompt_len));
    typename Family::Generator gen(m);
    std::vector<std::int32_t> ids(seq.begin(), seq.begin() + prompt_len);  // (prompt_len), then growing
    Tensor logits = gen.prefill(ids);                                      // (width)
    ASSERT_EQ(logits.numel(), Family::logits_width(m));
    EXPECT_TRUE(close_to_forward("prefill", logits, full_forward_last(m, ids), Family::kTolerance));
    for (int t = prompt_len; t < maxT; ++t) {
      ids.push_back(seq[t]);
      logits = gen.step(seq[t]);
      EXPECT_EQ(gen.length(), t + 1);
      EXPECT_TRUE(close_to_forward("step " + std::to_string(t), logits, full_forward_last(m, ids), Family::kTolerance));
    }
    EXPECT_TRUE(gen.full());
    EXPECT_EQ(gen.tokens(), ids);
  }
}

template <class Family>
void generate_prefill_again_forgets_the_previous_sequence(const typename Family::Model& m) {
  const int V = m.cfg.vocab_size;
  typename Family::Generator gen(m);
  gen.prefill(random_ids(9, V, 4));
  gen.step(5);
  const auto ids = random_ids(4, V, 5);  // (4)
  const Tensor logits = gen.prefill(ids);
  EXPECT_EQ(gen.length(), 4);
  EXPECT_TRUE(close_to_forward("second prefill", logits, full_forward_last(m, ids), Family::kTolerance));
}

template <class Family>
void generate_stops_at_the_context_limit(const typename Family::Model& m) {
  const int maxT = m.cfg.max_seq_len, V = m.cfg.vocab_size;
  typename Family::Generator gen(m, models::ContextFull::Stop);
  models::SamplingConfig cfg;
  Rng rng(1);
  const auto st = models::generate(gen, random_ids(5, V, 13), 100, cfg, rng);
  // The last token is predicted from a full context of maxT tokens but never fed back.
  EXPECT_TRUE(st.stopped_at_limit);
  EXPECT_EQ(st.new_tokens, maxT - 5 + 1);
  EXPECT_TRUE(gen.full());
  const std::string full = std::to_string(maxT) + " tokens";
  EXPECT_TRUE(throws_error([&] { gen.step(1); }, {full.c_str(), "context", "Slide"}));
  // A prompt of exactly maxT still yields one token.
  const auto st2 = models::generate(gen, random_ids(maxT, V, 14), 100, cfg, rng);
  EXPECT_EQ(st2.new_tokens, 1);
}

template <class Family>
void generate_sliding_window_equals_forward_over_the_last_max_t_tokens(const typename Family::Model& m) {
  const int maxT = m.cfg.max_seq_len;
  const auto seq = random_ids(maxT + 3, m.cfg.vocab_size, 16);  // (maxT + 3)
  typename Family::Generator gen(m, models::ContextFull::Slide);
  gen.prefill(std::vector<std::int32_t>(seq.begin(), seq.begin() + maxT));
  for (int t = maxT; t < maxT + 3; ++t) {
    const Tensor logits = gen.step(seq[t]);                                                     // (width)
    const std::vector<std::int32_t> window(seq.begin() + (t + 1 - maxT), seq.begin() + t + 1);  // (maxT)
    EXPECT_EQ(gen.tokens(), window);
    EXPECT_TRUE(
        close_to_forward("slide at " + std::to_string(t), logits, full_forward_last(m, window), Family::kTolerance));
  }
  EXPECT_EQ(gen.slides(), 3);
}

// The greedy continuation's first token, declared the end-of-text id, ends generation at once;
// an empty prompt starts from eot.
template <class Family>
void generate_stops_at_end_of_text_and_starts_from_it(const typename Family::Model& m) {
  models::SamplingConfig sc;
  sc.temperature = 0.0f;
  Rng rng(1);
  const auto first = Family::sample(m, {4, 5}, 5, sc, rng);  // (5)
  ASSERT_EQ(first.size(), 5u);
  sc.stop_at_eot = true;
  sc.eot = first[0];
  EXPECT_EQ(Family::sample(m, {4, 5}, 5, sc, rng), std::vector<std::int32_t>{first[0]});
  sc.stop_at_eot = false;
  EXPECT_EQ(Family::sample(m, {}, 4, sc, rng), Family::sample(m, {sc.eot}, 4, sc, rng));
}

// A prompt longer than the context, an empty one, ids outside the vocabulary, and bad sampling
// settings are errors that say what is wrong; `who` starts the generator's messages.
template <class Family>
void generate_bad_input_is_a_clear_error(const typename Family::Model& m, const char* who) {
  const int maxT = m.cfg.max_seq_len, V = m.cfg.vocab_size;
  typename Family::Generator gen(m);
  const std::string too_long = std::to_string(maxT + 1) + " tokens", context = "context of " + std::to_string(maxT);
  const std::string v = std::to_string(V), range = "[0, " + v + ")";
  EXPECT_TRUE(throws_error([&] { gen.prefill(std::vector<std::int32_t>(maxT + 1, 1)); },
                           {who, too_long.c_str(), context.c_str()}));
  EXPECT_TRUE(throws_error([&] { gen.prefill(std::vector<std::int32_t>{}); }, {"empty"}));
  EXPECT_TRUE(throws_error([&] { gen.prefill(std::vector<std::int32_t>{1, V}); }, {v.c_str(), range.c_str()}));
  EXPECT_TRUE(throws_error([&] { gen.prefill(std::vector<std::int32_t>{-1}); }, {"-1"}));
  gen.prefill(std::vector<std::int32_t>{1});
  EXPECT_TRUE(throws_error([&] { gen.step(100); }, {"100", "vocabulary"}));
  models::SamplingConfig sc;
  sc.temperature = -1.0f;
  Rng rng(1);
  EXPECT_TRUE(throws_error([&] { Family::sample(m, {1}, 3, sc, rng); }, {"temperature"}));
  sc.temperature = 1.0f;
  sc.top_k = -2;
  EXPECT_TRUE(throws_error([&] { Family::sample(m, {1}, 3, sc, rng); }, {"top_k"}));
}

// The generator's own work per token (cache, scratch, sampling) allocates nothing from the heap.
// The ops it calls may still allocate inside libraries (dnnl_sgemm's packing buffers, libgomp
// teams); those are counted by running the same ops directly (Family::op_allocations_per_step)
// and subtracted, so this checks that the generator adds nothing of its own.
template <class Family>
void generate_a_decode_step_allocates_nothing_beyond_its_ops(const typename Family::Model& m) {
  typename Family::Generator gen(m);
  models::Sampler sampler(m.cfg.vocab_size);
  models::SamplingConfig sc;
  sc.top_k = 5;
  Rng rng(1);
  Tensor logits = gen.prefill(std::vector<std::int32_t>{1, 2, 3});  // (width)
  logits = gen.step(sampler.sample(logits, sc, rng));               // warm-up (thread pools, GEMM state)
  const long ops = Family::op_allocations_per_step(m);
  while (!gen.full()) {
    const long before = allocations();
    logits = gen.step(sampler.sample(logits, sc, rng));
    ASSERT_EQ(allocations() - before, ops) << "at position " << gen.length() - 1;
  }
  std::printf("allocations per decode step made by the ops' front ends: %ld\n", ops);
}

}  // namespace llmcc::test
