#include "io/json_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <system_error>

#include "llmcc/error.h"
#include "llmcc/train/train_log.h"  // append_json_string

namespace llmcc {
namespace {

using Json = nlohmann::json;

constexpr int kMaxDepth = 64;
constexpr const char* kAnyValue = "a JSON value (object, array, string, number, true, false or null)";

// How far nlohmann's lexer has read. The SAX callbacks carry no position, so the parser reads
// the text through this iterator, which leaves its place in a Cursor the handler can see.
struct Cursor {
  const char* pos;      // one past the last byte read
  bool at_end = false;  // the lexer has asked past the last byte
};

class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* p, Cursor* c) : p_(p), c_(c) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    c_->pos = ++p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator old = *this;
    ++*this;
    return old;
  }
  // The lexer compares with the end before every byte it reads.
  bool operator==(const TrackedIterator& o) const {
    if (p_ != o.p_) return false;
    c_->at_end = true;
    return true;
  }

 private:
  const char* p_;
  Cursor* c_;
};

// What both handlers share: the text, error messages in llmcc's form, and where the token that
// a callback reports starts. nlohmann calls back right after lexing each token, so the token of
// a callback starts after the previous callback's token, whitespace, and at most one ':' or ','
// (the only tokens without a callback).
class Reader {
 public:
  Reader(std::string_view text, const std::string& filename, const std::string& where, const char* hint,
         const char* after_value)
      : s_(text), filename_(filename), where_(where), hint_(hint), after_value_(after_value), cursor_{text.data()} {}

  template <typename Handler>
  static void run(Handler& h) {
    Reader& r = h;
    const char* first = r.s_.data();
    const char* last = first + r.s_.size();
    // The handlers throw on every error, so the parse never stops early.
    const bool ok = Json::sax_parse(TrackedIterator(first, &r.cursor_), TrackedIterator(last, &r.cursor_), &h);
    LLMCC_ASSERT(ok, "nlohmann-json's SAX parser stopped without reporting an error");
  }

