#include "run_tokenizer.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "llmcc/error.h"
#include "models/hf_files.h"

namespace llmcc::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "tokenizer";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kWhere, path.string() + ": cannot open for reading");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(kWhere, path.string() + ": read error");
  return s.str();
}

// Writes <path>.tmp and renames it over <path>, so a reader never sees half a file.
void write_bytes(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(kWhere, tmp.string() + ": cannot open for writing");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) fail(kWhere, tmp.string() + ": write error (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail(kWhere, path.string() + ": cannot write (" + ec.message() + ")");
  }
}

const char* kind_of(const TextTokenizer& tok) {
  if (!tok.model_bytes().empty()) return "sentencepiece";
  return tok.files().count("tokenizer.json") ? "tokenizer.json" : "gpt2";
}

// The key=value facts every record carries, checked against the tokenizer it loads.
void describe_into(const TextTokenizer& tok, KeyValues& kv, const std::string& prefix) {
  kv[prefix + "kind"] = kind_of(tok);
  kv[prefix + "vocab_size"] = std::to_string(tok.vocab_size());
  kv[prefix + "bos"] = std::to_string(tok.bos());
  kv[prefix + "eos"] = std::to_string(tok.eos());
  kv[prefix + "document_start"] = std::to_string(tok.document_start());
}

// The record's vocab_size must be the loaded tokenizer's: another file now sits at its path.
void check_record(const KeyValues& kv, const std::string& prefix, const TextTokenizer& tok, const std::string& where) {
  const auto it = kv.find(prefix + "vocab_size");
  if (it != kv.end() && it->second != std::to_string(tok.vocab_size()))
    fail(kWhere, where + " records a " + it->second + "-token tokenizer, but " + tok.describe() +
                     " was loaded from its spec; the tokenizer files changed since (prepare the data again)");
}

}  // namespace

void write_data_tokenizer(const fs::path& dir, const TextTokenizer& tok) {
  KeyValues kv;
  describe_into(tok, kv, "");
  const std::map<std::string, std::string> files = tok.files();
  if (files.empty()) {
    kv["spec"] = tok.spec();
  } else {
    // Copies in dir, named relative to it: the data moves with its tokenizer. A tokenizer.json's
    // files that dir already holds (data prepared into the tokenizer's own folder) stay.
    for (const auto& [name, bytes] : files) {
      std::error_code ec;
      const std::string spec = tok.spec();
      if (spec.rfind("hf:", 0) == 0 && fs::equivalent(fs::path(spec.substr(3)).parent_path() / name, dir / name, ec))
        continue;
      write_bytes(dir / name, bytes);
    }
    kv["spec"] =
        files.count("tokenizer.json") ? std::string("hf:tokenizer.json") : std::string("sp:") + kDataTokenizerModel;
    kv["source"] = tok.spec();
  }
  write_bytes(dir / kDataTokenizerRecord, format_key_values(kv));
}

std::optional<RunTokenizer> read_data_tokenizer(const fs::path& dir) {
  const fs::path record = dir / kDataTokenizerRecord;
  std::error_code ec;
  if (!fs::is_regular_file(record, ec)) return std::nullopt;
  const KeyValues kv = parse_key_values(read_bytes(record), record.string());
  const auto it = kv.find("spec");
  if (it == kv.end() || it->second.empty())
    fail(kWhere, record.string() +
                     " has no 'spec' line (expected e.g. spec=sp:tokenizer.model; "
                     "llmcc prepare writes this file)");
  std::string spec = it->second;
  // A SentencePiece model or a tokenizer.json named relative to the record lives in the data
  // directory.
  for (const char* kind : {"sp:", "hf:"})
    if (spec.rfind(kind, 0) == 0 && fs::path(spec.substr(3)).is_relative())
      spec = kind + (dir / spec.substr(3)).string();
  RunTokenizer t;
  try {
    t.tok = load_text_tokenizer(spec);
  } catch (const Error& e) {
    fail(kWhere, record.string() + " names tokenizer '" + it->second + "', which does not load: " + e.what());
  }
  check_record(kv, "", *t.tok, record.string());
  t.source = record.string();
  return t;
}

