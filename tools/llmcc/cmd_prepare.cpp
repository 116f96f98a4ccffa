// llmcc prepare: text files -> token shards for training, in llm.c's token-file format, with
// GPT-2's BPE (the default) or a SentencePiece model (--tokenizer sp:MODEL).
//
// What it writes (also in `llmcc prepare --help` and the README):
//   * Every input file is one document; each document is preceded by the tokenizer's document
//     start: GPT-2's <|endoftext|> (id 50256), as llm.c's dev/data scripts do, or a
//     SentencePiece model's bos (its eos if it has no bos), as llama2.c's pretokenizer does. So
//     the stream is  start doc1 start doc2 ...  With GPT-2 a literal "<|endoftext|>" inside a
//     file also becomes that token (an already delimited corpus keeps its documents).
//   * Token files are version 1 (uint16 ids) when the vocabulary has at most 65,536 ids and
//     version 2 (uint32) above that (--format auto), the same for every shard of a run.
//   * The data set name `tinyshakespeare` stands for Tiny Shakespeare; as in llm.c's
//     dev/data/tinyshakespeare.py every blank-line-separated speech is its own document.
//   * Split: the LAST --val-fraction of the token stream (rounded to whole tokens) is the
//     validation split, the rest the training split. Each must hold at least kMinSplitTokens,
//     otherwise the input is too small and nothing is written.
//   * Files: DIR/train_000000.bin, train_000001.bin, ... and DIR/val_000000.bin, ..., each at
//     most --shard-tokens tokens. Shards of an earlier run with higher numbers are removed so a
//     glob over DIR sees only this run's data.
//   * The tokenizer: DIR/tokenizer.txt names it (and DIR/tokenizer.model holds a copy of a
//     SentencePiece model), so `llmcc train` and `llmcc generate` find it (run_tokenizer.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "llmcc/train/text_tokenizer.h"
#include "llmcc/train/token_file.h"
#include "llmcc/train/tokenizer.h"
#include "run_tokenizer.h"

namespace llmcc::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCmd = "llmcc prepare";
// A training window needs one input token and its target.
constexpr std::int64_t kMinSplitTokens = 2;

// Tiny Shakespeare (Karpathy's char-rnn corpus); the same source scripts/fetch_tinyshakespeare.sh uses.
constexpr const char* kShakespeareName = "tinyshakespeare";
constexpr const char* kShakespeareUrl =
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt";
constexpr std::uintmax_t kShakespeareBytes = 1115394;

struct Document {
  std::string label;  // file path or data set name, for messages
  std::string text;
  bool split_speeches = false;
};

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(kCmd, "input file " + path + " does not exist");
  if (fs::is_directory(path, ec)) fail(kCmd, "input " + path + " is a directory, expected a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kCmd, "cannot open input file " + path + " for reading");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(kCmd, "error reading input file " + path);
  return s.str();
}

bool has_size(const fs::path& p, std::uintmax_t bytes) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && fs::file_size(p, ec) == bytes && !ec;
}

// Finds Tiny Shakespeare: an earlier download in the output directory, then the shared data
// directory ($LLMCC_SHARED_DATA, or ../shared/data found walking up from the working directory
// and the binary), then downloads it with curl into DIR/input.txt when online.
std::string locate_tinyshakespeare(const fs::path& out_dir) {
  const fs::path cached = out_dir / "input.txt";
  if (has_size(cached, kShakespeareBytes)) {
    std::printf("tinyshakespeare: using %s\n", cached.c_str());
    return cached.string();
  }
  std::vector<std::string> tried;
  if (const char* env = std::getenv("LLMCC_SHARED_DATA"); env != nullptr && *env != '\0') {
    const fs::path p = fs::path(env) / "tinyshakespeare" / "input.txt";
    tried.push_back(p.string());
    if (fs::exists(p)) {
      std::printf("tinyshakespeare: using %s\n", p.c_str());
      return p.string();
    }
  }
  if (auto found = find_shared_data("tinyshakespeare/input.txt", &tried)) {
    std::printf("tinyshakespeare: using local copy %s\n", found->c_str());
    return found->string();
  }
  // Online: download. curl is the only network tool we rely on (the setup script installs it
  // with build-essential's dependencies on Debian; if it is missing the error says so).
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  const fs::path tmp = out_dir / ("input.txt.tmp." + std::to_string(::getpid()));
  const std::string command = "curl -fsSL --connect-timeout 5 --max-time 60 -o '" + tmp.string() + "' '" +
                              kShakespeareUrl + "' 2>/dev/null";
  std::printf("tinyshakespeare: no local copy; downloading %s\n", kShakespeareUrl);
  std::fflush(stdout);
  const int rc = std::system(command.c_str());
  if (rc == 0 && has_size(tmp, kShakespeareBytes)) {
    fs::rename(tmp, cached, ec);
    if (!ec) {
      std::printf("tinyshakespeare: downloaded to %s\n", cached.c_str());
      return cached.string();
    }
  }
  fs::remove(tmp, ec);
  std::string list;
  for (const auto& t : tried) list += "\n  " + t;
  fail(kCmd, std::string("cannot get Tiny Shakespeare: the download of ") + kShakespeareUrl +
                 " failed (offline, or curl missing) and no local copy was found; looked in:" + list +
                 "\n(hint: put input.txt in one of those places, set LLMCC_SHARED_DATA, or pass the file: "
                 "--input path/to/input.txt)");
}

