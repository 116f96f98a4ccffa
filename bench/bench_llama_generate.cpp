// Llama generation speed: the KV-cache sampler (models::llama_sample, LlamaGenerator) against the
// uncached one (models::llama_sample_uncached: a full forward of the window per token), in the same
// run, alternating, so that machine load hits both alike. Random weights (speed does not depend
// on them); greedy decoding, so both draw the same tokens (checked).
//
//   bench_llama_generate [preset=stories15m] [new_tokens=200] [rounds=3] [threads=0: all]
//
// Prints each round's tokens/s and the medians and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"
#include "models/llama/llama_generate.h"
#include "models/llama/llama_weights.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "stories15m";
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 200;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  if (argc > 4 && std::atoi(argv[4]) > 0) llmcc::set_num_threads(std::atoi(argv[4]));
  try {
    const llmcc::models::LlamaConfig config = llmcc::models::llama_preset(preset);
    llmcc::models::LlamaWeights w = llmcc::models::make_llama(config);
    llmcc::models::llama_init(w.model, 1);
    const std::vector<std::int32_t> prompt = {1, 450, 4996, 17354, 1701, 432, 17204, 975};  // 8 ids
    if (static_cast<int>(prompt.size()) + new_tokens > config.max_seq_len)
      std::printf("note: %zu + %d tokens exceed the context %d: the window slides\n", prompt.size(), new_tokens,
                  config.max_seq_len);
    llmcc::models::SamplingConfig greedy;
    greedy.temperature = 0.0f;
    std::printf("%s (%s), %d new tokens after an %zu-token prompt, %d threads\n", preset.c_str(), config.str().c_str(),
                new_tokens, prompt.size(), llmcc::num_threads());
    std::vector<double> cached_rate, uncached_rate;
    for (int r = 0; r < rounds; ++r) {
      llmcc::Rng rng(1);
      auto t0 = std::chrono::steady_clock::now();
      const auto a = llmcc::models::llama_sample(w.model, prompt, new_tokens, greedy, rng);
      const double cached_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      t0 = std::chrono::steady_clock::now();
      const auto b = llmcc::models::llama_sample_uncached(w.model, prompt, new_tokens, greedy, rng);
      const double uncached_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (a != b) {
        std::fprintf(stderr, "cached and uncached tokens differ\n");
        return 1;
      }
      cached_rate.push_back(new_tokens / cached_s);
      uncached_rate.push_back(new_tokens / uncached_s);
      std::printf("round %d: cached %.1f tokens/s (%.2f s), uncached %.1f tokens/s (%.2f s), %.1fx\n", r + 1,
                  cached_rate.back(), cached_s, uncached_rate.back(), uncached_s, uncached_s / cached_s);
      std::fflush(stdout);
    }
    const double c = median(cached_rate), u = median(uncached_rate);
    std::printf("median: cached %.1f tokens/s, uncached %.1f tokens/s, speedup %.1fx\n", c, u, c / u);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
