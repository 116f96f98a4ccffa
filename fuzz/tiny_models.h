// Small valid inputs shared by make_seeds and the targets that need a fixed, valid companion
// file (a GPT-2 tokenizer, a tiny model configuration).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/data_files.h"
#include "models/gpt2/gpt2_config.h"
#include "models/llama/llama_config.h"

namespace llmcc::fuzz {

// GPT-2's byte alphabet: printable Latin-1 bytes are their own code point, the other 68 bytes
// U+0100.. in byte order; returned as UTF-8.
inline std::string gpt2_byte_char(int b) {
  int cp = b;
  const auto printable = [](int x) {
    return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
  };
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A GPT-2 tokenizer of 256 byte tokens, a few merges and <|endoftext|>: {encoder.json, vocab.bpe}.
inline std::pair<std::string, std::string> tiny_gpt2_tokenizer_files() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(gpt2_byte_char(b));
  const std::string G = gpt2_byte_char(' ');  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {G, "t"},   {"h", "e"}, {G + "t", "he"}, {"i", "n"},  {"a", "n"},     {"e", "r"},      {G, "a"},
      {"o", "u"}, {"l", "l"}, {G, "s"},        {"in", "g"}, {G + "a", "n"}, {G + "an", "d"}, {"'", "s"}};
  std::string bpe = "#version: 0.2\n";
  for (const auto& [l, r] : merges) {
    tokens.push_back(l + r);
    bpe += l + " " + r + "\n";
  }
  std::string json = "{";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string key;
    for (char c : tokens[i]) {
      if (c == '"' || c == '\\') key += '\\';
      key += c;
    }
    json += "\"" + key + "\": " + std::to_string(i) + ", ";
  }
  json += "\"<|endoftext|>\": " + std::to_string(tokens.size()) + "}";
  return {json, bpe};
}

// The smallest shapes the models accept, so a whole model file is a few kilobytes.
inline models::Gpt2Config tiny_gpt2_config() {
  models::Gpt2Config c;
  c.vocab_size = 8;
  c.padded_vocab_size = 128;
  c.max_seq_len = 4;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = 4;
  return c;
}

inline models::LlamaConfig tiny_llama_config() {
  models::LlamaConfig c;
  c.vocab_size = 8;
  c.max_seq_len = 4;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_kv_head = 1;
  c.n_embd = 4;
  c.hidden_dim = 8;
  return c;
}

}  // namespace llmcc::fuzz
