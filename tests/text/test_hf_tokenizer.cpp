// tokenizer.json (llmcc/text/hf_tokenizer.h) on small files written here: merges by rank,
// ignore_merges, added tokens (longest first, specials only where allowed), decode of any bytes,
// and every part llmcc does not implement refused by name. Equality with the `tokenizers` library
// on real vocabularies and corpora is tests/hf/test_hf_tokenizers.py.
#include "llmcc/text/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llmcc/error.h"
#include "llmcc/text/text_tokenizer.h"
#include "temp_dir.h"
#include "text_edit.h"

namespace {

using llmcc::HfTokenizer;
using llmcc::test::replace_once;

// ByteLevel's character for byte b, as JSON string content (\uXXXX).
std::string byte_char(int b) {
  static std::vector<int> cp = [] {
    std::vector<int> out(256);
    int next = 256;
    for (int i = 0; i < 256; ++i) {
      const bool printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
      out[static_cast<std::size_t>(i)] = printable ? i : next++;
    }
    return out;
  }();
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", cp[static_cast<std::size_t>(b)]);
  return buf;
}

// Ids 0..255 the bytes; 256 "ab", 257 "abc", 258 "Ġa" (space a), 259 "bc"; merges in the order given.
std::string tokenizer_json(const std::string& merges = R"(["a b", "ab c", "\u0120 a", "b c"])",
                           const std::string& model_extra = "", const std::string& pre = "") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) vocab += "\"" + byte_char(b) + "\": " + std::to_string(b) + ", ";
  vocab += R"("ab": 256, "abc": 257, "\u0120a": 258, "bc": 259)";
  const std::string pre_tokenizer =
      pre.empty() ? R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})"
                  : pre;
  return R"({"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 260, "content": "<|s|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                   {"id": 261, "content": "<|s|>x", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
                   {"id": 262, "content": "zz", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}],
  "normalizer": null, "pre_tokenizer": )" +
         pre_tokenizer + R"(, "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false)" +
         model_extra + R"(, "vocab": {)" + vocab + R"(}, "merges": )" + merges + "}}";
}

std::vector<std::int32_t> ids(std::initializer_list<std::int32_t> v) { return v; }

TEST(HfTokenizer, MergesApplyByRankAndAddedTokensLongestFirst) {
  const HfTokenizer t = HfTokenizer::from_json(tokenizer_json(), "t.json");
  EXPECT_EQ(t.vocab_size(), 263);
  EXPECT_EQ(t.encode("abc", false), ids({257}));  // a b -> ab, ab c -> abc
  // " abcd": "a b" (rank 0) first, then "ab c"; "Ġ a" (rank 2) never gets its pair.
  EXPECT_EQ(t.encode("abc abcd", false), ids({257, ' ', 257, 'd'}));
  EXPECT_EQ(t.encode("xbc", false), ids({'x', 259}));
  // Added tokens: the longest at a position wins; a special one only when allowed.
  EXPECT_EQ(t.encode("a<|s|>b", true), ids({'a', 260, 'b'}));
  EXPECT_EQ(t.encode("a<|s|>xb", true), ids({'a', 261, 'b'}));
  EXPECT_EQ(t.encode("a<|s|>xb", false), ids({'a', 261, 'b'}));  // not special: always matched
  EXPECT_EQ(t.encode("<|s|>", false), ids({'<', '|', 's', '|', '>'}));
  EXPECT_EQ(t.encode("azzb", false), ids({'a', 262, 'b'}));
  EXPECT_EQ(t.token_id("<|s|>"), 260);
  EXPECT_EQ(t.token_id("abc"), 257);
  EXPECT_FALSE(t.token_id("nope").has_value());
}

