// GPT-2 tokenizer against the reference fixture written by scripts/tokenizer_reference.py
// (tiktoken built from the same encoder.json and vocab.bpe): all of Tiny Shakespeare and a set of
// tricky strings must match token for token, and decode(encode(s)) == s.
#include "llmcc/text/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <unistd.h>

#include "test_support.h"
#include "test_data.h"
#include "text/gpt2_pretokenize.h"
#include "io/json_reader.h"

namespace llmcc {
namespace {

namespace fs = std::filesystem;

uint64_t fnv1a64(const unsigned char* p, std::size_t n, uint64_t h = 0xCBF29CE484222325ull) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  if (hex == "-") return {};
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

struct Reference {
  std::map<std::string, std::string> fields;  // input_bytes, input_fnv1a64, count, ids_fnv1a64
  std::vector<int32_t> head, tail;
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;  // text -> ids
};

// Parses tests/fixtures/tokenizer/gpt2_reference.txt (format: see scripts/tokenizer_reference.py).
Reference load_reference() {
  const fs::path path = fs::path(__FILE__).parent_path() / ".." / "fixtures" / "tokenizer" / "gpt2_reference.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  Reference ref;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    const auto read_ids = [&] {
      std::vector<int32_t> ids;
      for (int32_t id; ls >> id;) ids.push_back(id);
      return ids;
    };
    if (key == "head") {
      ref.head = read_ids();
    } else if (key == "tail") {
      ref.tail = read_ids();
    } else if (key == "case") {
      std::string hex;
      ls >> hex;
      std::string text = from_hex(hex);
      ref.cases.emplace_back(std::move(text), read_ids());
    } else {
      ls >> ref.fields[key];
    }
  }
  EXPECT_EQ(ref.head.size(), 1000u);
  EXPECT_EQ(ref.tail.size(), 1000u);
  EXPECT_GT(ref.cases.size(), 30u);
  return ref;
}

// Loaded once: the tests share it (loading parses ~1.5 MB).
const Gpt2Tokenizer* tokenizer_or_null() {
  static std::unique_ptr<Gpt2Tokenizer> tok = [] {
    std::unique_ptr<Gpt2Tokenizer> t;
    if (llmcc::test::have_data("gpt2/encoder.json")) {
      t = std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load_default());
    }
    return t;
  }();
  return tok.get();
}

#define REQUIRE_TOKENIZER(tok)             \
  LLMCC_REQUIRE_DATA("gpt2/encoder.json"); \
  const Gpt2Tokenizer* tok = tokenizer_or_null()

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return ids.size() > 40 ? s + "..." : s;
}

// First index where two id streams differ, or -1.
std::ptrdiff_t first_mismatch(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<std::ptrdiff_t>(i);
  return a.size() == b.size() ? -1 : static_cast<std::ptrdiff_t>(n);
}

TEST(Tokenizer, MatchesReferenceOnAllOfTinyShakespeare) {
  REQUIRE_TOKENIZER(tok);
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  const auto input = find_data_file("tinyshakespeare/input.txt");
  const Reference ref = load_reference();
  const std::string text = read_all(*input);
  ASSERT_EQ(std::to_string(text.size()), ref.fields.at("input_bytes")) << *input << " is not the reference's input";
  char hex[17];
  std::snprintf(
      hex, sizeof hex, "%016llx",
      static_cast<unsigned long long>(fnv1a64(reinterpret_cast<const unsigned char*>(text.data()), text.size())));
  ASSERT_EQ(hex, ref.fields.at("input_fnv1a64")) << *input << " is not the reference's input";

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("encoded %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s)\n", text.size(), ids.size(), seconds,
              static_cast<double>(ids.size()) / seconds);
  EXPECT_LT(seconds, 10.0) << "encoding Tiny Shakespeare should take well under a few seconds";

  EXPECT_EQ(std::to_string(ids.size()), ref.fields.at("count"));
  ASSERT_GE(ids.size(), 1000u);
  const std::vector<int32_t> head(ids.begin(), ids.begin() + 1000), tail(ids.end() - 1000, ids.end());
  EXPECT_EQ(first_mismatch(head, ref.head), -1) << "first 1000 ids differ";
  EXPECT_EQ(first_mismatch(tail, ref.tail), -1) << "last 1000 ids differ";
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids) {
    const unsigned char le[2] = {static_cast<unsigned char>(id & 0xFF), static_cast<unsigned char>((id >> 8) & 0xFF)};
    h = fnv1a64(le, 2, h);
  }
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  EXPECT_EQ(hex, ref.fields.at("ids_fnv1a64")) << "the id stream differs from the reference";
  EXPECT_TRUE(tok->decode(ids) == text) << "decode(encode(text)) != text";
}

