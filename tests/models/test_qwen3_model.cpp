// Qwen3 (src/models/qwen3/): shapes and presets, the checkpoint config round trip, the model
// suite (loss at initialisation, the generated gradient memorises a batch and matches finite
// differences) and the generation suite (KV-cache logits equal the full forward, context limit,
// end of text, bad input, allocations), each for a tied and an untied head, with head_dim
// independent of n_embd / n_head. Parity with transformers is tests/models/test_qwen3_parity.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "allocation_counter.h"
#include "generate_suite.h"
#include "llmcc/arena.h"
#include "llmcc/train/rng.h"
#include "model_suite.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3/qwen3_generate.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/registry.h"
#include "qwen3.grad.h"
#include "random_ids.h"
#include "test_support.h"

namespace {

using llmcc::Rng;
using llmcc::Tensor;
using llmcc::models::ContextFull;
using llmcc::models::Qwen3Config;
using llmcc::models::Qwen3Generator;
using llmcc::models::SamplingConfig;

// D = 10 (not n_embd / n_head = 8, and not a multiple of the SIMD width, so the kernels' tails
// run); n_kv_head 2 of 4 heads: grouped-query attention.
Qwen3Config small_config(bool tied) {
  Qwen3Config c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.head_dim = 10;
  c.hidden_dim = 56;
  c.rope_theta = 100.0f;  // a small base: even the slowest pair turns visibly over 16 positions
  c.norm_eps = 1e-5f;
  c.tie_embeddings = tied;
  return c;
}

// Gains around one (their role), matrices N(0, std): far from uniform attention, so every path
// changes the logits.
llmcc::models::Qwen3Weights small_model(std::uint64_t seed, bool tied, float std = 0.3f) {
  auto w = llmcc::models::make_qwen3(small_config(tied));
  Rng rng(seed);
  llmcc::for_each_parameter(w.model, [&](const std::string&, Tensor& t) {
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), t.ndim() == 1 ? 1.0f : 0.0f, std);
  });
  return w;
}

std::int64_t declared_elements(const Qwen3Config& c) {
  llmcc::models::Qwen3 shapes(c);  // shapes only: no storage
  std::int64_t n = 0;
  llmcc::for_each_parameter(shapes, [&](const std::string&, Tensor& t) { n += t.numel(); });
  return n;
}

// Qwen3 for model_suite.h.
struct Qwen3Family {
  using Config = Qwen3Config;
  using Weights = llmcc::models::Qwen3Weights;
  static constexpr const char* kName = "qwen3";
  static Weights make(const Config& c) { return llmcc::models::make_qwen3(c); }
  static void init(Weights& w, std::uint64_t seed) { llmcc::models::qwen3_init(w.model, seed); }
  static float loss(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets) {
    return llmcc::models::qwen3_loss(w.model, idx, targets);
  }
  static float loss_grad(const Weights& w, llmcc::Tokens idx, llmcc::Tokens targets, auto& grad) {
    return llmcc::models::qwen3_loss_grad(w.model, idx, targets, grad);
  }
  static std::int64_t real_elements(const std::string&, const Tensor& t, const Config&) { return t.numel(); }
};

