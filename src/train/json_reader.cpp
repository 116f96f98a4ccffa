#include "train/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstddef>
#include <system_error>

#include "llmcc/error.h"

namespace llmcc {
namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::string& filename, const std::string& where, const char* hint)
      : s_(text), filename_(filename), where_(where), hint_(hint) {}

  JsonValue document() {
    skip_ws();
    JsonValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) error("end of file after the JSON value");
    return v;
  }

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
    msg.append(hint_);
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

  static constexpr int kMaxDepth = 64;

  JsonValue value(int depth) {
    if (depth > kMaxDepth) error("JSON nested at most " + std::to_string(kMaxDepth) + " levels deep");
    JsonValue v;
    const int c = peek();
    if (c == '{') {
      v.kind = JsonValue::Kind::Object;
      ++i_;
      skip_ws();
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        skip_ws();
        const std::size_t key_at = i_;
        std::string key = string();
        for (const auto& [k, unused] : v.object) {
          if (k == key) {
            i_ = key_at;
            error("a key not already in this object (\"" + key + "\" appears twice)");
          }
        }
        skip_ws();
        expect(':', "':' after a key");
        skip_ws();
        JsonValue member = value(depth + 1);
        v.object.emplace_back(std::move(key), std::move(member));
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "',' or '}' after a value");
        return v;
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::Array;
      ++i_;
      skip_ws();
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        skip_ws();
        v.array.push_back(value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']', "',' or ']' after an array element");
        return v;
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.string = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (literal("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
      return v;
    }
    if (literal("false")) {
      v.kind = JsonValue::Kind::Bool;
      return v;
    }
    if (literal("null")) return v;
    error("a JSON value (object, array, string, number, true, false or null)");
  }

  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  JsonValue number() {
    const std::size_t start = i_;
    bool integral = true;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
      if (peek() >= '0' && peek() <= '9') error("no leading zero in a number");
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++i_;
    } else {
      error("a digit in a number");
    }
    if (peek() == '.') {
      integral = false;
      ++i_;
      if (peek() < '0' || peek() > '9') error("a digit after the decimal point");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (peek() < '0' || peek() > '9') error("a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + i_;
    JsonValue v;
    v.kind = JsonValue::Kind::Number;
    if (integral) {
      const auto r = std::from_chars(first, last, v.integer);
      v.is_integer = r.ec == std::errc() && r.ptr == last;
    }
    const auto r = std::from_chars(first, last, v.number);
    if (r.ptr != last || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
      i_ = start;
      error("a number");
    }
    if (r.ec == std::errc::result_out_of_range && !v.is_integer) {
      i_ = start;
      error("a number within double range");
    }
    return v;
  }

  std::string_view s_;
  const std::string& filename_;
  const std::string& where_;
  const char* hint_;
  std::size_t i_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_json_int_object(std::string_view text,
                                                                    const std::string& filename,
                                                                    const std::string& where) {
  return Parser(text, filename, where, " (is this a JSON object of string -> integer?)").object();
}

JsonValue parse_json(std::string_view text, const std::string& filename, const std::string& where) {
  return Parser(text, filename, where, "").document();
}

JsonValue::JsonValue() = default;

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

const char* JsonValue::kind_name() const {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
  }
  return "?";
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double x) {
  LLMCC_ASSERT(std::isfinite(x), "json_number needs a finite value");
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  LLMCC_ASSERT(r.ec == std::errc(), "to_chars failed");
  return std::string(buf, r.ptr);
}

}  // namespace llmcc
