// Safetensors reader and writer: round trips are bit-identical, BF16 and F16 convert exactly,
// and every kind of malformed file fails with an error naming the file and the tensor.
#include "llmcc/io/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "test_support.h"
#include "io/json_reader.h"

namespace {

using llmcc::SafetensorsReader;
using llmcc::TensorShape;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

// A safetensors file from a raw header text and raw data bytes (no validation: tests build broken
// files with it).
std::string write_raw(const TempDir& dir, const std::string& name, const std::string& header, const std::string& data,
                      std::uint64_t header_len_override = 0) {
  const std::string path = dir.file(name);
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header_len_override ? header_len_override : header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
  return path;
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(Safetensors, WriteReadRoundTripIsBitIdentical) {
  TempDir dir;
  std::vector<float> a = llmcc::test::random_vector<float>(3 * 5, 1);
  a[0] = -0.0f;
  a[1] = std::numeric_limits<float>::denorm_min();
  a[2] = std::numeric_limits<float>::infinity();
  const std::vector<float> b = llmcc::test::random_vector<float>(7, 2);
  const float scalar = 42.5f;
  const std::string path = dir.file("m.safetensors");
  llmcc::write_safetensors(
      path,
      {llmcc::safetensors_tensor("layer.a", {3, 5}, a.data()),
       llmcc::safetensors_tensor("b \"quoted\" \\ name", {7}, b.data()),
       llmcc::safetensors_tensor("empty", {0, 4}, nullptr), llmcc::safetensors_tensor("scalar", {}, &scalar)},
      {{"format", "pt"}, {"note", "line\nbreak"}});
  const SafetensorsReader r(path);
  ASSERT_EQ(r.tensors().size(), 4u);
  EXPECT_EQ(r.tensors()[0].name, "layer.a");
  EXPECT_EQ(r.tensors()[0].dtype, "F32");
  EXPECT_EQ(r.tensors()[1].name, "b \"quoted\" \\ name");
  ASSERT_EQ(r.metadata().size(), 2u);
  EXPECT_EQ(r.metadata()[1].second, "line\nbreak");
  std::vector<float> got(15);
  r.read_f32("layer.a", {3, 5}, got.data());
  EXPECT_EQ(bytes_of(got), bytes_of(a));
  TensorShape shape;
  EXPECT_EQ(bytes_of(r.read_f32("b \"quoted\" \\ name", &shape)), bytes_of(b));
  EXPECT_EQ(shape, TensorShape{7});
  EXPECT_EQ(r.read_f32("scalar", &shape), std::vector<float>{42.5f});
  EXPECT_EQ(shape, TensorShape{});
  EXPECT_EQ(r.unread(), std::vector<std::string>{"empty"});
  r.skip("empty");
  EXPECT_TRUE(r.unread().empty());

  // The data section starts 8-byte aligned (the header is padded with spaces).
  std::ifstream in(path, std::ios::binary);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, WriterRejectsBadNames) {
  TempDir dir;
  const float x = 1.0f;
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::write_safetensors(dir.file("a"),
                                 {llmcc::safetensors_tensor("t", {1}, &x), llmcc::safetensors_tensor("t", {1}, &x)});
      },
      {"[safetensors]", "tensor 't' given twice"}));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::write_safetensors(dir.file("a"), {llmcc::safetensors_tensor("__metadata__", {1}, &x)}); },
      {"invalid tensor name '__metadata__'"}));
}

