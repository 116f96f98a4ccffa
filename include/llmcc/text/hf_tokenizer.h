// Hugging Face tokenizer.json files (the `tokenizers` library's format): byte-level BPE as GPT-2,
// Llama 3, Qwen2/Qwen3, SmolLM2 and most models since ship them, and SentencePiece-style BPE
// (Metaspace, byte fallback) as TinyLlama, Llama 2 and Mistral's converted files do.
//
// What is read (anything else is refused, naming the field and its value):
//   normalizer      null, or NFC (Qwen2/3), through ICU
//   pre_tokenizer   ByteLevel with use_regex (GPT-2's split pattern), or a Sequence of Split
//                   (a regex, behavior Isolated, not inverted) then ByteLevel without regex
//                   (Llama 3's, Qwen2's patterns); the regexes run in PCRE2 with Unicode
//                   properties (docs/data-format.md says why these libraries)
//   model           BPE over ByteLevel's alphabet: vocab, merges (as "a b" strings or [a, b]
//                   pairs), ignore_merges (Llama 3: a piece that is a token is that token)
//   added_tokens    matched in the text before anything else, longest first; special ones only
//                   when the caller allows them (encode's allow_special)
//   decoder         ByteLevel
//
// SentencePiece-style models instead: the Metaspace pre-tokenizer (prepend_scheme always, first
// or never; split or not), or no pre-tokenizer after the normalizers Prepend and Replace(" ");
// BPE over characters with byte_fallback (<0xXX> tokens), unk_token and fuse_unk; a decoder
// made of Metaspace, ByteFallback, Fuse, Replace and Strip steps.
//
//   auto tok = llmcc::HfTokenizer::load("model/tokenizer.json");
//   std::vector<std::int32_t> ids = tok.encode("Hello world", /*allow_special=*/false);
//   std::string text = tok.decode(ids);  // == "Hello world"
//
// Byte-level models: decode(encode(s)) == s for every byte string s (bytes that are not UTF-8 are
// pieces of their own). SentencePiece-style ones decode as `tokenizers` does (lossless() says
// which). Safe to use from several threads at once (the piece cache is guarded by a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/text/vocabulary.h"

namespace llmcc {

class HfTokenizer {
 public:
  // Throws llmcc::Error("[hf_tokenizer] <path>: ...") for a file that cannot be read, is not a
  // tokenizer.json, or uses a part llmcc does not implement (named).
  static HfTokenizer load(const std::string& path);
  ~HfTokenizer();
  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;

  // allow_special: special added tokens in the text ("<|endoftext|>", "<|im_start|>") become their
  // ids; otherwise their text is encoded as ordinary characters. Non-special added tokens are
  // always matched, as in `tokenizers`.
  std::vector<std::int32_t> encode(std::string_view text, bool allow_special) const;
  // Throws llmcc::Error for an id outside [0, vocab_size()).
  std::string decode(std::span<const std::int32_t> ids) const;

  // Whether decode(encode(s)) == s for every byte string s: true for byte-level models; a
  // Metaspace model's decoder drops the first piece's leading space, and unk loses text.
  bool lossless() const;
  int vocab_size() const;                                              // largest id + 1
  std::optional<std::int32_t> token_id(std::string_view token) const;  // an added token's or a vocab entry's id
  const std::string& path() const;
  // The file's bytes, so that a data directory or checkpoint can carry the tokenizer itself.
  const std::string& json() const;
  // The vocabulary of a byte-level BPE model (vocabulary.h): vocab entries and added tokens by id
  // (special ones Control, others UserDefined), merges in rank order, the split pattern; bos, eos
  // and the chat template are tokenizer_config.json's, which the caller adds. Throws
  // llmcc::Error naming the file for a SentencePiece-style (Metaspace) model.
  Vocabulary vocabulary() const;
  // Loads from bytes already read (json()); `label` names the source in errors.
  static HfTokenizer from_json(std::string json, const std::string& label);

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmcc
