#include "llmcc/train/sp_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <unordered_map>

#include "llmcc/error.h"

namespace llmcc {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "sp_tokenizer";

// Feeds the trainer every line of the input files, in order (one pass; the trainer keeps them).
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& files) : files_(files) { Next(); }
  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }
  void Next() override {
    while (!done_) {
      if (in_.is_open() && std::getline(in_, line_)) {
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        return;
      }
      if (in_.is_open() && in_.bad()) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal,
                                              "error reading " + files_[next_ - 1]);
        done_ = true;
        return;
      }
      in_.close();
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_.clear();
      in_.open(files_[next_], std::ios::binary);
      if (!in_) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                              "cannot open " + files_[next_]);
        done_ = true;
        return;
      }
      ++next_;
    }
  }

 private:
  const std::vector<std::string>& files_;
  std::size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

SpTokenizer::SpTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SpTokenizer::SpTokenizer(SpTokenizer&&) noexcept = default;
SpTokenizer& SpTokenizer::operator=(SpTokenizer&&) noexcept = default;
SpTokenizer::~SpTokenizer() = default;

SpTokenizer SpTokenizer::load(const std::string& model_path) {
  std::error_code ec;
  if (!fs::exists(model_path, ec)) {
    fail(kWhere, model_path + ": no such file (expected a SentencePiece .model, e.g. from `llmcc train-tokenizer`)");
  }
  if (fs::is_directory(model_path, ec)) fail(kWhere, model_path + ": is a directory, expected a SentencePiece .model file");
  // Only a regular file of a plausible size is handed to SentencePiece, which reads the whole
  // file into memory: a device (/dev/zero) or FIFO would never end.
  if (!fs::is_regular_file(model_path, ec))
    fail(kWhere, model_path + ": is not a regular file (a FIFO, device or socket?), expected a SentencePiece .model file");
  constexpr std::uintmax_t kMaxModelBytes = std::uintmax_t{256} << 20;
  if (const std::uintmax_t bytes = fs::file_size(model_path, ec); !ec && bytes > kMaxModelBytes)
    fail(kWhere, model_path + ": is " + std::to_string(bytes) + " bytes; SentencePiece models are far smaller (the limit is " +
                     std::to_string(kMaxModelBytes) + " bytes)");
  SpTokenizer t;
  t.path_ = model_path;
  const auto status = t.sp_->Load(model_path);
  if (!status.ok()) {
    fail(kWhere, model_path + ": not a valid SentencePiece model (" + status.ToString() +
                     "); expected the .model file written by spm_train or `llmcc train-tokenizer`, not the .vocab");
  }
  if (t.sp_->GetPieceSize() <= 0) fail(kWhere, model_path + ": the model has an empty vocabulary");
  return t;
}

SpTokenizer SpTokenizer::load_from_bytes(const std::string& bytes, const std::string& label) {
  if (bytes.empty()) fail(kWhere, label + ": no model bytes (expected a SentencePiece .model's contents)");
  SpTokenizer t;
  t.path_ = label;
  const auto status = t.sp_->LoadFromSerializedProto(absl::string_view(bytes.data(), bytes.size()));
  if (!status.ok()) fail(kWhere, label + ": not a valid SentencePiece model (" + status.ToString() + ")");
  if (t.sp_->GetPieceSize() <= 0) fail(kWhere, label + ": the model has an empty vocabulary");
  return t;
}

std::string SpTokenizer::serialized() const { return sp_->serialized_model_proto(); }

std::vector<std::int32_t> SpTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) fail(kWhere, path_ + ": encoding failed: " + status.ToString());
  return std::vector<std::int32_t>(ids.begin(), ids.end());
}

std::string SpTokenizer::decode(std::span<const std::int32_t> ids) const {
  const int n = vocab_size();
  std::vector<int> v(ids.begin(), ids.end());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= n) {
      fail(kWhere, path_ + ": token id " + std::to_string(v[i]) + " (position " + std::to_string(i) +
                       ") is outside the vocabulary [0, " + std::to_string(n) + ")");
    }
  }
  std::string out;
  const auto status = sp_->Decode(v, &out);
  if (!status.ok()) fail(kWhere, path_ + ": decoding failed: " + status.ToString());
  return out;
}

std::string SpTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    fail(kWhere, path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(vocab_size()) + ")");
  }
  return sp_->IdToPiece(id);
}

int SpTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SpTokenizer::bos() const { return sp_->bos_id(); }
int SpTokenizer::eos() const { return sp_->eos_id(); }
int SpTokenizer::unk() const { return sp_->unk_id(); }

std::string train_sp_tokenizer(const SpTrainOptions& o) {
  if (o.inputs.empty()) fail(kWhere, "training needs at least one input file");
  std::uintmax_t total = 0;
  for (const std::string& f : o.inputs) {
    std::error_code ec;
    if (!fs::exists(f, ec)) fail(kWhere, "input file " + f + " does not exist");
    if (!fs::is_regular_file(f, ec)) fail(kWhere, "input " + f + " is not a regular file");
    total += fs::file_size(f, ec);
  }
  if (total == 0) fail(kWhere, "the input files are empty; nothing to train on");
  if (o.model_type != "bpe" && o.model_type != "unigram") {
    fail(kWhere, "model type must be bpe or unigram, got '" + o.model_type + "'");
  }
  const int reserved = 3 + (o.byte_fallback ? 256 : 0);
  if (o.vocab_size <= reserved) {
    fail(kWhere, "vocab size " + std::to_string(o.vocab_size) + " is too small: unk, bos, eos" +
                     (o.byte_fallback ? " and the 256 byte-fallback tokens" : "") + " alone take " +
                     std::to_string(reserved) + " ids");
  }
  if (!(o.character_coverage > 0.0 && o.character_coverage <= 1.0)) {
    fail(kWhere, "character coverage must be in (0, 1], got " + std::to_string(o.character_coverage));
  }
  if (o.max_sentence_length <= 0) fail(kWhere, "max sentence length must be positive");
  if (o.model_prefix.empty()) fail(kWhere, "the output prefix is empty");
  const fs::path dir = fs::path(o.model_prefix).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) fail(kWhere, "cannot create output directory " + dir.string());
  }

  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", o.model_prefix},
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"input_sentence_size", "0"},        // every line, no sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},                // deterministic
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", o.quiet ? "2" : "0"},
  };
  sentencepiece::SetRandomGeneratorSeed(1234);
  LineIterator lines(o.inputs);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines);
  if (!status.ok()) {
    fail(kWhere, "training a " + std::to_string(o.vocab_size) + "-token " + o.model_type + " model on " +
                     std::to_string(total) + " bytes failed: " + status.ToString() +
                     " (hint: a vocabulary larger than the text supports fails; try a smaller --vocab-size)");
  }
  return o.model_prefix + ".model";
}

}  // namespace llmcc
