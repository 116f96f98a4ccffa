// GGUF files as llmcc/io/gguf_writer.h writes them, read back byte by byte: the header, every metadata
// type, tensor infos with ggml's dimension order, 32-byte aligned offsets and the tensors' bytes;
// and a bad request (a duplicate name, a row its type cannot block, a zero dimension) refused by
// name before anything is written.
#include "llmcc/io/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "test_support.h"

namespace {

using llmcc::GgmlType;
using llmcc::GgufMetadata;
using llmcc::GgufTensor;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

class Reader {
 public:
  explicit Reader(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    b_.assign(std::istreambuf_iterator<char>(in), {});
  }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<std::uint64_t>();
    std::string s(b_.data() + at_, n);
    at_ += n;
    return s;
  }
  std::size_t at() const { return at_; }
  const char* data() const { return b_.data(); }
  std::size_t size() const { return b_.size(); }

 private:
  std::vector<char> b_;
  std::size_t at_ = 0;
};

TEST(GgufWriterApi, HeaderMetadataInfosAndAlignedDataReadBack) {
  const TempDir dir;
  GgufMetadata md;
  md.set("general.architecture", std::string("llama"));
  md.set("a.u32", std::uint32_t{7});
  md.set("a.i32", std::int32_t{-3});
  md.set("a.f32", 0.25f);
  md.set("a.bool", true);
  md.set("a.strings", std::vector<std::string>{"x", "", "yz"});
  md.set("a.ints", std::vector<std::int32_t>{1, -2});
  md.set("a.floats", std::vector<float>{1.5f});
  md.set("a.u32", std::uint32_t{8});  // replaces, in place
  std::vector<float> m(3 * 64), v(5);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i) * 0.5f;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = -static_cast<float>(i);
  const std::vector<GgufTensor> tensors = {
      {"m", {64, 3}, GgmlType::Q8_0, [&](float* out) { std::copy(m.begin(), m.end(), out); }},
      {"v", {5}, GgmlType::F32, [&](float* out) { std::copy(v.begin(), v.end(), out); }},
  };
  llmcc::write_gguf(dir.file("a.gguf"), md, tensors);

  Reader r(dir.file("a.gguf"));
  EXPECT_EQ(r.get<std::uint32_t>(), 0x46554747u);  // "GGUF"
  EXPECT_EQ(r.get<std::uint32_t>(), 3u);
  EXPECT_EQ(r.get<std::uint64_t>(), 2u);
  EXPECT_EQ(r.get<std::uint64_t>(), 8u);
  EXPECT_EQ(r.str(), "general.architecture");
  EXPECT_EQ(r.get<std::uint32_t>(), 8u);
  EXPECT_EQ(r.str(), "llama");
  EXPECT_EQ(r.str(), "a.u32");
  EXPECT_EQ(r.get<std::uint32_t>(), 4u);
  EXPECT_EQ(r.get<std::uint32_t>(), 8u);
  EXPECT_EQ(r.str(), "a.i32");
  EXPECT_EQ(r.get<std::uint32_t>(), 5u);
  EXPECT_EQ(r.get<std::int32_t>(), -3);
  EXPECT_EQ(r.str(), "a.f32");
  EXPECT_EQ(r.get<std::uint32_t>(), 6u);
  EXPECT_EQ(r.get<float>(), 0.25f);
  EXPECT_EQ(r.str(), "a.bool");
  EXPECT_EQ(r.get<std::uint32_t>(), 7u);
  EXPECT_EQ(r.get<std::uint8_t>(), 1u);
  EXPECT_EQ(r.str(), "a.strings");
  EXPECT_EQ(r.get<std::uint32_t>(), 9u);
  EXPECT_EQ(r.get<std::uint32_t>(), 8u);
  EXPECT_EQ(r.get<std::uint64_t>(), 3u);
  EXPECT_EQ(r.str(), "x");
  EXPECT_EQ(r.str(), "");
  EXPECT_EQ(r.str(), "yz");
  EXPECT_EQ(r.str(), "a.ints");
  EXPECT_EQ(r.get<std::uint32_t>(), 9u);
  EXPECT_EQ(r.get<std::uint32_t>(), 5u);
  EXPECT_EQ(r.get<std::uint64_t>(), 2u);
  EXPECT_EQ(r.get<std::int32_t>(), 1);
  EXPECT_EQ(r.get<std::int32_t>(), -2);
  EXPECT_EQ(r.str(), "a.floats");
  EXPECT_EQ(r.get<std::uint32_t>(), 9u);
  EXPECT_EQ(r.get<std::uint32_t>(), 6u);
  EXPECT_EQ(r.get<std::uint64_t>(), 1u);
  EXPECT_EQ(r.get<float>(), 1.5f);
  // Tensor infos: ne[0] first, the type, the offset within the data section.
  EXPECT_EQ(r.str(), "m");
  EXPECT_EQ(r.get<std::uint32_t>(), 2u);
  EXPECT_EQ(r.get<std::uint64_t>(), 64u);
  EXPECT_EQ(r.get<std::uint64_t>(), 3u);
  EXPECT_EQ(r.get<std::uint32_t>(), 8u);  // Q8_0
  EXPECT_EQ(r.get<std::uint64_t>(), 0u);
  EXPECT_EQ(r.str(), "v");
  EXPECT_EQ(r.get<std::uint32_t>(), 1u);
  EXPECT_EQ(r.get<std::uint64_t>(), 5u);
  EXPECT_EQ(r.get<std::uint32_t>(), 0u);    // F32
  EXPECT_EQ(r.get<std::uint64_t>(), 224u);  // 3 rows x 68 bytes = 204, aligned up to 32
  const std::size_t data = (r.at() + 31) / 32 * 32;
  ASSERT_EQ(r.size(), data + 224 + 32);  // the last tensor padded too
  // The q8_0 rows decode to the values; the f32 tensor is its bytes.
  std::vector<float> back(m.size());
  llmcc::ggml_dequantize_row(GgmlType::Q8_0, reinterpret_cast<const std::uint8_t*>(r.data() + data), 192, back.data());
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(back[i], m[i], 0.51 * 95.5 / 127) << i;
  EXPECT_EQ(std::memcmp(r.data() + data + 224, v.data(), 5 * sizeof(float)), 0);
}

