// GPT-2 generation with a KV cache (src/models/gpt2/gpt2_generate.h): the cached logits equal the full
// forward at every step, sampling follows its specification (greedy, top-k, seeds, padded rows
// never chosen), the context limit stops or slides, a decode step allocates nothing, and
// `llmcc generate` runs on a saved checkpoint as a user runs it. The tests Llama's generation
// shares are generate_suite.h's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "allocation_counter.h"
#include "cli_run.h"
#include "generate_suite.h"
#include "llmcc/arena.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/rng.h"
#include "llmcc/text/tokenizer.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_generate.h"
#include "models/gpt2/gpt2_weights.h"
#include "random_ids.h"
#include "temp_dir.h"
#include "test_data.h"
#include "test_support.h"

namespace {

using llmcc::Rng;
using llmcc::Tensor;
using llmcc::models::ContextFull;
using llmcc::models::Gpt2Config;
using llmcc::models::Gpt2Generator;
using llmcc::models::SamplingConfig;
using llmcc::test::full_forward_last;
using llmcc::test::random_ids;

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
llmcc::models::Gpt2Weights small_model(std::uint64_t seed, float std = 0.3f) {
  auto w = llmcc::models::make_gpt2(small_config());
  llmcc::models::gpt2_init(w.model, seed);
  Rng rng(seed + 1);
  rng.fill_normal(w.params.data(), w.params.size(), 0.0f, std);
  return w;
}

int argmax(const std::vector<float>& logits, int V) {
  return static_cast<int>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
}

// The ops one decode step calls on (1, 1, C), run directly: the allocations they make themselves.
long op_allocations_per_step(const llmcc::models::Gpt2& m) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  const Tensor x = arena.zeros({1, 1, m.cfg.n_embd}, "x");  // (1, 1, C)
  const long before = llmcc::test::allocations();
  for (const llmcc::models::Gpt2Block& b : m.h) {
    const Tensor a = b.ln_1.forward(x);  // (1, 1, C)
    (void)b.attn.c_attn.forward(a);
    const Tensor h = x + b.attn.c_proj.forward(a);  // (1, 1, C)
    (void)(h + b.mlp.forward(b.ln_2.forward(h), m.no_adapters.h[0].mlp));
  }
  (void)llmcc::linear_nobias(m.ln_f.forward(x), m.wte);
  return llmcc::test::allocations() - before;
}

// GPT-2 for generate_suite.h. Its logits rows are padded_vocab_size wide; the tolerance is at most
// 1e-4 of the reference's max magnitude.
struct Gpt2Generation {
  using Model = llmcc::models::Gpt2;
  using Generator = Gpt2Generator;
  static constexpr llmcc::test::ForwardTolerance kTolerance{1e-4, 0.0};
  static std::int64_t logits_width(const Model& m) { return m.cfg.padded_vocab_size; }
  static std::vector<std::int32_t> sample(const Model& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                          const SamplingConfig& cfg, Rng& rng) {
    return llmcc::models::gpt2_sample(m, prompt, max_new_tokens, cfg, rng);
  }
  static long op_allocations_per_step(const Model& m) { return ::op_allocations_per_step(m); }
};

TEST(KvAttention, SingleQueryMatchesFusedAttentionLastRow) {
  // The fused causal op's last query row sees every key: the same as one query over the cache.
  for (int HS : {1, 5, 16, 12}) {
    for (int n : {1, 3, 7, 17}) llmcc::test::single_query_matches_fused_attention_last_row(3, 3, HS, n);
  }
}

TEST(Gpt2Generate, CachedLogitsEqualFullForwardAtEveryStep) {
  llmcc::test::generate_cached_logits_equal_full_forward_at_every_step<Gpt2Generation>(small_model(1).model);
}

TEST(Gpt2Generate, PrefillAgainForgetsThePreviousSequence) {
  llmcc::test::generate_prefill_again_forgets_the_previous_sequence<Gpt2Generation>(small_model(3).model);
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
  const auto st = llmcc::models::generate(gen, prompt, 10, greedy, rng, [&](std::int32_t id) { out.push_back(id); });
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
  const auto ta = llmcc::models::gpt2_sample(w.model, prompt, 12, cfg, a);
  const auto tb = llmcc::models::gpt2_sample(w.model, prompt, 12, cfg, b);
  const auto tc = llmcc::models::gpt2_sample(w.model, prompt, 12, cfg, c);
  EXPECT_EQ(ta.size(), 12u);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  // top-k = 1 at any temperature is greedy.
  SamplingConfig top1 = cfg, greedy = cfg;
  top1.top_k = 1;
  greedy.temperature = 0.0f;
  auto w2 = small_model(9);
  EXPECT_EQ(llmcc::models::gpt2_sample(w2.model, prompt, 12, top1, a),
            llmcc::models::gpt2_sample(w2.model, prompt, 12, greedy, c));
}

