// llmcc's JSON reading (src/io/json_reader.h): what it accepts, the positions and words of its
// errors, repeated keys, nesting depth, UTF-8 and surrogates, numbers, and lookup in large objects.
#include "io/json_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "test_support.h"

namespace {

using llmcc::JsonValue;
using llmcc::parse_json;
using llmcc::parse_json_int_object;
using llmcc::test::throws_error;

JsonValue parse(const std::string& text) { return parse_json(text, "t.json", "test"); }

TEST(Json, RepeatedKeyIsRejectedAtItsSecondOccurrence) {
  EXPECT_TRUE(throws_error([] { parse(R"({"a": 1, "b": 2, "a": 3})"); },
                           {"[test]", "t.json:1:18", "\"a\" appears twice", "got '\"'"}));
  // In a nested object, on a later line.
  EXPECT_TRUE(throws_error([] { parse("{\"x\": {\"k\": 1,\n  \"k\": 2}}"); }, {"t.json:2:3", "\"k\" appears twice"}));
  // The same key in two objects is fine.
  EXPECT_NO_THROW(parse(R"({"a": {"k": 1}, "b": {"k": 2}})"));
  // A large object (its keys are checked sorted): the first repeat in file order is named.
  std::string big = "{";
  for (int i = 0; i < 1000; ++i) big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",\n";
  EXPECT_NO_THROW(parse(big + "\"last\": 0}"));
  EXPECT_TRUE(throws_error([&] { parse(big + "\"k7\": 0, \"k3\": 0}"); }, {"t.json:1001:1", "\"k7\" appears twice"}));
}

TEST(Json, NestingDeeperThan64LevelsIsRejected) {
  const auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_NO_THROW(parse(nested(65)));  // the innermost array is 64 levels below the outermost
  EXPECT_TRUE(
      throws_error([&] { parse(nested(66)); }, {"t.json:1:66", "JSON nested at most 64 levels deep", "got '['"}));
  EXPECT_TRUE(throws_error([] { parse(std::string(1'000'000, '[')); }, {"64 levels"}));  // no stack exhaustion
  std::string objects;
  for (int i = 0; i < 70; ++i) objects += "{\"a\":";
  EXPECT_TRUE(throws_error([&] { parse(objects + "1"); }, {"64 levels"}));
}

TEST(Json, StringsAreUtf8WithEscapesAndSurrogatePairs) {
  const JsonValue v = parse(R"(["\u00e9\u4e2d\ud83d\ude00", "\"\\\/\b\f\n\r\t", "h\u00E9", "é"])");
  ASSERT_EQ(v.array.size(), 4u);
  EXPECT_EQ(v.array[0].string, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_EQ(v.array[1].string, "\"\\/\b\f\n\r\t");
  EXPECT_EQ(v.array[2].string, "h\xc3\xa9");
  EXPECT_EQ(v.array[3].string, "\xc3\xa9");
  // A high surrogate needs a low one after it; a low one cannot stand alone.
  EXPECT_TRUE(throws_error([] { parse(R"(["\ud800"])"); },
                           {"t.json:1:9", "a low surrogate \\uDC00..\\uDFFF after a high surrogate"}));
  EXPECT_TRUE(throws_error([] { parse(R"(["\ud800\u0041"])"); }, {"low surrogate"}));
  EXPECT_TRUE(throws_error([] { parse(R"(["\udc00"])"); }, {"no lone low surrogate"}));
  EXPECT_TRUE(throws_error([] { parse(R"(["\u12"])"); }, {"4 hex digits after \\u"}));
  EXPECT_TRUE(throws_error([] { parse(R"(["\q"])"); }, {"t.json:1:4", "a valid escape", "got 'q'"}));
  EXPECT_TRUE(throws_error([] { parse("[\"a\nb\"]"); }, {"t.json:1:4", "no raw control character inside a string"}));
  EXPECT_TRUE(throws_error([] { parse("[\"abc"); }, {"t.json:1:6", "'\"' closing the string", "got end of file"}));
  // Invalid UTF-8 in a string (a stray continuation byte, a truncated sequence, an overlong
  // form, an encoded surrogate) is an error at the byte, as in the reference safetensors reader.
  for (const char* bad : {"[\"a\x80\"]", "[\"a\xc3\"]", "[\"a\xc0\xaf\"]", "[\"a\xed\xa0\x80\"]"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(throws_error([&] { parse(bad); }, {"t.json:1:", "valid UTF-8 in a string"}));
  }
  EXPECT_TRUE(throws_error([] { parse_json_int_object("{\"\xff\": 1}", "enc.json", "tokenizer"); },
                           {"enc.json:1:3", "valid UTF-8 in a string", "JSON object of string -> integer"}));
}

TEST(Json, NumbersKeepIntegersExact) {
  const JsonValue v = parse(
      "[9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809, 1.0, 1e2, -0, "
      "18446744073709551616, 0.1]");
  ASSERT_EQ(v.array.size(), 9u);
  EXPECT_TRUE(v.array[0].is_integer);
  EXPECT_EQ(v.array[0].integer, std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE(v.array[1].is_integer);
  EXPECT_EQ(v.array[1].integer, std::numeric_limits<std::int64_t>::min());
  for (int i : {2, 3, 7}) {  // integral but beyond int64: numbers, not integers
    EXPECT_FALSE(v.array[i].is_integer) << i;
    EXPECT_EQ(v.array[i].kind, JsonValue::Kind::Number);
  }
  EXPECT_EQ(v.array[2].number, 9223372036854775808.0);
  EXPECT_EQ(v.array[3].number, -9223372036854775808.0);
  EXPECT_EQ(v.array[7].number, 18446744073709551616.0);
  EXPECT_FALSE(v.array[4].is_integer);  // written with a fraction or exponent: not an integer
  EXPECT_FALSE(v.array[5].is_integer);
  EXPECT_EQ(v.array[5].number, 100.0);
  EXPECT_TRUE(v.array[6].is_integer);
  EXPECT_EQ(v.array[6].integer, 0);
  EXPECT_EQ(v.array[8].number, 0.1);
  EXPECT_TRUE(throws_error([] { parse("[1e400]"); }, {"t.json:1:2", "a number within double range"}));
  EXPECT_TRUE(throws_error([] { parse("[-]"); }, {"a digit in a number"}));
  EXPECT_TRUE(throws_error([] { parse("[1.]"); }, {"a digit after the decimal point"}));
  EXPECT_TRUE(throws_error([] { parse("[1e+]"); }, {"a digit in the exponent"}));
  EXPECT_TRUE(throws_error([] { parse("[-01]"); }, {"t.json:1:4", "no leading zero in a number"}));
}

TEST(Json, SyntaxErrorsSayWhatWasExpectedWhere) {
  EXPECT_TRUE(throws_error([] { parse(R"({"a" 1})"); }, {"t.json:1:6", "':' after a key", "got '1'"}));
  EXPECT_TRUE(
      throws_error([] { parse(R"({"a": 1 "b": 2})"); }, {"t.json:1:9", "',' or '}' after a value", "got '\"'"}));
  EXPECT_TRUE(throws_error([] { parse("[1 2]"); }, {"t.json:1:4", "',' or ']' after an array element"}));
  EXPECT_TRUE(throws_error([] { parse("{1: 2}"); }, {"t.json:1:2", "'\"' starting a string"}));
  EXPECT_TRUE(throws_error([] { parse("[1,\n  ]"); }, {"t.json:2:3", "a JSON value", "got ']'"}));
  EXPECT_TRUE(throws_error([] { parse(""); }, {"t.json:1:1", "a JSON value", "got end of file"}));
  EXPECT_TRUE(throws_error([] { parse("[nul]"); }, {"a JSON value"}));
  EXPECT_TRUE(throws_error([] { parse("{}\n{}"); }, {"t.json:2:1", "end of file after the JSON value", "got '{'"}));
  // parse_json_int_object: the same positions, its own words and a hint.
  EXPECT_TRUE(throws_error([] { parse_json_int_object(R"({"a": {}})", "enc.json", "tokenizer"); },
                           {"enc.json:1:7", "an integer value", "got '{'", "JSON object of string -> integer"}));
  EXPECT_TRUE(throws_error([] { parse_json_int_object(R"({"a": 1e3})", "enc.json", "tokenizer"); },
                           {"enc.json:1:8", "an integer value (not a float)", "got 'e'"}));
  EXPECT_TRUE(throws_error([] { parse_json_int_object(R"({"a": 99999999999999999999})", "enc.json", "tokenizer"); },
                           {"enc.json:1:7", "an integer that fits in 64 bits"}));
  EXPECT_TRUE(throws_error([] { parse_json_int_object(R"({"a": 1} 2)", "enc.json", "tokenizer"); },
                           {"enc.json:1:10", "end of file after the object"}));
  EXPECT_TRUE(throws_error([] { parse_json_int_object("7", "enc.json", "tokenizer"); },
                           {"enc.json:1:1", "'{' starting the object"}));
}

TEST(Json, FindLooksUpSmallAndLargeObjects) {
  const JsonValue small = parse(R"({"b": 1, "a": 2})");
  EXPECT_EQ(small.find("a")->integer, 2);
  EXPECT_EQ(small.find("c"), nullptr);
  std::string text = "{";
  for (int i = 999; i >= 0; --i) text += "\"key" + std::to_string(i) + "\": " + std::to_string(i) + (i ? "," : "}");
  const JsonValue large = parse(text);
  ASSERT_EQ(large.object.size(), 1000u);
  EXPECT_EQ(large.object.front().first, "key999");  // file order kept
  for (int i = 0; i < 1000; ++i) {
    const JsonValue* v = large.find("key" + std::to_string(i));
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(v->integer, i);
  }
  EXPECT_EQ(large.find("key1000"), nullptr);
  EXPECT_EQ(large.find(""), nullptr);
  EXPECT_EQ(large.find("zzz"), nullptr);
  const JsonValue copy = large;  // the index is positions, so it holds in a copy
  EXPECT_EQ(copy.find("key500")->integer, 500);
  EXPECT_EQ(parse("[1]").find("a"), nullptr);  // not an object
}

}  // namespace
