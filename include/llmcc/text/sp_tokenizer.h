// SentencePiece tokenizers (Llama's kind) through Debian's libsentencepiece.
//
//   auto tok = llmcc::SpTokenizer::load("tok512.model");
//   std::vector<int32_t> ids = tok.encode("Hello world");   // no bos/eos added
//   std::string text = tok.decode(ids);
//   tok.vocab_size(); tok.bos(); tok.eos();                 // -1 when the model has none
//
//   llmcc::SpTrainOptions opt;                              // BPE, byte fallback, identity
//   opt.inputs = {"input.txt"};                             // normalisation: see below
//   opt.vocab_size = 512;
//   opt.model_prefix = "tok512";                            // writes tok512.model, tok512.vocab
//   llmcc::train_sp_tokenizer(opt);
//
// Training runs SentencePiece's own trainer on every line of the inputs (a line is a sentence to
// it). The defaults make a tokenizer for which decode(encode(s)) == s for every byte string s:
// the 'identity' normalisation (no NFKC), whitespace kept as it is (no collapsing of runs, no
// trimming), byte fallback (a character the vocabulary lacks becomes byte tokens <0xNN>, never
// <unk>; newlines, which the line-based trainer never sees, come out that way), digits split into
// single characters, and ids unk 0, bos 1, eos 2 (no pad). Training is deterministic: the trainer
// runs on one thread with a fixed seed and all input lines, so the same inputs and options give a
// byte-identical model.
//
// Two kinds of text SentencePiece itself does not give back, and this class does when the model
// has the 256 byte tokens: bytes that are not UTF-8 (its normaliser reads each as U+FFFD) and the
// character U+2581 '▁' (its meta symbol for a space). encode() spells the pieces holding them in
// byte tokens, and decode() turns every byte token into its byte, where SentencePiece writes
// U+FFFD for byte tokens that do not form a character. Otherwise both are SentencePiece's own, so
// a model's normalisation (NFKC, collapsed whitespace) still applies: see docs/data-format.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace llmcc {

class SpTokenizer {
 public:
  // Throws llmcc::Error("[sp_tokenizer] <path>: ...") for a missing, unreadable or corrupt file.
  static SpTokenizer load(const std::string& model_path);
  // The same from a .model file's bytes (a checkpoint carries them); `label` names the source in
  // errors and path(). Throws llmcc::Error("[sp_tokenizer] <label>: ...") for corrupt bytes.
  static SpTokenizer load_from_bytes(const std::string& bytes, const std::string& label);
  // The model as .model file bytes (its serialized ModelProto): load_from_bytes reads them back.
  std::string serialized() const;

  // SentencePiece's encoding; with byte tokens, pieces holding non-UTF-8 bytes or U+2581 are
  // spelled in byte tokens instead.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // SentencePiece's decoding, except that a byte token <0xNN> is always the byte 0xNN. An id
  // outside [0, vocab_size()) throws llmcc::Error naming it.
  std::string decode(std::span<const std::int32_t> ids) const;
  std::string piece(std::int32_t id) const;  // the vocabulary entry ("▁the", "<0x0A>", "<s>")
  // The piece's score (a unigram's log probability, BPE's negated merge rank) and kind, for ids in
  // [0, vocab_size()). Debian's SentencePiece cannot tell user-defined pieces: they are Normal.
  float score(std::int32_t id) const;
  enum class PieceKind { Normal, Unknown, Control, UserDefined, Unused, Byte };
  PieceKind kind(std::int32_t id) const;

  int vocab_size() const;
  int bos() const;  // -1 if the model has none
  int eos() const;
  int unk() const;
  const std::string& path() const { return path_; }

  SpTokenizer(SpTokenizer&&) noexcept;
  SpTokenizer& operator=(SpTokenizer&&) noexcept;
  ~SpTokenizer();

 private:
  SpTokenizer();
  void find_byte_pieces();
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::array<std::int32_t, 256> byte_id_{};  // byte -> id of its piece <0xNN>
  std::vector<std::int16_t> byte_of_id_;     // id -> its byte for pieces <0xNN>, else -1
  bool all_byte_pieces_ = false;             // the model has all 256 (byte fallback)
};

struct SpTrainOptions {
  std::vector<std::string> inputs;  // UTF-8 text files; every line is a training sentence
  int vocab_size = 0;               // including unk, bos, eos and (with byte fallback) 256 byte tokens
  std::string model_prefix;         // writes <prefix>.model and <prefix>.vocab
  std::string model_type = "bpe";   // bpe or unigram
  bool byte_fallback = true;
  double character_coverage = 1.0;  // fraction of characters kept as pieces (rarer ones -> bytes)
  int max_sentence_length = 16384;  // bytes; longer lines are skipped by the trainer
  bool quiet = true;                // hide SentencePiece's training log (errors still reported)
};

// Trains and writes the model; returns the path of the .model file. Throws llmcc::Error naming
// the input or the option for a missing input, an empty input, a bad option, or a failure the
// library reports (its message included, e.g. a vocabulary too large for the text).
std::string train_sp_tokenizer(const SpTrainOptions& options);

}  // namespace llmcc