TEST(Gpt2Sampler, FollowsTheSoftmaxOverTheTopK) {
  // logits ln(1), ln(2), ..., ln(8) (then padding): p_i proportional to i+1; top_k = 3 keeps
  // ids 5, 6, 7 with probabilities 6/21, 7/21, 8/21.
  const int V = 8;
  std::vector<float> logits(16, 100.0f);  // padded entries larger than any real one
  for (int i = 0; i < V; ++i) logits[i] = std::log(float(i + 1));
  llmcc::models::Sampler sampler(V);
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
  llmcc::models::Sampler sampler(6);
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
      for (std::int32_t id : llmcc::models::gpt2_sample(w.model, {1, 2}, 40, sc, rng))
        ASSERT_TRUE(id >= 0 && id < cfg.vocab_size) << id;
    }
  }
}

TEST(Gpt2Generate, StopsAtTheContextLimit) {
  llmcc::test::generate_stops_at_the_context_limit<Gpt2Generation>(small_model(12).model);
}

TEST(Gpt2Generate, SlidingWindowEqualsForwardOverTheLastMaxTTokens) {
  const auto w = small_model(15);
  llmcc::test::generate_sliding_window_equals_forward_over_the_last_max_t_tokens<Gpt2Generation>(w.model);
  // gpt2_sample slides, so it gives every token asked for.
  const int maxT = w.model.cfg.max_seq_len;
  SamplingConfig sc;
  Rng rng(17);
  EXPECT_EQ(llmcc::models::gpt2_sample(w.model, {1}, 2 * maxT, sc, rng).size(), std::size_t(2 * maxT));
}

TEST(Gpt2Generate, StopsAtEndOfTextAndStartsFromIt) {
  llmcc::test::generate_stops_at_end_of_text_and_starts_from_it<Gpt2Generation>(small_model(18).model);
}

TEST(Gpt2Generate, BadInputIsAClearError) {
  llmcc::test::generate_bad_input_is_a_clear_error<Gpt2Generation>(small_model(19).model, "gpt2 generate");
}

TEST(Gpt2Generate, ADecodeStepAllocatesNothingBeyondItsOps) {
  llmcc::test::generate_a_decode_step_allocates_nothing_beyond_its_ops<Gpt2Generation>(small_model(20).model);
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
  auto w = llmcc::models::make_gpt2(c);
  llmcc::models::gpt2_init(w.model, 21);
  llmcc::TrainState st;
  llmcc::models::gpt2_config_to_kv(c, st.config);
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
  // With bf16 or int8 weight copies: the copies are made and said, and the run is as reproducible.
  for (const std::string dtype : {"bf16", "int8"}) {
    std::vector<std::string> copy_args = args;
    copy_args.insert(copy_args.end(), {"--weights-dtype", dtype});
    const CliResult d = run_llmcc(dir, copy_args), e = run_llmcc(dir, copy_args);
    ASSERT_EQ(d.code, 0) << d.err;
    EXPECT_NE(d.err.find("decoding reads " + dtype + " copies of"), std::string::npos) << d.err;
    EXPECT_EQ(d.out, e.out);
    EXPECT_EQ(d.out.rfind("Hello world", 0), 0u) << d.out;
  }
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
  // --chat needs a chat template: GPT-2's tokenizer has none.
  const CliResult chat = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--chat", "--prompt", "hi"});
  EXPECT_EQ(chat.code, 1);
  EXPECT_NE(chat.err.find("has no chat template"), std::string::npos) << chat.err;
  const CliResult system = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--system", "be brief", "--prompt", "hi"});
  EXPECT_EQ(system.code, 1);
  EXPECT_NE(system.err.find("--system is a chat message; give --chat with it"), std::string::npos) << system.err;
  const CliResult dtype = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--weights-dtype", "f16"});
  EXPECT_EQ(dtype.code, 1);
  EXPECT_NE(dtype.err.find("--weights-dtype is 'f16', expected f32, bf16 or int8"), std::string::npos) << dtype.err;
  const CliResult too_long = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", long_prompt});
  EXPECT_EQ(too_long.code, 1);
  EXPECT_NE(too_long.err.find("40 tokens long, more than the model's context of 32"), std::string::npos)
      << too_long.err;
}

}  // namespace