TEST(Safetensors, F16ConversionIsExactForEveryValue) {
  // Every binary16 bit pattern against the compiler's own conversion.
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    _Float16 ref;
    std::memcpy(&ref, &h, 2);
    const float want = static_cast<float>(ref);
    const float got = llmcc::f16_to_f32(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "bits " << bits;
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << "bits " << bits;
    }
  }
  EXPECT_EQ(llmcc::f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(llmcc::f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(llmcc::f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(llmcc::f16_to_f32(0x7BFF), 65504.0f);               // largest finite
}

TEST(Safetensors, Bf16ConversionIsExact) {
  EXPECT_EQ(llmcc::bf16_bits_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(llmcc::bf16_bits_to_f32(0xC0A0), -5.0f);
  EXPECT_EQ(llmcc::bf16_bits_to_f32(0x3E20), 0.15625f);
  EXPECT_TRUE(std::isinf(llmcc::bf16_bits_to_f32(0x7F80)));
  for (std::uint32_t bits = 0; bits < 65536; bits += 97) {
    const float f = llmcc::bf16_bits_to_f32(static_cast<std::uint16_t>(bits));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), bits << 16);
  }
}

TEST(Safetensors, ReadsBf16AndF16AsFp32) {
  TempDir dir;
  // bf16: 1, -5, 0.15625; f16: 1, -2, 65504, 2^-24.
  const std::uint16_t bf[3] = {0x3F80, 0xC0A0, 0x3E20};
  const std::uint16_t hf[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
  std::string data(reinterpret_cast<const char*>(bf), 6);
  data.append(reinterpret_cast<const char*>(hf), 8);
  const std::string path = write_raw(dir, "h.safetensors",
                                     R"({"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},)"
                                     R"("h":{"dtype":"F16","shape":[2,2],"data_offsets":[6,14]}})",
                                     data);
  const SafetensorsReader r(path);
  EXPECT_EQ(r.read_f32("b"), (std::vector<float>{1.0f, -5.0f, 0.15625f}));
  std::vector<float> h(4);
  r.read_f32("h", {2, 2}, h.data());
  EXPECT_EQ(h, (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
}

TEST(Safetensors, ReadErrorsNameFileAndTensor) {
  TempDir dir;
  const std::string path = write_raw(dir, "m.safetensors",
                                     R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})",
                                     std::string(16, '\0'));
  const SafetensorsReader r(path);
  std::vector<float> out(4);
  EXPECT_TRUE(throws_error([&] { r.read_f32("missing", {2}, out.data()); },
                           {"[safetensors]", "m.safetensors", "no tensor 'missing'", "2 tensors", "'w'"}));
  EXPECT_TRUE(throws_error([&] { r.read_f32("w", {1, 2}, out.data()); },
                           {"m.safetensors", "tensor 'w'", "shape (2), expected (1, 2)"}));
  EXPECT_TRUE(throws_error([&] { r.read_f32("ids", {1}, out.data()); },
                           {"tensor 'ids'", "dtype I64, expected F32, BF16 or F16"}));
}

// One malformed file per case: header text, data bytes, what the error must say.
struct Broken {
  const char* what;
  std::string header;
  std::size_t data_bytes;
  std::vector<const char*> fragments;
};

