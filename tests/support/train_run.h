// Shared pieces of the tests that run `llmcc train` as a user would: a token shard with
// structure to learn, and the per-step fields of a run's log.jsonl as logged text.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "llmcc/train/rng.h"
#include "llmcc/io/token_file.h"

namespace llmcc::test {

// n tokens below `vocab` with structure to learn (a noisy arithmetic progression), so the loss
// moves.
inline void write_progression_shard(const std::string& path, std::size_t n, std::uint64_t seed, int vocab) {
  llmcc::Rng rng(seed);
  std::vector<std::int32_t> ids(n);
  std::int32_t t = 0;
  for (auto& id : ids) {
    t = (t + 7 + static_cast<std::int32_t>(rng.below(3))) % vocab;
    id = t;
  }
  llmcc::write_token_file(path, ids);
}

// step -> the logged text of one field, from the lines that have it ("loss", "val_loss", ...).
inline std::map<long, std::string> logged(const std::string& log_path, const std::string& field) {
  std::map<long, std::string> out;
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    const std::string key = "\"" + field + "\": ";
    const auto at = line.find(key);
    if (at == std::string::npos) continue;
    const long step = std::strtol(line.c_str() + line.find("\"step\": ") + 8, nullptr, 10);
    const std::size_t begin = at + key.size();
    const std::size_t end = line.find_first_of(",}", begin);
    EXPECT_EQ(out.count(step), 0u) << field << " logged twice for step " << step << " in " << log_path;
    out[step] = line.substr(begin, end - begin);
  }
  return out;
}

}  // namespace llmcc::test
