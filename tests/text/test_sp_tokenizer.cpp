// SentencePiece tokenizers: training a small BPE model on a slice of Tiny Shakespeare
// (deterministic), exact encode/decode round trips (every byte string, with byte fallback; decode
// as SentencePiece's own on text it keeps; what normalising models keep), the tokenizer spec
// strings, `llmcc train-tokenizer`, `llmcc prepare --tokenizer sp:` (valid token files whose
// documents start with bos and decode back to the input), `llmcc tokenize --tokenizer sp:`, and
// errors for missing or corrupt model files and bad training input.
#include "llmcc/text/sp_tokenizer.h"

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli_run.h"
#include "llmcc/text/text_tokenizer.h"
#include "llmcc/io/token_file.h"
#include "llmcc/text/tokenizer.h"
#include "temp_dir.h"
#include "test_support.h"
#include "test_data.h"

namespace {

namespace fs = std::filesystem;
using llmcc::SpTokenizer;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

constexpr std::size_t kSliceBytes = 100'000;  // enough for a 400-token vocabulary, trains in ~1 s

// The first kSliceBytes of Tiny Shakespeare, or "" when the shared data is not there.
const std::string& shakespeare_slice() {
  static const std::string text = [] {
    const auto path = llmcc::find_data_file("tinyshakespeare/input.txt");
    if (!path) return std::string();
    std::string all = llmcc::test::slurp(path->string());
    return all.substr(0, kSliceBytes);
  }();
  return text;
}

#define REQUIRE_SHAKESPEARE() LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt")

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

// Lines of words drawn from a small list with a fixed generator: a corpus that needs no data
// files, so the byte-level tests below always run.
std::string synthetic_corpus(std::size_t bytes) {
  static const char* const kWords[] = {"the", "king", "queen", "of",    "and",    "to",   "my", "lord", "speak", "hear",
                                       "me",  "good", "night", "sweet", "prince", "what", "is", "this", "a",     "day"};
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < bytes) {
    const std::size_t n = 3 + rng() % 8;
    for (std::size_t i = 0; i < n; ++i) text += std::string(i ? " " : "") + kWords[rng() % 20];
    text += rng() % 3 == 0 ? ".\n\n" : ",\n";
  }
  return text;
}

// A 300-token BPE model with llmcc's settings, trained on the synthetic corpus.
std::string train_synthetic(const TempDir& dir, bool byte_fallback = true) {
  write_file(dir.file("synthetic.txt"), synthetic_corpus(20'000));
  llmcc::SpTrainOptions o;
  o.inputs = {dir.file("synthetic.txt")};
  o.vocab_size = byte_fallback ? 300 : 60;
  o.byte_fallback = byte_fallback;
  o.model_prefix = dir.file(byte_fallback ? "syn" : "syn_nobytes");
  return llmcc::train_sp_tokenizer(o);
}

std::string hex(const std::string& s) {
  std::string out;
  char buf[4];
  for (const unsigned char c : s) {
    std::snprintf(buf, sizeof buf, "%02x ", c);
    out += buf;
  }
  return out;
}

// With byte fallback, text SentencePiece would change comes back byte for byte: bytes that are
// not UTF-8 (its normaliser reads them as U+FFFD) and the meta symbol U+2581 (decoded as a
// space) are spelled in byte tokens, and byte tokens decode to their bytes.
TEST(SpTokenizer, EveryByteStringRoundTripsWithByteFallback) {
  TempDir dir;
  const SpTokenizer tok = SpTokenizer::load(train_synthetic(dir));
  const std::vector<std::string> cases = {
      "\xff\xfe",                                   // never UTF-8
      "a\x80z",                                     // a lone continuation byte
      "x\xe6\xbcy",                                 // a 3-byte sequence cut short
      "end \xe6\xbc",                               // ... at the end of the text
      std::string("n\0ul", 4),                      // NUL
      "\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80",     // overlong, surrogate, past U+10FFFF
      "\xef\xbf\xbd",                               // U+FFFD itself
      "\xe2\x96\x81king \xe2\x96\x81\xe2\x96\x81",  // U+2581, SentencePiece's space symbol
      "\xff the king",                              // a byte token before a piece with a space
      "  two  spaces \xff\n\n",
  };
  for (const std::string& s : cases) {
    SCOPED_TRACE(hex(s));
    const std::vector<std::int32_t> ids = tok.encode(s);
    EXPECT_EQ(hex(tok.decode(ids)), hex(s));
    for (const std::int32_t id : ids) EXPECT_NE(id, tok.unk());
  }
  // An invalid byte is its own byte token.
  const std::vector<std::int32_t> ids = tok.encode("king\xffqueen");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + 0xFF), ids.end()) << "expected <0xFF>";
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  EXPECT_EQ(hex(tok.decode(tok.encode(all_bytes))), hex(all_bytes));
  // Short random strings of bytes, spaces, pieces of U+2581 and words.
  std::mt19937 rng(11);
  int failures = 0;
  for (int t = 0; t < 3000; ++t) {
    std::string s;
    for (std::size_t i = 0, n = rng() % 12; i < n; ++i) {
      switch (rng() % 4) {
        case 0:
          s += static_cast<char>(rng() % 256);
          break;
        case 1:
          s += ' ';
          break;
        case 2:
          s += "\xe2\x96\x81"[rng() % 3];
          break;
        default:
          s += " the king\n"[rng() % 10];
      }
    }
    const std::string back = tok.decode(tok.encode(s));
    if (back != s && ++failures <= 5) ADD_FAILURE() << "round trip of " << hex(s) << "gave " << hex(back);
  }
  EXPECT_EQ(failures, 0);
  // Streaming shows the same bytes: a cut-short sequence is held back until the end.
  const auto text = llmcc::load_text_tokenizer("sp:" + tok.path());
  const std::string s = "the \xe6\xbc\xa2 king \xff\xfe \xe6\xbc";
  llmcc::DecodeStream stream(*text, {});
  std::string streamed;
  for (const std::int32_t id : text->encode(s)) streamed += stream.push(id);
  EXPECT_EQ(hex(streamed + stream.finish()), hex(s));
}

