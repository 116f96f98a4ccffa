// Token files in llm.c's format: round trips, llm.c interop, and every broken-file error.
#include "llmcc/io/token_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"
#include "test_support.h"

namespace llmcc {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
using test::TempDir;

void write_raw(const std::string& path, const std::vector<std::int32_t>& header_ints,
               const std::vector<std::uint16_t>& tokens) {
  std::vector<std::int32_t> header(256, 0);
  std::copy(header_ints.begin(), header_ints.end(), header.begin());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
}

TEST(TokenFile, RoundTripsUint16AndUint32Tokens) {
  TempDir dir;
  const std::vector<std::int32_t> small = {0, 1, 50256, 65535, 7};
  write_token_file(dir.file("a.bin"), small);
  TokenFile a(dir.file("a.bin"));
  EXPECT_EQ(a.version(), 1);
  EXPECT_EQ(a.size(), 5);
  EXPECT_EQ(a.read_all(), small);
  EXPECT_EQ(fs::file_size(dir.file("a.bin")), 1024u + 5 * 2);
  EXPECT_FALSE(fs::exists(dir.file("a.bin.tmp")));

  const std::vector<std::int32_t> big = {3, 65536, 151935, 0};  // a Llama-3-sized vocabulary
  write_token_file(dir.file("b.bin"), big);
  EXPECT_EQ(TokenFile(dir.file("b.bin")).version(), 2);
  EXPECT_EQ(read_token_file(dir.file("b.bin")), big);
  write_token_file(dir.file("c.bin"), small, 2);  // version 2 on request
  EXPECT_EQ(TokenFile(dir.file("c.bin")).version(), 2);
  EXPECT_EQ(read_token_file(dir.file("c.bin")), small);

  write_token_file(dir.file("empty.bin"), {});
  EXPECT_EQ(TokenFile(dir.file("empty.bin")).size(), 0);

  std::int32_t window[2];
  a.read(2, 2, window);
  EXPECT_EQ(window[0], 50256);
  EXPECT_EQ(window[1], 65535);
  EXPECT_EQ(a.at(4), 7);
}

TEST(TokenFile, ReadsFilesWrittenByLlmC) {
  // Byte for byte what llm.c's data scripts write: header ints, then uint16 tokens.
  TempDir dir;
  write_raw(dir.file("llmc.bin"), {20240520, 1, 3}, {464, 2068, 7586});
  EXPECT_EQ(read_token_file(dir.file("llmc.bin")), (std::vector<std::int32_t>{464, 2068, 7586}));
}

TEST(TokenFile, WriterRejectsWhatTheFormatCannotHold) {
  TempDir dir;
  EXPECT_TRUE(test::throws_error([&] { write_token_file(dir.file("x.bin"), std::vector<std::int32_t>{1, 70000}, 1); },
                                 {"[token_file]", "x.bin", "largest id is 70000", "version 2"}));
  EXPECT_TRUE(test::throws_error([&] { write_token_file(dir.file("x.bin"), std::vector<std::int32_t>{1, -3}); },
                                 {"[token_file]", "token 1 is negative"}));
  EXPECT_TRUE(test::throws_error([&] { write_token_file(dir.file("x.bin"), std::vector<std::int32_t>{1}, 3); },
                                 {"[token_file]", "version must be"}));
  EXPECT_FALSE(fs::exists(dir.file("x.bin")));
  EXPECT_TRUE(test::throws_error([&] { write_token_file(dir.file("no/such/dir/x.bin"), std::vector<std::int32_t>{1}); },
                                 {"[token_file]", "x.bin", "cannot create"}));
}

TEST(TokenFile, BrokenFilesSayWhichFileAndWhatIsWrong) {
  TempDir dir;
  const std::string p = dir.file("bad.bin");
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"[token_file]", "bad.bin", "cannot open"}));

  {
    std::ofstream(p, std::ios::binary) << "short";
  }
  EXPECT_TRUE(
      test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "truncated", "1024-byte header", "only 5 bytes"}));

  write_raw(p, {12345, 1, 3}, {1, 2, 3});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "bad magic 12345", "expected 20240520"}));

  write_raw(p, {20240326, 3, 3}, {1, 2, 3});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad magic", "llm.c model checkpoint"}));

  write_raw(p, {20240520, 7, 3}, {1, 2, 3});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "unsupported version 7"}));

  write_raw(p, {20240520, 1, -1}, {});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "negative token count"}));

  write_raw(p, {20240520, 1, 5}, {1, 2, 3});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); },
                                 {"bad.bin", "truncated", "says 5 tokens (10 bytes)", "only 6 bytes"}));

  write_raw(p, {20240520, 2, 3}, {1, 2, 3});  // uint16 data under a uint32 header
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "truncated", "12 bytes"}));

  write_raw(p, {20240520, 1, 2}, {1, 2, 3});
  EXPECT_TRUE(test::throws_error([&] { TokenFile f(p); }, {"bad.bin", "2 unexpected bytes after the 2 tokens"}));

  EXPECT_TRUE(test::throws_error([&] { TokenFile f(dir.path.string()); }, {"not a regular file"}));
}

}  // namespace
}  // namespace llmcc
