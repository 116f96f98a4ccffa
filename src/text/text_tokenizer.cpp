#include "llmcc/text/text_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>

#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/text/hf_tokenizer.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/tokenizer.h"

namespace llmcc {

namespace {

class Gpt2Text final : public TextTokenizer {
 public:
  Gpt2Text(Gpt2Tokenizer tok, std::string spec) : tok_(std::move(tok)), spec_(std::move(spec)) {}
  std::vector<std::int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const override { return tok_.encode_ordinary(text); }
  std::vector<std::int32_t> encode_prompt(std::string_view text) const override {
    return text.empty() ? std::vector<std::int32_t>{tok_.eot()} : tok_.encode(text);
  }
  std::string decode(std::span<const std::int32_t> ids) const override { return tok_.decode(ids); }
  int vocab_size() const override { return tok_.vocab_size(); }
  int document_start() const override { return tok_.eot(); }
  int bos() const override { return tok_.eot(); }  // GPT-2 has one special token for both
  int eos() const override { return tok_.eot(); }
  std::string describe() const override { return "GPT-2 BPE (" + std::to_string(vocab_size()) + " tokens)"; }
  std::string spec() const override { return spec_; }
  std::string model_bytes() const override { return {}; }
  std::map<std::string, std::string> files() const override { return {}; }
  Vocabulary vocabulary() const override {
    Vocabulary v;
    v.model = "gpt2";
    v.split_pattern = kGpt2SplitPattern;
    v.tokens = tok_.token_texts();
    v.merges = tok_.merge_texts();
    v.kinds.assign(v.tokens.size(), Vocabulary::Kind::Normal);
    v.kinds[static_cast<std::size_t>(tok_.eot())] = Vocabulary::Kind::Control;
    v.bos = v.eos = tok_.eot();
    return v;
  }

 private:
  Gpt2Tokenizer tok_;
  std::string spec_;
};

class SpText final : public TextTokenizer {
 public:
  explicit SpText(SpTokenizer tok) : tok_(std::move(tok)) {}
  std::vector<std::int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const override { return tok_.encode(text); }
  std::vector<std::int32_t> encode_prompt(std::string_view text) const override {
    std::vector<std::int32_t> ids;
    if (tok_.bos() >= 0) ids.push_back(tok_.bos());
    const std::vector<std::int32_t> body = tok_.encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    if (ids.empty() && tok_.eos() >= 0) ids.push_back(tok_.eos());
    return ids;
  }
  // Every document is encoded on its own (llmcc prepare, encode_prompt), so each starts with
  // SentencePiece's dummy-prefix space, which its decode drops only at the start of what it is
  // given: the text after each bos or eos is decoded on its own too, so a model's next document
  // reads "\n\nJULIET:" and not "\n\n JULIET:". (bos and eos themselves are not text.)
  std::string decode(std::span<const std::int32_t> ids) const override {
    std::string out;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= ids.size(); ++i) {
      if (i < ids.size() && (ids[i] < 0 || (ids[i] != tok_.bos() && ids[i] != tok_.eos()))) continue;
      if (i > begin) out += tok_.decode(ids.subspan(begin, i - begin));
      begin = i + 1;
    }
    return out;
  }
  int vocab_size() const override { return tok_.vocab_size(); }
  int document_start() const override { return tok_.bos() >= 0 ? tok_.bos() : tok_.eos(); }
  int bos() const override { return tok_.bos(); }
  int eos() const override { return tok_.eos(); }
  std::string describe() const override {
    return "SentencePiece " + tok_.path() + " (" + std::to_string(vocab_size()) + " tokens)";
  }
  std::string spec() const override { return "sp:" + tok_.path(); }
  std::string model_bytes() const override { return tok_.serialized(); }
  std::map<std::string, std::string> files() const override { return {{"tokenizer.model", tok_.serialized()}}; }
  Vocabulary vocabulary() const override {
    Vocabulary v;
    v.model = "llama";
    const int n = tok_.vocab_size();
    for (int id = 0; id < n; ++id) {
      v.tokens.push_back(tok_.piece(id));
      v.scores.push_back(tok_.score(id));
      v.kinds.push_back(kind_of(tok_.kind(id)));
    }
    v.bos = tok_.bos();
    v.eos = tok_.eos();
    v.unk = tok_.unk();
    v.add_bos = v.bos >= 0;  // encode_prompt puts bos first
    return v;
  }