// The document start before every document, as llm.c's data scripts do; with split_speeches
// also after every blank line (llm.c's tinyshakespeare.py: text.replace('\n\n', '\n\n<|endoftext|>')).
void encode_document(const TextTokenizer& tok, const Document& doc, std::vector<std::int32_t>& out) {
  const int start_id = tok.document_start();
  if (start_id >= 0) out.push_back(start_id);
  if (!doc.split_speeches) {
    const std::vector<std::int32_t> ids = tok.encode(doc.text);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // GPT-2's encode() cuts the text at every <|endoftext|> first, so encoding the speeches one by
  // one gives the same ids as encoding the joined string.
  std::size_t start = 0;
  while (start < doc.text.size()) {
    const std::size_t blank = doc.text.find("\n\n", start);
    const std::size_t end = blank == std::string::npos ? doc.text.size() : blank + 2;
    const std::vector<std::int32_t> ids = tok.encode(std::string_view(doc.text).substr(start, end - start));
    out.insert(out.end(), ids.begin(), ids.end());
    if (blank != std::string::npos && start_id >= 0) out.push_back(start_id);
    start = end;
  }
}

std::string shard_name(const std::string& split, std::size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s_%06zu.bin", split.c_str(), index);
  return buf;
}

// Writes `tokens` as split_000000.bin, ... of at most shard_tokens each; returns the paths.
std::vector<std::string> write_split(const fs::path& dir, const std::string& split,
                                     std::span<const std::int32_t> tokens, std::int64_t shard_tokens,
                                     int version) {
  std::vector<std::string> paths;
  for (std::size_t begin = 0, index = 0; begin < tokens.size(); begin += static_cast<std::size_t>(shard_tokens), ++index) {
    const std::size_t n = std::min(tokens.size() - begin, static_cast<std::size_t>(shard_tokens));
    const std::string path = (dir / shard_name(split, index)).string();
    write_token_file(path, tokens.subspan(begin, n), version);
    std::printf("  wrote %s (%zu tokens)\n", path.c_str(), n);
    paths.push_back(path);
  }
  return paths;
}

// Removes <split>_NNNNNN.bin files numbered `first` and up: leftovers of an earlier, larger run.
void remove_stale_shards(const fs::path& dir, const std::string& split, std::size_t first) {
  const std::regex pattern(split + "_([0-9]{6,})\\.bin");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    if (std::stoull(m[1].str()) < first) continue;
    fs::remove(entry.path(), ec);
    std::printf("  removed stale %s (from an earlier run)\n", entry.path().c_str());
  }
}

}  // namespace