  // nlohmann's errors, in the words llmcc uses (tests/io/test_json.cpp pins the common ones).
  bool parse_error(std::size_t position, const std::string& last_token, const Json::exception& ex) {
    const std::size_t read =
        std::clamp<std::size_t>(position, 1, s_.size() + 1);  // bytes read, the failing one included
    if (ex.id == 406) error(read - std::min(read, last_token.size()), "a number within double range");
    const std::string_view what = ex.what();
    constexpr std::string_view kSyntax = "syntax error while parsing ";
    const std::size_t at = what.find(kSyntax);
    if (at == std::string_view::npos) error(read - 1, std::string(what));
    const std::string_view rest = what.substr(at + kSyntax.size());
    const std::string_view context = rest.substr(0, rest.find(" - "));
    const std::string_view detail = rest.substr(std::min(rest.size(), context.size() + 3));
    // What the parser wanted next: nlohmann's words, then llmcc's.
    struct Phrase {
      std::string_view nlohmann, llmcc;
    };
    const Phrase wanted[] = {
        {"'[', '{', or a literal", ""},  // a value: value_expected()
        {"string literal", "'\"' starting a string"},
        {"':'", "':' after a key"},
        {"'}'", "',' or '}' after a value"},
        {"']'", "',' or ']' after an array element"},
        {"end of input", after_value_},
    };
    const Phrase* expected = nullptr;
    for (const Phrase& w : wanted) {
      if (detail.ends_with("; expected " + std::string(w.nlohmann))) expected = &w;
    }
    const auto expected_words = [&] {
      return expected->llmcc.empty() ? value_expected() : std::string(expected->llmcc);
    };

    if (detail.starts_with("unexpected ")) {  // a whole token where another was wanted
      const std::string_view token = detail.substr(11, detail.find("; expected ") - 11);
      // Where it starts: the lexer keeps the text of string and number tokens only (last_token);
      // the others have a fixed length.
      std::size_t token_at = read - 1;
      if (token == "string literal" || token == "number literal") token_at = read - std::min(read, last_token.size());
      if (token == "true literal" || token == "null literal") token_at = read - std::min<std::size_t>(read, 4);
      if (token == "false literal") token_at = read - std::min<std::size_t>(read, 5);
      if (token == "end of input") token_at = s_.size();
      if (token == "number literal" && leading_zero(token_at)) error(token_at, "no leading zero in a number");
      if (expected == nullptr) error(token_at, std::string(context));
      error(token_at, expected_words());
    }

    // A lexer error. Where a structural token or the end was wanted (or a key, and no string
    // starts), the bytes that follow do not lex at all: said as for any wrong token there.
    if (expected != nullptr && !expected->llmcc.empty()) {
      const std::size_t token_at = token_start();
      if (leading_zero(token_at)) error(token_at, "no leading zero in a number");
      if (expected != &wanted[1] || token_at >= s_.size() || s_[token_at] != '"') error(token_at, expected_words());
    }
    const std::string_view message = detail.substr(0, detail.find("; last read: "));
    if (message.starts_with("invalid literal") || message.starts_with("invalid BOM")) {
      // No token starts here. Point at the start of a broken true, false or null ("nul",
      // "fals1"), else at the byte.
      std::size_t start = read - 1;
      for (std::size_t k = std::min<std::size_t>(4, read - 1); k > 0; --k) {
        const std::string_view prefix = s_.substr(read - 1 - k, k);
        if ((prefix.size() < 4 || prefix == "fals") &&
            (std::string_view("true").starts_with(prefix) || std::string_view("false").starts_with(prefix) ||
             std::string_view("null").starts_with(prefix))) {
          start = read - 1 - k;
          break;
        }
      }
      error(start, value_expected());
    }
    // A broken string or number: the byte that stopped the lexer is the last one read, except
    // after a whole \uXXXX that is a misplaced surrogate (then the byte after it).
    static constexpr Phrase kLexer[] = {
        {"invalid number; expected digit after '-'", "a digit in a number"},
        {"invalid number; expected digit after '.'", "a digit after the decimal point"},
        {"invalid number; expected '+', '-', or digit after exponent", "a digit in the exponent"},
        {"invalid number; expected digit after exponent sign", "a digit in the exponent"},
        {"invalid string: missing closing quote", "'\"' closing the string"},
        {"invalid string: control character", "no raw control character inside a string"},
        {"invalid string: forbidden character after backslash",
         "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"},
        {"invalid string: '\\u' must be followed by 4 hex digits", "4 hex digits after \\u"},
        {"invalid string: surrogate U+D800..U+DBFF", "a low surrogate \\uDC00..\\uDFFF after a high surrogate"},
        {"invalid string: surrogate U+DC00..U+DFFF", "no lone low surrogate"},
        {"invalid string: ill-formed UTF-8 byte", "valid UTF-8 in a string"},
    };
    for (const Phrase& p : kLexer) {
      if (!message.starts_with(p.nlohmann)) continue;
      const bool after_escape =
          message.starts_with("invalid string: surrogate") && read >= 6 && s_.substr(read - 6, 2) == "\\u";
      error(after_escape ? read : read - 1, std::string(p.llmcc));
    }
    error(read - 1, std::string(message));
  }

  bool binary(Json::binary_t&) { return true; }  // binary formats only; never called for JSON

 protected:
  // "expected <expected>, got <the byte at offset>" with the file, line and column of offset.
  [[noreturn]] void error(std::size_t offset, const std::string& expected) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < offset && k < s_.size(); ++k) {
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
    if (offset >= s_.size()) {
      msg.append("end of file");
    } else {
      msg.append(1, '\'').append(1, s_[offset]).append(1, '\'');
    }
    msg.append(hint_);
    fail(where_, msg);
  }

  // A number token at `at` right after a "0" token: "01" lexes as "0" then "1".
  bool leading_zero(std::size_t at) const {
    return at > 0 && at < s_.size() && s_[at - 1] == '0' && s_[at] >= '0' && s_[at] <= '9';
  }

  // Where the token of the current callback starts (see the class comment).
  std::size_t token_start() const {
    std::size_t i = prev_end_;
    bool separator = false;
    while (i < s_.size()) {
      const char c = s_[i];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || (!separator && (c == ':' || c == ','))) {
        separator = separator || c == ':' || c == ',';
        ++i;
      } else {
        break;
      }
    }
    return i;
  }
  // Called at the end of every callback. The lexer reads one byte past a number (or finds the
  // end of the text); every other token ends at the last byte read.
  void token_done(bool number = false) {
    prev_end_ = static_cast<std::size_t>(cursor_.pos - s_.data()) - (number && !cursor_.at_end ? 1 : 0);
  }

  ~Reader() = default;
  virtual std::string value_expected() const { return kAnyValue; }

  std::string_view s_;

 private:
  const std::string& filename_;
  const std::string& where_;
  const char* hint_;
  const char* after_value_;
  Cursor cursor_;
  std::size_t prev_end_ = 0;  // one past the last token a callback reported
};

