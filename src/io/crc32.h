// CRC-32 (IEEE 802.3 / zlib / PNG: reflected polynomial 0xEDB88320, initial value and final xor
// 0xFFFFFFFF; crc32("123456789") = 0xCBF43926), slicing-by-8. Private to src/train.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmcc::detail {

class Crc32 {
 public:
  void update(const void* data, std::size_t n);
  std::uint32_t value() const { return ~state_; }

 private:
  std::uint32_t state_ = 0xFFFFFFFFu;
};

inline std::uint32_t crc32(const void* data, std::size_t n) {
  Crc32 c;
  c.update(data, n);
  return c.value();
}

}  // namespace llmcc::detail