// On text SentencePiece keeps (UTF-8 without U+2581), encode and decode are SentencePiece's own,
// and decode agrees with SentencePiece's DecodeIds on any ids whose byte tokens form characters.
TEST(SpTokenizer, EncodeAndDecodeAreSentencePiecesOwnOnTextItKeeps) {
  TempDir dir;
  const std::string model = shakespeare_slice().empty() ? train_synthetic(dir) : train_small(dir);
  const std::string text =
      shakespeare_slice().empty() ? synthetic_corpus(20'000) : shakespeare_slice().substr(0, 20'000);
  const SpTokenizer tok = SpTokenizer::load(model);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(model).ok());
  std::vector<int> sp_ids;
  ASSERT_TRUE(sp.Encode(text, &sp_ids).ok());
  const std::vector<std::int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids, std::vector<std::int32_t>(sp_ids.begin(), sp_ids.end()));
  EXPECT_EQ(tok.decode(ids), sp.DecodeIds(sp_ids));
  EXPECT_EQ(tok.decode(ids), text);
  // Random ids, control tokens and <unk> included, but no byte tokens: SentencePiece's spelling
  // (leading space dropped at the start, "<unk>" as " \xe2\x81\x87 ", bos and eos as nothing).
  std::mt19937 rng(5);
  for (int t = 0; t < 200; ++t) {
    std::vector<int> r;
    for (std::size_t i = 0, n = rng() % 20; i < n; ++i) {
      const int id = static_cast<int>(rng() % static_cast<unsigned>(tok.vocab_size()));
      if (!sp.IsByte(id)) r.push_back(id);
    }
    ASSERT_EQ(tok.decode(std::vector<std::int32_t>(r.begin(), r.end())), sp.DecodeIds(r)) << "ids " << t;
  }
  // Byte tokens that form characters: the same text.
  const std::vector<int> euro = {3 + 0xE2, 3 + 0x82, 3 + 0xAC, sp.PieceToId("\xe2\x96\x81")};
  EXPECT_EQ(tok.decode(std::vector<std::int32_t>(euro.begin(), euro.end())), sp.DecodeIds(euro));
  // Where they do not, SentencePiece writes U+FFFD and decode() the bytes.
  const std::vector<int> cut = {3 + 0xE2, 3 + 0x82};
  EXPECT_EQ(sp.DecodeIds(cut), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(tok.decode(std::vector<std::int32_t>(cut.begin(), cut.end())), "\xe2\x82");
}

// What a model without byte fallback, or with a normalisation, keeps: SentencePiece's own rules.
TEST(SpTokenizer, OtherModelsKeepWhatSentencePieceKeeps) {
  TempDir dir;
  // No byte fallback: a character the vocabulary lacks, and a non-UTF-8 byte, are <unk>, which
  // decodes as " \xe2\x81\x87 " (U+2047).
  const SpTokenizer no_bytes = SpTokenizer::load(train_synthetic(dir, false));
  for (const std::string s : {"king \xff queen", "king \xe6\xbc\xa2 queen"}) {
    const std::vector<std::int32_t> ids = no_bytes.encode(s);
    EXPECT_NE(std::find(ids.begin(), ids.end(), no_bytes.unk()), ids.end()) << hex(s);
    EXPECT_EQ(no_bytes.decode(ids), "king  \xe2\x81\x87  queen") << hex(s);
  }
  // SentencePiece's default normalisation (nmt_nfkc) and whitespace removal, as spm_train writes
  // them: text comes back normalised ("\xef\xbd\x86" FULLWIDTH f is f, runs of spaces are one,
  // leading and trailing spaces are dropped); bytes that are not UTF-8 still come back.
  const std::unordered_map<std::string, std::string> args = {{"input", dir.file("synthetic.txt")},
                                                             {"model_prefix", dir.file("nfkc")},
                                                             {"vocab_size", "300"},
                                                             {"byte_fallback", "true"},
                                                             {"minloglevel", "2"},
                                                             {"num_threads", "1"}};
  ASSERT_TRUE(sentencepiece::SentencePieceTrainer::Train(args).ok());
  const SpTokenizer nfkc = SpTokenizer::load(dir.file("nfkc.model"));
  EXPECT_EQ(nfkc.decode(nfkc.encode("  the \xef\xbd\x8bing   said \xff ")), "the king said \xff");
}