TEST(Tokenizer, MatchesReferenceOnTrickyStrings) {
  REQUIRE_TOKENIZER(tok);
  const Reference ref = load_reference();
  int failures = 0;
  for (const auto& [text, expected] : ref.cases) {
    const std::vector<int32_t> got = tok->encode(text);
    const std::ptrdiff_t at = first_mismatch(got, expected);
    EXPECT_EQ(at, -1) << "text: \"" << text.substr(0, 200) << "\"\n  first difference at id " << at
                      << "\n  got:      " << show_ids(got) << "\n  expected: " << show_ids(expected);
    EXPECT_EQ(tok->decode(got), text);
    if (at != -1 && ++failures >= 5) break;  // enough to diagnose
  }
}

TEST(Tokenizer, VocabularyAndEndOfText) {
  REQUIRE_TOKENIZER(tok);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eot(), 50256);
  EXPECT_EQ(tok->decode_token(50256), "<|endoftext|>");
  EXPECT_EQ(tok->encode("<|endoftext|>"), std::vector<int32_t>{50256});
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  // encode_ordinary treats the special token's text as ordinary characters.
  const std::vector<int32_t> plain = tok->encode_ordinary("<|endoftext|>");
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tok->decode(plain), "<|endoftext|>");
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(Tokenizer, EveryByteStringRoundTrips) {
  REQUIRE_TOKENIZER(tok);
  // Invalid UTF-8 (lone continuation bytes, truncated sequences, overlong forms, surrogates) and
  // every single byte must still survive encode -> decode.
  const std::string nasty =
      std::string("\xff\xfe abc \xc3 \x80\x80 \xe2\x82 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 ok") +
      std::string("\0mid\0", 5);
  EXPECT_EQ(tok->decode(tok->encode(nasty)), nasty);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  EXPECT_EQ(tok->decode(tok->encode(all_bytes)), all_bytes);
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::vector<int32_t> ids = tok->encode(one);
    ASSERT_EQ(ids.size(), 1u) << "byte " << b;
    EXPECT_EQ(tok->decode_token(ids[0]), one);
  }
}

TEST(Tokenizer, DecodeOfOutOfRangeIdIsAnError) {
  REQUIRE_TOKENIZER(tok);
  EXPECT_TRUE(
      test::throws_error([&] { tok->decode_token(50257); }, {"[tokenizer]", "50257", "out of range", "0..50256"}));
  EXPECT_TRUE(test::throws_error([&] { tok->decode_token(-1); }, {"[tokenizer]", "-1", "out of range"}));
  const std::vector<int32_t> ids = {15496, 50300};
  EXPECT_TRUE(test::throws_error([&] { tok->decode(ids); }, {"[tokenizer]", "50300", "out of range"}));
}