TEST(HfTokenizer, IgnoreMergesTakesAWholePieceThatIsAToken) {
  // Merges that never build "abc" from "bc": with ignore_merges the piece is the token anyway.
  const std::string merges = R"(["b c", "a b", "ab c", "\u0120 a"])";
  EXPECT_EQ(HfTokenizer::from_json(tokenizer_json(merges), "t").encode("abc", false), ids({'a', 259}));
  EXPECT_EQ(HfTokenizer::from_json(tokenizer_json(merges, R"(, "ignore_merges": true)"), "t").encode("abc", false),
            ids({257}));
  // The [a, b] form of merges reads as "a b".
  const std::string pairs = R"([["b", "c"], ["a", "b"], ["ab", "c"], ["\u0120", "a"]])";
  EXPECT_EQ(HfTokenizer::from_json(tokenizer_json(pairs), "t").encode("abc", false), ids({'a', 259}));
}

TEST(HfTokenizer, DecodeGivesBackAnyBytes) {
  const HfTokenizer t = HfTokenizer::from_json(tokenizer_json(), "t.json");
  for (const std::string& s : {std::string("abc abcd <|s|>x zz"), std::string("\xff\xfe\xc3( \xe2\x82"),
                               std::string("caf\xc3\xa9 \xf0\x9f\x91\x8b\n\t "), std::string()}) {
    EXPECT_EQ(t.decode(t.encode(s, true)), s);
    EXPECT_EQ(t.decode(t.encode(s, false)), s);
  }
  EXPECT_EQ(t.decode(ids({260})), "<|s|>");
  const std::vector<std::int32_t> bad = {263};
  EXPECT_THROW((void)t.decode(bad), llmcc::Error);
}