 private:
  static Vocabulary::Kind kind_of(SpTokenizer::PieceKind k) {
    switch (k) {
      case SpTokenizer::PieceKind::Unknown:
        return Vocabulary::Kind::Unknown;
      case SpTokenizer::PieceKind::Control:
        return Vocabulary::Kind::Control;
      case SpTokenizer::PieceKind::UserDefined:
        return Vocabulary::Kind::UserDefined;
      case SpTokenizer::PieceKind::Unused:
        return Vocabulary::Kind::Unused;
      case SpTokenizer::PieceKind::Byte:
        return Vocabulary::Kind::Byte;
      case SpTokenizer::PieceKind::Normal:
        break;
    }
    return Vocabulary::Kind::Normal;
  }
  SpTokenizer tok_;
};

// A tokenizer.json, with the bos and eos its tokenizer_config.json names (else, as GPT-2's and
// Qwen's base files, <|endoftext|> for eos when the vocabulary has it). Built from the files'
// contents (kHfTokenizerFiles, by name), read from a folder or from a checkpoint that carries them.
class HfText final : public TextTokenizer {
 public:
  // files: "tokenizer.json" (required), "tokenizer_config.json", "chat_template.jinja"; `where`
  // names their folder (or the checkpoint) in messages and describe(); `spec` loads them again.
  HfText(std::map<std::string, std::string> files, const std::string& where, std::string spec)
      : files_(std::move(files)),
        tok_(HfTokenizer::from_json(files_.at("tokenizer.json"), where + "/tokenizer.json")),
        spec_(std::move(spec)) {
    if (const auto it = files_.find("tokenizer_config.json"); it != files_.end()) {
      const std::string path = where + "/tokenizer_config.json";
      const JsonValue j = parse_json(it->second, path, "hf_tokenizer");
      bos_ = special(j, "bos_token", path);
      eos_ = special(j, "eos_token", path);
      read_chat_template(j, path);
    }
    if (eos_ < 0) eos_ = tok_.token_id("<|endoftext|>").value_or(-1);
    if (const auto it = files_.find("chat_template.jinja"); chat_template_.empty() && it != files_.end()) {
      chat_template_ = it->second;
      chat_template_where_ = where + "/chat_template.jinja";
    }
  }
  std::vector<std::int32_t> encode(std::string_view text) const override { return tok_.encode(text, true); }
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const override { return tok_.encode(text, false); }
  std::vector<std::int32_t> encode_prompt(std::string_view text) const override {
    std::vector<std::int32_t> ids;
    if (bos_ >= 0) ids.push_back(bos_);
    const std::vector<std::int32_t> body = tok_.encode(text, true);
    ids.insert(ids.end(), body.begin(), body.end());
    if (ids.empty() && eos_ >= 0) ids.push_back(eos_);
    return ids;
  }
  std::string decode(std::span<const std::int32_t> ids) const override { return tok_.decode(ids); }
  int vocab_size() const override { return tok_.vocab_size(); }
  int document_start() const override { return bos_ >= 0 ? bos_ : eos_; }
  int bos() const override { return bos_; }
  int eos() const override { return eos_; }
  std::string describe() const override {
    return "tokenizer.json " + tok_.path() + " (" + std::to_string(vocab_size()) + " tokens)";
  }
  std::string spec() const override { return spec_; }
  std::string model_bytes() const override { return ""; }
  std::map<std::string, std::string> files() const override { return files_; }
  Vocabulary vocabulary() const override {
    Vocabulary v = tok_.vocabulary();
    v.bos = bos_;
    v.eos = eos_;
    v.add_bos = bos_ >= 0;  // encode_prompt puts bos first
    v.chat_template = chat_template_;
    return v;
  }
  ChatTemplate chat_template() const override {
    if (chat_template_.empty())
      fail("hf_tokenizer", "the folder of " + tok_.path() +
                               " has no chat template (a \"chat_template\" in tokenizer_config.json or a "
                               "chat_template.jinja)");
    const std::string bos = bos_ >= 0 ? tok_.decode(std::vector<std::int32_t>{bos_}) : "";
    ChatTemplate t = ChatTemplate::recognise(chat_template_, bos, chat_template_where_);
    for (const std::string& special : t.special_tokens())
      if (!tok_.token_id(special))
        fail("hf_tokenizer", chat_template_where_ + ": the chat template writes " + special +
                                 ", which is not a token of " + tok_.path());
    return t;
  }

