// GPT-2's byte-level BPE tokenizer, in C++ only.
//
// Reads the two files GPT-2 shipped: encoder.json (token string -> id, strings written in GPT-2's
// byte-to-unicode alphabet) and vocab.bpe (the merges, most important first). Encoding splits the
// text with GPT-2's pre-tokenisation pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (\p{L}, \p{N} from Unicode 16.0, as in tiktoken's regex engine) and runs BPE on the UTF-8 bytes
// of each piece. It matches tiktoken's "gpt2" encoding token for token: tests/text/test_tokenizer.cpp
// checks all of Tiny Shakespeare and a set of tricky strings against a fixture written by
// scripts/tokenizer_reference.py.
//
//   auto tok = llmcc::Gpt2Tokenizer::load_default();  // found or fetched (see load_default)
//   std::vector<int32_t> ids = tok.encode("Hello world<|endoftext|>");  // {15496, 995, 50256}
//   std::string text = tok.decode(ids);
//
// Bytes that are not valid UTF-8 are each treated as one punctuation-like character, so any byte
// string encodes and decode(encode(s)) == s always holds. The object is safe to use from several
// threads at once (the BPE cache is guarded by a mutex).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmcc {

class Gpt2Tokenizer {
 public:
  // Throws llmcc::Error naming the file and what is wrong with it: besides malformed entries, a
  // merge whose result is not a token, and a token longer than one byte that no merge makes (BPE
  // could never emit it: a truncated vocab.bpe).
  static Gpt2Tokenizer load(const std::string& encoder_json, const std::string& vocab_bpe);
  // Loads encoder.json and vocab.bpe from $LLMCC_GPT2_TOKENIZER_DIR if set, otherwise from where
  // llmcc finds its data files (docs/data-format.md: a shared data directory, the download
  // cache), downloading it into the cache when it is in neither; throws llmcc::Error saying what
  // to fetch and how when it cannot.
  static Gpt2Tokenizer load_default();

  // Text -> ids; every "<|endoftext|>" in the text becomes the single token eot().
  std::vector<int32_t> encode(std::string_view text) const;
  // Text -> ids with "<|endoftext|>" encoded as ordinary characters.
  std::vector<int32_t> encode_ordinary(std::string_view text) const;

  // Ids -> bytes (concatenated; may split a UTF-8 character between tokens). An id outside
  // [0, vocab_size()) throws llmcc::Error.
  std::string decode(std::span<const int32_t> ids) const;
  std::string decode_token(int32_t id) const;

  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }  // 50257 for GPT-2
  int eot() const { return eot_; }                                          // 50256 for GPT-2
  // Each token as encoder.json spells it (in GPT-2's printable byte alphabet; eot as
  // "<|endoftext|>"), by id, and vocab.bpe's merges as "left right" lines in rank order.
  std::vector<std::string> token_texts() const;
  std::vector<std::string> merge_texts() const;

  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer();

 private:
  struct Cache;
  Gpt2Tokenizer();
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> token_bytes_;  // id -> raw bytes ("<|endoftext|>" for eot)
  // (left id << 32 | right id) -> (merge rank, merged id), from vocab.bpe.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  int32_t byte_token_[256] = {};  // byte -> its single-byte token id
  int32_t eot_ = -1;
  std::unique_ptr<Cache> cache_;  // piece -> ids, shared across calls
};

}  // namespace llmcc
