// Editing file text for the variants of a test file (a config.json with one value changed).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace llmcc::test {

// `text` with the first occurrence of `from` replaced by `to`; a missing `from` fails the test.
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return text;
  return text.replace(at, from.size(), to);
}

}  // namespace llmcc::test
