// Checkpoint inputs carry a CRC-32 and their own size, which random mutations almost never keep
// right; the reader would refuse nearly every input at the checksum. So the first input byte
// chooses: odd, the file is the rest of the input with its size field, end marker and checksum
// rewritten to match (the table and section parsers see mutated but checksummed files); even,
// the rest is written as it is (the checks before the checksum see raw bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "io/crc32.h"

namespace llmcc::fuzz {

// The file bytes for an input (first byte: the mode described above).
inline std::string checkpoint_file_bytes(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {};
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr std::size_t kHeader = 32, kTrailer = 8;  // as in src/io/checkpoint.cpp
  if ((data[0] & 1) == 0 || file.size() < kHeader + kTrailer || file.compare(0, 8, "LLMCCKPT") != 0) return file;
  const std::uint64_t n = file.size();
  std::memcpy(file.data() + 16, &n, 8);
  std::memcpy(file.data() + file.size() - 4, "KEND", 4);
  const std::uint32_t crc = detail::crc32(file.data(), file.size() - kTrailer);
  std::memcpy(file.data() + file.size() - kTrailer, &crc, 4);
  return file;
}

}  // namespace llmcc::fuzz
