// `llmcc prepare` and `llmcc tokenize` run as a user runs them (the built binary, LLMCC_BINARY):
// shards decode back to the input, splits have the documented sizes, bad input exits 1 with a
// message naming the problem and writes nothing, and a run that fails part-way leaves an earlier
// data set in --out as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/io/token_file.h"
#include "llmcc/text/tokenizer.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "test_data.h"

namespace {

namespace fs = std::filesystem;
using llmcc::Gpt2Tokenizer;

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;
using llmcc::test::run_llmcc_after;
using llmcc::test::slurp;

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

const Gpt2Tokenizer* tokenizer() {
  static const std::unique_ptr<Gpt2Tokenizer> tok = []() -> std::unique_ptr<Gpt2Tokenizer> {
    if (!llmcc::test::have_data("gpt2/encoder.json")) return nullptr;
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load_default());
  }();
  return tok.get();
}

#define REQUIRE_TOKENIZER()                \
  LLMCC_REQUIRE_DATA("gpt2/encoder.json"); \
  [[maybe_unused]] const Gpt2Tokenizer* tok = tokenizer()

// Every <split>_NNNNNN.bin in dir, in order (stops at the first missing number).
std::vector<std::string> shards(const fs::path& dir, const std::string& split) {
  std::vector<std::string> paths;
  for (int i = 0;; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%s_%06d.bin", split.c_str(), i);
    if (!fs::exists(dir / name)) break;
    paths.push_back((dir / name).string());
  }
  return paths;
}

std::vector<std::int32_t> read_all(const std::vector<std::string>& paths) {
  std::vector<std::int32_t> all;
  for (const auto& p : paths) {
    const auto t = llmcc::read_token_file(p);
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

std::size_t count_bin_files(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".bin") ++n;
  return n;
}

// Every file in dir (name -> bytes), to compare a data set before and after a run.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = slurp(e.path().string());
  return files;
}

// Work or set-aside directories (<out>.tmp-<pid>, <out>.old-<pid>) left beside the output.
std::vector<std::string> leftovers(const fs::path& parent) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(parent)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos) names.push_back(name);
  }
  return names;
}

std::string repeat(const std::string& s, std::size_t n) {
  std::string r;
  for (std::size_t i = 0; i < n; ++i) r += s;
  return r;
}

const std::string kDocA =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n";
const std::string kDocB =
    "Caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 numbers 12345, tabs\tand  spaces, and <|endoftext|> inside.\n";

TEST(CliPrepare, ShardsDecodeToTheInputWithTheDocumentedSplit) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  const std::string doc_a = repeat(kDocA, 80), doc_b = repeat(kDocB, 10);  // a few shards of 1,024
  write_file(dir.file("a.txt"), doc_a);
  write_file(dir.file("b.txt"), doc_b);
  const fs::path out = dir.path / "data";
  const CliResult r = run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), dir.file("b.txt"), "--out", out.string(),
                                      "--val-fraction", "0.25", "--shard-tokens", "1024"});
  ASSERT_EQ(r.code, 0) << r.err;

  // The stream is eot a eot b (a literal <|endoftext|> in b is the eot token too).
  std::vector<std::int32_t> expected = {tok->eot()};
  for (int32_t id : tok->encode(doc_a)) expected.push_back(id);
  expected.push_back(tok->eot());
  for (int32_t id : tok->encode(doc_b)) expected.push_back(id);

  const auto train_paths = shards(out, "train"), val_paths = shards(out, "val");
  const auto train = read_all(train_paths), val = read_all(val_paths);
  const auto total = static_cast<std::int64_t>(expected.size());
  const auto n_val = std::llround(static_cast<double>(total) * 0.25);
  EXPECT_EQ(static_cast<std::int64_t>(val.size()), n_val);
  EXPECT_EQ(static_cast<std::int64_t>(train.size()), total - n_val);
  // At most 1,024 tokens a shard, all full but the last of each split.
  EXPECT_GT(train_paths.size(), 1u);
  EXPECT_EQ(train_paths.size(), (train.size() + 1023) / 1024);
  EXPECT_EQ(val_paths.size(), (val.size() + 1023) / 1024);
  EXPECT_EQ(count_bin_files(out), train_paths.size() + val_paths.size());
  for (const auto& p : train_paths) EXPECT_EQ(llmcc::TokenFile(p).version(), 1) << p;

  std::vector<std::int32_t> all = train;
  all.insert(all.end(), val.begin(), val.end());
  EXPECT_EQ(all, expected);
  EXPECT_EQ(tok->decode(all), "<|endoftext|>" + doc_a + "<|endoftext|>" + doc_b);
  EXPECT_TRUE(leftovers(dir.path).empty());
  // The report names the counts and the files.
  EXPECT_NE(r.out.find("train " + std::to_string(train.size()) + ", val " + std::to_string(val.size())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("val_000000.bin"), std::string::npos) << r.out;
}

