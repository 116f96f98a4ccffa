// A tokenizer's whole vocabulary, for files that carry it (a GGUF export): each token's text as
// the tokenizer's files spell it, its kind, and for the two kinds of model:
//   "gpt2"   byte-level BPE: tokens in GPT-2's printable byte alphabet ("\u0120the" for " the"),
//            merges "left right" in rank order, and the regex that splits text before BPE
//   "llama"  SentencePiece: pieces ("\u2581the", "<0x0A>") with their scores
// TextTokenizer::vocabulary() (text_tokenizer.h) gives it for every kind of tokenizer.
#pragma once

#include <string>
#include <vector>

namespace llmcc {

struct Vocabulary {
  enum class Kind { Normal, Unknown, Control, UserDefined, Unused, Byte };
  std::string model;
  std::string split_pattern;        // BPE: the pre-tokenizer's regex (PCRE syntax, as tokenizer.json has it)
  std::vector<std::string> tokens;  // by id ("" for an id no token has)
  std::vector<float> scores;        // by id; empty for BPE
  std::vector<Kind> kinds;          // by id
  std::vector<std::string> merges;
  int bos = -1, eos = -1, unk = -1, pad = -1;  // -1: none
  bool add_bos = false;                        // whether encoding a prompt puts bos first
  std::string chat_template;                   // Jinja, as tokenizer_config.json has it; empty: none
};

// GPT-2's split pattern (its ByteLevel pre-tokenizer's regex).
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace llmcc
