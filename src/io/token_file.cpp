#include "llmcc/io/token_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "file_io.h"
#include "llmcc/error.h"

namespace llmcc {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; a big-endian port needs byte swaps here");

namespace {
constexpr const char* kWhere = "token_file";
constexpr std::int32_t kLlmcModelMagic = 20240326;  // llm.c's GPT-2 checkpoint, a common mix-up
}  // namespace

void write_token_file(const std::string& path, std::span<const std::int32_t> tokens, int version) {
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail(kWhere, path + ": " + std::to_string(tokens.size()) +
                     " tokens do not fit the header's int32 count; split them into shards");
  }
  std::int32_t max_id = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0) {
      fail(kWhere, path + ": token " + std::to_string(i) + " is negative (" + std::to_string(tokens[i]) +
                       "); token ids must be >= 0");
    }
    max_id = std::max(max_id, tokens[i]);
  }
  if (version == 0) version = max_id <= 0xFFFF ? 1 : 2;
  if (version != 1 && version != 2) {
    fail(kWhere, path + ": version must be 0 (auto), 1 (uint16) or 2 (uint32), got " + std::to_string(version));
  }
  if (version == 1 && max_id > 0xFFFF) {
    fail(kWhere, path + ": version 1 stores uint16 tokens but the largest id is " + std::to_string(max_id) +
                     "; use version 2 (or 0 to choose automatically)");
  }

  std::int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = version;
  header[2] = static_cast<std::int32_t>(tokens.size());
  detail::AtomicFile out(path, kWhere);
  out.write(header, sizeof(header));
  // Narrow in blocks so a large shard needs no second full-size copy.
  constexpr std::size_t kBlock = 1 << 16;
  std::vector<std::uint16_t> narrow;
  if (version == 1) {
    narrow.resize(std::min(kBlock, tokens.size()));
    for (std::size_t i = 0; i < tokens.size(); i += kBlock) {
      const std::size_t n = std::min(kBlock, tokens.size() - i);
      for (std::size_t j = 0; j < n; ++j) narrow[j] = static_cast<std::uint16_t>(tokens[i + j]);
      out.write(narrow.data(), n * sizeof(std::uint16_t));
    }
  } else {
    out.write(tokens.data(), tokens.size() * sizeof(std::int32_t));
  }
  out.commit();
}

struct TokenFile::Mapping {
  detail::MappedFile file;
};

TokenFile::TokenFile(const std::string& path)
    : map_(std::make_unique<Mapping>(Mapping{detail::MappedFile(path, kWhere)})) {
  const detail::MappedFile& f = map_->file;
  if (f.size() < kTokenFileHeaderBytes) {
    fail(kWhere, path + ": truncated: a token file starts with a " + std::to_string(kTokenFileHeaderBytes) +
                     "-byte header, the file has only " + std::to_string(f.size()) + " bytes");
  }
  std::int32_t header[3];
  std::memcpy(header, f.data(), sizeof(header));
  if (header[0] != kTokenFileMagic) {
    std::string hint = "; not an llm.c token file (was it written by `llmcc prepare`?)";
    if (header[0] == kLlmcModelMagic) hint = "; this looks like an llm.c model checkpoint, not token data";
    fail(kWhere,
         path + ": bad magic " + std::to_string(header[0]) + ", expected " + std::to_string(kTokenFileMagic) + hint);
  }
  if (header[1] != 1 && header[1] != 2) {
    fail(kWhere,
         path + ": unsupported version " + std::to_string(header[1]) + "; known: 1 (uint16 tokens), 2 (uint32 tokens)");
  }
  if (header[2] < 0) {
    fail(kWhere, path + ": corrupt header: negative token count " + std::to_string(header[2]));
  }
  version_ = header[1];
  count_ = header[2];
  const std::size_t width = version_ == 1 ? 2 : 4;
  const std::size_t expected = static_cast<std::size_t>(count_) * width;
  const std::size_t have = f.size() - kTokenFileHeaderBytes;
  if (have < expected) {
    fail(kWhere, path + ": truncated: the header says " + std::to_string(count_) + " tokens (" +
                     std::to_string(expected) + " bytes) but only " + std::to_string(have) +
                     " bytes follow it; re-create the file");
  }
  if (have > expected) {
    fail(kWhere, path + ": " + std::to_string(have - expected) + " unexpected bytes after the " +
                     std::to_string(count_) + " tokens the header announces (version " + std::to_string(version_) +
                     ", " + std::to_string(width) + " bytes per token); the header's count or version is wrong");
  }
  tokens_ = f.data() + kTokenFileHeaderBytes;
}

TokenFile::TokenFile(TokenFile&&) noexcept = default;
TokenFile& TokenFile::operator=(TokenFile&&) noexcept = default;
TokenFile::~TokenFile() = default;

const std::string& TokenFile::path() const { return map_->file.path(); }

void TokenFile::read(std::int64_t start, std::int64_t n, std::int32_t* out) const {
  LLMCC_ASSERT(start >= 0 && n >= 0 && start + n <= count_, "token range outside the file");
  if (version_ == 1) {
    const unsigned char* p = tokens_ + start * 2;
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out[i] = v;
    }
  } else {
    const unsigned char* p = tokens_ + start * 4;
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = static_cast<std::int32_t>(v);
    }
  }
}

std::int32_t TokenFile::at(std::int64_t i) const {
  std::int32_t v = 0;
  read(i, 1, &v);
  return v;
}

std::vector<std::int32_t> TokenFile::read_all() const {
  std::vector<std::int32_t> out(static_cast<std::size_t>(count_));
  read(0, count_, out.data());
  return out;
}

std::vector<std::int32_t> read_token_file(const std::string& path) { return TokenFile(path).read_all(); }

}  // namespace llmcc