// The error of loading `json`, or "" when it loads.
std::string load_error(const std::string& json) {
  try {
    (void)HfTokenizer::from_json(json, "tok.json");
  } catch (const llmcc::Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfTokenizer, WhatIsNotImplementedIsRefusedByName) {
  const std::string good = tokenizer_json();
  ASSERT_EQ(load_error(good), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replace_once(good, R"("normalizer": null)", R"("normalizer": {"type": "NFKC"})"), "normalizer.type is NFKC"},
      {replace_once(good, R"("byte_fallback": false)", R"("byte_fallback": true)"),
       "model.byte_fallback is true; llmcc implements false"},
      {replace_once(good, R"("type": "BPE")", R"("type": "WordPiece")"), "model.type is WordPiece"},
      {replace_once(good, R"("dropout": null)", R"("dropout": 0.1)"), "model.dropout is a number"},
      {replace_once(good, R"("continuing_subword_prefix": null)", R"("continuing_subword_prefix": "##")"),
       "model.continuing_subword_prefix is set"},
      {replace_once(good, R"("add_prefix_space": false)", R"("add_prefix_space": true)"),
       "pre_tokenizer.add_prefix_space is true"},
      {replace_once(good, R"("decoder": {"type": "ByteLevel"})", R"("decoder": {"type": "Metaspace"})"),
       "decoder.type is Metaspace"},
      {replace_once(good, R"("lstrip": false, "rstrip": false, "normalized": false, "special": true)",
                    R"("lstrip": true, "rstrip": false, "normalized": false, "special": true)"),
       "added_tokens[0].lstrip is true"},
      {replace_once(good, R"("a b", )", R"("a b c", )"), "model.merges[0] 'a b c' is not two tokens"},
      {replace_once(good, R"("ab c", )", R"("ab q", )"), "model.merges[1] 'ab q': abq is not in the vocabulary"},
      {tokenizer_json(R"(["a b"])", "",
                      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{L}+"},
                         "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})"),
       "pre_tokenizer.pretokenizers[0].behavior is Removed; llmcc implements Isolated"},
      {tokenizer_json(R"(["a b"])", "",
                      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(unclosed"},
                         "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})"),
       "the pre-tokenizer's regex does not compile"},
      {tokenizer_json(R"(["a b"])", "", R"({"type": "Whitespace"})"), "pre_tokenizer.type is Whitespace"},
      {"[1, 2]", "tok.json: is an array, expected a JSON object"},
      {"{\"model\": ", "tok.json:1:"},
  };
  for (const auto& [json, fragment] : cases) {
    const std::string error = load_error(json);
    EXPECT_NE(error.find(fragment), std::string::npos) << "expected `" << fragment << "` in: " << error;
    EXPECT_NE(error.find("tok.json"), std::string::npos) << error;
  }
}

// decode maps an id to one string, so a file where one id names two tokens cannot round-trip and
// is refused; an added token that repeats a vocab entry (GPT-2's "<|endoftext|>") is fine.
TEST(HfTokenizer, AnIdNamesOneToken) {
  const std::string good = tokenizer_json();
  const std::string zz = R"("id": 262, "content": "zz")";
  ASSERT_EQ(load_error(replace_once(good, zz, R"("id": 259, "content": "bc")")), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replace_once(good, R"("bc": 259)", R"("bc": 256)"), "model.vocab gives id 256 to both"},
      {replace_once(good, R"("bc": 259)", R"("bc": 98)"), "model.vocab gives id 98 to both"},
      {replace_once(good, zz, R"("id": 259, "content": "zz")"), "added token 'zz' has id 259, which names 'bc'"},
      {replace_once(good, zz, R"("id": 260, "content": "zz")"), "added token 'zz' has id 260, which names '<|s|>'"},
      {replace_once(good, zz, R"("id": 262, "content": "abc")"),
       "added token 'abc' has id 262 but model.vocab gives it id 257"},
      {replace_once(good, zz, R"("id": 555555207, "content": "zz")"), "ids go up to 555555207 for 263 tokens"},
  };
  for (const auto& [json, fragment] : cases) {
    const std::string error = load_error(json);
    EXPECT_NE(error.find(fragment), std::string::npos) << "expected `" << fragment << "` in: " << error;
  }
}

// A SentencePiece-style file: ids 0 <unk>, 1 <s>, 2..257 the bytes' <0xXX>, 258 "▁", 259 "a",
// 260 "b", 261 "▁a", 262 "ab", 263 "▁ab"; merges "▁ a", "a b", "▁a b".
std::string metaspace_json(const std::string& pre, const std::string& decoder, bool byte_fallback = true,
                           const std::string& normalizer = "null") {
  std::string vocab = R"("<unk>": 0, "<s>": 1, )";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof name, "\"<0x%02X>\": %d, ", b, b + 2);
    vocab += name;
  }
  vocab += R"("\u2581": 258, "a": 259, "b": 260, "\u2581a": 261, "ab": 262, "\u2581ab": 263)";
  return R"({"added_tokens": [{"id": 1, "content": "<s>", "special": true}], "normalizer": )" + normalizer +
         R"(, "pre_tokenizer": )" + pre + R"(, "decoder": )" + decoder +
         R"(, "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": )" +
         (byte_fallback ? "true" : "false") + R"(, "vocab": {)" + vocab +
         R"(}, "merges": ["\u2581 a", "a b", "\u2581a b"]}})";
}