// parse_json: builds the JsonValue tree, rejecting repeated keys and deep nesting.
class TreeBuilder final : public Reader {
 public:
  TreeBuilder(std::string_view text, const std::string& filename, const std::string& where)
      : Reader(text, filename, where, "", "end of file after the JSON value") {}

  JsonValue take() { return std::move(root_); }

  bool null() {
    slot();
    token_done();
    return true;
  }
  bool boolean(bool b) {
    JsonValue& v = slot();
    v.kind = JsonValue::Kind::Bool;
    v.boolean = b;
    token_done();
    return true;
  }
  bool number_integer(Json::number_integer_t x) {
    const bool minus_zero = x == 0 && s_[token_start()] == '-';  // "-0": the double keeps its sign
    number(minus_zero ? -0.0 : static_cast<double>(x), true, x);
    return true;
  }
  bool number_unsigned(Json::number_unsigned_t x) {
    const bool fits = x <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    number(static_cast<double>(x), fits, fits ? static_cast<std::int64_t>(x) : 0);
    return true;
  }
  bool number_float(Json::number_float_t x, const std::string& text) {
    // nlohmann rejects overflow to infinity; underflow to zero ("1e-400") is refused here.
    if (x == 0 && text.substr(0, text.find_first_of("eE")).find_first_of("123456789") != std::string::npos) {
      error(token_start(), "a number within double range");
    }
    number(x, false, 0);
    return true;
  }
  bool string(std::string& s) {
    JsonValue& v = slot();
    v.kind = JsonValue::Kind::String;
    v.string = std::move(s);
    token_done();
    return true;
  }
  bool start_object(std::size_t) {
    JsonValue& v = slot();
    v.kind = JsonValue::Kind::Object;
    open_.push_back({&v, key_at_.size()});
    token_done();
    return true;
  }
  bool key(std::string& k) {
    const Open& o = open_.back();
    std::vector<std::pair<std::string, JsonValue>>& members = o.value->object;
    const std::size_t at = token_start();
    if (members.size() < JsonValue::kIndexedMembers) {  // larger objects are checked once, sorted
      for (const auto& [name, unused] : members) {
        if (name == k) repeated(at, k);
      }
    }
    key_at_.push_back(at);
    members.emplace_back(std::move(k), JsonValue());
    token_done();
    return true;
  }
  bool end_object() {
    const Open o = open_.back();
    open_.pop_back();
    index(*o.value, o.first_key);
    key_at_.resize(o.first_key);
    token_done();
    return true;
  }
  bool start_array(std::size_t) {
    JsonValue& v = slot();
    v.kind = JsonValue::Kind::Array;
    open_.push_back({&v, 0});
    token_done();
    return true;
  }
  bool end_array() {
    open_.pop_back();
    token_done();
    return true;
  }

 private:
  struct Open {
    JsonValue* value;       // stays put: its parent grows only after it is closed
    std::size_t first_key;  // objects: where their keys' offsets start in key_at_
  };

  // The value the current callback fills: the root, a new array element or the last key's value.
  JsonValue& slot() {
    if (open_.size() > static_cast<std::size_t>(kMaxDepth)) {
      error(token_start(), "JSON nested at most " + std::to_string(kMaxDepth) + " levels deep");
    }
    if (open_.empty()) return root_;
    JsonValue& parent = *open_.back().value;
    if (parent.kind == JsonValue::Kind::Array) return parent.array.emplace_back();
    return parent.object.back().second;
  }

  void number(double x, bool is_integer, std::int64_t integer) {
    JsonValue& v = slot();
    v.kind = JsonValue::Kind::Number;
    v.number = x;
    v.is_integer = is_integer;
    v.integer = integer;
    token_done(true);
  }

  [[noreturn]] void repeated(std::size_t at, const std::string& k) const {
    error(at, "a key not already in this object (\"" + k + "\" appears twice)");
  }

