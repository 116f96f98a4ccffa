#include "llmcc/text/sp_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>
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
        status_ =
            sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, "cannot open " + files_[next_]);
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

// True when `s` is well-formed UTF-8: no stray continuation bytes, truncated sequences, overlong
// forms, surrogates or code points past U+10FFFF. SentencePiece's normaliser reads exactly these
// as characters and turns every other byte into U+FFFD.
bool well_formed_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
      return false;
    if (s.size() - i < len) return false;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// SentencePiece's meta symbol U+2581 '▁', which stands for a space inside pieces.
constexpr std::string_view kMetaSpace = "\xE2\x96\x81";

// Text SentencePiece cannot give back as it is: bytes that are not UTF-8 (read as U+FFFD) and the
// meta symbol itself (decoded as a space). With byte pieces, such text is spelled in bytes.
bool needs_byte_spelling(std::string_view s) {
  return !well_formed_utf8(s) || s.find(kMetaSpace) != std::string_view::npos;
}

}  // namespace

SpTokenizer::SpTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SpTokenizer::SpTokenizer(SpTokenizer&&) noexcept = default;
SpTokenizer& SpTokenizer::operator=(SpTokenizer&&) noexcept = default;
SpTokenizer::~SpTokenizer() = default;

namespace {

// SentencePiece reports most bad models through its status, but some (a piece whose text starts
// with a NUL byte, for one) throw from inside the library instead: those become the same error.
template <class Load>
auto load_guarded(Load&& load, const std::string& label) -> decltype(load()) {
  try {
    return load();
  } catch (const std::exception& e) {
    fail(kWhere, label + ": not a valid SentencePiece model (the library refused it: " + e.what() + ")");
  }
}

}  // namespace

SpTokenizer SpTokenizer::load(const std::string& model_path) {
  std::error_code ec;
  if (!fs::exists(model_path, ec)) {
    fail(kWhere, model_path + ": no such file (expected a SentencePiece .model, e.g. from `llmcc train-tokenizer`)");
  }
  if (fs::is_directory(model_path, ec))
    fail(kWhere, model_path + ": is a directory, expected a SentencePiece .model file");
  // Only a regular file of a plausible size is handed to SentencePiece, which reads the whole
  // file into memory: a device (/dev/zero) or FIFO would never end.
  if (!fs::is_regular_file(model_path, ec))
    fail(kWhere,
         model_path + ": is not a regular file (a FIFO, device or socket?), expected a SentencePiece .model file");
  constexpr std::uintmax_t kMaxModelBytes = std::uintmax_t{256} << 20;
  if (const std::uintmax_t bytes = fs::file_size(model_path, ec); !ec && bytes > kMaxModelBytes)
    fail(kWhere, model_path + ": is " + std::to_string(bytes) +
                     " bytes; SentencePiece models are far smaller (the limit is " + std::to_string(kMaxModelBytes) +
                     " bytes)");
  SpTokenizer t;
  t.path_ = model_path;
  const auto status = load_guarded([&] { return t.sp_->Load(model_path); }, model_path);
  if (!status.ok()) {
    fail(kWhere, model_path + ": not a valid SentencePiece model (" + status.ToString() +
                     "); expected the .model file written by spm_train or `llmcc train-tokenizer`, not the .vocab");
  }
  if (t.sp_->GetPieceSize() <= 0) fail(kWhere, model_path + ": the model has an empty vocabulary");
  t.find_byte_pieces();
  return t;
}

SpTokenizer SpTokenizer::load_from_bytes(const std::string& bytes, const std::string& label) {
  if (bytes.empty()) fail(kWhere, label + ": no model bytes (expected a SentencePiece .model's contents)");
  SpTokenizer t;
  t.path_ = label;
  const auto status = load_guarded(
      [&] { return t.sp_->LoadFromSerializedProto(absl::string_view(bytes.data(), bytes.size())); }, label);
  if (!status.ok()) fail(kWhere, label + ": not a valid SentencePiece model (" + status.ToString() + ")");
  if (t.sp_->GetPieceSize() <= 0) fail(kWhere, label + ": the model has an empty vocabulary");
  t.find_byte_pieces();
  return t;
}

void SpTokenizer::find_byte_pieces() {
  byte_of_id_.assign(static_cast<std::size_t>(vocab_size()), -1);
  int found = 0;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const int id = sp_->PieceToId(name);
    if (id < 0 || id >= vocab_size() || !sp_->IsByte(id)) continue;
    byte_id_[static_cast<std::size_t>(b)] = id;
    byte_of_id_[static_cast<std::size_t>(id)] = static_cast<std::int16_t>(b);
    ++found;
  }
  all_byte_pieces_ = found == 256;
}

std::string SpTokenizer::serialized() const { return sp_->serialized_model_proto(); }

