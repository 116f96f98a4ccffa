// Data files llmcc reads but does not ship: GPT-2's tokenizer (gpt2/encoder.json,
// gpt2/vocab.bpe) and Tiny Shakespeare (tinyshakespeare/input.txt). Where they are looked for,
// and how they are fetched when they are not found.
//
// Each file has a path relative to a data directory laid out like ../shared/data. It is looked
// for, in order:
//   1. $LLMCC_SHARED_DATA/<relative> when that variable is set (then no other shared directory);
//      otherwise <dir>/../shared/data/<relative> for dir = the working directory, the
//      executable's directory, and each of their ancestors;
//   2. the download cache: $LLMCC_DATA_CACHE/<relative>, else $XDG_CACHE_HOME/llmcc/<relative>,
//      else $HOME/.cache/llmcc/<relative>.
// When a set of files is not found, fetch_data_files downloads it into the cache with curl, from
// $LLMCC_DATA_URL/<relative> when that is set (a mirror; file:// URLs work) or else from each
// file's public URL, checks it, and renames it into place; LLMCC_OFFLINE=1 turns downloading
// off. scripts/fetch_data.sh does the same from the shell.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace llmcc {

struct DataFile {
  std::string relative;     // "gpt2/encoder.json"
  std::string url;          // where it is published
  std::uint64_t bytes = 0;  // its exact size, when it is known (0: not checked)
};

// GPT-2's BPE files, as OpenAI publishes them.
std::vector<DataFile> gpt2_tokenizer_files();
// Tiny Shakespeare, from Karpathy's char-rnn repository (1,115,394 bytes).
std::vector<DataFile> tinyshakespeare_files();

// The download cache directory (see above); empty when neither variable nor HOME is set.
std::filesystem::path data_cache_dir();

// The first existing place of `relative` (see above), shared directories before the cache;
// nullopt if none. `tried` (if given) receives every candidate looked at, in order.
std::optional<std::filesystem::path> find_data_file(const std::string& relative,
                                                    std::vector<std::string>* tried = nullptr);

// The directory holding every file of `files` (each file's relative path must share the same
// parent): the first place that has them all, else the cache after downloading the missing ones.
// `check` (may be empty) validates a downloaded set in its temporary directory before it is
// moved into place, throwing llmcc::Error if it is not what was expected. Throws llmcc::Error
// ("[what] ...") naming the files, every place looked, and the command that fetches them when
// they can be neither found nor downloaded. Progress goes to stderr.
std::filesystem::path fetch_data_files(const std::vector<DataFile>& files, const std::string& what,
                                       const std::function<void(const std::filesystem::path& dir)>& check = {});

}  // namespace llmcc
