#include "train/json_reader.h"

#include <cstddef>

#include "llmcc/error.h"

namespace llmcc {
namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::string& filename, const std::string& where)
      : s_(text), filename_(filename), where_(where) {}

  std::vector<std::pair<std::string, int64_t>> object() {
    std::vector<std::pair<std::string, int64_t>> out;
    skip_ws();
    expect('{', "'{' starting the object");
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        skip_ws();
        std::string key = string();
        skip_ws();
        expect(':', "':' after a key");
        skip_ws();
        out.emplace_back(std::move(key), integer());
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "',' or '}' after a value");
        break;
      }
    }
    skip_ws();
    if (i_ != s_.size()) error("end of file after the object");
    return out;
  }

 private:
  int peek() const { return i_ < s_.size() ? static_cast<unsigned char>(s_[i_]) : -1; }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }

  void expect(char c, const char* what) {
    if (peek() != c) error(what);
    ++i_;
  }

  [[noreturn]] void error(const std::string& expected) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    // Built with append: GCC 12 reports a false -Wrestrict on "'" + std::string(1, c) + "'".
    std::string msg = filename_;
    msg.append(":").append(std::to_string(line)).append(":").append(std::to_string(col));
    msg.append(": expected ").append(expected).append(", got ");
    if (i_ >= s_.size()) {
      msg.append("end of file");
    } else {
      msg.append(1, '\'').append(1, s_[i_]).append(1, '\'');
    }
    msg.append(" (is this a JSON object of string -> integer?)");
    fail(where_, msg);
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      int c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error("4 hex digits after \\u");
      v = v * 16 + static_cast<unsigned>(d);
      ++i_;
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    expect('"', "'\"' starting a string");
    std::string out;
    for (;;) {
      int c = peek();
      if (c < 0) error("'\"' closing the string");
      ++i_;
      if (c == '"') return out;
      if (c < 0x20) {
        --i_;
        error("no raw control character inside a string");
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      int e = peek();
      ++i_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
            if (peek() != '\\') error("a low surrogate \\uDC00..\\uDFFF after a high surrogate");
            ++i_;
            if (peek() != 'u') error("a low surrogate \\uDC00..\\uDFFF after a high surrogate");
            ++i_;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error("a low surrogate \\uDC00..\\uDFFF after a high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            error("no lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --i_;
          error("a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
      }
    }
  }

  int64_t integer() {
    bool negative = peek() == '-';
    if (negative) ++i_;
    if (peek() < '0' || peek() > '9') error("an integer value");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (v > (INT64_MAX - 9) / 10) error("an integer that fits in 64 bits");
      v = v * 10 + (peek() - '0');
      ++i_;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') error("an integer value (not a float)");
    return negative ? -v : v;
  }

  std::string_view s_;
  const std::string& filename_;
  const std::string& where_;
  std::size_t i_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_json_int_object(std::string_view text,
                                                                    const std::string& filename,
                                                                    const std::string& where) {
  return Parser(text, filename, where).object();
}

}  // namespace llmcc