std::vector<std::int32_t> SpTokenizer::encode(std::string_view text) const {
  const absl::string_view in(text.data(), text.size());
  if (!all_byte_pieces_ || !needs_byte_spelling(text)) {
    std::vector<int> ids;
    const auto status = sp_->Encode(in, &ids);
    if (!status.ok()) fail(kWhere, path_ + ": encoding failed: " + status.ToString());
    return std::vector<std::int32_t>(ids.begin(), ids.end());
  }
  // Each piece records the input bytes it came from, [begin, end). A piece whose bytes
  // SentencePiece would not give back (see needs_byte_spelling) is replaced by one byte piece per
  // input byte. Byte fallback spells a character the vocabulary lacks as several byte pieces of
  // which only the last holds its input bytes (the others have begin == end): when that piece is
  // replaced, so are they.
  sentencepiece::ImmutableSentencePieceText spt;
  const auto status = sp_->Encode(in, spt.mutable_proto());
  if (!status.ok()) fail(kWhere, path_ + ": encoding failed: " + status.ToString());
  std::vector<std::int32_t> out;
  out.reserve(spt.pieces_size() + 8);
  std::size_t spelled_before = 0;  // byte pieces at the end of `out` with no input bytes of their own
  for (std::size_t i = 0; i < spt.pieces_size(); ++i) {
    const auto p = spt.pieces(static_cast<int>(i));
    const auto id = static_cast<std::int32_t>(p.id());
    if (id < 0 || id >= vocab_size() || p.begin() > p.end() || p.end() > text.size())
      fail(kWhere, path_ + ": SentencePiece reported id " + std::to_string(p.id()) + " for input bytes [" +
                       std::to_string(p.begin()) + ", " + std::to_string(p.end()) + ") of a " +
                       std::to_string(text.size()) + "-byte text");
    const bool is_byte = byte_of_id_[static_cast<std::size_t>(id)] >= 0;
    const std::string_view bytes = text.substr(p.begin(), p.end() - p.begin());
    if (bytes.empty()) {
      out.push_back(id);
      spelled_before = is_byte ? spelled_before + 1 : 0;
      continue;
    }
    if (needs_byte_spelling(bytes)) {
      if (is_byte) out.resize(out.size() - spelled_before);
      for (const char c : bytes) out.push_back(byte_id_[static_cast<unsigned char>(c)]);
    } else {
      out.push_back(id);
    }
    spelled_before = 0;
  }
  return out;
}

// SentencePiece's own decode, with one change: a byte piece <0xNN> is the byte 0xNN. SentencePiece
// writes U+FFFD for byte pieces that do not form a UTF-8 character, so text spelled in bytes by
// encode() would not come back; where they do form characters the two agree.
std::string SpTokenizer::decode(std::span<const std::int32_t> ids) const {
  const int n = vocab_size();
  std::vector<int> v(ids.begin(), ids.end());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= n) {
      fail(kWhere, path_ + ": token id " + std::to_string(v[i]) + " (position " + std::to_string(i) +
                       ") is outside the vocabulary [0, " + std::to_string(n) + ")");
    }
  }
  sentencepiece::ImmutableSentencePieceText spt;
  const auto status = sp_->Decode(v, spt.mutable_proto());
  if (!status.ok()) fail(kWhere, path_ + ": decoding failed: " + status.ToString());
  if (spt.pieces_size() != v.size())
    fail(kWhere, path_ + ": SentencePiece decoded " + std::to_string(v.size()) + " ids into " +
                     std::to_string(spt.pieces_size()) + " pieces");
  if (std::none_of(v.begin(), v.end(), [&](int id) { return byte_of_id_[static_cast<std::size_t>(id)] >= 0; }))
    return spt.text();
  std::string out;  // the pieces' spellings, which make up spt.text()
  out.reserve(spt.text().size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int16_t byte = byte_of_id_[static_cast<std::size_t>(v[i])];
    if (byte >= 0)
      out += static_cast<char>(byte);
    else
      out += spt.pieces(static_cast<int>(i)).surface();
  }
  return out;
}

float SpTokenizer::score(std::int32_t id) const {
  piece(id);  // throws for an id out of range
  return sp_->GetScore(id);
}

SpTokenizer::PieceKind SpTokenizer::kind(std::int32_t id) const {
  piece(id);
  if (sp_->IsUnknown(id)) return PieceKind::Unknown;
  if (sp_->IsControl(id)) return PieceKind::Control;
  if (sp_->IsByte(id)) return PieceKind::Byte;
  if (sp_->IsUnused(id)) return PieceKind::Unused;
  return PieceKind::Normal;
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
      {"input_sentence_size", "0"},  // every line, no sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},  // deterministic
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
