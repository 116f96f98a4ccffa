#include "models/qwen3/qwen3_config.h"

#include <cmath>
#include <sstream>

#include "llmcc/error.h"
#include "models/gpt2/gpt2_config.h"  // kMaxParameterCount, check_parameter_count

namespace llmcc::models {

namespace {
constexpr const char* kWhere = "Qwen3 config";

// Per block: two RMSNorm gains C, q (NH D x C), k and v (NKV D x C each), o (C x NH D), the
// per-head q and k norms D each, and SwiGLU's three (F x C). In long double: no overflow for any
// int fields, exact for every count up to kMaxParameterCount.
long double block_parameters(const Qwen3Config& c) {
  const long double C = c.n_embd, F = c.hidden_dim, D = c.head_dim;
  const long double q = static_cast<long double>(c.n_head) * D, kv = static_cast<long double>(c.n_kv_head) * D;
  return 2.0L * C + 2.0L * q * C + 2.0L * kv * C + 2.0L * D + 3.0L * F * C;
}

// embed_tokens (V, C), L blocks, the final norm C and, untied, the head (V, C).
long double total_parameters(const Qwen3Config& c) {
  const long double C = c.n_embd, V = c.vocab_size;
  return (c.tie_embeddings ? 1.0L : 2.0L) * V * C + static_cast<long double>(c.n_layer) * block_parameters(c) + C;
}
}  // namespace

std::int64_t Qwen3Config::parameter_count() const {
  const long double n = total_parameters(*this);
  check_parameter_count(kWhere, "the parameter count of " + str(), n);
  return static_cast<std::int64_t>(n);  // exact: an integer below 2^40
}

double Qwen3Config::matmul_weights() const {
  // Per layer q and o (NH D x C), k and v (NKV D x C), SwiGLU's three (F x C), and the (V x C)
  // head (tied or not, it is a product). Norms, RoPE, SiLU and the gating product are
  // element-wise and not counted, as for Llama.
  const double C = n_embd, L = n_layer, F = hidden_dim, D = head_dim;
  const double q = n_head * D, kv = n_kv_head * D;
  return L * (2.0 * q * C + 2.0 * kv * C + 3.0 * F * C) + double(vocab_size) * C;
}

double Qwen3Config::flops_per_step(int B, int T) const {
  const double L = n_layer, D = head_dim;
  const double q = n_head * D;
  const double matmul_params = matmul_weights();
  const double tokens = static_cast<double>(B) * T;
  // QK^T and AV under the causal mask: 2 * T * (NH D) per token per layer forward, twice that
  // backward.
  const double attention = L * 2.0 * T * q * 3.0;
  return tokens * (6.0 * matmul_params + attention);
}

void Qwen3Config::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) fail("Qwen3 config", what);
  };
  auto s = [](auto v) { return std::to_string(v); };
  need(vocab_size > 0, "vocab_size must be positive, got " + s(vocab_size));
  need(max_seq_len > 0, "max_seq_len must be positive, got " + s(max_seq_len));
  need(n_layer > 0, "n_layer must be positive, got " + s(n_layer));
  need(n_head > 0, "n_head must be positive, got " + s(n_head));
  need(n_kv_head > 0 && n_head % n_kv_head == 0,
       "n_kv_head (" + s(n_kv_head) + ") must be a positive divisor of n_head (" + s(n_head) + ")");
  need(n_embd > 0, "n_embd must be positive, got " + s(n_embd));
  need(head_dim > 0 && head_dim % 2 == 0,
       "head_dim must be positive and even (RoPE rotates pairs of channels), got " + s(head_dim));
  need(hidden_dim > 0, "hidden_dim must be positive, got " + s(hidden_dim));
  need(std::isfinite(rope_theta) && rope_theta > 1.0f,
       "rope_theta must be a finite number above 1, got " + s(rope_theta));
  need(std::isfinite(norm_eps) && norm_eps > 0.0f, "norm_eps must be positive, got " + s(norm_eps));
  // Before anything multiplies the sizes in int64: the largest tensors, then the whole model.
  const long double C = n_embd;
  check_parameter_count(kWhere, "embed_tokens: vocab_size (" + s(vocab_size) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(vocab_size) * C);
  check_parameter_count(kWhere, "q_proj: n_head (" + s(n_head) + ") x head_dim (" + s(head_dim) + ") x n_embd",
                        static_cast<long double>(n_head) * head_dim * C);
  check_parameter_count(kWhere, "gate_proj: hidden_dim (" + s(hidden_dim) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(hidden_dim) * C);
  check_parameter_count(kWhere, "n_layer (" + s(n_layer) + ") blocks",
                        static_cast<long double>(n_layer) * block_parameters(*this));
  check_parameter_count(kWhere, "the parameter count of " + str(), total_parameters(*this));
}

std::string Qwen3Config::str() const {
  std::ostringstream s;
  s << "L" << n_layer << " H" << n_head << "/" << n_kv_head << " C" << n_embd << " D" << head_dim << " F" << hidden_dim
    << " T" << max_seq_len << " V" << vocab_size << " theta " << rope_theta << (tie_embeddings ? " tied" : " untied");
  return s.str();
}

namespace {
struct Preset {
  const char* name;
  int n_layer, n_head, n_kv_head, n_embd, head_dim, hidden_dim, max_seq_len, vocab_size;
  bool tied;
};
constexpr Preset kPresets[] = {
    {"qwen3-tiny", 4, 4, 2, 128, 32, 384, 256, 32000, true},
    {"qwen3-0.6b", 28, 16, 8, 1024, 128, 3072, 2048, 151936, true},  // Qwen/Qwen3-0.6B's config.json
    {"qwen3-1.7b", 28, 16, 8, 2048, 128, 6144, 2048, 151936, true},  // Qwen/Qwen3-1.7B's config.json
};
}  // namespace

Qwen3Config qwen3_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      Qwen3Config c;
      c.n_layer = p.n_layer;
      c.n_head = p.n_head;
      c.n_kv_head = p.n_kv_head;
      c.n_embd = p.n_embd;
      c.head_dim = p.head_dim;
      c.hidden_dim = p.hidden_dim;
      c.max_seq_len = p.max_seq_len;
      c.vocab_size = p.vocab_size;
      c.tie_embeddings = p.tied;
      return c;
    }
  }
  std::string names;
  for (const Preset& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
  fail("Qwen3 preset", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> qwen3_preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

}  // namespace llmcc::models
