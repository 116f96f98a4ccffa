#include "data_sets.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "llmcc/error.h"
#include "io/data_files.h"

namespace llmcc::cli {

namespace fs = std::filesystem;

bool is_data_set_name(const std::string& input) {
  std::error_code ec;
  return input == kTinyShakespeare && !fs::exists(input, ec);
}

std::string data_set_path(const std::string& name, const char* cmd) {
  if (name != kTinyShakespeare) fail(cmd, "no data set named '" + name + "' (known: tinyshakespeare)");
  // Its size (data_files.cpp) is checked for a copy found here too, not only for a download.
  const std::vector<DataFile> files = tinyshakespeare_files();
  const DataFile& file = files.front();
  const fs::path path = fetch_data_files(files, kTinyShakespeare) / "input.txt";
  std::error_code ec;
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (ec || bytes != file.bytes)
    fail(cmd, path.string() + " has " + std::to_string(bytes) + " bytes; Tiny Shakespeare has " +
                  std::to_string(file.bytes) + " (a damaged copy? delete it to fetch it again)");
  std::printf("tinyshakespeare: using %s\n", path.c_str());
  return path.string();
}

}  // namespace llmcc::cli
