// llmcc prepare: text files -> token shards for training, in llm.c's token-file format, with
// GPT-2's BPE (the default), a SentencePiece model (--tokenizer sp:MODEL) or a tokenizer.json
// (--tokenizer hf:FILE).
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
//     validation split, the rest the training split; or, with --val-tokens N, the FIRST N tokens
//     (llm.c's split of Tiny Shakespeare is the first 32,768). Each must hold at least kMinSplitTokens,
//     otherwise the input is too small and nothing is written.
//   * Files: DIR/train_000000.bin, train_000001.bin, ... and DIR/val_000000.bin, ..., each at
//     most --shard-tokens tokens (at least kMinShardTokens, so a shard holds a training window).
//   * The tokenizer: DIR/tokenizer.txt names it (and copies of a SentencePiece model or of a
//     tokenizer.json's files sit beside it), so `llmcc train` and `llmcc generate` find it
//     (run_tokenizer.h).
//   * --chat FILE: chat data instead of text files. Each line of FILE is a conversation
//     ({"messages": [{"role": ..., "content": ...}]}), rendered in the tokenizer's chat format and
//     encoded with a loss mask (text/chat_data.h): train_000000.mask beside train_000000.bin
//     (io/loss_mask_file.h) marks the assistant's tokens, the only ones training predicts.
//     Conversations are packed one after another; the LAST --val-fraction of the conversations
//     (at least one) is the validation split. A malformed line is an error naming its number.
//   * All or nothing: the data set is written to DIR.tmp-<pid> beside DIR, fsynced, and only then
//     swapped in (DIR -> DIR.old-<pid>, DIR.tmp-<pid> -> DIR, DIR.old-<pid> removed), so a failed
//     run leaves an earlier data set in DIR as it was and shards of two runs never mix. An
//     existing DIR may hold only files prepare writes (is_prepare_file); anything else is refused
//     rather than deleted.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "args.h"
#include "commands.h"
#include "data_sets.h"
#include "llmcc/error.h"
#include "llmcc/text/text_tokenizer.h"
#include "llmcc/io/loss_mask_file.h"
#include "llmcc/io/token_file.h"
#include "llmcc/text/chat_data.h"
#include "llmcc/text/tokenizer.h"
#include "run_tokenizer.h"

namespace llmcc::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCmd = "llmcc prepare";
// A training window needs one input token and its target.
constexpr std::int64_t kMinSplitTokens = 2;
// The data loader reads a window of B*T+1 tokens from ONE shard; prepare does not know B and T,
// so it refuses shards too small for any useful window (1,024 = T 1,023 at B 1, or B 8 x T 127).
constexpr std::int64_t kMinShardTokens = 1024;

struct Document {
  std::string label;  // file path or data set name, for messages
  std::string text;
  bool split_speeches = false;
};

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(kCmd, "input file " + path + " does not exist");
  if (fs::is_directory(path, ec)) fail(kCmd, "input " + path + " is a directory, expected a text file");
  // A FIFO, device or socket never ends (or blocks): only regular files are read.
  if (!fs::is_regular_file(path, ec))
    fail(kCmd, "input " + path + " is not a regular file (a FIFO, device or socket?), expected a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kCmd, "cannot open input file " + path + " for reading");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(kCmd, "error reading input file " + path);
  return s.str();
}

