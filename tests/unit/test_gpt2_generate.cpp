// GPT-2 generation with a KV cache (src/nn/gpt2_generate.h): the cached logits equal the full
// forward at every step, sampling follows its specification (greedy, top-k, seeds, padded rows
// never chosen), the context limit stops or slides, a decode step allocates nothing, and
// `llmcc generate` runs on a saved checkpoint as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/train/checkpoint.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/tokenizer.h"
#include "nn/gpt2.h"
#include "nn/gpt2_generate.h"
#include "nn/gpt2_weights.h"
#include "nn/kv_attention.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "test_support.h"
#include "test_data.h"

// Counts heap allocations of this process, to check that a decode step makes none. GCC sees
// the replaced delete's free() inlined where a new-expression's pointer arrives and warns of a
// mismatch; both sides are ours and malloc-based, so the warning is switched off for this file.
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

using llmcc::Rng;
using llmcc::Tensor;
using llmcc::nn::ContextFull;
using llmcc::nn::Gpt2Config;
using llmcc::nn::Gpt2Generator;
using llmcc::nn::SamplingConfig;

// HS = 12: not a multiple of the SIMD width, so the kernel's tails run.
Gpt2Config small_config() {
  Gpt2Config c;
  c.vocab_size = 67;
  c.padded_vocab_size = 128;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 48;
  return c;
}

// A small GPT-2 with weights large enough (std 0.3, not GPT-2's 0.02) that attention is far from
// uniform and every path changes the logits.
llmcc::nn::Gpt2Weights small_model(std::uint64_t seed, float std = 0.3f) {
  auto w = llmcc::nn::make_gpt2(small_config());
  llmcc::nn::gpt2_init(w.model, seed);
  Rng rng(seed + 1);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, std);
  return w;
}

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return ids;
}

// Gpt2::forward over all of `ids`; the logits (Vp) of the last position.
std::vector<float> full_forward_last(const llmcc::nn::Gpt2& m, const std::vector<std::int32_t>& ids) {
  llmcc::Arena arena(64 << 20);
  llmcc::ArenaScope scope(arena);
  const int T = static_cast<int>(ids.size());
  const Tensor logits = m.forward(llmcc::Tokens(ids.data(), 1, T));  // (1, T, Vp)
  const std::int64_t Vp = logits.dim(-1);
  const float* last = logits.f32() + (T - 1) * Vp;
  return std::vector<float>(last, last + Vp);
}

int argmax(const std::vector<float>& logits, int V) {
  return static_cast<int>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
}

// The tolerance: max abs error at most 1e-4 of the reference's max magnitude.
::testing::AssertionResult close_to_forward(const char* what, const Tensor& got, const std::vector<float>& ref) {
  double max_ref = 0;
  for (float r : ref) max_ref = std::max(max_ref, std::fabs(double(r)));
  EXPECT_EQ(static_cast<std::size_t>(got.numel()), ref.size());
  return llmcc::test::all_close(what, got.f32(), ref.data(), ref.size(), 1e-4 * max_ref, 0.0);
}

TEST(KvAttention, SingleQueryMatchesFusedAttentionLastRow) {
  // The fused causal op's last query row sees every key: the same as one query over the cache.
  for (int HS : {1, 5, 16, 12}) {
    for (int n : {1, 3, 7, 17}) {
      const int NH = 3, C = NH * HS;
      SCOPED_TRACE("HS=" + std::to_string(HS) + " n=" + std::to_string(n));
      llmcc::Arena arena(1 << 20);
      llmcc::ArenaScope scope(arena);
      const Tensor q = llmcc::test::tensor_from(arena, {1, n, C}, llmcc::test::random_vector<float>(n * C, 1, -2, 2));
      const Tensor k = llmcc::test::tensor_from(arena, {1, n, C}, llmcc::test::random_vector<float>(n * C, 2, -2, 2));
      const Tensor v = llmcc::test::tensor_from(arena, {1, n, C}, llmcc::test::random_vector<float>(n * C, 3));
      const Tensor ref = llmcc::attention(q, k, v, NH, NH);  // (1, n, C)
      std::vector<float> out(C), scores(NH * n);
      llmcc::test::for_each_thread_count([&](int) {
        llmcc::nn::attention_single_query(out.data(), q.f32() + (n - 1) * C, k.f32(), v.f32(), n, NH, NH, HS, C,
                                          scores.data());
        EXPECT_TRUE(llmcc::test::all_close("out", out.data(), ref.f32() + (n - 1) * C, C, 1e-6, 1e-5));
      });
    }
  }
}

