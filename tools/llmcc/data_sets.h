// Text data sets llmcc knows by name, for `--input`: "tinyshakespeare" is Tiny Shakespeare,
// found or fetched like every data file llmcc does not ship (io/data_files.h).
#pragma once

#include <string>

namespace llmcc::cli {

inline constexpr const char* kTinyShakespeare = "tinyshakespeare";

// True when `input` names a data set rather than a file (no file of that name exists).
bool is_data_set_name(const std::string& input);

// The path of the data set's text, found or downloaded; throws llmcc::Error("[cmd] ...") when
// neither works, or when the file found is not the data set (a wrong size).
std::string data_set_path(const std::string& name, const char* cmd);

}  // namespace llmcc::cli
