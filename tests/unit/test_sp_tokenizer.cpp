// SentencePiece tokenizers: training a small BPE model on a slice of Tiny Shakespeare
// (deterministic), exact encode/decode round trips, the tokenizer spec strings, `llmcc
// train-tokenizer`, `llmcc prepare --tokenizer sp:` (valid token files whose documents start with
// bos and decode back to the input), `llmcc tokenize --tokenizer sp:`, and errors for missing or
// corrupt model files and bad training input.
#include "llmcc/train/sp_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/train/text_tokenizer.h"
#include "llmcc/train/token_file.h"
#include "llmcc/train/tokenizer.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using llmcc::SpTokenizer;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

constexpr std::size_t kSliceBytes = 100'000;  // enough for a 400-token vocabulary, trains in ~1 s

// The first kSliceBytes of Tiny Shakespeare, or "" when the shared data is not there.
const std::string& shakespeare_slice() {
  static const std::string text = [] {
    const auto path = llmcc::find_shared_data("tinyshakespeare/input.txt");
    if (!path) return std::string();
    std::string all = llmcc::test::slurp(path->string());
    return all.substr(0, kSliceBytes);
  }();
  return text;
}

#define REQUIRE_SHAKESPEARE()                  \
  if (shakespeare_slice().empty())             \
  GTEST_SKIP() << "Tiny Shakespeare not found " \
                  "(../shared/data/tinyshakespeare/input.txt)"

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Trains a 400-token BPE model on the slice in `dir`; returns the .model path.
std::string train_small(const TempDir& dir, const std::string& prefix = "tok") {
  write_file(dir.file("input.txt"), shakespeare_slice());
  llmcc::SpTrainOptions o;
  o.inputs = {dir.file("input.txt")};
  o.vocab_size = 400;
  o.model_prefix = dir.file(prefix);
  return llmcc::train_sp_tokenizer(o);
}

TEST(SpTokenizer, TrainsDeterministicallyAndRoundTripsExactly) {
  REQUIRE_SHAKESPEARE();
  TempDir dir;
  const std::string model = train_small(dir, "a");
  EXPECT_EQ(model, dir.file("a.model"));
  EXPECT_TRUE(fs::exists(dir.file("a.vocab")));
  // The same input and options give the same bytes (the file records its own path, so the second
  // run writes to the same one).
  const std::string first = llmcc::test::slurp(model);
  EXPECT_TRUE(llmcc::test::slurp(train_small(dir, "a")) == first) << "training is not deterministic";

  const SpTokenizer tok = SpTokenizer::load(model);
  EXPECT_EQ(tok.vocab_size(), 400);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.piece(1), "<s>");
  EXPECT_EQ(tok.piece(3), "<0x00>");  // byte fallback tokens follow the specials

  const std::vector<std::int32_t> ids = tok.encode(shakespeare_slice());
  EXPECT_LT(ids.size(), shakespeare_slice().size() * 2 / 3) << "BPE merged almost nothing";
  for (const std::int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 400);
  EXPECT_EQ(tok.decode(ids), shakespeare_slice());

  // Whitespace runs, leading/trailing spaces, tabs, blank lines, digits, characters the vocabulary
  // lacks (byte fallback) all come back byte for byte.
  for (const std::string s : {"", " ", "  two  spaces  ", "\ttab\n\n\nlines\r\n", "ROMEO: 12345 zebra!",
                              "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "<s></s><unk>"}) {
    SCOPED_TRACE(s);
    const auto enc = tok.encode(s);
    EXPECT_EQ(tok.decode(enc), s);
    for (const std::int32_t id : enc) EXPECT_NE(id, tok.unk());
  }
  // Digits are split into single characters: no piece holds two.
  for (const std::int32_t id : tok.encode("2024 1999")) {
    const std::string p = tok.piece(id);
    if (p.rfind("<0x", 0) == 0) continue;  // a byte token, e.g. <0x39> for a digit not in the slice
    int n = 0;
    for (const char c : p) n += c >= '0' && c <= '9';
    EXPECT_LE(n, 1) << p;
  }
  // Special tokens are not read from text.
  for (const std::int32_t id : tok.encode("<s>")) EXPECT_NE(id, tok.bos());
}