std::optional<RunTokenizer> data_tokenizer(const std::vector<std::string>& files) {
  std::optional<RunTokenizer> found;
  std::vector<fs::path> seen;
  for (const std::string& f : files) {
    fs::path dir = fs::path(f).parent_path();
    if (dir.empty()) dir = ".";
    bool done = false;
    for (const fs::path& d : seen) done = done || d == dir;
    if (done) continue;
    seen.push_back(dir);
    std::optional<RunTokenizer> t = read_data_tokenizer(dir);
    if (!t) continue;
    if (!found) {
      found = std::move(t);
    } else if (!same_tokenizer(*found->tok, *t->tok)) {
      fail(kWhere, "the shards were prepared with different tokenizers: " + found->tok->describe() + " (" +
                       found->source + ") and " + t->tok->describe() + " (" + t->source +
                       "); prepare them with one tokenizer");
    }
  }
  return found;
}

bool same_tokenizer(const TextTokenizer& a, const TextTokenizer& b) {
  const std::map<std::string, std::string> af = a.files(), bf = b.files();
  if (!af.empty() || !bf.empty()) return af == bf;
  return a.spec() == b.spec() && a.vocab_size() == b.vocab_size();
}

void store_tokenizer(const TextTokenizer& tok, KeyValues& config, std::map<std::string, std::string>& files) {
  describe_into(tok, config, "tokenizer.");
  config["tokenizer.spec"] = tok.spec();
  for (const auto& [name, bytes] : tok.files()) files[name] = bytes;
}

std::optional<RunTokenizer> checkpoint_tokenizer(const std::string& path) {
  std::error_code ec;
  if (models::is_hf_model(path)) {
    // A Hugging Face folder's tokenizer.json; Llama 2-style repositories ship a SentencePiece
    // tokenizer.model instead.
    const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    const fs::path json = dir / "tokenizer.json";
    if (fs::is_regular_file(json, ec)) return RunTokenizer{load_text_tokenizer("hf:" + json.string()), json.string()};
    const fs::path model = dir / "tokenizer.model";
    if (!fs::is_regular_file(model, ec)) return std::nullopt;
    return RunTokenizer{load_text_tokenizer("sp:" + model.string()), model.string()};
  }
  char head[8] = {};
  std::size_t got = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
  }
  if (got != sizeof head || std::memcmp(head, "LLMCCKPT", 8) != 0) return std::nullopt;  // llm.c's files
  const CheckpointReader reader(path);
  const std::string section = std::string("file.") + kCheckpointTokenizerFile;
  KeyValues kv;
  if (reader.has("config")) kv = parse_key_values(reader.blob("config"), path + " [config]");
  RunTokenizer t;
  if (reader.has(section)) {
    t.tok = load_sp_tokenizer_bytes(reader.blob(section), path + " [" + section + "]");
  } else if (reader.has("file.tokenizer.json")) {
    std::map<std::string, std::string> files;
    for (const char* name : kHfTokenizerFiles)
      if (reader.has(std::string("file.") + name)) files[name] = reader.blob(std::string("file.") + name);
    t.tok = load_hf_tokenizer_files(files, path + " [file.*]");
  } else if (const auto it = kv.find("tokenizer.spec"); it != kv.end()) {
    try {
      t.tok = load_text_tokenizer(it->second);
    } catch (const Error& e) {
      fail(kWhere, path + ": its tokenizer '" + it->second + "' does not load (" + e.what() + "); give --tokenizer");
    }
  } else {
    return std::nullopt;
  }
  check_record(kv, "tokenizer.", *t.tok, path);
  t.source = path;
  return t;
}

void check_tokenizer_fits(const RunTokenizer& t, int model_vocab_size, const std::string& model, const char* where) {
  const int n = t.tok->vocab_size();
  if (n == model_vocab_size) return;
  fail(where, "the tokenizer " + t.tok->describe() + ", from " + t.source + ", has " + std::to_string(n) +
                  " tokens but " + model + " has a vocabulary of " + std::to_string(model_vocab_size) +
                  (n > model_vocab_size ? ": its ids would be outside the model's"
                                        : ": ids the model predicts would not decode") +
                  "; expected the tokenizer the model was (or is to be) trained with");
}

}  // namespace llmcc::cli
