#include "text/gpt2_pretokenize.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace llmcc::gpt2 {
namespace {

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
};

#include "text/unicode_tables.inc"

bool in_ranges(const CodePointRange* begin, const CodePointRange* end, uint32_t cp) {
  // First range whose hi >= cp; cp is inside it if lo <= cp.
  const CodePointRange* r =
      std::lower_bound(begin, end, cp, [](const CodePointRange& a, uint32_t v) { return a.hi < v; });
  return r != end && r->lo <= cp;
}

// \s in Python `regex` and Rust `regex`: the Unicode White_Space property (stable since 6.3).
bool is_white_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

CharClass classify_slow(uint32_t cp) {
  if (is_white_space(cp)) return CharClass::kSpace;
  if (in_ranges(std::begin(kLetterRanges), std::end(kLetterRanges), cp)) return CharClass::kLetter;
  if (in_ranges(std::begin(kNumberRanges), std::end(kNumberRanges), cp)) return CharClass::kNumber;
  return CharClass::kOther;
}

// Latin-1 is most of what real text needs: one table look-up instead of a binary search.
const std::array<CharClass, 256> kLatin1 = [] {
  std::array<CharClass, 256> t{};
  for (uint32_t cp = 0; cp < 256; ++cp) t[cp] = classify_slow(cp);
  return t;
}();

}  // namespace

CharClass classify(uint32_t cp) { return cp < 256 ? kLatin1[cp] : classify_slow(cp); }

uint32_t decode_utf8(std::string_view s, std::size_t i, std::size_t& len) {
  constexpr uint32_t kInvalid = 0xFFFFFFFFu;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = byte(i);
  len = 1;
  if (c < 0x80) return c;
  std::size_t need;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1, cp = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2, cp = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3, cp = c & 0x07, min = 0x10000;
  } else {
    return kInvalid;  // continuation byte, overlong lead C0/C1, or F5..FF
  }
  if (i + need >= s.size()) return kInvalid;  // truncated
  for (std::size_t k = 1; k <= need; ++k) {
    const unsigned b = byte(i + k);
    if ((b & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  len = need + 1;
  return cp;
}

const char* unicode_version() { return LLMCC_UNICODE_VERSION; }

}  // namespace llmcc::gpt2