TEST(Gpt2Generate, CachedLogitsEqualFullForwardAtEveryStep) {
  auto w = small_model(1);
  const int maxT = w.model.cfg.max_seq_len;
  const auto seq = random_ids(maxT, w.model.cfg.vocab_size, 2);
  for (int prompt_len : {1, 5, maxT}) {
    SCOPED_TRACE("prompt_len=" + std::to_string(prompt_len));
    Gpt2Generator gen(w.model);
    std::vector<std::int32_t> ids(seq.begin(), seq.begin() + prompt_len);
    Tensor logits = gen.prefill(ids);
    ASSERT_EQ(logits.numel(), w.model.cfg.padded_vocab_size);
    EXPECT_TRUE(close_to_forward("prefill", logits, full_forward_last(w.model, ids)));
    for (int t = prompt_len; t < maxT; ++t) {
      ids.push_back(seq[t]);
      logits = gen.step(seq[t]);
      EXPECT_EQ(gen.length(), t + 1);
      EXPECT_TRUE(close_to_forward(("step " + std::to_string(t)).c_str(), logits, full_forward_last(w.model, ids)));
    }
    EXPECT_TRUE(gen.full());
    EXPECT_EQ(gen.tokens(), ids);
  }
}

TEST(Gpt2Generate, PrefillAgainForgetsThePreviousSequence) {
  auto w = small_model(3);
  Gpt2Generator gen(w.model);
  gen.prefill(random_ids(9, 67, 4));
  gen.step(5);
  const auto ids = random_ids(4, 67, 5);
  const Tensor logits = gen.prefill(ids);
  EXPECT_EQ(gen.length(), 4);
  EXPECT_TRUE(close_to_forward("second prefill", logits, full_forward_last(w.model, ids)));
}

TEST(Gpt2Generate, GreedyIsArgmaxOfTheFullForward) {
  auto w = small_model(6);
  const int V = w.model.cfg.vocab_size;
  Gpt2Generator gen(w.model);
  Rng rng(1);
  SamplingConfig greedy;
  greedy.temperature = 0.0f;
  std::vector<std::int32_t> seq = random_ids(3, V, 7);
  const std::vector<std::int32_t> prompt = seq;
  std::vector<std::int32_t> out;
  const auto st = llmcc::nn::generate(gen, prompt, 10, greedy, rng, [&](std::int32_t id) { out.push_back(id); });
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(st.new_tokens, 10);
  EXPECT_EQ(st.decode_steps, 9);
  for (std::int32_t id : out) {
    EXPECT_EQ(id, argmax(full_forward_last(w.model, seq), V)) << "after " << seq.size() << " tokens";
    seq.push_back(id);
  }
  // The greedy draw consumed no random numbers.
  EXPECT_EQ(rng.state(), Rng(1).state());
}

