#include "io/data_files.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "llmcc/error.h"

namespace llmcc {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// The data directories in search order: the shared ones, then the cache.
std::vector<fs::path> data_dirs() {
  std::vector<fs::path> dirs;
  if (const std::string shared = env("LLMCC_SHARED_DATA"); !shared.empty()) {
    dirs.emplace_back(shared);
  } else {
    std::vector<fs::path> starts;
    std::error_code ec;
    const fs::path cwd = fs::current_path(ec);
    if (!ec) starts.push_back(cwd);
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) starts.push_back(exe.parent_path());
    for (const fs::path& start : starts) {
      for (fs::path dir = start;; dir = dir.parent_path()) {
        const fs::path candidate = (dir / ".." / "shared" / "data").lexically_normal();
        if (std::find(dirs.begin(), dirs.end(), candidate) == dirs.end()) dirs.push_back(candidate);
        if (dir == dir.parent_path()) break;  // the root
      }
    }
  }
  if (const fs::path cache = data_cache_dir(); !cache.empty()) dirs.push_back(cache);
  return dirs;
}

// Runs curl (no shell: the URL and path go to it as arguments). Returns "" on success, else why not.
std::string download(const std::string& url, const fs::path& out) {
  // Everything the child needs is built before fork: after it, only exec and _exit (another
  // thread may hold the allocator's lock).
  const std::string path = out.string();
  const char* argv[] = {"curl", "-fsSL", "--connect-timeout", "10",        "--max-time",
                        "300",  "-o",    path.c_str(),        url.c_str(), nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("cannot start curl: ") + std::strerror(errno);
  if (pid == 0) {
    ::execvp("curl", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::string("waiting for curl: ") + std::strerror(errno);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return "curl is not installed";
  return "curl could not download " + url +
         (WIFEXITED(status) ? " (exit code " + std::to_string(WEXITSTATUS(status)) + ")" : " (killed)");
}

bool has_all(const fs::path& dir, const std::vector<DataFile>& files) {
  std::error_code ec;
  return std::all_of(files.begin(), files.end(),
                     [&](const DataFile& f) { return fs::is_regular_file(dir / fs::path(f.relative).filename(), ec); });
}

}  // namespace

std::vector<DataFile> gpt2_tokenizer_files() {
  const std::string base = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/";
  return {{"gpt2/encoder.json", base + "encoder.json", 0}, {"gpt2/vocab.bpe", base + "vocab.bpe", 0}};
}

std::vector<DataFile> tinyshakespeare_files() {
  return {{"tinyshakespeare/input.txt",
           "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt", 1115394}};
}

fs::path data_cache_dir() {
  if (const std::string dir = env("LLMCC_DATA_CACHE"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "llmcc";
  if (const std::string home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "llmcc";
  return {};
}

std::optional<fs::path> find_data_file(const std::string& relative, std::vector<std::string>* tried) {
  std::error_code ec;
  for (const fs::path& dir : data_dirs()) {
    const fs::path candidate = dir / relative;
    if (tried) tried->push_back(candidate.string());
    if (fs::exists(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

fs::path fetch_data_files(const std::vector<DataFile>& files, const std::string& what,
                          const std::function<void(const fs::path& dir)>& check) {
  LLMCC_ASSERT(!files.empty(), "fetch_data_files: no files");
  const fs::path sub = fs::path(files.front().relative).parent_path();
  for (const DataFile& f : files)
    LLMCC_ASSERT(fs::path(f.relative).parent_path() == sub, "fetch_data_files: files of one set share a directory");

  std::vector<std::string> tried;
  for (const fs::path& dir : data_dirs()) {
    tried.push_back((dir / sub).string());
    if (has_all(dir / sub, files)) return dir / sub;
  }

  std::string names, places, commands;
  for (const DataFile& f : files) names += (names.empty() ? "" : " and ") + fs::path(f.relative).filename().string();
  for (const std::string& t : tried) places += "\n  " + t;
  const fs::path cache = data_cache_dir();
  const std::string mirror = env("LLMCC_DATA_URL");
  for (const DataFile& f : files)
    commands += "\n  curl -fL --create-dirs -o " + (cache.empty() ? fs::path("<dir>") : cache).string() + "/" +
                f.relative + " " + f.url;
  const auto fail_fetch = [&](const std::string& why) {
    fail(what, "cannot find " + names + " (" + why + "); looked in:" + places +
                   "\nFetch them with `bash scripts/fetch_data.sh " + sub.string() +
                   "` from the llmcc repository, or:" + commands +
                   "\n(or set LLMCC_SHARED_DATA to a directory holding " + sub.string() + "/)");
  };
  if (env("LLMCC_OFFLINE") == "1") fail_fetch("LLMCC_OFFLINE=1, so nothing is downloaded");
  if (cache.empty()) fail_fetch("no download cache: neither LLMCC_DATA_CACHE, XDG_CACHE_HOME nor HOME is set");

  // Download into a work directory beside the final one, check, then rename file by file: the
  // set is complete in the cache only once its last file is in place.
  std::error_code ec;
  const fs::path final_dir = cache / sub;
  const fs::path work = cache / (sub.string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) fail_fetch("cannot create " + work.string() + ": " + ec.message());
  struct RemoveOnExit {
    fs::path dir;
    ~RemoveOnExit() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{work};
  for (const DataFile& f : files) {
    const std::string url = mirror.empty() ? f.url : mirror + "/" + f.relative;
    const fs::path out = work / fs::path(f.relative).filename();
    std::fprintf(stderr, "%s: downloading %s\n", what.c_str(), url.c_str());
    if (const std::string why = download(url, out); !why.empty()) fail_fetch(why);
    if (f.bytes > 0 && fs::file_size(out, ec) != f.bytes)
      fail_fetch(url + " gave " + std::to_string(fs::file_size(out, ec)) + " bytes, expected " +
                 std::to_string(f.bytes));
  }
  if (check) check(work);
  fs::create_directories(final_dir, ec);
  for (const DataFile& f : files) {
    const fs::path name = fs::path(f.relative).filename();
    fs::rename(work / name, final_dir / name, ec);
    if (ec) fail_fetch("cannot move the download into " + final_dir.string() + ": " + ec.message());
  }
  std::fprintf(stderr, "%s: saved in %s\n", what.c_str(), final_dir.string().c_str());
  return final_dir;
}

}  // namespace llmcc