TEST(Pretokenize, SplitsLikeGpt2sPattern) {
  const auto split = [](std::string_view text) {
    std::vector<std::string> pieces;
    gpt2::pretokenize(text, [&](std::string_view p) { pieces.emplace_back(p); });
    return pieces;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello  world\n\n"), (V{"Hello", " ", " world", "\n\n"}));
  EXPECT_EQ(split("it's they'll I'M"), (V{"it", "'s", " they", "'ll", " I", "'", "M"}));
  EXPECT_EQ(split("abc123 45!? x"), (V{"abc", "123", " 45", "!?", " x"}));
  EXPECT_EQ(split("a\n\nb"), (V{"a", "\n", "\n", "b"}));  // \s+(?!\S) leaves the last newline
  EXPECT_EQ(split("a \n b"), (V{"a", " \n", " b"}));
  EXPECT_EQ(split("end   "), (V{"end", "   "}));  // trailing run kept whole
  EXPECT_EQ(split(" 'sx"), (V{" '", "sx"}));      // the space takes the punctuation run
  EXPECT_EQ(split("café Ωx ½3"), (V{"café", " Ωx", " ½3"}));
  EXPECT_EQ(split("e\xcc\x81"), (V{"e", "\xcc\x81"}));  // a combining mark (Mn) is not a letter
  EXPECT_EQ(split("a\xc2\xa0"
                  "b"),
            (V{"a", "\xc2\xa0", "b"}));                         // NBSP is \s but not ' '
  EXPECT_EQ(gpt2::classify(0x4E2D), gpt2::CharClass::kLetter);  // 中
  EXPECT_EQ(gpt2::classify(0x0663), gpt2::CharClass::kNumber);  // Arabic-Indic 3
  EXPECT_EQ(gpt2::classify(0x2163), gpt2::CharClass::kNumber);  // Roman numeral IV (Nl)
  EXPECT_EQ(gpt2::classify(0x1F44D), gpt2::CharClass::kOther);  // emoji
  EXPECT_EQ(gpt2::classify(0x3000), gpt2::CharClass::kSpace);   // ideographic space
}

TEST(JsonReader, ParsesStringsWithEscapesAndIntegers) {
  const auto r = parse_json_int_object(R"( { "a": 1, "\u0120the" : 262, "\"\\\/\n\t": -3, "\ud83d\ude00": 7 } )",
                                       "x.json", "test");
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], (std::pair<std::string, int64_t>{"a", 1}));
  EXPECT_EQ(r[1], (std::pair<std::string, int64_t>{"\xc4\xa0the", 262}));
  EXPECT_EQ(r[2], (std::pair<std::string, int64_t>{"\"\\/\n\t", -3}));
  EXPECT_EQ(r[3], (std::pair<std::string, int64_t>{"\xf0\x9f\x98\x80", 7}));
  EXPECT_TRUE(parse_json_int_object("{}", "x.json", "test").empty());
}

TEST(JsonReader, ErrorsNameFileLineAndWhatWasExpected) {
  EXPECT_TRUE(test::throws_error([] { parse_json_int_object("{\"a\": 1,\n \"b\": 2.5}", "enc.json", "tokenizer"); },
                                 {"[tokenizer]", "enc.json:2:8", "integer", "'.'"}));
  EXPECT_TRUE(test::throws_error([] { parse_json_int_object("{\"a\": \"x\"}", "enc.json", "tokenizer"); },
                                 {"enc.json:1:7", "an integer value"}));
  EXPECT_TRUE(test::throws_error([] { parse_json_int_object("{\"a\": 1", "enc.json", "tokenizer"); },
                                 {"enc.json", "',' or '}'", "end of file"}));
  EXPECT_TRUE(test::throws_error([] { parse_json_int_object("{\"\\ud800\": 1}", "enc.json", "tokenizer"); },
                                 {"low surrogate"}));
  EXPECT_TRUE(test::throws_error([] { parse_json_int_object("[1]", "enc.json", "tokenizer"); }, {"'{'"}));
}

// Small but complete GPT-2-style files in a temporary directory.
struct TempFiles {
  fs::path dir = fs::temp_directory_path() / ("llmcc_tok_" + std::to_string(::getpid()));
  TempFiles() { fs::create_directories(dir); }
  ~TempFiles() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
  // encoder.json with all 256 byte tokens in GPT-2's alphabet, plus `extra` entries.
  std::string encoder(const std::string& extra) {
    std::string json = "{";
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const int cp = printable ? b : next++;
      char buf[32];
      std::snprintf(buf, sizeof buf, "\"\\u%04x\": %d, ", cp, b);
      json += buf;
    }
    return write("encoder.json", json + extra + "}");
  }
};

TEST(Tokenizer, LoadsSmallFilesAndMergesByRank) {
  TempFiles tmp;
  // "ab" (rank 0) is merged before "bc" (rank 1): "abc" -> ab c, then "abc" via (ab, c).
  const std::string enc = tmp.encoder("\"ab\": 256, \"bc\": 257, \"abc\": 258, \"<|endoftext|>\": 259");
  const std::string bpe = tmp.write("vocab.bpe", "#version: 0.2\na b\nb c\nab c\n");
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(enc, bpe);
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.eot(), 259);
  EXPECT_EQ(tok.encode("abc"), std::vector<int32_t>{258});
  EXPECT_EQ(tok.encode("bc ab"), (std::vector<int32_t>{257, ' ', 256}));  // no merge joins the space
  EXPECT_EQ(tok.encode("xbcx<|endoftext|>"), (std::vector<int32_t>{'x', 257, 'x', 259}));
}

