// A tokenizer named by a spec string, for commands that work with either kind:
//
//   "gpt2"        GPT-2's BPE from $LLMCC_GPT2_TOKENIZER_DIR or ../shared/data/gpt2
//   "gpt2:DIR"    GPT-2's BPE from DIR/encoder.json and DIR/vocab.bpe
//   "sp:MODEL"    a SentencePiece model file (llmcc train-tokenizer, Llama's tokenizer.model)
//   DIR           an existing directory: the same as gpt2:DIR (what --tokenizer meant before)
//
//   auto tok = llmcc::load_text_tokenizer("sp:data/tok512.model");
//   ids = tok->encode(text);  text = tok->decode(ids);
//   tok->document_start();    // the id written before every document in token files
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmcc {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // Special tokens' text ("<|endoftext|>") as ordinary characters. SentencePiece never reads
  // special tokens from text, so for it this is encode().
  virtual std::vector<std::int32_t> encode_ordinary(std::string_view text) const = 0;
  // An id outside [0, vocab_size()) throws llmcc::Error.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;
  // The id that starts every document in prepared data: GPT-2's <|endoftext|> (as llm.c's data
  // scripts), a SentencePiece model's bos (as llama2.c's), else its eos; -1 when there is none.
  virtual int document_start() const = 0;
  virtual int bos() const = 0;  // -1 when the tokenizer has none
  virtual int eos() const = 0;
  // "gpt2 BPE (50257 tokens)", "SentencePiece data/tok.model (512 tokens, bpe)" for logs.
  virtual std::string describe() const = 0;
};

// Throws llmcc::Error("[tokenizer] ...") for an unknown kind, naming the accepted forms, and
// whatever the loader throws for missing or corrupt files.
std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& spec);

}  // namespace llmcc