  // Sorts the member positions of a large object by key (ties in file order), so a repeated key
  // sits next to its first occurrence and find can search.
  void index(JsonValue& v, std::size_t first_key) {
    const auto& m = v.object;
    if (m.size() < JsonValue::kIndexedMembers) return;
    LLMCC_ASSERT(m.size() <= std::numeric_limits<std::uint32_t>::max(), "JSON object too large to index");
    v.sorted.resize(m.size());
    std::iota(v.sorted.begin(), v.sorted.end(), 0u);
    std::sort(v.sorted.begin(), v.sorted.end(), [&m](std::uint32_t a, std::uint32_t b) {
      const int c = m[a].first.compare(m[b].first);
      return c != 0 ? c < 0 : a < b;
    });
    std::uint32_t first_repeat = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t i = 1; i < v.sorted.size(); ++i) {
      if (m[v.sorted[i]].first == m[v.sorted[i - 1]].first) first_repeat = std::min(first_repeat, v.sorted[i]);
    }
    if (first_repeat != std::numeric_limits<std::uint32_t>::max()) {
      repeated(key_at_[first_key + first_repeat], m[first_repeat].first);
    }
  }

  JsonValue root_;
  std::vector<Open> open_;           // the arrays and objects being read, outermost first
  std::vector<std::size_t> key_at_;  // byte offset of each key of the open objects
};

// parse_json_int_object: one flat object of integers, read straight into key/value pairs.
class IntObjectReader final : public Reader {
 public:
  IntObjectReader(std::string_view text, const std::string& filename, const std::string& where)
      : Reader(text, filename, where, " (is this a JSON object of string -> integer?)",
               "end of file after the object") {}

  std::vector<std::pair<std::string, std::int64_t>> take() { return std::move(out_); }

  bool null() { not_integer(); }
  bool boolean(bool) { not_integer(); }
  bool string(std::string&) { not_integer(); }
  bool start_array(std::size_t) { not_integer(); }
  bool end_array() { return true; }  // unreachable: start_array fails
  bool number_integer(Json::number_integer_t x) {
    if (!in_object_) not_integer();
    out_.back().second = x;
    token_done(true);
    return true;
  }
  bool number_unsigned(Json::number_unsigned_t x) {
    if (!in_object_) not_integer();
    if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      error(token_start(), "an integer that fits in 64 bits");
    }
    out_.back().second = static_cast<std::int64_t>(x);
    token_done(true);
    return true;
  }
  bool number_float(Json::number_float_t, const std::string& text) {
    if (!in_object_) not_integer();
    const std::size_t fraction = text.find_first_of(".eE");
    if (fraction == std::string::npos) error(token_start(), "an integer that fits in 64 bits");
    error(token_start() + fraction, "an integer value (not a float)");
  }
  bool start_object(std::size_t) {
    if (in_object_) not_integer();
    in_object_ = true;
    token_done();
    return true;
  }
  bool key(std::string& k) {
    out_.emplace_back(std::move(k), 0);
    token_done();
    return true;
  }
  bool end_object() {
    in_object_ = false;
    token_done();
    return true;
  }

 private:
  [[noreturn]] void not_integer() const { error(token_start(), value_expected()); }
  std::string value_expected() const override { return in_object_ ? "an integer value" : "'{' starting the object"; }

  std::vector<std::pair<std::string, std::int64_t>> out_;
  bool in_object_ = false;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_json_int_object(std::string_view text, const std::string& filename,
                                                                   const std::string& where) {
  IntObjectReader r(text, filename, where);
  Reader::run(r);
  return r.take();
}

JsonValue parse_json(std::string_view text, const std::string& filename, const std::string& where) {
  TreeBuilder b(text, filename, where);
  Reader::run(b);
  return b.take();
}

JsonValue::JsonValue() = default;

const JsonValue* JsonValue::find(std::string_view key) const {
  if (!sorted.empty() && sorted.size() == object.size()) {
    const auto it = std::lower_bound(sorted.begin(), sorted.end(), key,
                                     [this](std::uint32_t i, std::string_view k) { return object[i].first < k; });
    return it != sorted.end() && object[*it].first == key ? &object[*it].second : nullptr;
  }
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

const char* JsonValue::kind_name() const {
  switch (kind) {
    case Kind::Null:
      return "null";
    case Kind::Bool:
      return "a boolean";
    case Kind::Number:
      return "a number";
    case Kind::String:
      return "a string";
    case Kind::Array:
      return "an array";
    case Kind::Object:
      return "an object";
  }
  return "?";
}

std::string json_quote(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::string json_number(double x) {
  LLMCC_ASSERT(std::isfinite(x), "json_number needs a finite value");
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  LLMCC_ASSERT(r.ec == std::errc(), "to_chars failed");
  return std::string(buf, r.ptr);
}

}  // namespace llmcc