// A second run over an earlier data set replaces it as a whole: 3+ train shards become 1, no
// shard of the first run survives, and nothing is left beside the directory.
TEST(CliPrepare, FormatV2WritesUint32AndARerunReplacesTheWholeDataSet) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  write_file(dir.file("big.txt"), repeat(kDocB, 120));
  write_file(dir.file("a.txt"), kDocA);
  const std::string out = dir.file("data");
  ASSERT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("big.txt"), "--out", out, "--shard-tokens", "1024"}).code,
            0);
  ASSERT_GE(shards(out, "train").size(), 3u);

  const CliResult r = run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), "--out", out, "--format", "v2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(shards(out, "train").size(), 1u);
  EXPECT_EQ(shards(out, "val").size(), 1u);
  EXPECT_EQ(count_bin_files(out), 2u) << r.out;
  EXPECT_EQ(snapshot(out).size(), 3u);  // the two shards and tokenizer.txt
  EXPECT_TRUE(fs::exists(fs::path(out) / "tokenizer.txt"));
  EXPECT_EQ(llmcc::TokenFile(out + "/train_000000.bin").version(), 2);
  auto all = read_all({out + "/train_000000.bin", out + "/val_000000.bin"});
  EXPECT_EQ(tok->decode(all), "<|endoftext|>" + kDocA);
  EXPECT_TRUE(leftovers(dir.path).empty());
}

// A run that fails after writing its train shard (the val shard hits the file-size limit, as a
// full disk would) leaves the earlier data set byte for byte and no work directory behind.
TEST(CliPrepare, AFailedRunLeavesThePreviousDataSetAsItWas) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  write_file(dir.file("old.txt"), repeat(kDocB, 120));
  const std::string out = dir.file("data");
  ASSERT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("old.txt"), "--out", out, "--shard-tokens", "1024"}).code,
            0);
  const auto before = snapshot(out);
  ASSERT_GE(before.size(), 4u);

  // ~6,000 tokens, 20% train: the train shard fits in 4 KiB, the val shard needs more than 8 KiB
  // (ulimit -f counts 512- or 1024-byte blocks depending on the shell; either way 8 blocks cut
  // between the two).
  const std::size_t reps = 6000 / tok->encode(kDocA).size() + 1;
  const std::string text = repeat(kDocA, reps);
  write_file(dir.file("new.txt"), text);
  const auto n = static_cast<double>(tok->encode(text).size() + 1);
  const auto n_val = static_cast<std::size_t>(std::llround(n * 0.8));
  const std::size_t n_train = static_cast<std::size_t>(n) - n_val;
  ASSERT_LT(1024 + 2 * n_train, 4096u);
  ASSERT_GT(1024 + 2 * n_val, 8192u);

  const CliResult r = run_llmcc_after(
      dir, "ulimit -f 8; trap '' XFSZ",
      {"prepare", "--input", dir.file("new.txt"), "--out", out, "--val-fraction", "0.8", "--shard-tokens", "100000"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("train_000000.bin"), std::string::npos) << "the failure should come after the train shard\n"
                                                               << r.out;
  EXPECT_NE(r.err.find("val_000000.bin"), std::string::npos) << r.err;
  EXPECT_TRUE(snapshot(out) == before) << "the earlier data set in " << out << " changed";
  EXPECT_TRUE(leftovers(dir.path).empty());
}

// An --out holding files prepare did not write is refused, not replaced (that would delete them).
TEST(CliPrepare, RefusesAnOutputDirectoryHoldingOtherFiles) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  write_file(dir.file("a.txt"), kDocA);
  const std::string out = dir.file("data");
  ASSERT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), "--out", out}).code, 0);
  write_file(out + "/notes.md", "mine");
  const auto before = snapshot(out);

  const CliResult r = run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), "--out", out, "--format", "v2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds files llmcc prepare did not write (notes.md)"), std::string::npos) << r.err;
  EXPECT_TRUE(snapshot(out) == before);
  EXPECT_TRUE(leftovers(dir.path).empty());
  // An existing empty directory is fine.
  const std::string empty = dir.file("empty");
  fs::create_directory(empty);
  EXPECT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), "--out", empty}).code, 0);
  EXPECT_EQ(count_bin_files(empty), 2u);
}