// The document start before every document, as llm.c's data scripts do; with split_speeches
// also after every blank line (llm.c's tinyshakespeare.py: text.replace('\n\n', '\n\n<|endoftext|>')).
// ordinary: "<|endoftext|>" in the text is characters, not GPT-2's token (tiktoken's
// encode_ordinary, which llm.c's scripts use).
void encode_document(const TextTokenizer& tok, const Document& doc, bool ordinary, std::vector<std::int32_t>& out) {
  const int start_id = tok.document_start();
  if (start_id >= 0) out.push_back(start_id);
  const auto encode = [&](std::string_view text) { return ordinary ? tok.encode_ordinary(text) : tok.encode(text); };
  if (!doc.split_speeches) {
    const std::vector<std::int32_t> ids = encode(doc.text);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // GPT-2's encode() cuts the text at every <|endoftext|> first, so encoding the speeches one by
  // one gives the same ids as encoding the joined string.
  std::size_t start = 0;
  while (start < doc.text.size()) {
    const std::size_t blank = doc.text.find("\n\n", start);
    const std::size_t end = blank == std::string::npos ? doc.text.size() : blank + 2;
    const std::vector<std::int32_t> ids = encode(std::string_view(doc.text).substr(start, end - start));
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

// Writes `tokens` as split_000000.bin, ... of at most shard_tokens each into `dir`; returns the
// file names. Messages name the file as it will be called in `shown` once the run succeeds.
// With a mask (one per token), each shard gets its loss mask file beside it.
std::vector<std::string> write_split(const fs::path& dir, const fs::path& shown, const std::string& split,
                                     std::span<const std::int32_t> tokens, std::int64_t shard_tokens, int version,
                                     std::span<const std::uint8_t> mask = {}, std::int32_t row_tokens = 0) {
  std::vector<std::string> names;
  for (std::size_t begin = 0, index = 0; begin < tokens.size();
       begin += static_cast<std::size_t>(shard_tokens), ++index) {
    const std::size_t n = std::min(tokens.size() - begin, static_cast<std::size_t>(shard_tokens));
    const std::string name = shard_name(split, index);
    write_token_file((dir / name).string(), tokens.subspan(begin, n), version);
    if (mask.empty()) {
      std::printf("  wrote %s (%zu tokens)\n", (shown / name).c_str(), n);
    } else {
      const std::span<const std::uint8_t> part = mask.subspan(begin, n);
      write_loss_mask_file(loss_mask_path((dir / name).string()), part, row_tokens);
      std::printf("  wrote %s (%zu tokens, %zu trained) and its loss mask\n", (shown / name).c_str(), n,
                  static_cast<std::size_t>(std::count(part.begin(), part.end(), std::uint8_t{1})));
    }
    names.push_back(name);
  }
  return names;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The names prepare writes in its output directory: shards, the tokenizer record and model, the
// Tiny Shakespeare download, and the temporary names of those writes (a crashed earlier version
// that wrote in place can leave them): (train|val)_<6 or more digits>.(bin|mask) with an optional .tmp; tokenizer.txt,
// the tokenizer's files (tokenizer.model; tokenizer.json, tokenizer_config.json,
// chat_template.jinja) and input.txt with an optional .tmp.<digits>.
bool is_prepare_file(std::string_view name) {
  for (const std::string_view split : {"train_", "val_"}) {
    if (!name.starts_with(split)) continue;
    std::string_view index = name.substr(split.size());
    if (index.ends_with(".tmp")) index.remove_suffix(4);
    if (!index.ends_with(".bin") && !index.ends_with(".mask")) return false;
    index.remove_suffix(index.ends_with(".bin") ? 4 : 5);
    return index.size() >= 6 && all_digits(index);
  }
  for (const std::string_view file : {"tokenizer.txt", "tokenizer.model", "tokenizer.json", "tokenizer_config.json",
                                      "chat_template.jinja", "input.txt"}) {
    if (!name.starts_with(file)) continue;
    const std::string_view rest = name.substr(file.size());
    if (rest.empty() || (rest.starts_with(".tmp.") && all_digits(rest.substr(5)))) return true;
  }
  return false;
}

// Refuses an existing output directory holding anything prepare did not write: replacing the
// directory would delete it.
void check_replaceable(const fs::path& out, const std::string& out_dir) {
  std::error_code ec;
  std::vector<std::string> foreign;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_ec;
    if (!is_prepare_file(name) || entry.is_directory(type_ec)) foreign.push_back(name);
  }
  if (ec) fail(kCmd, "cannot list output directory " + out_dir + ": " + ec.message());
  if (foreign.empty()) return;
  std::sort(foreign.begin(), foreign.end());
  std::string list;
  for (std::size_t i = 0; i < foreign.size() && i < 5; ++i) list += (i ? ", " : "") + foreign[i];
  if (foreign.size() > 5) list += ", ... (" + std::to_string(foreign.size()) + " in all)";
  fail(kCmd, "output directory " + out_dir + " holds files llmcc prepare did not write (" + list +
                 "); prepare replaces the whole directory, so it will not overwrite it\n"
                 "(hint: pass a new or empty --out, or move those files elsewhere)");
}

// fsync, so the data set is on disk before it is renamed into place. A file's error (a delayed
// write failing for lack of space) is fatal; a directory's is best effort (not every file system
// can fsync one).
void sync_path(const fs::path& path, bool is_dir) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
  if (fd < 0) {
    if (is_dir) return;
    fail(kCmd, "cannot open " + path.string() + " to sync it: " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !is_dir) fail(kCmd, "cannot sync " + path.string() + ": " + std::strerror(err) + " (disk full?)");
}

void sync_tree(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec)) sync_path(entry.path(), false);
  if (ec) fail(kCmd, "cannot list " + dir.string() + ": " + ec.message());
  sync_path(dir, true);
}

// The new data set being written; removed unless it was moved into place.
struct WorkDir {
  fs::path path;
  bool committed = false;
  WorkDir() = default;
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir() {
    if (committed || path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Swaps the complete new data set `work` in as `out`. Between the two renames `out` does not
// exist: a crash there leaves the old data set, complete, in <out>.old-<pid> and the new one,
// complete, in <out>.tmp-<pid>; a user who finds no <out> renames either back. A crash after the
// second rename leaves the new data set in <out> and at most a stale <out>.old-<pid>.
void replace_output(WorkDir& work, const fs::path& out, const std::string& out_dir) {
  std::error_code ec;
  const bool had_old = fs::exists(out, ec);
  const fs::path old = out.string() + ".old-" + std::to_string(::getpid());
  if (had_old) {
    check_replaceable(out, out_dir);  // again: files may have appeared while we tokenized
    fs::remove_all(old, ec);          // a leftover of a crashed run with the same pid
    fs::rename(out, old, ec);
    if (ec)
      fail(kCmd, "cannot move the previous data set " + out_dir + " aside to " + old.string() + ": " + ec.message());
  }
  fs::rename(work.path, out, ec);
  if (ec) {
    const std::string why = ec.message();
    if (had_old) {
      std::error_code back_ec;
      fs::rename(old, out, back_ec);
    }
    fail(kCmd, "cannot move the new data set " + work.path.string() + " to " + out_dir + ": " + why);
  }
  work.committed = true;
  sync_path(out.parent_path(), true);
  if (had_old) {
    fs::remove_all(old, ec);
    if (ec) std::printf("warning: cannot remove the previous data set %s: %s\n", old.c_str(), ec.message().c_str());
  }
}

}  // namespace

// --chat: conversations -> packed token shards with loss masks (see the top of this file).
// The conversations of one split in rows of `row` tokens (row > 0: each from its first token,
// cut to `row` tokens or padded with `pad` under mask 0) or packed (row 0), as shards of at most
// about shard_tokens tokens: a padded split's shards hold whole rows and one more pad token each,
// so that every row's last target exists in its own shard.
struct SplitTokens {
  std::vector<std::int32_t> ids;
  std::vector<std::uint8_t> mask;
  std::int64_t shard_tokens = 0;  // tokens per shard (the last may hold fewer)
  std::size_t cut = 0;            // padded: conversations longer than a row, cut to it
  std::size_t cut_trained = 0;    // the trained tokens the cuts dropped
};
SplitTokens split_tokens(std::span<const ChatTokens> conversations, std::int32_t row, std::int32_t pad,
                         std::int64_t shard_tokens) {
  SplitTokens out;
  out.shard_tokens = shard_tokens;
  if (row == 0) {
    for (const ChatTokens& c : conversations) {
      out.ids.insert(out.ids.end(), c.ids.begin(), c.ids.end());
      out.mask.insert(out.mask.end(), c.mask.begin(), c.mask.end());
    }
    return out;
  }
  const std::int64_t rows_per_shard = std::max<std::int64_t>(1, (shard_tokens - 1) / row);
  out.shard_tokens = rows_per_shard * row + 1;
  for (std::size_t c = 0; c < conversations.size(); ++c) {
    const ChatTokens& conv = conversations[c];
    const std::size_t keep = std::min(conv.ids.size(), static_cast<std::size_t>(row));
    if (keep < conv.ids.size()) {
      ++out.cut;
      out.cut_trained += static_cast<std::size_t>(
          std::count(conv.mask.begin() + static_cast<std::ptrdiff_t>(keep), conv.mask.end(), std::uint8_t{1}));
    }
    out.ids.insert(out.ids.end(), conv.ids.begin(), conv.ids.begin() + static_cast<std::ptrdiff_t>(keep));
    out.mask.insert(out.mask.end(), conv.mask.begin(), conv.mask.begin() + static_cast<std::ptrdiff_t>(keep));
    out.ids.insert(out.ids.end(), static_cast<std::size_t>(row) - keep, pad);
    out.mask.insert(out.mask.end(), static_cast<std::size_t>(row) - keep, std::uint8_t{0});
    // A shard's last row, or the split's: the one more token.
    if ((c + 1) % static_cast<std::size_t>(rows_per_shard) == 0 || c + 1 == conversations.size()) {
      out.ids.push_back(pad);
      out.mask.push_back(0);
    }
  }
  return out;
}

void prepare_chat(const std::string& chat_file, const std::string& tokenizer_spec, const std::string& format,
                  double val_fraction, std::int64_t shard_tokens, std::int32_t pad_to, const std::string& out_dir,
                  const fs::path& out, WorkDir& work) {
  const std::string text = read_text_file(chat_file);
  const std::unique_ptr<TextTokenizer> tok_ptr = load_text_tokenizer(tokenizer_spec);
  const TextTokenizer& tok = *tok_ptr;
  const ChatTemplate tmpl = tok.chat_template();
  const int version = format == "v1" ? 1 : format == "v2" ? 2 : tok.vocab_size() > 65536 ? 2 : 1;
  if (version == 1 && tok.vocab_size() > 65536)
    fail(kCmd, "the tokenizer has " + std::to_string(tok.vocab_size()) +
                   " ids, more than --format v1 (uint16) holds; use --format v2 or auto");
  std::printf("tokenizer: %s; chat format: %s\n", tok.describe().c_str(), tmpl.describe().c_str());
  std::vector<ChatTokens> conversations;
  std::size_t line_no = 0, without_reply = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = std::string_view(text).substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // a blank line
    const std::string where = chat_file + " line " + std::to_string(line_no);
    const std::vector<ChatMessage> messages = parse_conversation(line, where);
    conversations.push_back(encode_conversation(tok, tmpl, messages, where));
    const std::vector<std::uint8_t>& m = conversations.back().mask;
    if (std::find(m.begin(), m.end(), std::uint8_t{1}) == m.end()) ++without_reply;
  }
  if (conversations.size() < 2)
    fail(kCmd, chat_file + " holds " + std::to_string(conversations.size()) +
                   " conversation(s); the train and validation splits need one each at least");
  if (without_reply > 0)
    std::printf("warning: %zu conversation(s) have no assistant message: they train nothing\n", without_reply);
  const std::size_t n = conversations.size();
  const std::size_t n_val =
      std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(static_cast<double>(n) * val_fraction)), 1, n - 1);
  // Pads are never read as targets (mask 0) and come after their row's conversation, so no
  // trained position attends to them: any id would do; the end of text reads naturally.
  const std::int32_t pad = tok.eos() >= 0 ? tok.eos() : std::max(tok.document_start(), 0);
  const std::span<const ChatTokens> all(conversations);
  const SplitTokens split[2] = {split_tokens(all.first(n - n_val), pad_to, pad, shard_tokens),
                                split_tokens(all.last(n_val), pad_to, pad, shard_tokens)};
  std::printf(
      "%zu conversations: train %zu (%zu tokens), val %zu (the last; %zu tokens)%s\n", n, n - n_val,
      split[0].ids.size(), n_val, split[1].ids.size(),
      pad_to > 0
          ? (", one per row of " + std::to_string(pad_to) + " tokens padded with id " + std::to_string(pad)).c_str()
          : ", packed");
  const std::size_t cut = split[0].cut + split[1].cut;
  if (cut > 0)
    std::printf(
        "warning: %zu conversation(s) are longer than --pad-to %d tokens and were cut to it, dropping %zu "
        "trained token(s)\n",
        cut, pad_to, split[0].cut_trained + split[1].cut_trained);
  const fs::path shown(out_dir);
  const auto train_names =
      write_split(work.path, shown, "train", split[0].ids, split[0].shard_tokens, version, split[0].mask, pad_to);
  const auto val_names =
      write_split(work.path, shown, "val", split[1].ids, split[1].shard_tokens, version, split[1].mask, pad_to);
  write_data_tokenizer(work.path, tok);
  std::printf("  wrote %s (the tokenizer, for llmcc train and generate)\n", (shown / kDataTokenizerRecord).c_str());
  sync_tree(work.path);
  replace_output(work, out, out_dir);
  std::printf("done: %zu train and %zu val shard(s) with loss masks in %s (token file v%d)\n", train_names.size(),
              val_names.size(), out_dir.c_str(), version);
}

