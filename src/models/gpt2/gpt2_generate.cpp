// Gpt2Generator (prefill + KV-cache decode), Sampler, generate() and gpt2_sample().
#include "models/gpt2/gpt2_generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "llmcc/error.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "models/kv_attention.h"

namespace llmcc::models {

namespace {

constexpr const char* kGen = "gpt2 generate";

// Bytes one arena allocation of n floats takes (arenas round every request up to 64 bytes).
std::size_t arena_bytes(std::int64_t n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

// One block's temporaries for T rows, allocation by allocation as run_prompt and decode_one
// make them: ln_1, c_attn (3C wide), attention, c_proj, +, ln_2, c_fc, gelu, c_proj, + (and the
// scores of the single-query attention when decoding).
std::size_t block_scratch_bytes(std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t maxT) {
  const std::size_t row = arena_bytes(T * C), qkv = arena_bytes(T * 3 * C), wide = arena_bytes(T * 4 * C);
  return 7 * row + qkv + 2 * wide + arena_bytes(NH * maxT);
}

// Copies the k and v parts of T packed rows [q | k | v] ((T, 3C)) into rows 0..T-1 of one layer's
// caches ((maxT, C) each).
void cache_kv(float* k_cache, float* v_cache, const float* qkv, std::int64_t T, std::int64_t C) {
  for (std::int64_t t = 0; t < T; ++t) {
    std::memcpy(k_cache + t * C, qkv + t * 3 * C + C, static_cast<std::size_t>(C) * sizeof(float));
    std::memcpy(v_cache + t * C, qkv + t * 3 * C + 2 * C, static_cast<std::size_t>(C) * sizeof(float));
  }
}

}  // namespace

// ---- the generator ----------------------------------------------------------------------------

Gpt2Generator::Gpt2Generator(const Gpt2& model, ContextFull on_full)
    : WindowGenerator(kGen, "<|endoftext|>", (model.cfg.validate(), model.cfg.max_seq_len), model.cfg.vocab_size,
                      on_full),  // validated before any size below is computed from it
      m_(model),
      L_(model.cfg.n_layer),
      C_(model.cfg.n_embd),
      NH_(model.cfg.n_head),
      maxT_(model.cfg.max_seq_len),
      Vp_(model.cfg.padded_vocab_size),
      state_(2 * arena_bytes(std::int64_t{model.cfg.n_layer} * model.cfg.max_seq_len * model.cfg.n_embd) +
             arena_bytes(std::int64_t{model.cfg.max_seq_len} * model.cfg.n_embd)),
      scratch_([&] {
        const std::int64_t T = model.cfg.max_seq_len, C = model.cfg.n_embd;
        // The largest of: a prefill layer, a decode layer, the embedding, the LM head row.
        const std::size_t head = arena_bytes(C) + arena_bytes(model.cfg.padded_vocab_size);
        return std::max({block_scratch_bytes(T, C, model.cfg.n_head, T), block_scratch_bytes(1, C, model.cfg.n_head, T),
                         arena_bytes(T * C), head});
      }()) {
  if (static_cast<int>(model.h.size()) != L_ || !model.wte.defined() || !model.wpe.defined())
    fail(kGen, "the model has no weights bound (build it with make_gpt2 or load_gpt2)");
  // Uninitialised: a cache row is always written before it is read, and untouched pages cost
  // nothing, so a short generation with a long-context model stays cheap.
  k_cache_ = state_.tensor({L_, maxT_, C_}, "k cache");  // (L, maxT, C)
  v_cache_ = state_.tensor({L_, maxT_, C_}, "v cache");  // (L, maxT, C)
  residual_ = state_.tensor({maxT_, C_}, "residual");    // (maxT, C)
}

Gpt2Generator::~Gpt2Generator() = default;

std::size_t Gpt2Generator::planned_bytes() const { return state_.capacity() + scratch_.capacity(); }

// Runs tokens (the whole cached sequence, from position 0) through the model's own ops,
// filling the cache rows 0..T-1; returns the last row's logits (Vp) when asked.
Tensor Gpt2Generator::run_prompt(std::span<const std::int32_t> tokens, bool want_logits) {
  const int T = static_cast<int>(tokens.size());
  const std::int64_t layer = std::int64_t{maxT_} * C_;  // one layer of the cache
  ArenaScope scope(scratch_);
  scratch_.reset();
  {
    Tensor x0 = token_position_embedding(Tokens(tokens.data(), 1, T), m_.wte, m_.wpe);  // (1, T, C)
    std::memcpy(residual_.f32(), x0.f32(), x0.nbytes());
  }
  for (int l = 0; l < L_; ++l) {
    scratch_.reset();  // each layer's temporaries replace the previous layer's
    const Gpt2Block& b = m_.h[l];
    const Tensor x(residual_.f32(), {1, T, C_});  // (1, T, C)
    const Tensor a = b.ln_1.forward(x);           // (1, T, C)
    const Tensor qkv = b.attn.c_attn.forward(a);  // (1, T, 3C)
    cache_kv(k_cache_.f32() + l * layer, v_cache_.f32() + l * layer, qkv.f32(), T, C_);
    const Tensor h = x + b.attn.c_proj.forward(attention_qkv(qkv, NH_, NH_));  // (1, T, C)
    const Tensor out = h + b.mlp.forward(b.ln_2.forward(h));                   // (1, T, C)
    std::memcpy(residual_.f32(), out.f32(), out.nbytes());
  }
  if (!want_logits) return {};
  scratch_.reset();
  const Tensor last(residual_.f32() + std::int64_t{T - 1} * C_, {1, 1, C_});  // (1, 1, C)
  const Tensor logits = linear_nobias(m_.ln_f.forward(last), m_.wte);         // (1, 1, Vp)
  return Tensor(logits.raw(), {Vp_});
}

// One new position: the block's ops on (1, 1, C), attention over the cache rows 0..pos.
Tensor Gpt2Generator::decode_one(std::int32_t token) {
  const int pos = length();
  LLMCC_ASSERT(pos < maxT_, "decode_one on a full sequence");
  const std::int64_t layer = std::int64_t{maxT_} * C_;  // one layer of the cache
  const int HS = C_ / NH_;
  ArenaScope scope(scratch_);
  float* x0 = residual_.f32();  // (C): row 0 carries the one position
  const float* te = m_.wte.f32() + std::int64_t{token} * C_;
  const float* pe = m_.wpe.f32() + std::int64_t{pos} * C_;
  for (int c = 0; c < C_; ++c) x0[c] = te[c] + pe[c];
  for (int l = 0; l < L_; ++l) {
    scratch_.reset();
    const Gpt2Block& b = m_.h[l];
    const Tensor x(x0, {1, 1, C_});               // (1, 1, C)
    const Tensor a = b.ln_1.forward(x);           // (1, 1, C)
    const Tensor qkv = b.attn.c_attn.forward(a);  // (1, 1, 3C): q, k, v of the new position, one GEMV
    float* kc = k_cache_.f32() + l * layer;       // (maxT, C)
    float* vc = v_cache_.f32() + l * layer;       // (maxT, C)
    cache_kv(kc + std::int64_t{pos} * C_, vc + std::int64_t{pos} * C_, qkv.f32(), 1, C_);
    const Tensor y = new_tensor({1, 1, C_}, "kv attention");                                      // (1, 1, C)
    const Tensor scores = new_tensor({NH_, pos + 1}, "kv attention");                             // (NH, pos + 1)
    attention_single_query(y.f32(), qkv.f32(), kc, vc, pos + 1, NH_, NH_, HS, C_, scores.f32());  // q: qkv's first C
    const Tensor h = x + b.attn.c_proj.forward(y);                                                // (1, 1, C)
    const Tensor out = h + b.mlp.forward(b.ln_2.forward(h));                                      // (1, 1, C)
    std::memcpy(x0, out.f32(), out.nbytes());
  }
  tokens_.push_back(token);  // within the reserved capacity
  scratch_.reset();
  const Tensor logits = linear_nobias(m_.ln_f.forward(Tensor(x0, {1, 1, C_})), m_.wte);  // (1, 1, Vp)
  return Tensor(logits.raw(), {Vp_});
}

std::vector<std::int32_t> gpt2_sample(const Gpt2& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                      const SamplingConfig& cfg, Rng& rng) {
  Gpt2Generator gen(m, ContextFull::Slide);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(std::max(max_new_tokens, 0)));
  generate(gen, prompt, max_new_tokens, cfg, rng, [&](std::int32_t id) { out.push_back(id); });
  return out;
}

}  // namespace llmcc::models