// The data-set name: llm.c's dev/data/tinyshakespeare.py makes every blank-line-separated speech
// a document and gets 338,028 tokens (32,768 val + 305,260 train in its split).
// --val-tokens N: the first N tokens are validation (llm.c's split); --ordinary: a literal
// <|endoftext|> in the text is characters, so the eot token only starts documents.
TEST(CliPrepare, ValTokensTakesTheFirstTokensAndOrdinaryKeepsLiteralEndOfText) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  const std::string doc_b = repeat(kDocB, 30);
  write_file(dir.file("b.txt"), doc_b);
  const fs::path out = dir.path / "data";
  const CliResult r = run_llmcc(
      dir, {"prepare", "--input", dir.file("b.txt"), "--out", out.string(), "--val-tokens", "100", "--ordinary"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::int32_t> expected = {tok->eot()};
  for (int32_t id : tok->encode_ordinary(doc_b)) expected.push_back(id);
  ASSERT_NE(tok->encode(doc_b), tok->encode_ordinary(doc_b));  // the text holds the literal
  const auto val = read_all(shards(out, "val")), train = read_all(shards(out, "train"));
  EXPECT_EQ(val, std::vector<std::int32_t>(expected.begin(), expected.begin() + 100));
  EXPECT_EQ(train, std::vector<std::int32_t>(expected.begin() + 100, expected.end()));
  EXPECT_EQ(std::count(expected.begin(), expected.end(), tok->eot()), 1);
  EXPECT_NE(r.out.find("val 100 (the first)"), std::string::npos) << r.out;

  CliResult bad = run_llmcc(dir, {"prepare", "--input", dir.file("b.txt"), "--out", dir.file("x"), "--val-tokens",
                                  "100", "--val-fraction", "0.2"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--val-tokens and --val-fraction exclude each other"), std::string::npos) << bad.err;
  bad = run_llmcc(dir, {"prepare", "--input", dir.file("b.txt"), "--out", dir.file("x"), "--val-tokens", "100000"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("input too small"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("(--val-tokens 100000)"), std::string::npos) << bad.err;
}

TEST(CliPrepare, TinyShakespeareByNameMatchesLlmc) {
  REQUIRE_TOKENIZER();
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  const auto input = llmcc::find_data_file("tinyshakespeare/input.txt");
  llmcc::test::TempDir dir;
  const std::string out = dir.file("ts");
  const CliResult r = run_llmcc(dir, {"prepare", "--input", "tinyshakespeare", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto train = llmcc::read_token_file(out + "/train_000000.bin");
  const auto val = llmcc::read_token_file(out + "/val_000000.bin");
  EXPECT_EQ(train.size() + val.size(), 338028u);
  EXPECT_EQ(val.size(), 33803u);  // round(0.1 * 338028)
  EXPECT_EQ(train.front(), tok->eot());
  std::vector<std::int32_t> all = train;
  all.insert(all.end(), val.begin(), val.end());
  std::string expected = "<|endoftext|>" + slurp(input->string());
  // eot after every blank line
  for (std::size_t at = expected.find("\n\n"); at != std::string::npos; at = expected.find("\n\n", at + 15))
    expected.insert(at + 2, "<|endoftext|>");
  const std::string decoded = tok->decode(all);
  EXPECT_EQ(decoded.size(), expected.size());
  EXPECT_TRUE(decoded == expected) << "the shards do not decode to Tiny Shakespeare with llm.c's separators";

  // llm.c's split: validation is the first 32,768 tokens.
  const CliResult split = run_llmcc(dir, {"prepare", "--input", "tinyshakespeare", "--out", dir.file("ts-llmc"),
                                          "--val-tokens", "32768", "--ordinary"});
  ASSERT_EQ(split.code, 0) << split.err;
  const auto llmc_val = llmcc::read_token_file(dir.file("ts-llmc") + "/val_000000.bin");
  const auto llmc_train = llmcc::read_token_file(dir.file("ts-llmc") + "/train_000000.bin");
  EXPECT_EQ(llmc_val, std::vector<std::int32_t>(all.begin(), all.begin() + 32768));
  EXPECT_EQ(llmc_train, std::vector<std::int32_t>(all.begin() + 32768, all.end()));
}

TEST(CliPrepare, BadInputExitsOneNamingTheProblemAndWritesNothing) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  write_file(dir.file("a.txt"), kDocA);
  write_file(dir.file("empty.txt"), "");
  write_file(dir.file("tiny.txt"), "Hi");
  const std::string out = dir.file("data");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string missing = dir.file("no_such_file.txt");
  const std::vector<Case> cases = {
      {{"--input", dir.file("a.txt"), missing, "--out", out}, missing},
      {{"--input", dir.file("empty.txt"), "--out", out}, "empty.txt is empty"},
      {{"--input", dir.file("tiny.txt"), "--out", out}, "input too small"},
      {{"--input", dir.file("a.txt"), "--out", out, "--val-fraction", "0"}, "--val-fraction must be in (0, 1)"},
      {{"--input", dir.file("a.txt"), "--out", out, "--val-fraction", "1"}, "--val-fraction must be in (0, 1)"},
      {{"--input", dir.file("a.txt"), "--out", out, "--val-fraction", "half"}, "--val-fraction expects a number"},
      {{"--input", dir.file("a.txt"), "--out", out, "--format", "v3"}, "--format must be auto, v1 or v2"},
      {{"--input", dir.file("a.txt"), "--out", out, "--shard-tokens", "2"},
       "--shard-tokens 2 is below the floor of 1024 tokens"},
      {{"--input", dir.file("a.txt"), "--out", out, "--shard-tokens", "1023"}, "--shard-tokens 1023 is below"},
      {{"--input", dir.file("a.txt"), "--out", out, "--bogus"}, "unknown flag --bogus"},
      {{"--out", out}, "give --input (text files) or --chat"},
      // A file where the output directory should be.
      {{"--input", dir.file("a.txt"), "--out", dir.file("a.txt") + "/sub"}, "cannot create output directory"},
      {{"--input", dir.file("a.txt"), "--out", out, "--tokenizer", dir.file("nowhere")}, "nowhere"},
      // A device or FIFO never ends (or blocks until a writer comes): refused, not read.
      {{"--input", "/dev/zero", "--out", out}, "input /dev/zero is not a regular file"},
      {{"--input", dir.file("fifo"), "--out", out}, "fifo is not a regular file"},
      {{"--input", dir.file("a.txt"), "--out", out, "--tokenizer", "sp:/dev/zero"}, "/dev/zero: is not a regular file"},
  };
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  for (const Case& c : cases) {
    std::vector<std::string> args = {"prepare"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliResult r = run_llmcc(dir, args);
    std::string shown;
    for (const auto& a : c.args) shown += " " + a;
    EXPECT_EQ(r.code, 1) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << shown << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("llmcc prepare: error:"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(leftovers(dir.path).empty());
}

TEST(CliTokenize, EncodesAndDecodesRoundTrip) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  const std::string text = "Hello world<|endoftext|> It's 2024 \xe2\x80\x94 caf\xc3\xa9!\n";
  const auto expected = tok->encode(text);

  CliResult r = run_llmcc(dir, {"tokenize", "--text", text});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string line;
  for (std::size_t i = 0; i < expected.size(); ++i) line += (i ? " " : "") + std::to_string(expected[i]);
  EXPECT_EQ(r.out, line + "\n");
  EXPECT_NE(r.err.find(std::to_string(expected.size()) + " tokens"), std::string::npos) << r.err;

  write_file(dir.file("in.txt"), text);
  r = run_llmcc(dir, {"tokenize", "--file", dir.file("in.txt")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, line + "\n");

  // --ordinary keeps <|endoftext|> as characters.
  r = run_llmcc(dir, {"tokenize", "--ordinary", "--text", "a<|endoftext|>"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("50256"), std::string::npos) << r.out;

  std::vector<std::string> args = {"tokenize", "--decode"};
  for (int32_t id : expected) args.push_back(std::to_string(id));
  r = run_llmcc(dir, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text);  // byte for byte (no newline added when not a terminal)
}

TEST(CliTokenize, BadInputExitsOne) {
  REQUIRE_TOKENIZER();
  llmcc::test::TempDir dir;
  std::ofstream(dir.file("bad.jsonl")) << "\"ok\"\n3\n";
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"tokenize", "--decode", "15496", "50257"}, "token id 50257 is outside the vocabulary [0, 50257)"},
      {{"tokenize", "--decode", "-1"}, "token id -1 is outside"},
      {{"tokenize", "--decode", "12x"}, "expects token ids (integers), got '12x'"},
      {{"tokenize", "--file", dir.file("missing.txt")}, "missing.txt does not exist"},
      {{"tokenize", "--text", "a", "--decode", "1"}, "exactly one of --text, --file, --json-lines, --chat or --decode"},
      {{"tokenize", "--json-lines", dir.file("missing.jsonl")}, "missing.jsonl does not exist"},
      {{"tokenize", "--json-lines", dir.file("bad.jsonl")}, "bad.jsonl line 2: is a number, expected a JSON string"},
      {{"tokenize"}, "exactly one of"},
      {{"tokenize", "--chat", dir.file("bad.jsonl")}, "GPT-2 BPE (50257 tokens) has no chat template"},
      {{"tokenize", "--txt", "a"}, "unknown flag --txt"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_llmcc(dir, c.args);
    EXPECT_EQ(r.code, 1) << c.args.back() << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "stderr: " << r.err;
  }
}

}  // namespace