TEST(SpTokenizer, SpecStringsChooseTheTokenizer) {
  REQUIRE_SHAKESPEARE();
  TempDir dir;
  const std::string model = train_small(dir);
  const auto sp = llmcc::load_text_tokenizer("sp:" + model);
  EXPECT_EQ(sp->vocab_size(), 400);
  EXPECT_EQ(sp->document_start(), 1);  // bos
  EXPECT_EQ(sp->decode(sp->encode("To be, or not")), "To be, or not");
  EXPECT_EQ(sp->encode_ordinary("<s> x"), sp->encode("<s> x"));
  EXPECT_NE(sp->describe().find("SentencePiece"), std::string::npos);
  EXPECT_TRUE(throws_error([&] { llmcc::load_text_tokenizer(model); },
                           {"[tokenizer]", "unknown tokenizer", ("sp:" + model).c_str()}));
  EXPECT_TRUE(throws_error([] { llmcc::load_text_tokenizer("bpe"); }, {"expected gpt2, gpt2:DIR", "sp:MODEL"}));
  EXPECT_TRUE(throws_error([] { llmcc::load_text_tokenizer("sp:"); }, {"unknown tokenizer 'sp:'"}));
  if (llmcc::find_shared_data("gpt2/encoder.json")) {
    const auto gpt2 = llmcc::load_text_tokenizer("gpt2");
    EXPECT_EQ(gpt2->vocab_size(), 50257);
    EXPECT_EQ(gpt2->document_start(), 50256);
    EXPECT_EQ(gpt2->encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
  }
}

TEST(SpTokenizer, LoadAndDecodeErrors) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.file("none.model")); },
                           {"[sp_tokenizer]", "none.model", "no such file"}));
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.path.string()); }, {"is a directory"}));
  // A device would be read forever (SentencePiece reads the whole file into memory).
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load("/dev/zero"); }, {"/dev/zero", "not a regular file"}));
  write_file(dir.file("junk.model"), std::string("this is not a protobuf \xff\xff\xff\xff", 27));
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.file("junk.model")); },
                           {"junk.model", "not a valid SentencePiece model"}));
  write_file(dir.file("empty.model"), "");
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.file("empty.model")); }, {"empty.model"}));
  if (shakespeare_slice().empty()) return;
  const std::string model = train_small(dir);
  // The .vocab text file is a common mix-up for the .model.
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.file("tok.vocab")); }, {"tok.vocab", "not the .vocab"}));
  // A truncated model file.
  const std::string bytes = llmcc::test::slurp(model);
  write_file(dir.file("cut.model"), bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(throws_error([&] { SpTokenizer::load(dir.file("cut.model")); }, {"cut.model", "not a valid"}));
  const SpTokenizer tok = SpTokenizer::load(model);
  const std::vector<std::int32_t> bad = {5, 400};
  EXPECT_TRUE(throws_error([&] { tok.decode(bad); }, {"token id 400 (position 1)", "[0, 400)"}));
  const std::vector<std::int32_t> negative = {-1};
  EXPECT_TRUE(throws_error([&] { tok.decode(negative); }, {"token id -1"}));
  EXPECT_TRUE(throws_error([&] { tok.piece(-3); }, {"token id -3"}));
}

TEST(SpTokenizer, TrainingErrors) {
  TempDir dir;
  llmcc::SpTrainOptions o;
  o.model_prefix = dir.file("t");
  o.vocab_size = 400;
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"at least one input file"}));
  o.inputs = {dir.file("missing.txt")};
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"input file", "missing.txt", "does not exist"}));
  write_file(dir.file("empty.txt"), "");
  o.inputs = {dir.file("empty.txt")};
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"empty"}));
  write_file(dir.file("small.txt"), "the cat sat on the mat\nthe dog sat on the log\n");
  o.inputs = {dir.file("small.txt")};
  o.vocab_size = 200;
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"vocab size 200 is too small", "259"}));
  o.vocab_size = 5000;  // far more pieces than two short lines can make
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"failed", "smaller --vocab-size"}));
  o.vocab_size = 300;
  o.model_type = "wordpiece";
  EXPECT_TRUE(throws_error([&] { llmcc::train_sp_tokenizer(o); }, {"bpe or unigram", "wordpiece"}));
  EXPECT_FALSE(fs::exists(dir.file("t.model")));
}