int run_prepare(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string out_dir, tokenizer_spec = "gpt2", format = "auto";
  double val_fraction = 0.1;
  std::int64_t shard_tokens = 100'000'000;

  ArgParser p("prepare", "Tokenize text files (GPT-2 BPE or SentencePiece) into train/val token shards (llm.c format).");
  p.add("--input", &inputs,
        "text files, or the data set name 'tinyshakespeare'");
  p.add("--out", &out_dir, "output directory for train_NNNNNN.bin and val_NNNNNN.bin (created if missing)");
  p.add("--val-fraction", &val_fraction, "fraction of the token stream, taken from its end, used for validation");
  p.add("--tokenizer", &tokenizer_spec,
        "gpt2 (GPT-2 BPE from $LLMCC_GPT2_TOKENIZER_DIR or ../shared/data/gpt2), gpt2:DIR (encoder.json and "
        "vocab.bpe in DIR) or sp:MODEL (a SentencePiece .model, e.g. from llmcc train-tokenizer)");
  p.add("--shard-tokens", &shard_tokens, "maximum tokens per shard file");
  p.add("--format", &format,
        "token file version: v1 = uint16 ids (llm.c), v2 = uint32 ids, auto = v1 when the vocabulary has at most "
        "65536 ids, else v2");
  p.require("--input");
  p.require("--out");
  p.epilogue(
      "Every input file becomes the document start + its text: GPT-2's '<|endoftext|>' (a literal <|endoftext|>\n"
      "in the text is that token too), or a SentencePiece model's bos (its eos when it has no bos).\n"
      "'tinyshakespeare' is Tiny Shakespeare: <out>/input.txt, else $LLMCC_SHARED_DATA or ../shared/data copy,\n"
      "else downloaded from its public URL with curl; every blank-line-separated speech is a document, as in\n"
      "llm.c's dev/data/tinyshakespeare.py (338,028 tokens). The last --val-fraction of all tokens is the\n"
      "validation split; each split must get at least 2 tokens. <out>/tokenizer.txt records the tokenizer\n"
      "(with a copy of a SentencePiece model in <out>/tokenizer.model) for llmcc train and generate.\n\n"
      "Examples:\n"
      "  llmcc prepare --input tinyshakespeare --out data/tinyshakespeare\n"
      "  llmcc prepare --input a.txt b.txt --out data/mine --val-fraction 0.05\n"
      "  llmcc train-tokenizer --input data/tinyshakespeare/input.txt --vocab-size 512 --out data/tok512\n"
      "  llmcc prepare --input tinyshakespeare --tokenizer sp:data/tok512.model --out data/ts-sp512");
  if (!p.parse(argc, argv)) return 0;

  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    fail(kCmd, "--val-fraction must be in (0, 1) so that neither split is empty, got " + std::to_string(val_fraction));
  // The token-file header counts tokens in an int32.
  if (shard_tokens < kMinSplitTokens || shard_tokens >= (std::int64_t{1} << 31))
    fail(kCmd, "--shard-tokens must be in [" + std::to_string(kMinSplitTokens) + ", 2^31), got " +
                   std::to_string(shard_tokens));
  if (format != "v1" && format != "v2" && format != "auto")
    fail(kCmd, "--format must be auto, v1 or v2, got '" + format + "'");
  if (out_dir.empty()) fail(kCmd, "--out must not be empty");

  // Output directory first, so a typo there fails before minutes of tokenizing.
  const fs::path out(out_dir);
  {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec || !fs::is_directory(out))
      fail(kCmd, "cannot create output directory " + out_dir + (ec ? ": " + ec.message() : ": a file is in the way"));
    if (::access(out.c_str(), W_OK | X_OK) != 0) fail(kCmd, "output directory " + out_dir + " is not writable");
  }

  // Read every input (all errors before any work).
  std::vector<Document> docs;
  for (const std::string& input : inputs) {
    Document d;
    std::error_code ec;
    if (input == kShakespeareName && !fs::exists(input, ec)) {
      d.label = locate_tinyshakespeare(out);
      d.split_speeches = true;
    } else {
      d.label = input;
    }
    d.text = read_text_file(d.label);
    if (d.text.empty()) fail(kCmd, "input file " + d.label + " is empty");
    docs.push_back(std::move(d));
  }

  const std::unique_ptr<TextTokenizer> tok_ptr = load_text_tokenizer(tokenizer_spec);
  const TextTokenizer& tok = *tok_ptr;
  // Chosen from the vocabulary, not the data, so every shard of a run has the same version.
  const int version = format == "v1" ? 1 : format == "v2" ? 2 : tok.vocab_size() > 65536 ? 2 : 1;
  if (version == 1 && tok.vocab_size() > 65536)
    fail(kCmd, "the tokenizer has " + std::to_string(tok.vocab_size()) +
                   " ids, more than --format v1 (uint16) holds; use --format v2 or auto");
  std::printf("tokenizer: %s\n", tok.describe().c_str());
  if (tok.document_start() < 0)
    std::printf("warning: the tokenizer has neither bos nor eos; documents are concatenated without a separator\n");

  std::vector<std::int32_t> tokens;
  for (const Document& d : docs) {
    const std::size_t before = tokens.size();
    encode_document(tok, d, tokens);
    std::printf("%s: %zu bytes -> %zu tokens\n", d.label.c_str(), d.text.size(), tokens.size() - before);
  }

  const auto total = static_cast<std::int64_t>(tokens.size());
  const auto n_val = static_cast<std::int64_t>(std::llround(static_cast<double>(total) * val_fraction));
  const std::int64_t n_train = total - n_val;
  if (n_val < kMinSplitTokens || n_train < kMinSplitTokens) {
    fail(kCmd, "input too small: " + std::to_string(total) + " tokens split into " + std::to_string(n_train) +
                   " train and " + std::to_string(n_val) + " val tokens (--val-fraction " + std::to_string(val_fraction) +
                   "); each split needs at least " + std::to_string(kMinSplitTokens) + " tokens");
  }

  std::printf("total %lld tokens: train %lld, val %lld (last %.4g of the stream)\n", static_cast<long long>(total),
              static_cast<long long>(n_train), static_cast<long long>(n_val), val_fraction);
  const std::span<const std::int32_t> all(tokens);
  const auto train_paths = write_split(out, "train", all.first(static_cast<std::size_t>(n_train)), shard_tokens, version);
  const auto val_paths = write_split(out, "val", all.subspan(static_cast<std::size_t>(n_train)), shard_tokens, version);
  remove_stale_shards(out, "train", train_paths.size());
  remove_stale_shards(out, "val", val_paths.size());
  write_data_tokenizer(out, tok);
  std::printf("  wrote %s (the tokenizer, for llmcc train and generate)\n",
              (out / kDataTokenizerRecord).c_str());
  std::printf("done: %zu train and %zu val shard(s) in %s (token file v%d)\n", train_paths.size(), val_paths.size(),
              out_dir.c_str(), version);
  return 0;
}

}  // namespace llmcc::cli