TEST(Gpt2Generate, SeedsReproduceAndDiffer) {
  auto w = small_model(8, 0.02f);  // GPT-2's scale: a flat distribution, so seeds matter
  SamplingConfig cfg;
  cfg.temperature = 1.0f;
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  Rng a(42), b(42), c(43);
  const auto ta = llmcc::nn::gpt2_sample(w.model, prompt, 12, cfg, a);
  const auto tb = llmcc::nn::gpt2_sample(w.model, prompt, 12, cfg, b);
  const auto tc = llmcc::nn::gpt2_sample(w.model, prompt, 12, cfg, c);
  EXPECT_EQ(ta.size(), 12u);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  // top-k = 1 at any temperature is greedy.
  SamplingConfig top1 = cfg, greedy = cfg;
  top1.top_k = 1;
  greedy.temperature = 0.0f;
  auto w2 = small_model(9);
  EXPECT_EQ(llmcc::nn::gpt2_sample(w2.model, prompt, 12, top1, a),
            llmcc::nn::gpt2_sample(w2.model, prompt, 12, greedy, c));
}

TEST(Gpt2Sampler, FollowsTheSoftmaxOverTheTopK) {
  // logits ln(1), ln(2), ..., ln(8) (then padding): p_i proportional to i+1; top_k = 3 keeps
  // ids 5, 6, 7 with probabilities 6/21, 7/21, 8/21.
  const int V = 8;
  std::vector<float> logits(16, 100.0f);  // padded entries larger than any real one
  for (int i = 0; i < V; ++i) logits[i] = std::log(float(i + 1));
  llmcc::nn::Sampler sampler(V);
  Rng rng(5);
  SamplingConfig cfg;
  std::vector<int> all(V), top3(V);
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) {
    cfg.top_k = 0;
    ++all.at(sampler.sample(logits, cfg, rng));
    cfg.top_k = 3;
    ++top3.at(sampler.sample(logits, cfg, rng));
  }
  for (int i = 0; i < V; ++i) {
    EXPECT_NEAR(all[i] / double(draws), (i + 1) / 36.0, 0.01) << "id " << i;
    EXPECT_NEAR(top3[i] / double(draws), i >= 5 ? (i + 1) / 21.0 : 0.0, 0.01) << "id " << i;
  }
  // Temperature 2 flattens: p_i proportional to sqrt(i+1).
  cfg.top_k = 0;
  cfg.temperature = 2.0f;
  std::vector<int> warm(V);
  for (int i = 0; i < draws; ++i) ++warm.at(sampler.sample(logits, cfg, rng));
  double z = 0;
  for (int i = 0; i < V; ++i) z += std::sqrt(i + 1.0);
  for (int i = 0; i < V; ++i) EXPECT_NEAR(warm[i] / double(draws), std::sqrt(i + 1.0) / z, 0.01) << "id " << i;
}

TEST(Gpt2Sampler, TiesAndGreedyPickTheLowestIdAndTopKKeepsExactlyK) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f, 3.0f, -1.0f};
  llmcc::nn::Sampler sampler(6);
  Rng rng(1);
  SamplingConfig cfg;
  cfg.temperature = 0.0f;
  EXPECT_EQ(sampler.sample(logits, cfg, rng), 1);
  cfg.temperature = 1.0f;
  cfg.top_k = 2;  // three ids tie at 3.0: the two lowest (1 and 3) are kept
  std::vector<int> seen(6);
  for (int i = 0; i < 2000; ++i) ++seen.at(sampler.sample(logits, cfg, rng));
  EXPECT_GT(seen[1], 800);
  EXPECT_GT(seen[3], 800);
  EXPECT_EQ(seen[1] + seen[3], 2000);
  cfg.top_k = 100;  // more than the vocabulary: all kept
  for (int i = 0; i < 200; ++i) EXPECT_LT(sampler.sample(logits, cfg, rng), 6);
}

