#include "models/llama/llama_config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "llmcc/error.h"
#include "models/gpt2/gpt2_config.h"  // kMaxParameterCount, check_parameter_count

namespace llmcc::models {

namespace {
constexpr const char* kWhere = "Llama config";

// kv = n_kv_head * head_dim (the width of wk and wv); 0 when n_head is not positive, which
// validate() reports before any count is looked at.
long double kv_width(const LlamaConfig& c) {
  return c.n_head > 0 ? static_cast<long double>(c.n_kv_head) * c.head_dim() : 0.0L;
}

// Per block: attention_norm C, wq C^2, wk and wv 2 kv C, wo C^2, ffn_norm C, w1, w3, w2 3 F C. In
// long double, as every count here: no overflow for any int fields, and exact for every count up
// to kMaxParameterCount.
long double block_parameters(const LlamaConfig& c) {
  const long double C = c.n_embd, F = c.hidden_dim;
  return 2.0L * C * C + 2.0L * kv_width(c) * C + 3.0L * F * C + 2.0L * C;
}

// tok_embeddings (V, C), L blocks, the final norm C and, untied, the output head (V, C).
long double total_parameters(const LlamaConfig& c) {
  const long double C = c.n_embd, V = c.vocab_size;
  return (c.tie_embeddings ? 1.0L : 2.0L) * V * C + static_cast<long double>(c.n_layer) * block_parameters(c) + C;
}
}  // namespace

std::int64_t LlamaConfig::parameter_count() const {
  const long double n = total_parameters(*this);
  check_parameter_count(kWhere, "the parameter count of " + str(), n);
  return static_cast<std::int64_t>(n);  // exact: an integer below 2^40
}

double LlamaConfig::matmul_weights() const {
  // Per layer wq and wo (C x C), wk and wv (n_kv_head * HS x C each: GQA shrinks them), SwiGLU's
  // three (F x C) matrices, and the (V x C) head (tied or not, it is a product). The embedding is
  // a lookup; RMSNorm, RoPE, SiLU and the gating product are element-wise and not counted (as
  // GPT-2's layernorm and GELU are not).
  const double C = n_embd, L = n_layer, F = hidden_dim;
  const double kv = static_cast<double>(n_kv_head) * head_dim();
  return L * (2.0 * C * C + 2.0 * kv * C + 3.0 * F * C) + double(vocab_size) * C;
}

double LlamaConfig::flops_per_step(int B, int T) const {
  const double C = n_embd, L = n_layer;
  const double matmul_params = matmul_weights();
  const double tokens = static_cast<double>(B) * T;
  // As GPT-2's: 2 FLOPs per weight per token forward, 4 backward; QK^T and AV under the causal
  // mask cost 2*T*C per token per layer forward, twice that backward (GQA shares k and v rows,
  // not the products).
  const double attention = L * 2.0 * T * C * 3.0;
  return tokens * (6.0 * matmul_params + attention);
}

void LlamaConfig::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) fail("Llama config", what);
  };
  auto s = [](auto v) { return std::to_string(v); };
  need(vocab_size > 0, "vocab_size must be positive, got " + s(vocab_size));
  need(max_seq_len > 0, "max_seq_len must be positive, got " + s(max_seq_len));
  need(n_layer > 0, "n_layer must be positive, got " + s(n_layer));
  need(n_head > 0, "n_head must be positive, got " + s(n_head));
  need(n_kv_head > 0 && n_head % n_kv_head == 0,
       "n_kv_head (" + s(n_kv_head) + ") must be a positive divisor of n_head (" + s(n_head) + ")");
  need(n_embd > 0 && n_embd % n_head == 0,
       "n_embd (" + s(n_embd) + ") must be a positive multiple of n_head (" + s(n_head) + ")");
  need(head_dim() % 2 == 0,
       "the head size n_embd / n_head = " + s(head_dim()) + " must be even (RoPE rotates pairs of channels)");
  need(hidden_dim > 0, "hidden_dim must be positive, got " + s(hidden_dim));
  need(std::isfinite(rope_theta) && rope_theta > 1.0f,
       "rope_theta must be a finite number above 1, got " + s(rope_theta));
  need(std::isfinite(norm_eps) && norm_eps > 0.0f, "norm_eps must be positive, got " + s(norm_eps));
  rope_scaling.validate("Llama config");
  // Before anything multiplies the sizes in int64: the largest tensors, then the whole model.
  const long double C = n_embd;
  check_parameter_count(kWhere, "tok_embeddings: vocab_size (" + s(vocab_size) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(vocab_size) * C);
  check_parameter_count(kWhere, "wq: n_embd x n_embd with n_embd " + s(n_embd), C * C);
  check_parameter_count(kWhere, "w1: hidden_dim (" + s(hidden_dim) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(hidden_dim) * C);
  check_parameter_count(
      kWhere, "n_layer (" + s(n_layer) + ") blocks of n_embd (" + s(n_embd) + "), hidden_dim (" + s(hidden_dim) + ")",
      static_cast<long double>(n_layer) * block_parameters(*this));
  check_parameter_count(kWhere, "the parameter count of " + str(), total_parameters(*this));
}

