// Helpers shared by the fuzz targets (docs/fuzzing.md).
//
// A target hands the fuzzer's bytes to one of llmcc's readers. llmcc::Error is the expected
// refusal of a bad input and is caught; anything else (another exception, an abort, a sanitizer
// report, libFuzzer's out-of-memory or timeout) is a finding and crashes the process.
//
// Most readers take a file name, so the bytes go to a file in a directory of this process
// (/dev/shm/llmcc-fuzz-<pid>, else $TMPDIR or /tmp; removed at exit). Inputs that stand for
// several files (a tokenizer's two files, a model directory) are split at kPartSeparator.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/error.h"

namespace llmcc::fuzz {

// Between the parts of an input that stands for several files (also in the dictionaries).
inline constexpr std::string_view kPartSeparator = "\n#####\n";

// This process's scratch directory, created on first use and removed at exit. The name is
// never freed, so the exit handler can still read it after static destructors have run.
inline const std::string& scratch_dir() {
  static const std::string* dir = [] {
    // /dev/shm when there is one: rewriting a file on a disk file system can cost a write-back
    // on every close (ext4 flushes a truncated and rewritten file), ten times the parse.
    const char* tmp = std::getenv("TMPDIR");
    std::string root = tmp && *tmp ? tmp : "/tmp";
    if (::access("/dev/shm", W_OK) == 0) root = "/dev/shm";
    auto* d = new std::string(root + "/llmcc-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

// scratch_dir()/name.
inline std::string scratch_path(const std::string& name) { return scratch_dir() + "/" + name; }

// Replaces the file's contents; aborts if the scratch directory is not writable (a broken
// harness, not a finding in llmcc).
inline void write_file(const std::string& path, const void* data, std::size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  ::close(fd);
}

inline void write_file(const std::string& path, std::string_view bytes) {
  write_file(path, bytes.data(), bytes.size());
}

// The input cut at every kPartSeparator, padded with empty parts to at least `min_parts`.
inline std::vector<std::string_view> split_parts(const std::uint8_t* data, std::size_t size, std::size_t min_parts) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = s.find(kPartSeparator);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) break;
    s.remove_prefix(at + kPartSeparator.size());
  }
  while (parts.size() < min_parts) parts.emplace_back();
  return parts;
}

// Runs f(); llmcc::Error (a refused input) is the expected outcome for most inputs.
template <class F>
void expect_error_or_ok(F&& f) {
  try {
    f();
  } catch (const llmcc::Error&) {
  }
}

}  // namespace llmcc::fuzz
