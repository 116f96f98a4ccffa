// tokenizer.json encoding speed on one thread: encodes a text file with llmcc's HfTokenizer,
// best of --rounds, and prints MB/s and tokens. bench/tokenizer_speed.py runs it beside the
// `tokenizers` library on the same files.
//
//   build/bench/bench_hf_tokenizer TOKENIZER_JSON TEXT_FILE [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/error.h"
#include "llmcc/text/hf_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [ROUNDS]\n", argv[0]);
    return 2;
  }
  try {
    const llmcc::HfTokenizer tok = llmcc::HfTokenizer::load(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) llmcc::fail("bench_hf_tokenizer", std::string(argv[2]) + ": cannot open");
    std::ostringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    const int rounds = argc == 4 ? std::atoi(argv[3]) : 3;
    double best = 1e30;
    std::size_t tokens = 0;
    for (int r = 0; r < std::max(rounds, 1); ++r) {
      // A fresh tokenizer each round: its piece cache starts empty, as on a first encode.
      const llmcc::HfTokenizer fresh = llmcc::HfTokenizer::from_json(tok.json(), argv[1]);
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<std::int32_t> ids = fresh.encode(text, false);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, sec);
      tokens = ids.size();
    }
    std::printf("result: impl=llmcc bytes=%zu tokens=%zu seconds=%.4f mb_per_s=%.2f\n", text.size(), tokens, best,
                static_cast<double>(text.size()) / 1e6 / best);
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