TEST(Safetensors, MalformedFilesFailWithClearErrors) {
  TempDir dir;
  const std::string w8 = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<Broken> cases = {
      {"bad json", R"({"w":{"dtype":"F32",)", 8, {"(header)", "expected"}},
      {"not an object", R"([1, 2])", 0, {"does not start with '{'"}},
      {"duplicate tensor", "{" + w8 + "," + w8 + "}", 8, {"appears twice"}},
      {"entry not an object", R"({"w":[0,8]})", 8, {"tensor 'w'", "is an array, expected an object"}},
      {"no dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, {"tensor 'w'", "no string 'dtype'"}},
      {"unknown dtype",
       R"({"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})",
       8,
       {"unknown dtype 'F12'", "BF16"}},
      {"unknown key", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8, {"unexpected key 'x'"}},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, {"not a non-negative integer"}},
      {"float dim", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8, {"not a non-negative integer"}},
      {"offsets not a pair",
       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})",
       8,
       {"'data_offsets' must be [begin, end]"}},
      {"offsets reversed", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, {"end before they begin"}},
      {"offsets past data",
       R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       8,
       {"tensor 'w'", "run past the data section (8 bytes)"}},
      {"size mismatch",
       R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       8,
       {"tensor 'w'", "hold 8 bytes, but F32 (3) needs 12"}},
      {"huge shape",
       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       8,
       {"needs more than 2^64"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12,
       {"tensor 'b'", "overlap tensor 'a' [0, 8)"}},
      {"hole",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12,
       {"data bytes [4, 8) belong to no tensor", "before tensor 'b'"}},
      {"trailing bytes", "{" + w8 + "}", 12, {"data bytes [8, 12) after the last tensor", "4 bytes too many"}},
      {"metadata not strings", R"({"__metadata__":{"format":1},)" + w8 + "}", 8, {"__metadata__ 'format' is a number"}},
      {"metadata not object",
       R"({"__metadata__":"pt",)" + w8 + "}",
       8,
       {"__metadata__ is a string, expected an object"}},
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = write_raw(dir, "bad.safetensors", c.header, std::string(c.data_bytes, '\0'));
    EXPECT_TRUE(throws_error([&] { SafetensorsReader r(path); }, {"[safetensors]", "bad.safetensors"}));
    for (const char* f : c.fragments) EXPECT_TRUE(throws_error([&] { SafetensorsReader r(path); }, {f}));
  }
}

TEST(Safetensors, TruncatedAndMissingFiles) {
  TempDir dir;
  {
    std::ofstream(dir.file("short.safetensors"), std::ios::binary) << "abc";
  }
  EXPECT_TRUE(throws_error([&] { SafetensorsReader r(dir.file("short.safetensors")); },
                           {"short.safetensors", "truncated: 3 bytes"}));
  const std::string past = write_raw(dir, "past.safetensors", "{}", "", 1000);
  EXPECT_TRUE(throws_error([&] { SafetensorsReader r(past); },
                           {"past.safetensors", "header length 1000 runs past the end of the file (10 bytes)"}));
  EXPECT_TRUE(
      throws_error([&] { SafetensorsReader r(dir.file("nope.safetensors")); }, {"nope.safetensors", "cannot open"}));
  // A file cut short inside the tensor data: the last tensor's offsets run past the end.
  const std::vector<float> v(4, 1.0f);
  const std::string path = dir.file("cut.safetensors");
  llmcc::write_safetensors(path, {llmcc::safetensors_tensor("w", {4}, v.data())});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  EXPECT_TRUE(throws_error([&] { SafetensorsReader r(path); }, {"tensor 'w'", "run past the data section"}));
}

// A checkpoint of many small tensors: every one is listed in header order and found by name with
// its shape, offsets and values (loading is linear in the header; this checks the result only).
TEST(Safetensors, EmptyTensorsReadAsNoValues) {
  // Tensors with a zero dimension hold no bytes; reading one copies nothing (found by
  // fuzz_safetensors: the copy was a memcpy to the null data() of an empty vector).
  TempDir dir;
  const std::string path = write_raw(dir, "empty.safetensors",
                                     R"({"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                                     R"("e":{"dtype":"BF16","shape":[2,0,3],"data_offsets":[0,0]}})",
                                     "");
  const SafetensorsReader r(path);
  TensorShape shape;
  EXPECT_TRUE(r.read_f32("z", &shape).empty());
  EXPECT_EQ(shape, (TensorShape{0}));
  EXPECT_TRUE(r.read_f32("e", &shape).empty());
  EXPECT_EQ(shape, (TensorShape{2, 0, 3}));
  EXPECT_TRUE(r.unread().empty());
}

