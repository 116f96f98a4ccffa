// Gpt2Config: the shape of a GPT-2 model, its named presets and command-line style overrides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmcc::models {

struct Gpt2Config {
  int vocab_size = 50257;         // real tokens; targets and sampling never go beyond this
  int padded_vocab_size = 50304;  // rows of wte: vocab rounded up to a multiple of 128 (as llm.c)
  int max_seq_len = 1024;         // rows of wpe
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;

  // Elements of all parameters (padded vocab rows included, as in the weight file). Throws
  // llmcc::Error when that is over kMaxParameterCount (validate() names the field first).
  std::int64_t parameter_count() const;
  // Forward + backward FLOPs of one training step over B x T tokens (6N per token plus attention).
  // Weights that multiply in matrix products per token (2 FLOPs each forward, 4 backward).
  double matmul_weights() const;
  double flops_per_step(int B, int T) const;
  // Throws llmcc::Error naming the field when a value is out of range (n_embd % n_head, a
  // tensor or the whole model over kMaxParameterCount elements, ...).
  void validate() const;
  // "L12 H12 C768 T1024 V50257(50304)"
  std::string str() const;
};

// Named presets: gpt2 (124M), gpt2-medium (350M), gpt2-large, gpt2-xl, and small ones for tests
// and demos: gpt2-tiny (L4 H4 C128), gpt2-mini (L6 H6 C384). Throws llmcc::Error listing the
// names for an unknown one.
Gpt2Config gpt2_preset(const std::string& name);
std::vector<std::string> gpt2_preset_names();

// Rounds a vocabulary size up to a multiple of 128 (llm.c's padding). Throws llmcc::Error when
// the result does not fit an int.
int padded_vocab(int vocab_size);

// The most elements a model may have, per tensor and in total: 2^40 (4 TiB of float weights, 16
// TiB with gradients and AdamW's moments), far beyond what a CPU trains. Keeping counts this low
// means every product of them with a byte size, a batch or an optimizer state fits int64, and
// configs read from files or flags with absurd sizes fail in validate(), not in an allocation.
inline constexpr std::int64_t kMaxParameterCount = std::int64_t{1} << 40;

// Throws llmcc::Error("[where] <what> = <count> elements, more than the limit 2^40 ...") when
// count (computed by the caller in long double, so that no int64 product can overflow) is above
// kMaxParameterCount or is not a number.
void check_parameter_count(const std::string& where, const std::string& what, long double count);

}  // namespace llmcc::models