// The ops one decode step calls on (1, 1, C), run directly: the allocations they make themselves.
long op_allocations_per_step(const llmcc::models::Qwen3& m) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  const Tensor x = arena.zeros({1, 1, m.cfg.n_embd}, "x");  // (1, 1, C)
  const long before = llmcc::test::allocations();
  for (const llmcc::models::Qwen3Block& b : m.model.layers) {
    const auto& at = b.self_attn;
    const Tensor a = b.input_layernorm.forward(x);  // (1, 1, C)
    const Tensor q = at.q_norm.forward_heads(llmcc::linear_nobias(a, at.q_proj), 1, 1, at.n_head, at.head_dim);
    const Tensor k = at.k_norm.forward_heads(llmcc::linear_nobias(a, at.k_proj), 1, 1, at.n_kv_head, at.head_dim);
    (void)llmcc::rope(q, at.n_head, at.rope_freqs, 3);
    (void)llmcc::rope(k, at.n_kv_head, at.rope_freqs, 3);
    (void)llmcc::linear_nobias(a, at.v_proj);
    const Tensor y = arena.zeros({1, 1, std::int64_t{at.n_head} * at.head_dim}, "y");
    const Tensor h = x + llmcc::linear_nobias(y, at.o_proj);  // (1, 1, C)
    (void)(h + b.mlp.forward(b.post_attention_layernorm.forward(h), m.no_adapters.layers[0]));
  }
  (void)llmcc::linear_nobias(m.model.norm.forward(x), m.model.embed_tokens);
  return llmcc::test::allocations() - before;
}

// Qwen3 for generate_suite.h (the tolerance is Llama's).
struct Qwen3Generation {
  using Model = llmcc::models::Qwen3;
  using Generator = Qwen3Generator;
  static constexpr llmcc::test::ForwardTolerance kTolerance{1e-5, 1e-5};
  static std::int64_t logits_width(const Model& m) { return m.cfg.vocab_size; }
  static std::vector<std::int32_t> sample(const Model& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                          const SamplingConfig& cfg, Rng& rng) {
    Qwen3Generator gen(m, ContextFull::Slide);
    std::vector<std::int32_t> out;
    llmcc::models::generate(gen, prompt, max_new_tokens, cfg, rng, [&](std::int32_t id) { out.push_back(id); });
    return out;
  }
  static long op_allocations_per_step(const Model& m) { return ::op_allocations_per_step(m); }
};

TEST(Qwen3Model, PresetsCountTheirParameters) {
  for (const std::string& name : llmcc::models::qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Config c = llmcc::models::qwen3_preset(name);
    EXPECT_EQ(declared_elements(c), c.parameter_count());
  }
  // Qwen/Qwen3-0.6B: 596,049,920 parameters (tied head), as transformers counts them.
  EXPECT_EQ(llmcc::models::qwen3_preset("qwen3-0.6b").parameter_count(), 596049920);
  Qwen3Config untied = small_config(false);
  EXPECT_EQ(declared_elements(untied), declared_elements(small_config(true)) + 37 * 32);
  EXPECT_TRUE(llmcc::test::throws_error([] { llmcc::models::qwen3_preset("qwen3-99b"); }, {"qwen3-99b", "qwen3-tiny"}));
  Qwen3Config bad = small_config(true);
  bad.head_dim = 9;
  EXPECT_TRUE(llmcc::test::throws_error([&] { bad.validate(); }, {"head_dim", "even"}));
  bad = small_config(true);
  bad.n_kv_head = 3;
  EXPECT_TRUE(llmcc::test::throws_error([&] { bad.validate(); }, {"n_kv_head (3)", "n_head (4)"}));
}

TEST(Qwen3Model, ConfigRoundTripsThroughKeyValuesAndTheRegistry) {
  for (bool tied : {true, false}) {
    Qwen3Config c = small_config(tied);
    llmcc::KeyValues kv;
    llmcc::models::qwen3_config_to_kv(c, kv);
    EXPECT_EQ(kv.at("model.family"), "qwen3");
    const Qwen3Config back = llmcc::models::qwen3_config_from_kv(kv, "test");
    EXPECT_EQ(back.str(), c.str());
    EXPECT_EQ(back.head_dim, c.head_dim);
    EXPECT_EQ(back.norm_eps, c.norm_eps);
    const llmcc::models::ModelConfig mc = llmcc::models::model_config_from_kv(kv, "test");
    EXPECT_STREQ(mc.family_name(), "qwen3");
    EXPECT_EQ(mc.as<Qwen3Config>().tie_embeddings, tied);
  }
  llmcc::KeyValues kv;
  llmcc::models::qwen3_config_to_kv(small_config(true), kv);
  kv["model.tie_embeddings"] = "yes";
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::qwen3_config_from_kv(kv, "f.bin"); },
                                        {"f.bin", "model.tie_embeddings", "yes"}));
  kv.erase("model.head_dim");
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::models::qwen3_config_from_kv(kv, "f.bin"); },
                                        {"f.bin", "model.head_dim"}));
}

