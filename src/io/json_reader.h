// JSON reading (RFC 8259) and writer helpers, private to llmcc. The reading is nlohmann-json's
// SAX parser (a fuzzed library; docs/architecture.md, "JSON", has the measurements behind the
// choice) with llmcc's rules on top:
//
//   parse_json_int_object: flat objects of string keys and integer values, such as GPT-2's
//     encoder.json: {"!": 0, "\u0120the": 262, ...}.
//   parse_json: any JSON document into a JsonValue tree (safetensors headers, Hugging Face
//     config.json). Object keys keep their file order; a repeated key is an error (a
//     safetensors header naming one tensor twice is corrupt, not "last one wins").
//
// Strings must be valid UTF-8 and may hold any escape JSON allows, \uXXXX with surrogate pairs
// included; they come back as UTF-8. Errors name the file, the line and column (in bytes), and
// what was expected and found:
//   Error("[<where>] <filename>:<line>:<col>: expected ..., got ...").
// Parsing takes time linear in the text, plus n log n in the members of each object of 16 or more
// (their keys are sorted, to find repeats and so that JsonValue::find is a binary search).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcc {

std::vector<std::pair<std::string, int64_t>> parse_json_int_object(std::string_view text, const std::string& filename,
                                                                   const std::string& where);

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;      // every number, as a double
  bool is_integer = false;  // written without fraction or exponent and fits int64
  int64_t integer = 0;      // its exact value when is_integer
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order, keys unique
  // Set by parse_json for objects of kIndexedMembers or more: the member positions in `object`
  // ordered by key, so find is a binary search. Empty otherwise (find scans).
  std::vector<std::uint32_t> sorted;
  static constexpr std::size_t kIndexedMembers = 16;

  // Defined (= default) in json_reader.cpp: with an implicit one, clang instantiates
  // std::pair<std::string, JsonValue> (libstdc++'s pair asks whether its members are implicitly
  // default-constructible) while JsonValue is still incomplete, and rejects it.
  JsonValue();

  // The member named key of an object, or null when absent (or when this is not an object).
  const JsonValue* find(std::string_view key) const;
  // "null", "a boolean", "a number", "a string", "an array", "an object" (for messages).
  const char* kind_name() const;
};

// Nesting deeper than 64 levels is an error (no stack exhaustion on hostile input).
JsonValue parse_json(std::string_view text, const std::string& filename, const std::string& where);

// s as a JSON string literal with quotes (append_json_string): control characters, '"' and '\'
// escaped, UTF-8 characters kept, a byte that is not part of one written as \ufffd.
std::string json_quote(std::string_view s);

// x as a JSON number that reads back to the same float (shortest round-trip form); integers
// have no fraction ("1", "1e-05"). x must be finite.
std::string json_number(double x);

}  // namespace llmcc
