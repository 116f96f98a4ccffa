#include "data_sets.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "llmcc/error.h"
#include "llmcc/train/data_files.h"

namespace llmcc::cli {

namespace fs = std::filesystem;

// Tiny Shakespeare is Karpathy's char-rnn corpus; any other size is another file.
constexpr std::uintmax_t kTinyShakespeareBytes = 1115394;

bool is_data_set_name(const std::string& input) {
  std::error_code ec;
  return input == kTinyShakespeare && !fs::exists(input, ec);
}

std::string data_set_path(const std::string& name, const char* cmd) {
  if (name != kTinyShakespeare) fail(cmd, "no data set named '" + name + "' (known: tinyshakespeare)");
  const fs::path path = fetch_data_files(tinyshakespeare_files(), kTinyShakespeare) / "input.txt";
  std::error_code ec;
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (ec || bytes != kTinyShakespeareBytes)
    fail(cmd, path.string() + " has " + std::to_string(bytes) + " bytes; Tiny Shakespeare has " +
                  std::to_string(kTinyShakespeareBytes) + " (a damaged copy? delete it to fetch it again)");
  std::printf("tinyshakespeare: using %s\n", path.c_str());
  return path.string();
}

}  // namespace llmcc::cli