TEST(SpTokenizerCli, TrainTokenizerPrepareAndTokenize) {
  REQUIRE_SHAKESPEARE();
  TempDir dir;
  // Two documents: the slice split in two.
  const std::string& text = shakespeare_slice();
  const std::string doc1 = text.substr(0, text.size() / 2), doc2 = text.substr(text.size() / 2);
  write_file(dir.file("a.txt"), doc1);
  write_file(dir.file("b.txt"), doc2);

  auto r = llmcc::test::run_llmcc(
      dir, {"train-tokenizer", "--input", dir.file("a.txt"), dir.file("b.txt"), "--vocab-size", "400", "--out", dir.file("sp/tok")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("400 tokens, bos 1, eos 2"), std::string::npos) << r.out;
  const std::string model = dir.file("sp/tok.model");
  const SpTokenizer tok = SpTokenizer::load(model);

  r = llmcc::test::run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), dir.file("b.txt"), "--tokenizer",
                                   "sp:" + model, "--out", dir.file("data"), "--val-fraction", "0.1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SentencePiece"), std::string::npos) << r.out;
  const llmcc::TokenFile train(dir.file("data/train_000000.bin"));
  const llmcc::TokenFile val(dir.file("data/val_000000.bin"));
  EXPECT_EQ(train.version(), 1);  // 400 ids fit uint16
  std::vector<std::int32_t> all = train.read_all();
  const std::vector<std::int32_t> v = val.read_all();
  all.insert(all.end(), v.begin(), v.end());
  // bos doc1 bos doc2, each document encoded on its own.
  std::vector<std::int32_t> want = {tok.bos()};
  for (const auto id : tok.encode(doc1)) want.push_back(id);
  want.push_back(tok.bos());
  for (const auto id : tok.encode(doc2)) want.push_back(id);
  EXPECT_EQ(all, want);
  EXPECT_NEAR(static_cast<double>(v.size()) / static_cast<double>(all.size()), 0.1, 1e-3);

  // --format v2 writes uint32 ids that read back the same.
  r = llmcc::test::run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), dir.file("b.txt"), "--tokenizer",
                                   "sp:" + model, "--out", dir.file("data2"), "--format", "v2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const llmcc::TokenFile train2(dir.file("data2/train_000000.bin"));
  EXPECT_EQ(train2.version(), 2);
  EXPECT_EQ(train2.read_all(), train.read_all());

  r = llmcc::test::run_llmcc(dir, {"tokenize", "--tokenizer", "sp:" + model, "--text", "Hello\nthere"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string expected;
  for (const auto id : tok.encode("Hello\nthere")) expected += (expected.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(r.out, expected + "\n");
  r = llmcc::test::run_llmcc(dir, {"tokenize", "--tokenizer", "sp:" + model, "--decode", "1", "3"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(1, '\0'));  // <s> decodes to nothing, <0x00> to a NUL byte

  // Errors: a missing model, a model given without sp:, too small a vocabulary.
  r = llmcc::test::run_llmcc(dir, {"prepare", "--input", dir.file("a.txt"), "--tokenizer", "sp:" + dir.file("no.model"),
                                   "--out", dir.file("data3")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no.model: no such file"), std::string::npos) << r.err;
  r = llmcc::test::run_llmcc(dir, {"tokenize", "--tokenizer", model, "--text", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("sp:" + model), std::string::npos) << r.err;
  r = llmcc::test::run_llmcc(dir, {"train-tokenizer", "--input", dir.file("a.txt"), "--vocab-size", "100", "--out",
                                   dir.file("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("vocab size 100 is too small"), std::string::npos) << r.err;
}

}  // namespace