TEST(Tokenizer, TokenAndMergeTextsAreTheFilesOwn) {
  // Bytes outside GPT-2's printable set are spelled as code points from U+0100 ("\xc4\xa0" is
  // U+0120, the space); merges come back in rank order as vocab.bpe lists them.
  TempFiles tmp;
  const std::string enc = tmp.encoder("\"\u0120a\": 256, \"\u0120ab\": 257, \"<|endoftext|>\": 258");
  const std::string bpe = tmp.write("vocab.bpe",
                                    "#version: 0.2\n\xc4\xa0 a\n\xc4\xa0"
                                    "a b\n");
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(enc, bpe);
  const std::vector<std::string> texts = tok.token_texts();
  ASSERT_EQ(texts.size(), 259u);
  EXPECT_EQ(texts['a'], "a");
  EXPECT_EQ(texts[' '], "\xc4\xa0");
  EXPECT_EQ(texts[10], "\xc4\x8a");  // '\n' -> U+010A
  EXPECT_EQ(texts[256],
            "\xc4\xa0"
            "a");
  EXPECT_EQ(texts[258], "<|endoftext|>");
  EXPECT_EQ(tok.merge_texts(), (std::vector<std::string>{"\xc4\xa0 a",
                                                         "\xc4\xa0"
                                                         "a b"}));
}

TEST(Tokenizer, Gpt2sTokenAndMergeTextsAreEncoderJsonAndVocabBpe) {
  REQUIRE_TOKENIZER(tok);
  const std::vector<std::string> texts = tok->token_texts();
  ASSERT_EQ(texts.size(), 50257u);
  EXPECT_EQ(texts[15496], "Hello");
  EXPECT_EQ(texts[995], "\xc4\xa0world");
  const std::vector<std::string> merges = tok->merge_texts();
  ASSERT_EQ(merges.size(), 50000u);
  // vocab.bpe's lines after its version header, in order.
  std::ifstream in(llmcc::find_data_file("gpt2/vocab.bpe")->string());
  std::string line;
  std::getline(in, line);
  for (std::size_t i = 0; i < merges.size() && std::getline(in, line); ++i) ASSERT_EQ(merges[i], line) << "merge " << i;
}

TEST(Tokenizer, LoadErrorsNameTheFileAndTheProblem) {
  TempFiles tmp;
  const std::string bpe = tmp.write("vocab.bpe", "#version: 0.2\na b\n");
  EXPECT_TRUE(
      test::throws_error([&] { Gpt2Tokenizer::load((tmp.dir / "missing.json").string(), bpe); },
                         {"[tokenizer]", "cannot open encoder.json", "missing.json", "LLMCC_GPT2_TOKENIZER_DIR"}));
  const std::string broken = tmp.write("broken.json", "{\"a\": 1,");
  EXPECT_TRUE(
      test::throws_error([&] { Gpt2Tokenizer::load(broken, bpe); }, {"[tokenizer]", "broken.json:1:9", "expected"}));
  const std::string no_eot = tmp.encoder("\"ab\": 256");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(no_eot, bpe); }, {"encoder.json", "<|endoftext|>"}));
  const std::string gap = tmp.encoder("\"ab\": 256, \"<|endoftext|>\": 300");
  EXPECT_TRUE(
      test::throws_error([&] { Gpt2Tokenizer::load(gap, bpe); }, {"encoder.json", "id 300", "expected 0..257"}));
  const std::string enc = tmp.encoder("\"ab\": 256, \"<|endoftext|>\": 257");
  const std::string unknown = tmp.write("unknown.bpe", "#version: 0.2\na b\nab q\n");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, unknown); },
                                 {"[tokenizer]", "unknown.bpe:3", "merged token", "not in encoder.json"}));
  const std::string malformed = tmp.write("malformed.bpe", "#version: 0.2\na b c\n");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, malformed); },
                                 {"malformed.bpe:2", "two tokens separated by one space"}));
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, (tmp.dir / "nope.bpe").string()); },
                                 {"cannot open vocab.bpe", "nope.bpe"}));
}

