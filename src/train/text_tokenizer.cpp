#include "llmcc/train/text_tokenizer.h"

#include <filesystem>
#include <system_error>

#include "llmcc/error.h"
#include "llmcc/train/sp_tokenizer.h"
#include "llmcc/train/tokenizer.h"

namespace llmcc {

namespace {

class Gpt2Text final : public TextTokenizer {
 public:
  explicit Gpt2Text(Gpt2Tokenizer tok) : tok_(std::move(tok)) {}
  std::vector<std::int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const override { return tok_.encode_ordinary(text); }
  std::string decode(std::span<const std::int32_t> ids) const override { return tok_.decode(ids); }
  int vocab_size() const override { return tok_.vocab_size(); }
  int document_start() const override { return tok_.eot(); }
  int bos() const override { return tok_.eot(); }  // GPT-2 has one special token for both
  int eos() const override { return tok_.eot(); }
  std::string describe() const override {
    return "GPT-2 BPE (" + std::to_string(vocab_size()) + " tokens)";
  }

 private:
  Gpt2Tokenizer tok_;
};

class SpText final : public TextTokenizer {
 public:
  explicit SpText(SpTokenizer tok) : tok_(std::move(tok)) {}
  std::vector<std::int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const override { return tok_.encode(text); }
  std::string decode(std::span<const std::int32_t> ids) const override { return tok_.decode(ids); }
  int vocab_size() const override { return tok_.vocab_size(); }
  int document_start() const override { return tok_.bos() >= 0 ? tok_.bos() : tok_.eos(); }
  int bos() const override { return tok_.bos(); }
  int eos() const override { return tok_.eos(); }
  std::string describe() const override {
    return "SentencePiece " + tok_.path() + " (" + std::to_string(vocab_size()) + " tokens)";
  }

 private:
  SpTokenizer tok_;
};

Gpt2Tokenizer load_gpt2_dir(const std::string& dir) {
  const std::filesystem::path d(dir);
  return Gpt2Tokenizer::load((d / "encoder.json").string(), (d / "vocab.bpe").string());
}

}  // namespace

std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& spec) {
  if (spec == "gpt2") return std::make_unique<Gpt2Text>(Gpt2Tokenizer::load_default());
  if (spec.rfind("gpt2:", 0) == 0 && spec.size() > 5) return std::make_unique<Gpt2Text>(load_gpt2_dir(spec.substr(5)));
  if (spec.rfind("sp:", 0) == 0 && spec.size() > 3) return std::make_unique<SpText>(SpTokenizer::load(spec.substr(3)));
  std::error_code ec;
  if (!spec.empty() && std::filesystem::is_directory(spec, ec)) return std::make_unique<Gpt2Text>(load_gpt2_dir(spec));
  std::string hint;
  if (spec.size() > 6 && spec.substr(spec.size() - 6) == ".model") hint = " (for a SentencePiece model write sp:" + spec + ")";
  fail("tokenizer", "unknown tokenizer '" + spec + "'" + hint +
                        "; expected gpt2, gpt2:DIR (encoder.json and vocab.bpe), sp:MODEL (a SentencePiece .model) "
                        "or an existing directory with GPT-2's files");
}

}  // namespace llmcc