TEST(Qwen3Model, LossAtInitialisationIsLogVocab) {
  llmcc::test::model_loss_at_initialisation_is_log_vocab<Qwen3Family>(llmcc::models::qwen3_preset("qwen3-tiny"), 32000);
}

TEST(Qwen3Model, GeneratedGradientMemorisesABatch) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    llmcc::test::model_generated_gradient_memorises_a_batch<Qwen3Family>(small_config(tied));
  }
}

TEST(Qwen3Model, GeneratedGradientMatchesFiniteDifferences) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto w = small_model(11, tied);
    llmcc::test::model_generated_gradient_matches_finite_differences<Qwen3Family>(w, {9, 5e-3, 150});
  }
}

TEST(Qwen3Generate, CachedLogitsEqualFullForwardAtEveryStep) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const auto w = small_model(2, tied);
    for (llmcc::KernelMode mode : {llmcc::KernelMode::Fast, llmcc::KernelMode::Reference}) {
      llmcc::set_kernel_mode(mode);
      llmcc::test::generate_cached_logits_equal_full_forward_at_every_step<Qwen3Generation>(w.model);
    }
    llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
  }
}

TEST(Qwen3Generate, PrefillAgainForgetsThePreviousSequence) {
  llmcc::test::generate_prefill_again_forgets_the_previous_sequence<Qwen3Generation>(small_model(3, true).model);
}

TEST(Qwen3Generate, StopsAtTheContextLimit) {
  llmcc::test::generate_stops_at_the_context_limit<Qwen3Generation>(small_model(12, false).model);
}

TEST(Qwen3Generate, SlidingWindowEqualsForwardOverTheLastMaxTTokens) {
  llmcc::test::generate_sliding_window_equals_forward_over_the_last_max_t_tokens<Qwen3Generation>(
      small_model(15, true).model);
}

TEST(Qwen3Generate, StopsAtEndOfTextAndStartsFromIt) {
  llmcc::test::generate_stops_at_end_of_text_and_starts_from_it<Qwen3Generation>(small_model(18, true).model);
}

TEST(Qwen3Generate, BadInputIsAClearError) {
  llmcc::test::generate_bad_input_is_a_clear_error<Qwen3Generation>(small_model(19, false).model, "qwen3 generate");
  llmcc::models::Qwen3 unbound(small_config(false));
  EXPECT_TRUE(llmcc::test::throws_error([&] { Qwen3Generator g(unbound); }, {"no weights bound"}));
}

TEST(Qwen3Generate, ADecodeStepAllocatesNothingBeyondItsOps) {
  llmcc::test::generate_a_decode_step_allocates_nothing_beyond_its_ops<Qwen3Generation>(small_model(20, true).model);
}

// The planned arenas hold a full-length prefill and a decode at the last position of the tiny
// preset (an arena overflow throws, so running them is the check).
TEST(Qwen3Generate, PlannedMemoryHoldsAFullContext) {
  Qwen3Config c = llmcc::models::qwen3_preset("qwen3-tiny");
  c.max_seq_len = 64;
  auto w = llmcc::models::make_qwen3(c);
  llmcc::models::qwen3_init(w.model, 1);
  Qwen3Generator gen(w.model, ContextFull::Slide);
  gen.prefill(llmcc::test::random_ids(64, c.vocab_size, 3));
  gen.step(5);  // a slide: a prefill of 63, then a decode at position 63
  EXPECT_EQ(gen.length(), 64);
}

}  // namespace