TEST(HfTokenizer, SentencePieceStyleModelsSplitAtSpacesAndFallBackToBytes) {
  const std::string pre =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true})";
  const std::string dec = R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"},)"
                          R"( {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}]})";
  const HfTokenizer t = HfTokenizer::from_json(metaspace_json(pre, dec), "sp.json");
  EXPECT_FALSE(t.lossless());
  EXPECT_EQ(t.encode("ab ab", false), ids({263, 263}));    // "▁ab" "▁ab"
  EXPECT_EQ(t.encode("ba", false), ids({258, 260, 259}));  // "▁" "b" "a": no merge joins them
  // "é" is not in the vocabulary: its two UTF-8 bytes' tokens.
  EXPECT_EQ(t.encode("a\xc3\xa9", false), ids({261, 2 + 0xc3, 2 + 0xa9}));
  EXPECT_EQ(t.decode(ids({261, 2 + 0xc3, 2 + 0xa9, 263})), "a\xc3\xa9 ab");  // the first ▁ dropped
  // After an added token the text starts again with "▁" (prepend_scheme always).
  EXPECT_EQ(t.encode("<s>ab", true), ids({1, 263}));
  // prepend_scheme first: only the text at the start of the input; unsplit: one piece.
  const std::string first =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})";
  const HfTokenizer f = HfTokenizer::from_json(metaspace_json(first, dec), "sp.json");
  EXPECT_EQ(f.encode("ab<s>ab", true), ids({263, 1, 262}));
  // Without byte fallback an unknown character is unk, consecutive ones one unk (fuse_unk).
  const HfTokenizer u = HfTokenizer::from_json(metaspace_json(pre, dec, false), "sp.json");
  EXPECT_EQ(u.encode("a\xc3\xa9\xc3\xa9"
                     "b",
                     false),
            ids({261, 0, 260}));
  // Llama 2's converted form: Prepend and Replace normalizers, no pre-tokenizer, and the decoder
  // Replace, ByteFallback, Fuse, Strip.
  const std::string legacy_norm = R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},)"
                                  R"( {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";
  const std::string legacy_dec =
      R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},)"
      R"( {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";
  const HfTokenizer l = HfTokenizer::from_json(metaspace_json("null", legacy_dec, true, legacy_norm), "sp.json");
  EXPECT_EQ(l.encode(" ab", false), ids({258, 263}));  // "▁▁ab": Prepend does not look at what follows
  EXPECT_EQ(l.decode(ids({258, 263})), " ab");
  // What is not implemented is refused by name.
  const std::string bad_scheme =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "sometimes", "split": true})";
  EXPECT_NE(load_error(metaspace_json(bad_scheme, dec)).find("prepend_scheme is sometimes"), std::string::npos);
  EXPECT_NE(load_error(metaspace_json(pre, R"({"type": "WordPiece"})")).find("decoder.type is WordPiece"),
            std::string::npos);
  const std::string two = R"({"type": "Metaspace", "replacement": "ab", "prepend_scheme": "always"})";
  EXPECT_NE(load_error(metaspace_json(two, dec)).find("pre_tokenizer.replacement is not one character"),
            std::string::npos);
}

TEST(HfTokenizer, SpecsLoadAFileOrItsDirectoryWithTheConfigsSpecialTokens) {
  llmcc::test::TempDir dir;
  {
    std::ofstream(dir.file("tokenizer.json")) << tokenizer_json();
    std::ofstream(dir.file("tokenizer_config.json")) << R"({"bos_token": "<|s|>", "eos_token": {"content": "zz"}})";
  }
  for (const std::string& spec :
       {"hf:" + dir.path.string(), "hf:" + dir.file("tokenizer.json"), dir.path.string(), dir.file("tokenizer.json")}) {
    const auto t = llmcc::load_text_tokenizer(spec);
    EXPECT_EQ(t->bos(), 260) << spec;
    EXPECT_EQ(t->eos(), 262) << spec;
    EXPECT_EQ(t->document_start(), 260);
    EXPECT_EQ(t->encode_prompt("abc"), ids({260, 257}));
    EXPECT_EQ(t->encode("<|s|>"), ids({260}));
    EXPECT_EQ(t->encode_ordinary("<|s|>").size(), 5u);
    EXPECT_EQ(t->spec(), "hf:" + dir.file("tokenizer.json"));
  }
  std::ofstream(dir.file("tokenizer_config.json"), std::ios::trunc) << R"({"eos_token": "<|nope|>"})";
  try {
    (void)llmcc::load_text_tokenizer(dir.path.string());
    ADD_FAILURE() << "an eos_token that is not a token loaded";
  } catch (const llmcc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("eos_token '<|nope|>' is not a token of"), std::string::npos) << e.what();
  }
}

}  // namespace