// vocab.bpe must make every token of encoder.json longer than one byte: BPE can never emit a
// token no merge makes, which is what a vocab.bpe cut short looks like.
TEST(Tokenizer, VocabBpeMustMakeEveryLongerToken) {
  TempFiles tmp;
  const std::string enc = tmp.encoder("\"ab\": 256, \"bc\": 257, \"abc\": 258, \"<|endoftext|>\": 259");
  EXPECT_EQ(Gpt2Tokenizer::load(enc, tmp.write("full.bpe", "#version: 0.2\na b\nb c\nab c\n")).vocab_size(), 260);
  // The last merge missing.
  const std::string cut = tmp.write("cut.bpe", "#version: 0.2\na b\nb c\n");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, cut); },
                                 {"[tokenizer]", "cut.bpe: its 2 merges make 2 of the 3 tokens longer than one byte",
                                  "the other 1 could never be produced", "'abc' (id 258)", "truncated"}));
  // Cut inside the last line: one half of the pair missing.
  const std::string mid = tmp.write("mid.bpe", "#version: 0.2\na b\nb c\nab");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, mid); },
                                 {"mid.bpe:4", "two tokens separated by one space", "no newline", "truncated"}));
  // A merge whose result encoder.json lacks names its line.
  const std::string extra = tmp.write("extra.bpe", "#version: 0.2\na b\nb c\nab c\nc a\n");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, extra); },
                                 {"extra.bpe:5", "merged token is not in encoder.json", "'c a'"}));
  // Cut inside the last token: still a pair ("ab b" for "ab bc"), but "abbc" is never made.
  const std::string enc2 = tmp.encoder(  // replaces encoder.json
      "\"ab\": 256, \"bc\": 257, \"abbc\": 258, \"abb\": 259, \"<|endoftext|>\": 260");
  EXPECT_EQ(Gpt2Tokenizer::load(enc2, tmp.write("full2.bpe", "#version: 0.2\na b\nb c\nab b\nab bc\n")).vocab_size(),
            261);
  const std::string short_token = tmp.write("short.bpe", "#version: 0.2\na b\nb c\nab b\nab b");
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc2, short_token); },
                                 {"short.bpe", "'abbc' (id 258)", "last line has no newline", "truncated"}));
}

// GPT-2's own files, cut short, are refused (when the files are here).
TEST(Tokenizer, TruncatedGpt2VocabBpeIsRefused) {
  LLMCC_REQUIRE_DATA("gpt2/encoder.json");
  std::filesystem::path dir;
  if (const char* env = std::getenv("LLMCC_GPT2_TOKENIZER_DIR"); env && *env)
    dir = env;
  else
    dir = find_data_file("gpt2/encoder.json")->parent_path();
  TempFiles tmp;
  const std::string enc = (dir / "encoder.json").string();
  std::ifstream in(dir / "vocab.bpe", std::ios::binary);
  const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The "#version" line and the first 30,000 merges.
  std::size_t end = 0;
  for (int line = 0; line < 30'001; ++line) end = full.find('\n', end) + 1;
  const std::string lines = tmp.write("lines.bpe", full.substr(0, end));
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, lines); },
                                 {"lines.bpe: its 30,000 merges make 30,000 of the 50,000 tokens",
                                  "the other 20,000 could never be produced", "(id 30256)", "truncated"}));
  // Cut just after a pair's space: the last line has one token.
  const std::size_t space = full.find(' ', 300'000);
  const std::string cut = tmp.write("cut.bpe", full.substr(0, space + 1));
  const auto line_no = 1 + std::count(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(space), '\n');
  EXPECT_TRUE(test::throws_error([&] { Gpt2Tokenizer::load(enc, cut); },
                                 {("cut.bpe:" + std::to_string(line_no) + ":").c_str(), "no newline", "truncated"}));
}

TEST(Tokenizer, LoadDefaultHonoursTheEnvironmentVariable) {
  TempFiles tmp;
  const char* before = std::getenv("LLMCC_GPT2_TOKENIZER_DIR");
  const std::string saved = before ? before : "";
  ::setenv("LLMCC_GPT2_TOKENIZER_DIR", tmp.dir.c_str(), 1);
  EXPECT_TRUE(test::throws_error([] { Gpt2Tokenizer::load_default(); }, {"cannot open encoder.json", tmp.dir.c_str()}));
  if (before)
    ::setenv("LLMCC_GPT2_TOKENIZER_DIR", saved.c_str(), 1);
  else
    ::unsetenv("LLMCC_GPT2_TOKENIZER_DIR");
}

}  // namespace
}  // namespace llmcc
