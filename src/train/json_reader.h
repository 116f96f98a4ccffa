// A minimal JSON reader for flat objects of string keys and integer values, such as GPT-2's
// encoder.json: {"!": 0, "\u0120the": 262, ...}. Strings may hold any escape JSON allows,
// \uXXXX with surrogate pairs included; keys come back as UTF-8. Anything else (nested values,
// floats, true/false/null) is an error naming the file, the line and column, and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcc {

// Throws Error("[<where>] <filename>:<line>:<col>: expected ..., got ...").
std::vector<std::pair<std::string, int64_t>> parse_json_int_object(std::string_view text,
                                                                    const std::string& filename,
                                                                    const std::string& where);

}  // namespace llmcc