TEST(Safetensors, HundredThousandTensorsAreAllFoundByName) {
  TempDir dir;
  constexpr int kN = 100'000;
  const auto name = [](int i) { return "model.layers." + std::to_string(i / 8) + ".w" + std::to_string(i % 8); };
  const auto shape = [](int i) { return TensorShape{1 + i % 3}; };
  std::vector<float> values;  // tensor i holds 1 + i % 3 copies of i
  std::vector<std::size_t> at;
  for (int i = 0; i < kN; ++i) {
    at.push_back(values.size());
    values.insert(values.end(), static_cast<std::size_t>(1 + i % 3), static_cast<float>(i));
  }
  std::vector<llmcc::SafetensorsTensor> tensors;
  for (int i = 0; i < kN; ++i) tensors.push_back(llmcc::safetensors_tensor(name(i), shape(i), values.data() + at[i]));
  const std::string path = dir.file("many.safetensors");
  llmcc::write_safetensors(path, tensors);

  SafetensorsReader r(path);
  ASSERT_EQ(r.tensors().size(), static_cast<std::size_t>(kN));
  std::vector<float> out(3);
  for (int i = 0; i < kN; ++i) {
    const llmcc::SafetensorsEntry* e = r.find(name(i));
    ASSERT_NE(e, nullptr) << name(i);
    ASSERT_EQ(e->name, name(i));
    ASSERT_EQ(e->shape, shape(i)) << name(i);
    ASSERT_EQ(e->begin, 4 * at[i]) << name(i);
    ASSERT_EQ(&r.tensors()[static_cast<std::size_t>(i)], e);  // header order kept
    r.read_f32(name(i), shape(i), out.data());
    ASSERT_EQ(out[static_cast<std::size_t>(i % 3)], static_cast<float>(i)) << name(i);
  }
  EXPECT_TRUE(r.unread().empty());
  EXPECT_FALSE(r.has("model.layers.0.w8"));
  EXPECT_FALSE(r.has(""));
  SafetensorsReader moved = std::move(r);  // the name index moves with the entries
  EXPECT_EQ(moved.find(name(kN - 1))->begin, 4 * at[kN - 1]);
}

TEST(Json, ParsesValuesAndRejectsBadInput) {
  const llmcc::JsonValue v = llmcc::parse_json(
      R"( {"a": [1, -2.5e3, true, false, null, "x\u00e9"], "b": {"c": 9007199254740993}, "d": 1e-05} )", "t.json",
      "test");
  ASSERT_EQ(v.kind, llmcc::JsonValue::Kind::Object);
  const llmcc::JsonValue* a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 6u);
  EXPECT_TRUE(a->array[0].is_integer);
  EXPECT_EQ(a->array[1].number, -2500.0);
  EXPECT_FALSE(a->array[1].is_integer);
  EXPECT_TRUE(a->array[2].boolean);
  EXPECT_EQ(a->array[4].kind, llmcc::JsonValue::Kind::Null);
  EXPECT_EQ(a->array[5].string, "x\xc3\xa9");
  EXPECT_EQ(v.find("b")->find("c")->integer, 9007199254740993);  // exact beyond 2^53
  EXPECT_EQ(v.find("d")->number, 1e-5);
  EXPECT_EQ(v.find("zz"), nullptr);
  EXPECT_TRUE(throws_error([] { llmcc::parse_json("{\"a\": 01}", "t.json", "test"); },
                           {"[test]", "t.json:1:8", "leading zero"}));
  EXPECT_TRUE(throws_error([] { llmcc::parse_json("[1,]", "t.json", "test"); }, {"a JSON value"}));
  EXPECT_TRUE(throws_error([] { llmcc::parse_json("{} x", "t.json", "test"); }, {"end of file after the JSON value"}));
  EXPECT_TRUE(throws_error([] { llmcc::parse_json("tru", "t.json", "test"); }, {"a JSON value"}));
  EXPECT_TRUE(throws_error([] { llmcc::parse_json(std::string(100, '['), "t.json", "test"); }, {"64 levels"}));
  EXPECT_EQ(llmcc::json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(llmcc::json_number(1e-5), "1e-05");
  EXPECT_EQ(llmcc::json_number(3.0), "3");
}

}  // namespace