int run_prepare(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string out_dir, tokenizer_spec = "gpt2", format = "auto", chat_file;
  double val_fraction = 0.1;
  std::int64_t val_tokens = 0;
  bool ordinary = false;
  std::int64_t shard_tokens = 100'000'000;
  int pad_to = 0;

  ArgParser p("prepare",
              "Tokenize text files (GPT-2 BPE or SentencePiece) into train/val token shards (llm.c format).");
  p.add("--input", &inputs, "text files, or the data set name 'tinyshakespeare'");
  p.add("--chat", &chat_file,
        "instead of --input: chat data, one conversation per line ({\"messages\": [{\"role\": ..., \"content\": "
        "...}]}), in the tokenizer's chat format with a loss mask on the assistant's tokens (needs a tokenizer.json "
        "with a chat template, --tokenizer hf:...)");
  p.add("--pad-to", &pad_to,
        "with --chat: one conversation per row of this many tokens, from its first token, padded (untrained) or "
        "cut to it; train with --seq-len equal to it (0: conversations packed one after another)");
  p.add("--out", &out_dir,
        "output directory for train_NNNNNN.bin and val_NNNNNN.bin (created if missing; an earlier data set there "
        "is replaced as a whole, only once the new one is complete)");
  p.add("--val-fraction", &val_fraction, "fraction of the token stream, taken from its end, used for validation");
  p.add("--val-tokens", &val_tokens,
        "instead of --val-fraction: the FIRST N tokens are the validation split (llm.c's Tiny Shakespeare split is "
        "--val-tokens 32768)");
  p.add("--ordinary", &ordinary,
        "GPT-2: a literal '<|endoftext|>' in the text is ordinary characters, not the token 50256 (as llm.c's "
        "scripts encode)");
  p.add("--tokenizer", &tokenizer_spec,
        "gpt2 (GPT-2 BPE: $LLMCC_GPT2_TOKENIZER_DIR, ../shared/data/gpt2 or ~/.cache/llmcc/gpt2, else downloaded), "
        "gpt2:DIR (encoder.json and "
        "vocab.bpe in DIR), sp:MODEL (a SentencePiece .model, e.g. from llmcc train-tokenizer) or hf:FILE "
        "(a Hugging Face tokenizer.json, or a directory holding one)");
  p.add("--shard-tokens", &shard_tokens, "maximum tokens per shard file (at least 1024)");
  p.add("--format", &format,
        "token file version: v1 = uint16 ids (llm.c), v2 = uint32 ids, auto = v1 when the vocabulary has at most "
        "65536 ids, else v2");
  p.require("--out");
  p.epilogue(
      "Every input file becomes the document start + its text: GPT-2's '<|endoftext|>' (a literal <|endoftext|>\n"
      "in the text is that token too), or a SentencePiece model's bos (its eos when it has no bos).\n"
      "'tinyshakespeare' is Tiny Shakespeare, from $LLMCC_SHARED_DATA or ../shared/data, else the download cache\n"
      "(~/.cache/llmcc), else downloaded there with curl; every blank-line-separated speech is a document, as in\n"
      "llm.c's dev/data/tinyshakespeare.py (338,028 tokens). The last --val-fraction of all tokens is the\n"
      "validation split (or the first --val-tokens); each split must get at least 2 tokens. <out>/tokenizer.txt "
      "records the tokenizer\n"
      "(with a copy of a SentencePiece model or of a tokenizer.json's files in <out>) for llmcc train and\n"
      "generate.\n\n"
      "Examples:\n"
      "  llmcc prepare --input tinyshakespeare --out data/tinyshakespeare\n"
      "  llmcc prepare --input a.txt b.txt --out data/mine --val-fraction 0.05\n"
      "  llmcc prepare --input tinyshakespeare --out data/ts-llmc --val-tokens 32768 --ordinary   # llm.c's split\n"
      "  llmcc train-tokenizer --input tinyshakespeare --vocab-size 512 --out data/tok512\n"
      "  llmcc prepare --input tinyshakespeare --tokenizer sp:data/tok512.model --out data/ts-sp512\n"
      "  llmcc prepare --chat chats.jsonl --tokenizer hf:SmolLM2-360M-Instruct --out data/chat   # loss masks");
  if (!p.parse(argc, argv)) return 0;

  if (p.given("--input") == p.given("--chat"))
    fail(kCmd, "give --input (text files) or --chat (a JSON-lines file of conversations), one of them");
  if (p.given("--pad-to") && !p.given("--chat")) fail(kCmd, "--pad-to pads conversations: give it with --chat");
  if (pad_to < 0 || pad_to == 1)
    fail(kCmd, "--pad-to must be at least 2 tokens (or 0: packed), got " + std::to_string(pad_to));
  if (p.given("--chat") && p.given("--val-tokens"))
    fail(kCmd,
         "--val-tokens does not apply to --chat: the last --val-fraction of the conversations is the validation "
         "split");
  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    fail(kCmd, "--val-fraction must be in (0, 1) so that neither split is empty, got " + std::to_string(val_fraction));
  if (p.given("--val-tokens") && p.given("--val-fraction"))
    fail(kCmd, "--val-tokens and --val-fraction exclude each other (the first N tokens, or the last fraction)");
  if (p.given("--val-tokens") && val_tokens < kMinSplitTokens)
    fail(kCmd,
         "--val-tokens must be at least " + std::to_string(kMinSplitTokens) + ", got " + std::to_string(val_tokens));
  if (shard_tokens < kMinShardTokens)
    fail(kCmd, "--shard-tokens " + std::to_string(shard_tokens) + " is below the floor of " +
                   std::to_string(kMinShardTokens) +
                   " tokens: training reads each window of B*T+1 tokens from one shard, and smaller shards "
                   "would be too short for one");
  // The token-file header counts tokens in an int32.
  if (shard_tokens >= (std::int64_t{1} << 31))
    fail(kCmd, "--shard-tokens must be below 2^31 (the token file counts tokens in an int32), got " +
                   std::to_string(shard_tokens));
  if (format != "v1" && format != "v2" && format != "auto")
    fail(kCmd, "--format must be auto, v1 or v2, got '" + format + "'");
  if (out_dir.empty()) fail(kCmd, "--out must not be empty");

  // Output directory first, so a typo there fails before minutes of tokenizing. The new data set
  // goes to a work directory beside it (same file system, so the final rename is atomic).
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "data/" names "data"
  WorkDir work;
  {
    std::error_code ec;
    if (fs::is_symlink(out, ec)) {
      out = fs::canonical(out, ec);  // replace the directory it points to, keep the link
      if (ec) fail(kCmd, "output directory " + out_dir + " is a dangling symbolic link");
    }
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      fail(kCmd, "cannot create output directory " + out_dir + ": a file is in the way");
    if (fs::is_directory(out, ec)) check_replaceable(out, out_dir);
    fs::create_directories(out.parent_path(), ec);
    if (ec || !fs::is_directory(out.parent_path()))
      fail(kCmd, "cannot create output directory " + out_dir + ": " +
                     (ec ? ec.message() : out.parent_path().string() + " is not a directory"));
    const fs::path path = out.string() + ".tmp-" + std::to_string(::getpid());
    fs::remove_all(path, ec);  // a leftover of a crashed run with the same pid
    if (!fs::create_directory(path, ec) || ec)
      fail(kCmd, "cannot create output directory " + out_dir + ": cannot create " + path.string() +
                     " beside it: " + (ec ? ec.message() : "it exists"));
    work.path = path;
  }

  if (p.given("--chat")) {
    prepare_chat(chat_file, tokenizer_spec, format, val_fraction, shard_tokens, pad_to, out_dir, out, work);
    return 0;
  }

  // Read every input (all errors before any work).
  std::vector<Document> docs;
  for (const std::string& input : inputs) {
    Document d;
    std::error_code ec;
    if (is_data_set_name(input)) {
      d.label = data_set_path(input, kCmd);
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
    encode_document(tok, d, ordinary, tokens);
    std::printf("%s: %zu bytes -> %zu tokens\n", d.label.c_str(), d.text.size(), tokens.size() - before);
  }

  const auto total = static_cast<std::int64_t>(tokens.size());
  const bool val_first = p.given("--val-tokens");
  const std::int64_t n_val = val_first
                                 ? std::min(val_tokens, total)
                                 : static_cast<std::int64_t>(std::llround(static_cast<double>(total) * val_fraction));
  const std::int64_t n_train = total - n_val;
  const std::string rule =
      val_first ? "--val-tokens " + std::to_string(val_tokens) : "--val-fraction " + std::to_string(val_fraction);
  if (n_val < kMinSplitTokens || n_train < kMinSplitTokens) {
    fail(kCmd, "input too small: " + std::to_string(total) + " tokens split into " + std::to_string(n_train) +
                   " train and " + std::to_string(n_val) + " val tokens (" + rule + "); each split needs at least " +
                   std::to_string(kMinSplitTokens) + " tokens");
  }

  if (val_first)
    std::printf("total %lld tokens: val %lld (the first), train %lld\n", static_cast<long long>(total),
                static_cast<long long>(n_val), static_cast<long long>(n_train));
  else
    std::printf("total %lld tokens: train %lld, val %lld (last %.4g of the stream)\n", static_cast<long long>(total),
                static_cast<long long>(n_train), static_cast<long long>(n_val), val_fraction);
  const std::span<const std::int32_t> all(tokens);
  const std::span<const std::int32_t> train_part =
      val_first ? all.subspan(static_cast<std::size_t>(n_val)) : all.first(static_cast<std::size_t>(n_train));
  const std::span<const std::int32_t> val_part =
      val_first ? all.first(static_cast<std::size_t>(n_val)) : all.subspan(static_cast<std::size_t>(n_train));
  const fs::path shown(out_dir);
  const auto train_names = write_split(work.path, shown, "train", train_part, shard_tokens, version);
  const auto val_names = write_split(work.path, shown, "val", val_part, shard_tokens, version);
  write_data_tokenizer(work.path, tok);
  std::printf("  wrote %s (the tokenizer, for llmcc train and generate)\n", (shown / kDataTokenizerRecord).c_str());
  sync_tree(work.path);
  replace_output(work, out, out_dir);
  std::printf("done: %zu train and %zu val shard(s) in %s (token file v%d)\n", train_names.size(), val_names.size(),
              out_dir.c_str(), version);
  return 0;
}

}  // namespace llmcc::cli