TEST(Gpt2Generate, NeverProducesPaddedIds) {
  // Padded rows of wte made huge: their logits dwarf the real ones, yet are never chosen. Each
  // padded row is 20 times the row of the most likely real token after the prompt (the padded
  // rows are never embedded, so the prompt's hidden state and that token do not change), so
  // its logit is 20 times the largest real one whatever the sign of the hidden state.
  auto w = small_model(10);
  const auto& cfg = w.model.cfg;
  const int best = argmax(full_forward_last(w.model, {1, 2}), cfg.vocab_size);
  float* wte = w.model.wte.f32();
  for (std::int64_t r = cfg.vocab_size; r < cfg.padded_vocab_size; ++r)
    for (std::int64_t c = 0; c < cfg.n_embd; ++c) wte[r * cfg.n_embd + c] = 20.0f * wte[best * cfg.n_embd + c];
  Gpt2Generator gen(w.model, ContextFull::Slide);
  const Tensor logits = gen.prefill(std::vector<std::int32_t>{1, 2});
  ASSERT_GT(logits.f32()[best], 0.0f) << "the construction needs a positive largest logit";
  const float* l = logits.f32();
  EXPECT_GT(*std::max_element(l + cfg.vocab_size, l + cfg.padded_vocab_size), *std::max_element(l, l + cfg.vocab_size));
  for (float temperature : {0.0f, 1.0f, 5.0f}) {
    for (int top_k : {0, 3}) {
      SamplingConfig sc;
      sc.temperature = temperature;
      sc.top_k = top_k;
      Rng rng(11);
      for (std::int32_t id : llmcc::nn::gpt2_sample(w.model, {1, 2}, 40, sc, rng))
        ASSERT_TRUE(id >= 0 && id < cfg.vocab_size) << id;
    }
  }
}

TEST(Gpt2Generate, StopsAtTheContextLimit) {
  auto w = small_model(12);
  const int maxT = w.model.cfg.max_seq_len;
  Gpt2Generator gen(w.model, ContextFull::Stop);
  SamplingConfig cfg;
  Rng rng(1);
  const auto st = llmcc::nn::generate(gen, random_ids(5, 67, 13), 100, cfg, rng);
  // The last token is predicted from a full context of maxT tokens but never fed back.
  EXPECT_TRUE(st.stopped_at_limit);
  EXPECT_EQ(st.new_tokens, maxT - 5 + 1);
  EXPECT_TRUE(gen.full());
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.step(1); }, {"16 tokens", "context", "Slide"}));
  // A prompt of exactly maxT still yields one token.
  const auto st2 = llmcc::nn::generate(gen, random_ids(maxT, 67, 14), 100, cfg, rng);
  EXPECT_EQ(st2.new_tokens, 1);
}

TEST(Gpt2Generate, SlidingWindowEqualsForwardOverTheLastMaxTTokens) {
  auto w = small_model(15);
  const int maxT = w.model.cfg.max_seq_len;
  const auto seq = random_ids(maxT + 3, 67, 16);
  Gpt2Generator gen(w.model, ContextFull::Slide);
  gen.prefill(std::vector<std::int32_t>(seq.begin(), seq.begin() + maxT));
  for (int t = maxT; t < maxT + 3; ++t) {
    const Tensor logits = gen.step(seq[t]);
    const std::vector<std::int32_t> window(seq.begin() + (t + 1 - maxT), seq.begin() + t + 1);
    EXPECT_EQ(gen.tokens(), window);
    EXPECT_TRUE(
        close_to_forward(("slide at " + std::to_string(t)).c_str(), logits, full_forward_last(w.model, window)));
  }
  EXPECT_EQ(gen.slides(), 3);
  // gpt2_sample slides, so it gives every token asked for.
  SamplingConfig sc;
  Rng rng(17);
  EXPECT_EQ(llmcc::nn::gpt2_sample(w.model, {1}, 2 * maxT, sc, rng).size(), std::size_t(2 * maxT));
}

