#include "models/gpt2/gpt2_config.h"

#include <iomanip>
#include <limits>
#include <sstream>

#include "llmcc/error.h"

namespace llmcc::models {

namespace {
constexpr const char* kWhere = "GPT-2 config";

// 12 C^2 + 13 C per block: ln_1 2C, c_attn (q, k, v) 3(C^2 + C), attention projection C^2 + C,
// ln_2 2C, mlp c_fc 4C^2 + 4C, mlp c_proj 4C^2 + C. In long double, as every count here: no
// overflow for any int fields, and exact for every count up to kMaxParameterCount.
long double block_parameters(const Gpt2Config& c) {
  const long double C = c.n_embd;
  return 12.0L * C * C + 13.0L * C;
}

// wte (Vp, C), wpe (T, C), L blocks and the final layernorm (2C).
long double total_parameters(const Gpt2Config& c) {
  const long double C = c.n_embd;
  return static_cast<long double>(c.padded_vocab_size) * C + static_cast<long double>(c.max_seq_len) * C +
         static_cast<long double>(c.n_layer) * block_parameters(c) + 2.0L * C;
}
}  // namespace

void check_parameter_count(const std::string& where, const std::string& what, long double count) {
  if (count <= static_cast<long double>(kMaxParameterCount)) return;  // false for NaN
  std::ostringstream s;
  s << what << " = " << std::setprecision(4) << static_cast<double>(count)
    << " elements, more than the limit of 2^40 = " << kMaxParameterCount
    << " per tensor and in total (4 TiB of float weights)";
  fail(where, s.str());
}

std::int64_t Gpt2Config::parameter_count() const {
  const long double n = total_parameters(*this);
  check_parameter_count(kWhere, "the parameter count of " + str(), n);
  return static_cast<std::int64_t>(n);  // exact: an integer below 2^40
}

double Gpt2Config::matmul_weights() const {
  // Embeddings are lookups; the tied head is a matmul over the padded vocab.
  const double C = n_embd, L = n_layer;
  return L * 12.0 * C * C + static_cast<double>(padded_vocab_size) * C;
}

double Gpt2Config::flops_per_step(int B, int T) const {
  const double C = n_embd, L = n_layer;
  const double matmul_params = matmul_weights();
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
  need(
      n_embd > 0 && n_embd % n_head == 0,
      "n_embd (" + std::to_string(n_embd) + ") must be a positive multiple of n_head (" + std::to_string(n_head) + ")");
  // Before anything multiplies the sizes in int64: the largest tensors, then the whole model.
  auto s = [](auto v) { return std::to_string(v); };
  const long double C = n_embd;
  check_parameter_count(kWhere, "wte: padded_vocab_size (" + s(padded_vocab_size) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(padded_vocab_size) * C);
  check_parameter_count(kWhere, "wpe: max_seq_len (" + s(max_seq_len) + ") x n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(max_seq_len) * C);
  check_parameter_count(kWhere, "mlp c_fc: 4 n_embd x n_embd with n_embd " + s(n_embd), 4.0L * C * C);
  check_parameter_count(kWhere, "n_layer (" + s(n_layer) + ") blocks of n_embd (" + s(n_embd) + ")",
                        static_cast<long double>(n_layer) * block_parameters(*this));
  check_parameter_count(kWhere, "the parameter count of " + str(), total_parameters(*this));
}

std::string Gpt2Config::str() const {
  std::ostringstream s;
  s << "L" << n_layer << " H" << n_head << " C" << n_embd << " T" << max_seq_len << " V" << vocab_size << "("
    << padded_vocab_size << ")";
  return s.str();
}

int padded_vocab(int vocab_size) {
  const std::int64_t padded = (static_cast<std::int64_t>(vocab_size) + 127) / 128 * 128;
  if (padded > std::numeric_limits<int>::max())
    fail(kWhere, "vocab_size (" + std::to_string(vocab_size) + ") padded to a multiple of 128 does not fit an int");
  return static_cast<int>(padded);
}

namespace {
struct Preset {
  const char* name;
  int n_layer, n_head, n_embd, max_seq_len;
};
constexpr Preset kPresets[] = {
    {"gpt2", 12, 12, 768, 1024},     {"gpt2-medium", 24, 16, 1024, 1024}, {"gpt2-large", 36, 20, 1280, 1024},
    {"gpt2-xl", 48, 25, 1600, 1024}, {"gpt2-tiny", 4, 4, 128, 256},       {"gpt2-mini", 6, 6, 384, 256},
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

}  // namespace llmcc::models