TEST(SpTokenizer, TheVocabularyListsEveryPieceWithItsScoreAndKind) {
  REQUIRE_SHAKESPEARE();
  const TempDir dir;
  const std::string model = train_small(dir);
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  const SpTokenizer sp = SpTokenizer::load(model);
  const llmcc::Vocabulary v = tok->vocabulary();
  EXPECT_EQ(v.model, "llama");
  ASSERT_EQ(v.tokens.size(), 400u);
  ASSERT_EQ(v.scores.size(), 400u);
  ASSERT_EQ(v.kinds.size(), 400u);
  EXPECT_TRUE(v.merges.empty());
  EXPECT_EQ(v.bos, sp.bos());
  EXPECT_EQ(v.eos, sp.eos());
  EXPECT_EQ(v.unk, sp.unk());
  EXPECT_TRUE(v.add_bos);
  EXPECT_EQ(v.kinds[static_cast<std::size_t>(sp.unk())], llmcc::Vocabulary::Kind::Unknown);
  EXPECT_EQ(v.kinds[static_cast<std::size_t>(sp.bos())], llmcc::Vocabulary::Kind::Control);
  int bytes = 0;
  for (int id = 0; id < 400; ++id) {
    EXPECT_EQ(v.tokens[static_cast<std::size_t>(id)], sp.piece(id));
    EXPECT_EQ(v.scores[static_cast<std::size_t>(id)], sp.score(id));
    if (v.kinds[static_cast<std::size_t>(id)] == llmcc::Vocabulary::Kind::Byte) {
      ++bytes;
      EXPECT_EQ(v.tokens[static_cast<std::size_t>(id)].rfind("<0x", 0), 0u) << v.tokens[static_cast<std::size_t>(id)];
    }
  }
  EXPECT_EQ(bytes, 256);  // byte fallback: every byte has its piece
  const std::size_t newline =
      static_cast<std::size_t>(std::find(v.tokens.begin(), v.tokens.end(), "<0x0A>") - v.tokens.begin());
  ASSERT_LT(newline, v.tokens.size());
  EXPECT_EQ(v.kinds[newline], llmcc::Vocabulary::Kind::Byte);
  // Scores rank the learned pieces: BPE's come from their merge order, highest first.
  EXPECT_GT(v.scores[300], v.scores[399]);
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
  if (llmcc::test::have_data("gpt2/encoder.json")) {
    const auto gpt2 = llmcc::load_text_tokenizer("gpt2");
    EXPECT_EQ(gpt2->vocab_size(), 50257);
    EXPECT_EQ(gpt2->document_start(), 50256);
    EXPECT_EQ(gpt2->encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
  } else {
    llmcc::test::note_missing_data("gpt2/encoder.json", "the GPT-2 part of this test");
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

// A model whose second piece starts with a NUL byte: SentencePiece throws from inside its trie
// builder instead of returning a status (found by fuzz_sp_model); it is the same clear error.
TEST(SpTokenizer, AModelTheLibraryThrowsOnIsAClearError) {
  const std::string model(
      "\x0a\x0e\x0a\x05\x3c\x75\x6e\x6b\x3e\x15\x00\x00\x00\x00\x18\x02\x0a\x0c\x0a\x03\x00\x89\x3e\x15\x00\x00\x00\x00"
      "\x18\x54\x0a\x0d\x0a\x04\x3c\x2f\x73\x2e\x15\x00\x00\x00\x00\x18\x03",
      45);
  EXPECT_TRUE(throws_error([&] { (void)llmcc::load_sp_tokenizer_bytes(model, "crafted.model"); },
                           {"crafted.model", "not a valid SentencePiece model"}));
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

  auto r = llmcc::test::run_llmcc(dir, {"train-tokenizer", "--input", dir.file("a.txt"), dir.file("b.txt"),
                                        "--vocab-size", "400", "--out", dir.file("sp/tok")});
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
  r = llmcc::test::run_llmcc(
      dir, {"train-tokenizer", "--input", dir.file("a.txt"), "--vocab-size", "100", "--out", dir.file("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("vocab size 100 is too small"), std::string::npos) << r.err;
}

}  // namespace