TEST(Gpt2Generate, StopsAtEndOfTextAndStartsFromIt) {
  auto w = small_model(18);
  SamplingConfig sc;
  sc.temperature = 0.0f;
  Rng rng(1);
  // The greedy continuation's first token, declared the end-of-text id, ends generation at once.
  const auto first = llmcc::nn::gpt2_sample(w.model, {4, 5}, 5, sc, rng);
  ASSERT_EQ(first.size(), 5u);
  sc.stop_at_eot = true;
  sc.eot = first[0];
  EXPECT_EQ(llmcc::nn::gpt2_sample(w.model, {4, 5}, 5, sc, rng), std::vector<std::int32_t>{first[0]});
  // An empty prompt starts from eot.
  sc.stop_at_eot = false;
  EXPECT_EQ(llmcc::nn::gpt2_sample(w.model, {}, 4, sc, rng), llmcc::nn::gpt2_sample(w.model, {sc.eot}, 4, sc, rng));
}

TEST(Gpt2Generate, BadInputIsAClearError) {
  auto w = small_model(19);
  Gpt2Generator gen(w.model);
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>(17, 1)); },
                                        {"17 tokens", "context of 16"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{}); }, {"empty"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{1, 67}); }, {"67", "[0, 67)"}));
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.prefill(std::vector<std::int32_t>{-1}); }, {"-1"}));
  gen.prefill(std::vector<std::int32_t>{1});
  EXPECT_TRUE(llmcc::test::throws_error([&] { gen.step(100); }, {"100", "vocabulary"}));
  SamplingConfig sc;
  sc.temperature = -1.0f;
  Rng rng(1);
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::gpt2_sample(w.model, {1}, 3, sc, rng); }, {"temperature"}));
  sc.temperature = 1.0f;
  sc.top_k = -2;
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::nn::gpt2_sample(w.model, {1}, 3, sc, rng); }, {"top_k"}));
}

// The ops one decode step calls on (1, 1, C), run directly: the allocations they make themselves.
long op_allocations_per_step(const llmcc::nn::Gpt2& m) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  const Tensor x = arena.zeros({1, 1, m.cfg.n_embd}, "x");  // (1, 1, C)
  const long before = g_allocations.load();
  for (const llmcc::nn::Gpt2Block& b : m.h) {
    const Tensor a = b.ln_1.forward(x);
    (void)b.attn.c_attn.forward(a);
    const Tensor h = x + b.attn.c_proj.forward(a);
    (void)(h + b.mlp.forward(b.ln_2.forward(h)));
  }
  (void)llmcc::linear_nobias(m.ln_f.forward(x), m.wte);
  return g_allocations.load() - before;
}

TEST(Gpt2Generate, ADecodeStepAllocatesNothingBeyondItsOps) {
  // The generator's own work per token (cache, scratch, sampling) allocates nothing from the
  // heap. The ops it calls may still allocate inside libraries (dnnl_sgemm's packing buffers,
  // libgomp teams); those are counted by running the same ops directly and subtracted, so
  // this checks that the generator adds nothing of its own.
  auto w = small_model(20);
  Gpt2Generator gen(w.model);
  llmcc::nn::Sampler sampler(w.model.cfg.vocab_size);
  SamplingConfig sc;
  sc.top_k = 5;
  Rng rng(1);
  Tensor logits = gen.prefill(std::vector<std::int32_t>{1, 2, 3});
  logits = gen.step(sampler.sample(logits, sc, rng));  // warm-up (thread pools, GEMM state)
  const long ops = op_allocations_per_step(w.model);
  while (!gen.full()) {
    const long before = g_allocations.load();
    logits = gen.step(sampler.sample(logits, sc, rng));
    ASSERT_EQ(g_allocations.load() - before, ops) << "at position " << gen.length() - 1;
  }
  std::printf("allocations per decode step made by the ops' front ends: %ld\n", ops);
}

// ---- llmcc generate, run as a user runs it -------------------------------------------------

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;

