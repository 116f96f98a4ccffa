#include "models/bench_step.h"

#include "llmcc/error.h"
#include "llmcc/train/rng.h"

namespace llmcc::models::bench_detail {

void check_batch(int B, int T, int max_seq_len) {
  if (B < 1) fail("llmcc bench", "batch size must be at least 1, got " + std::to_string(B));
  if (T < 1 || T > max_seq_len)
    fail("llmcc bench", "sequence length must be in [1, " + std::to_string(max_seq_len) +
                            "] (the model's max_seq_len), got " + std::to_string(T));
}

std::vector<std::int32_t> random_stream(int B, int T, int vocab, std::uint64_t seed) {
  // One stream of B*T + 1 random tokens: targets are the inputs shifted by one (as llm.c).
  Rng rng(seed + 1);
  std::vector<std::int32_t> stream(static_cast<std::size_t>(B) * T + 1);
  for (auto& id : stream) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return stream;
}

}  // namespace llmcc::models::bench_detail