 private:
  // tokenizer_config.json's "chat_template": a string, or a list of {"name", "template"} of which
  // the one named "default" is the chat format.
  void read_chat_template(const JsonValue& j, const std::string& path) {
    const JsonValue* v = j.find("chat_template");
    if (v == nullptr || v->kind == JsonValue::Kind::Null) return;
    if (v->kind == JsonValue::Kind::Array) {
      const JsonValue* found = nullptr;
      for (const JsonValue& e : v->array) {
        const JsonValue* name = e.find("name");
        if (name != nullptr && name->kind == JsonValue::Kind::String && name->string == "default")
          found = e.find("template");
      }
      if (found == nullptr) fail("hf_tokenizer", path + ": chat_template is a list without an entry named \"default\"");
      v = found;
    }
    if (v->kind != JsonValue::Kind::String)
      fail("hf_tokenizer", path + ": chat_template is " + std::string(v->kind_name()) + ", expected a string");
    chat_template_ = v->string;
    chat_template_where_ = path;
  }

  // tokenizer_config.json's `key`: a token's text, or {"content": text}; its id, -1 when absent.
  std::int32_t special(const JsonValue& j, const char* key, const std::string& path) const {
    const JsonValue* v = j.find(key);
    if (v != nullptr && v->kind == JsonValue::Kind::Object) v = v->find("content");
    if (v == nullptr || v->kind == JsonValue::Kind::Null) return -1;
    if (v->kind != JsonValue::Kind::String) fail("hf_tokenizer", path + ": " + key + " is not a token's text");
    const std::optional<std::int32_t> id = tok_.token_id(v->string);
    if (!id) fail("hf_tokenizer", path + ": " + key + " '" + v->string + "' is not a token of " + tok_.path());
    return *id;
  }

  std::map<std::string, std::string> files_;
  HfTokenizer tok_;
  std::string spec_;
  std::int32_t bos_ = -1, eos_ = -1;
  std::string chat_template_, chat_template_where_;  // the Jinja text, and the file it came from
};

}  // namespace

ChatTemplate TextTokenizer::chat_template() const {
  fail("tokenizer", describe() + " has no chat template; chat formats come with a tokenizer.json folder");
}

namespace {

std::string absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

std::unique_ptr<TextTokenizer> load_gpt2_dir(const std::string& dir) {
  const std::filesystem::path d(dir);
  return std::make_unique<Gpt2Text>(Gpt2Tokenizer::load((d / "encoder.json").string(), (d / "vocab.bpe").string()),
                                    "gpt2:" + absolute(dir));
}

// Bytes at the end of `s` that start a UTF-8 character whose continuation bytes are missing.
std::size_t incomplete_utf8_tail(const std::string& s) {
  for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// A tokenizer.json given as the file or the directory holding it, with the files beside it that
// kHfTokenizerFiles names.
std::unique_ptr<TextTokenizer> load_hf(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  const fs::path abs = absolute(file);
  std::map<std::string, std::string> files;
  const auto read = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in)
      fail("hf_tokenizer", p.string() + ": cannot open for reading" +
                               (p == abs ? std::string(" (expected a tokenizer.json)") : std::string()));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) fail("hf_tokenizer", p.string() + ": read error");
    return text.str();
  };
  files["tokenizer.json"] = read(abs);
  for (const char* name : kHfTokenizerFiles) {
    const fs::path beside = abs.parent_path() / name;
    if (std::string(name) != "tokenizer.json" && fs::is_regular_file(beside, ec)) files[name] = read(beside);
  }
  const std::string where = abs.filename() == "tokenizer.json" ? abs.parent_path().string() : abs.string();
  return std::make_unique<HfText>(std::move(files), where, "hf:" + abs.string());
}

bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

}  // namespace

std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& spec) {
  if (spec == "gpt2") return std::make_unique<Gpt2Text>(Gpt2Tokenizer::load_default(), "gpt2");
  if (spec.rfind("gpt2:", 0) == 0 && spec.size() > 5) return load_gpt2_dir(spec.substr(5));
  if (spec.rfind("sp:", 0) == 0 && spec.size() > 3)
    return std::make_unique<SpText>(SpTokenizer::load(absolute(spec.substr(3))));
  if (spec.rfind("hf:", 0) == 0 && spec.size() > 3) return load_hf(spec.substr(3));
  if (ends_with(spec, "tokenizer.json")) return load_hf(spec);
  std::error_code ec;
  if (!spec.empty() && std::filesystem::is_directory(spec, ec)) {
    if (std::filesystem::exists(std::filesystem::path(spec) / "tokenizer.json", ec)) return load_hf(spec);
    return load_gpt2_dir(spec);
  }
  std::string hint;
  if (spec.size() > 6 && spec.substr(spec.size() - 6) == ".model")
    hint = " (for a SentencePiece model write sp:" + spec + ")";
  fail("tokenizer", "unknown tokenizer '" + spec + "'" + hint +
                        "; expected gpt2, gpt2:DIR (encoder.json and vocab.bpe), sp:MODEL (a SentencePiece .model), "
                        "hf:FILE (a tokenizer.json, or a directory holding one) or an existing directory with "
                        "GPT-2's files or a tokenizer.json");
}

std::unique_ptr<TextTokenizer> load_hf_tokenizer_files(const std::map<std::string, std::string>& files,
                                                       const std::string& label) {
  for (const auto& [name, bytes] : files) {
    bool known = false;
    for (const char* k : kHfTokenizerFiles) known = known || name == k;
    if (!known) fail("hf_tokenizer", label + ": '" + name + "' is not one of a tokenizer.json's files");
  }
  if (!files.count("tokenizer.json")) fail("hf_tokenizer", label + ": has no tokenizer.json");
  return std::make_unique<HfText>(files, label, "hf:" + label);
}

std::unique_ptr<TextTokenizer> load_sp_tokenizer_bytes(const std::string& bytes, const std::string& label) {
  return std::make_unique<SpText>(SpTokenizer::load_from_bytes(bytes, label));
}

DecodeStream::DecodeStream(const TextTokenizer& tok, std::vector<std::int32_t> context)
    : tok_(tok), ids_(std::move(context)), shown_(tok.decode(ids_)) {}

std::string DecodeStream::push(std::int32_t id) {
  ids_.push_back(id);
  return emit(false);
}

std::string DecodeStream::finish() { return emit(true); }

std::string DecodeStream::emit(bool final) {
  const std::string text = tok_.decode(ids_);
  std::size_t end = text.size();
  if (!final) end -= incomplete_utf8_tail(text);  // a character whose byte tokens are still to come
  if (end <= shown_.size()) return {};
  // Normally text extends what was shown; if an earlier piece's spelling changed (it cannot be
  // taken back), the text past the same length still follows.
  std::string out = text.substr(shown_.size(), end - shown_.size());
  shown_ = text.substr(0, end);
  return out;
}

}  // namespace llmcc