// A weights-only llmcc checkpoint of a tiny GPT-2 with the real vocabulary.
std::string save_tiny_checkpoint(const llmcc::test::TempDir& dir) {
  Gpt2Config c;
  c.max_seq_len = 32;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  auto w = llmcc::nn::make_gpt2(c);
  llmcc::nn::gpt2_init(w.model, 21);
  llmcc::TrainState st;
  llmcc::nn::gpt2_config_to_kv(c, st.config);
  const std::string path = dir.file("tiny.bin");
  llmcc::save_checkpoint(path, w.params, nullptr, st);
  return path;
}

TEST(GenerateCli, PrintsTextAndSpeedAndIsReproducible) {
  LLMCC_REQUIRE_DATA("gpt2/encoder.json");
  llmcc::test::TempDir dir;
  const std::string ckpt = save_tiny_checkpoint(dir);
  const std::vector<std::string> args = {"generate", "--ckpt",          ckpt, "--prompt", "Hello world", "--max-tokens",
                                         "8",        "--top-k",         "50", "--seed",   "7",           "--threads",
                                         "1",        "--no-stop-at-eot"};
  const CliResult a = run_llmcc(dir, args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.rfind("Hello world", 0), 0u) << a.out;
  EXPECT_GT(a.out.size(), std::string("Hello world\n").size()) << a.out;
  EXPECT_NE(a.err.find("prefill: 2 tokens"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("decode: 8 new tokens, 7 cached steps"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("tokens/s"), std::string::npos) << a.err;
  const CliResult b = run_llmcc(dir, args);
  EXPECT_EQ(b.out, a.out);
  // Empty prompt, greedy, a context limit: 32 tokens of context stop generation.
  const CliResult c = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", "", "--max-tokens", "100",
                                      "--temperature", "0", "--no-stop-at-eot"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("reached the model's context of 32 tokens"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("decode: 32 new tokens"), std::string::npos) << c.err;
}

TEST(GenerateCli, BadInputExitsOneWithAMessage) {
  llmcc::test::TempDir dir;
  const CliResult flag = run_llmcc(dir, {"generate", "--ckpt", "x.bin", "--bogus"});
  EXPECT_EQ(flag.code, 1);
  EXPECT_NE(flag.err.find("--bogus"), std::string::npos) << flag.err;
  const CliResult missing = run_llmcc(dir, {"generate", "--ckpt", dir.file("none.bin")});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("none.bin does not exist"), std::string::npos) << missing.err;
  const CliResult no_ckpt = run_llmcc(dir, {"generate", "--prompt", "hi"});
  EXPECT_EQ(no_ckpt.code, 1);
  EXPECT_NE(no_ckpt.err.find("--ckpt"), std::string::npos) << no_ckpt.err;
  const CliResult temp = run_llmcc(dir, {"generate", "--ckpt", "x.bin", "--temperature", "-0.5"});
  EXPECT_EQ(temp.code, 1);
  EXPECT_NE(temp.err.find("--temperature"), std::string::npos) << temp.err;
  const CliResult topk = run_llmcc(dir, {"generate", "--ckpt", "x.bin", "--top-k", "-1"});
  EXPECT_EQ(topk.code, 1);
  EXPECT_NE(topk.err.find("--top-k"), std::string::npos) << topk.err;
  const CliResult full = run_llmcc(dir, {"generate", "--ckpt", "x.bin", "--on-full", "wrap"});
  EXPECT_EQ(full.code, 1);
  EXPECT_NE(full.err.find("'stop' or 'slide'"), std::string::npos) << full.err;
  if (!llmcc::test::have_data("gpt2/encoder.json")) {
    llmcc::test::note_missing_data("gpt2/encoder.json", "the prompt checks of this test");
    return;
  }
  const std::string ckpt = save_tiny_checkpoint(dir);
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += " word";
  const CliResult too_long = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", long_prompt});
  EXPECT_EQ(too_long.code, 1);
  EXPECT_NE(too_long.err.find("40 tokens long, more than the model's context of 32"), std::string::npos)
      << too_long.err;
}

}  // namespace
