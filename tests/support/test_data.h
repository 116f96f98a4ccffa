// Tests that need data llmcc does not ship (GPT-2's tokenizer, Tiny Shakespeare): found as
// llmcc finds it (io/data_files.h; never downloaded by a test). When it is missing the
// test says so in its output and skips, or fails when LLMCC_TEST_REQUIRE_DATA=1: scripts/test.sh
// sets that when the shared data directory is present, so a run that has the data (CI) never
// skips these tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "io/data_files.h"

namespace llmcc::test {

inline bool data_required() {
  const char* v = std::getenv("LLMCC_TEST_REQUIRE_DATA");
  return v != nullptr && std::string(v) == "1";
}

// True when the set holding `relative` ("gpt2/encoder.json") is available; GPT-2's tokenizer
// also through $LLMCC_GPT2_TOKENIZER_DIR.
inline bool have_data(const std::string& relative) {
  if (relative.rfind("gpt2/", 0) == 0 && std::getenv("LLMCC_GPT2_TOKENIZER_DIR") != nullptr) return true;
  return find_data_file(relative).has_value();
}

inline std::string missing_data_message(const std::string& relative) {
  return "needs " + relative + ", which is not in $LLMCC_SHARED_DATA, ../shared/data or the download cache " +
         "(bash scripts/fetch_data.sh fetches it)" +
         (data_required() ? "; LLMCC_TEST_REQUIRE_DATA=1, so this is a failure" : "; skipped");
}

// For a test that cannot run a part without the data: a failure when data is required, else a
// note in the output.
inline void note_missing_data(const std::string& relative, const std::string& part) {
  if (data_required()) {
    ADD_FAILURE() << part << " " << missing_data_message(relative);
  } else {
    std::printf("[  NOTE    ] %s %s\n", part.c_str(), missing_data_message(relative).c_str());
  }
}

// Writes the first 200 KB of Tiny Shakespeare (about 60k GPT-2 tokens) to `path`, the slice the
// end-to-end training tests learn from; the caller has checked that the data is there
// (LLMCC_REQUIRE_DATA).
inline void write_shakespeare_200k(const std::string& path) {
  std::ifstream in(llmcc::find_data_file("tinyshakespeare/input.txt")->string(), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.resize(200'000);
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace llmcc::test

// Ends the test when `relative` is missing: skipped with the message, or failed when data is
// required. Use at the top of a test body.
#define LLMCC_REQUIRE_DATA(relative)                                                               \
  do {                                                                                             \
    if (!::llmcc::test::have_data(relative)) {                                                     \
      if (::llmcc::test::data_required()) FAIL() << ::llmcc::test::missing_data_message(relative); \
      GTEST_SKIP() << ::llmcc::test::missing_data_message(relative);                               \
    }                                                                                              \
  } while (0)
