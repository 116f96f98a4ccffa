// Token files in llm.c's format (docs/data-format.md), so data prepared for llm.c works here and
// ours works there.
//
//   header: 256 little-endian int32
//     [0] magic 20240520
//     [1] version: 1 = tokens are uint16 (llm.c's only version), 2 = tokens are uint32
//         (llmcc's extension for vocabularies over 65,535 ids; llm.c cannot read it)
//     [2] number of tokens N (0 <= N < 2^31)
//     [3..255] zero
//   then N tokens, 2 or 4 bytes each, little-endian; nothing after them.
//
//   write_token_file("train_000.bin", ids);          // version 1 if every id fits in uint16
//   TokenFile f("train_000.bin");                    // validates, memory-maps
//   f.read(0, 1024, buffer);                         // tokens [0, 1024) widened to int32
//
// A bad file throws llmcc::Error naming the file and what is wrong ("truncated: the header says
// 1000 tokens (2000 bytes) but only 1500 bytes follow it", "bad magic 20240326 ...").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llmcc {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr std::size_t kTokenFileHeaderBytes = kTokenFileHeaderInts * sizeof(std::int32_t);

// Writes `tokens` to `path` atomically (<path>.tmp, fsync, rename). version 0 picks 1 when every
// token is in [0, 65535] and 2 otherwise; asking for version 1 with a larger id, a negative id,
// or 2^31 or more tokens throws llmcc::Error.
void write_token_file(const std::string& path, std::span<const std::int32_t> tokens, int version = 0);

// A validated, memory-mapped token file. Cheap to move; the mapping lives as long as it does.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);
  TokenFile(TokenFile&&) noexcept;
  TokenFile& operator=(TokenFile&&) noexcept;
  ~TokenFile();

  const std::string& path() const;
  int version() const { return version_; }
  std::int64_t size() const { return count_; }  // number of tokens

  // Copies tokens [start, start + n) into out, widened to int32. Asserts the range is inside.
  void read(std::int64_t start, std::int64_t n, std::int32_t* out) const;
  std::int32_t at(std::int64_t i) const;
  std::vector<std::int32_t> read_all() const;

 private:
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  int version_ = 1;
  std::int64_t count_ = 0;
  const unsigned char* tokens_ = nullptr;  // start of the token payload
};

// Reads a whole token file (convenience for tools and tests).
std::vector<std::int32_t> read_token_file(const std::string& path);

}  // namespace llmcc