std::string LlamaConfig::str() const {
  std::ostringstream s;
  s << "L" << n_layer << " H" << n_head << "/" << n_kv_head << " C" << n_embd << " F" << hidden_dim << " T"
    << max_seq_len << " V" << vocab_size << " theta " << rope_theta;
  if (rope_scaling.type != RopeScaling::Type::None)
    s << " " << rope_scaling.type_name() << " rope x" << rope_scaling.factor << " (" << rope_scaling.low_freq_factor
      << ", " << rope_scaling.high_freq_factor << ", " << rope_scaling.original_max_position_embeddings << ")";
  if (tie_embeddings) s << " tied";
  return s.str();
}

int llama_hidden_dim(int dim, int multiple_of, float ffn_dim_multiplier) {
  // In int64 and checked, as dim and the multiplier may come from a file.
  auto s = [](auto v) { return std::to_string(v); };
  if (dim <= 0 || multiple_of <= 0 || !(ffn_dim_multiplier > 0.0f && std::isfinite(ffn_dim_multiplier)))
    fail(kWhere, "hidden_dim needs a positive dim, multiple_of and ffn_dim_multiplier, got " + s(dim) + ", " +
                     s(multiple_of) + ", " + s(ffn_dim_multiplier));
  std::int64_t hidden = 2 * (4 * static_cast<std::int64_t>(dim)) / 3;
  if (ffn_dim_multiplier != 1.0f) {
    const float scaled = ffn_dim_multiplier * static_cast<float>(hidden);  // +inf when huge: too big below
    hidden = scaled < 1e18f ? static_cast<std::int64_t>(scaled) : std::int64_t{1} << 60;
  }
  const std::int64_t rounded = (hidden + multiple_of - 1) / multiple_of * multiple_of;
  if (rounded > std::numeric_limits<int>::max())
    fail(kWhere, "hidden_dim for dim " + s(dim) + " (" + s(rounded) + ") does not fit an int");
  return static_cast<int>(rounded);
}

namespace {
struct Preset {
  const char* name;
  int n_layer, n_head, n_kv_head, n_embd, hidden_dim, max_seq_len, vocab_size;
  float rope_theta;
};
// llama2.c's stories models tie their output head to the embedding; these presets are untied (an
// output.weight of their own), so they have vocab_size * n_embd more parameters than the
// originals: stories15m 24.4M here vs llama2.c's 15.2M. llama-3.2-1b is tied, as Meta's (1.24B
// parameters). llama-3.2-1b has Llama 3.2's "llama3"
// RoPE frequency scaling (set in llama_preset); its context is kept at 2048 here (the real
// model's is 131072), which only bounds the sequences trained or sampled.
constexpr Preset kPresets[] = {
    {"llama-tiny", 4, 4, 2, 128, 352, 256, 32000, 10000.0f},        // hidden: llama_hidden_dim(128, 32)
    {"llama-mini", 6, 6, 2, 384, 1024, 256, 32000, 10000.0f},       // hidden: llama_hidden_dim(384, 32)
    {"stories15m", 6, 6, 6, 288, 768, 256, 32000, 10000.0f},        // llama2.c's stories15M.bin
    {"stories42m", 8, 8, 8, 512, 1376, 1024, 32000, 10000.0f},      // llama2.c's stories42M.bin
    {"stories110m", 12, 12, 12, 768, 2048, 1024, 32000, 10000.0f},  // llama2.c's stories110M.bin
    {"llama-3.2-1b", 16, 32, 8, 2048, 8192, 2048, 128256, 500000.0f},
};
}  // namespace

LlamaConfig llama_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      LlamaConfig c;
      c.n_layer = p.n_layer;
      c.n_head = p.n_head;
      c.n_kv_head = p.n_kv_head;
      c.n_embd = p.n_embd;
      c.hidden_dim = p.hidden_dim;
      c.max_seq_len = p.max_seq_len;
      c.vocab_size = p.vocab_size;
      c.rope_theta = p.rope_theta;
      if (name == "llama-3.2-1b") {  // Llama 3.2's config.json rope_scaling
        c.rope_scaling.type = RopeScaling::Type::Llama3;
        c.rope_scaling.factor = 32.0f;
        c.rope_scaling.low_freq_factor = 1.0f;
        c.rope_scaling.high_freq_factor = 4.0f;
        c.rope_scaling.original_max_position_embeddings = 8192;
        c.tie_embeddings = true;
      }
      return c;
    }
  }
  std::string names;
  for (const Preset& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
  fail("Llama preset", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> llama_preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

bool is_llama_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return true;
  return false;
}

}  // namespace llmcc::models