TEST(GgufWriterApi, BadRequestsAreRefusedByNameAndLeaveNoFile) {
  const TempDir dir;
  const auto zeros = [](float*) {};
  const std::string path = dir.file("bad.gguf");
  EXPECT_TRUE(throws_error(
      [&] { llmcc::write_gguf(path, {}, {{"a", {32}, GgmlType::F32, zeros}, {"a", {32}, GgmlType::F32, zeros}}); },
      {"[gguf]", "tensor a is given twice"}));
  EXPECT_TRUE(throws_error([&] { llmcc::write_gguf(path, {}, {{"w", {64, 2}, GgmlType::Q4_K, zeros}}); },
                           {"[gguf]", "tensor w", "64", "q4_K"}));
  EXPECT_TRUE(throws_error([&] { llmcc::write_gguf(path, {}, {{"w", {0, 2}, GgmlType::F32, zeros}}); },
                           {"[gguf]", "tensor w", "dimension of 0"}));
  EXPECT_TRUE(
      throws_error([&] { llmcc::write_gguf(path, {}, {{"", {1}, GgmlType::F32, zeros}}); }, {"[gguf]", "no name"}));
  EXPECT_FALSE(std::filesystem::exists(path));
  // A fill that throws midway leaves no file either (the write is atomic).
  EXPECT_THROW(llmcc::write_gguf(path, {}, {{"t", {32}, GgmlType::F32, [](float*) { throw std::runtime_error("x"); }}}),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
