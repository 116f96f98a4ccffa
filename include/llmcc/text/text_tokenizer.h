// A tokenizer named by a spec string, for commands that work with either kind:
//
//   "gpt2"        GPT-2's BPE (Gpt2Tokenizer::load_default: found or fetched)
//   "gpt2:DIR"    GPT-2's BPE from DIR/encoder.json and DIR/vocab.bpe
//   "sp:MODEL"    a SentencePiece model file (llmcc train-tokenizer, Llama's tokenizer.model)
//   DIR           an existing directory: the same as gpt2:DIR (what --tokenizer meant before)
//
//   auto tok = llmcc::load_text_tokenizer("sp:data/tok512.model");
//   ids = tok->encode(text);  text = tok->decode(ids);
//   tok->document_start();    // the id written before every document in token files
//   tok->spec();              // "sp:/abs/data/tok512.model": loads it again
//
// Streaming text out of a sampler (each new id's text as the whole sequence's decode spells it):
//   DecodeStream out(*tok, prompt_ids);
//   for each new id: std::cout << out.push(id);
//   std::cout << out.finish();
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/text/chat_template.h"
#include "llmcc/text/vocabulary.h"

namespace llmcc {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // Special tokens' text ("<|endoftext|>") as ordinary characters. SentencePiece never reads
  // special tokens from text, so for it this is encode().
  virtual std::vector<std::int32_t> encode_ordinary(std::string_view text) const = 0;
  // The ids a model continues for a prompt: SentencePiece puts its bos first, as Llama's and
  // llama2.c's generators do (an empty prompt is bos alone); GPT-2 encodes the text as it is (an
  // empty prompt is <|endoftext|>, the document start). Empty only for an empty prompt and a
  // tokenizer with neither bos nor eos.
  virtual std::vector<std::int32_t> encode_prompt(std::string_view text) const = 0;
  // An id outside [0, vocab_size()) throws llmcc::Error.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;
  // The id that starts every document in prepared data: GPT-2's <|endoftext|> (as llm.c's data
  // scripts), a SentencePiece model's bos (as llama2.c's), else its eos; -1 when there is none.
  virtual int document_start() const = 0;
  virtual int bos() const = 0;  // -1 when the tokenizer has none
  virtual int eos() const = 0;
  // "GPT-2 BPE (50257 tokens)", "SentencePiece data/tok.model (512 tokens)" for logs.
  virtual std::string describe() const = 0;
  // The spec that loads this tokenizer again, with absolute paths: "gpt2" (the default files),
  // "gpt2:/abs/dir", "sp:/abs/tok.model" (for a model read from bytes, "sp:" + its label).
  virtual std::string spec() const = 0;
  // A SentencePiece model's .model file bytes, so that a data directory or a checkpoint can carry
  // the tokenizer itself; empty for GPT-2 (its two files are found through spec()).
  virtual std::string model_bytes() const = 0;
  // The files that make this tokenizer again, by name, so that a data directory or a checkpoint
  // can carry it: a SentencePiece model's "tokenizer.model"; a tokenizer.json with the files of
  // kHfTokenizerFiles its folder has; none for GPT-2 (its files are found through spec()).
  virtual std::map<std::string, std::string> files() const = 0;
  // The chat format of a tokenizer.json's folder (llmcc/text/chat_template.h): its
  // tokenizer_config.json's "chat_template" (a string, or the list entry named "default"), else
  // its chat_template.jinja. Throws llmcc::Error naming the files when there is none, when it is
  // not recognised, or when the vocabulary lacks one of its special tokens; GPT-2's and
  // SentencePiece tokenizers have none.
  virtual ChatTemplate chat_template() const;
  // The whole vocabulary (Vocabulary above). Throws llmcc::Error naming the tokenizer when its
  // model is neither BPE nor SentencePiece.
  virtual Vocabulary vocabulary() const = 0;
};

// The files of a Hugging Face tokenizer: tokenizer.json, and beside it the bos, eos and chat
// template they name.
inline constexpr const char* kHfTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"};

// Throws llmcc::Error("[tokenizer] ...") for an unknown kind, naming the accepted forms, and
// whatever the loader throws for missing or corrupt files.
std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& spec);
// A tokenizer.json from its files' contents (TextTokenizer::files()), as a checkpoint carries
// them; `label` names the source in errors, describe() and spec(). Throws llmcc::Error
// ("[hf_tokenizer] <label>...") without a tokenizer.json, for a name not in kHfTokenizerFiles,
// and for contents the loader refuses.
std::unique_ptr<TextTokenizer> load_hf_tokenizer_files(const std::map<std::string, std::string>& files,
                                                       const std::string& label);
// A SentencePiece tokenizer from a .model file's bytes (model_bytes()); `label` names the source
// in errors and describe(). Throws llmcc::Error("[sp_tokenizer] <label>: ...") for corrupt bytes.
std::unique_ptr<TextTokenizer> load_sp_tokenizer_bytes(const std::string& bytes, const std::string& label);

// Decodes ids one at a time for streaming output. SentencePiece spells a piece by its neighbours
// (the leading space of a sequence's first piece is dropped; a character the vocabulary lacks is
// several byte tokens), so each push decodes the whole sequence and returns the text beyond what
// was returned before. Text ending in a UTF-8 sequence cut short (a character whose remaining byte
// tokens are still to come) is held back until the character completes or finish() is called.
// Cost per push: one decode of the sequence so far (microseconds for a few thousand ids).
class DecodeStream {
 public:
  // `context`: ids already shown (the prompt, with its bos); their text is not returned.
  DecodeStream(const TextTokenizer& tok, std::vector<std::int32_t> context);
  std::string push(std::int32_t id);  // text to show now; may be empty
  std::string finish();               // whatever was held back

 private:
  std::string emit(bool final);
  const TextTokenizer& tok_;
  std::vector<std::int32_t> ids_;
  std::string shown_;  // decode(context) then every returned piece
};

}  // namespace llmcc
