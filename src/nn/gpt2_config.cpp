#include "nn/gpt2_config.h"

#include <sstream>

#include "llmcc/error.h"

namespace llmcc::nn {

std::int64_t Gpt2Config::parameter_count() const {
  const std::int64_t C = n_embd, L = n_layer;
  const std::int64_t per_layer = 2 * C           // ln_1
                                 + 3 * (C * C + C)  // c_attn (q, k, v)
                                 + C * C + C        // attention projection
                                 + 2 * C            // ln_2
                                 + 4 * C * C + 4 * C  // mlp c_fc
                                 + 4 * C * C + C;     // mlp c_proj
  return static_cast<std::int64_t>(padded_vocab_size) * C + static_cast<std::int64_t>(max_seq_len) * C +
         L * per_layer + 2 * C;
}

double Gpt2Config::flops_per_step(int B, int T) const {
  // Matmul weights only (embeddings are lookups; the tied head is a matmul over the padded vocab).
  const double C = n_embd, L = n_layer;
  const double matmul_params = L * 12.0 * C * C + static_cast<double>(padded_vocab_size) * C;
  const double tokens = static_cast<double>(B) * T;
  // 2 FLOPs per weight per token forward, 4 backward; attention QK^T and AV: 2*T*C per token per
  // layer forward under the causal mask (half of 4*T*C), twice that backward.
  const double attention = L * 2.0 * T * C * 3.0;
  return tokens * (6.0 * matmul_params + attention);
}

void Gpt2Config::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) fail("GPT-2 config", what);
  };
  need(vocab_size > 0, "vocab_size must be positive, got " + std::to_string(vocab_size));
  need(padded_vocab_size >= vocab_size, "padded_vocab_size (" + std::to_string(padded_vocab_size) +
                                            ") must be at least vocab_size (" + std::to_string(vocab_size) + ")");
  need(max_seq_len > 0, "max_seq_len must be positive, got " + std::to_string(max_seq_len));
  need(n_layer > 0, "n_layer must be positive, got " + std::to_string(n_layer));
  need(n_head > 0, "n_head must be positive, got " + std::to_string(n_head));
  need(n_embd > 0 && n_embd % n_head == 0, "n_embd (" + std::to_string(n_embd) +
                                               ") must be a positive multiple of n_head (" +
                                               std::to_string(n_head) + ")");
}

std::string Gpt2Config::str() const {
  std::ostringstream s;
  s << "L" << n_layer << " H" << n_head << " C" << n_embd << " T" << max_seq_len << " V" << vocab_size << "("
    << padded_vocab_size << ")";
  return s.str();
}

int padded_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

namespace {
struct Preset {
  const char* name;
  int n_layer, n_head, n_embd, max_seq_len;
};
constexpr Preset kPresets[] = {
    {"gpt2", 12, 12, 768, 1024},        {"gpt2-medium", 24, 16, 1024, 1024}, {"gpt2-large", 36, 20, 1280, 1024},
    {"gpt2-xl", 48, 25, 1600, 1024},    {"gpt2-tiny", 4, 4, 128, 256},       {"gpt2-mini", 6, 6, 384, 256},
};
}  // namespace

Gpt2Config gpt2_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      Gpt2Config c;
      c.n_layer = p.n_layer;
      c.n_head = p.n_head;
      c.n_embd = p.n_embd;
      c.max_seq_len = p.max_seq_len;
      return c;
    }
  }
  std::string names;
  for (const Preset& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
  fail("GPT-2 preset", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> gpt2_preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

}  // namespace llmcc::nn
