// Data files llmcc does not ship (GPT-2's tokenizer, Tiny Shakespeare): found in a shared data
// directory first, else in the download cache, else downloaded into the cache from a mirror
// (LLMCC_DATA_URL=file://..., so the download code itself runs here), checked, and moved into
// place; offline, the error names the files, every place looked and the commands that fetch
// them. The same through scripts/fetch_data.sh and through `llmcc tokenize` / `llmcc prepare`.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/error.h"
#include "io/data_files.h"
#include "llmcc/text/tokenizer.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using llmcc::test::throws_error;

// Sets environment variables for a scope and puts the old values back after it.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string slurp(const fs::path& p) { return llmcc::test::slurp(p.string()); }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A mirror laid out like ../shared/data. GPT-2's real files when this machine has them; else a
// small BPE pair that loads the same way (256 byte tokens, two merges, <|endoftext|>).
struct Mirror {
  fs::path dir;
  bool real_gpt2 = false;
  explicit Mirror(const fs::path& d) : dir(d) {
    if (const auto enc = llmcc::find_data_file("gpt2/encoder.json")) {
      fs::create_directories(dir / "gpt2");
      fs::copy_file(*enc, dir / "gpt2/encoder.json");
      fs::copy_file(enc->parent_path() / "vocab.bpe", dir / "gpt2/vocab.bpe");
      real_gpt2 = true;
    } else {
      std::string json = "{";
      const auto byte_char = [](int b) -> std::string {  // GPT-2's byte -> printable character map
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        int cp = b;
        if (!printable) {
          int n = 0;
          for (int c = 0; c < b; ++c) {
            const bool p = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
            if (!p) ++n;
          }
          cp = 256 + n;
        }
        std::string s;
        if (cp < 0x80) {
          s += static_cast<char>(cp);
        } else {
          s += static_cast<char>(0xC0 | (cp >> 6));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return s;
      };
      for (int b = 0; b < 256; ++b) {
        std::string key = byte_char(b);
        if (key == "\"" || key == "\\") key = "\\" + key;
        json += "\"" + key + "\": " + std::to_string(b) + ", ";
      }
      json += "\"he\": 256, \"hel\": 257, \"<|endoftext|>\": 258}";
      write(dir / "gpt2/encoder.json", json);
      write(dir / "gpt2/vocab.bpe", "#version: 0.2\nh e\nhe l\n");
    }
    write(dir / "tinyshakespeare/input.txt", std::string(1115394, 'x'));
  }
};

class DataFiles : public ::testing::Test {
 protected:
  llmcc::test::TempDir tmp;
  fs::path none = tmp.path / "no-shared-data", cache = tmp.path / "cache";
  Mirror mirror{tmp.path / "mirror"};
  std::string url = "file://" + (tmp.path / "mirror").string();
  // No shared directory (LLMCC_SHARED_DATA points at an empty one), an empty cache, the mirror.
  std::map<std::string, std::optional<std::string>> isolated() const {
    return {{"LLMCC_SHARED_DATA", none.string()},
            {"LLMCC_DATA_CACHE", cache.string()},
            {"LLMCC_DATA_URL", url},
            {"LLMCC_OFFLINE", std::nullopt},
            {"LLMCC_GPT2_TOKENIZER_DIR", std::nullopt}};
  }
};

TEST_F(DataFiles, ASharedCopyIsUsedAndNothingIsDownloaded) {
  auto env = isolated();
  env["LLMCC_SHARED_DATA"] = mirror.dir.string();
  env["LLMCC_DATA_URL"] = "file:///nonexistent";
  const ScopedEnv scoped(env);
  EXPECT_EQ(llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "test"), mirror.dir / "gpt2");
  EXPECT_EQ(llmcc::find_data_file("tinyshakespeare/input.txt"), mirror.dir / "tinyshakespeare/input.txt");
  EXPECT_FALSE(fs::exists(cache));
}

TEST_F(DataFiles, AMissingSetIsDownloadedIntoTheCacheAndFoundThereAfter) {
  const ScopedEnv scoped(isolated());
  std::vector<std::string> checked;
  const fs::path dir = llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "test", [&](const fs::path& work) {
    checked.push_back(work.string());
    EXPECT_TRUE(fs::exists(work / "encoder.json") && fs::exists(work / "vocab.bpe"));
  });
  EXPECT_EQ(dir, cache / "gpt2");
  EXPECT_EQ(checked.size(), 1u);
  EXPECT_EQ(slurp(dir / "encoder.json"), slurp(mirror.dir / "gpt2/encoder.json"));
  EXPECT_EQ(slurp(dir / "vocab.bpe"), slurp(mirror.dir / "gpt2/vocab.bpe"));
  EXPECT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), 1) << "a work directory stayed";

  // The mirror gone: the cache is enough, and nothing is checked again.
  fs::remove_all(mirror.dir);
  EXPECT_EQ(llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "test",
                                    [&](const fs::path&) { ADD_FAILURE() << "downloaded again"; }),
            cache / "gpt2");
  const llmcc::Gpt2Tokenizer tok = llmcc::Gpt2Tokenizer::load_default();
  EXPECT_EQ(tok.decode(tok.encode("hello")), "hello");
}

TEST_F(DataFiles, ADownloadThatFailsItsCheckKeepsNothing) {
  const ScopedEnv scoped(isolated());
  EXPECT_TRUE(throws_error(
      [] {
        llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "test",
                                [](const fs::path&) { llmcc::fail("test", "not a tokenizer"); });
      },
      {"[test] not a tokenizer"}));
  EXPECT_FALSE(fs::exists(cache / "gpt2"));
  EXPECT_TRUE(fs::is_empty(cache));

  write(mirror.dir / "tinyshakespeare/input.txt", "too short");
  EXPECT_TRUE(throws_error([] { llmcc::fetch_data_files(llmcc::tinyshakespeare_files(), "tinyshakespeare"); },
                           {"[tinyshakespeare]", "gave 9 bytes, expected 1115394"}));
  EXPECT_FALSE(fs::exists(cache / "tinyshakespeare"));
}

TEST_F(DataFiles, OfflineTheErrorSaysWhatToFetchAndHow) {
  auto env = isolated();
  env["LLMCC_OFFLINE"] = "1";
  {
    const ScopedEnv scoped(env);
    const std::string cached = (cache / "gpt2").string();
    EXPECT_TRUE(
        throws_error([] { llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "tokenizer"); },
                     {"[tokenizer] cannot find encoder.json and vocab.bpe", "LLMCC_OFFLINE=1", (none / "gpt2").c_str(),
                      cached.c_str(), "bash scripts/fetch_data.sh gpt2", "curl -fL --create-dirs -o",
                      "openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe", "LLMCC_SHARED_DATA"}));
    EXPECT_TRUE(throws_error([] { (void)llmcc::Gpt2Tokenizer::load_default(); },
                             {"encoder.json", "bash scripts/fetch_data.sh gpt2"}));
  }
  env["LLMCC_OFFLINE"] = std::nullopt;
  env["LLMCC_DATA_URL"] = "file://" + (tmp.path / "empty-mirror").string();
  const ScopedEnv scoped(env);
  EXPECT_TRUE(throws_error([] { llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "tokenizer"); },
                           {"curl could not download file://", "empty-mirror/gpt2/encoder.json"}));
  EXPECT_FALSE(fs::exists(cache / "gpt2"));
}

// The shell script: the same places, the same cache, and --print-dir for scripts that need a path.
TEST_F(DataFiles, TheScriptFetchesTheSameWay) {
  std::string vars;
  for (const auto& [name, value] : isolated()) vars += value ? name + "=" + llmcc::test::shell_quote(*value) + " " : "";
  const std::string script = llmcc::test::shell_quote(std::string(LLMCC_SOURCE_DIR) + "/scripts/fetch_data.sh");
  const std::string out = (tmp.path / "script.out").string(), err = (tmp.path / "script.err").string();
  ASSERT_EQ(std::system((vars + "bash " + script + " --print-dir gpt2 tinyshakespeare >" + out + " 2>" + err).c_str()),
            0)
      << slurp(err);
  EXPECT_NE(slurp(err).find("gpt2: downloading file://"), std::string::npos) << slurp(err);
  EXPECT_EQ(slurp(out), (cache / "gpt2").string() + "\n" + (cache / "tinyshakespeare").string() + "\n");
  EXPECT_EQ(slurp(cache / "gpt2/vocab.bpe"), slurp(mirror.dir / "gpt2/vocab.bpe"));
  // Present now: nothing downloaded; the C++ side finds the script's cache.
  ASSERT_EQ(std::system((vars + "bash " + script + " gpt2 >" + out + " 2>&1").c_str()), 0);
  EXPECT_NE(slurp(out).find("gpt2: present in " + (cache / "gpt2").string()), std::string::npos) << slurp(out);
  {
    const ScopedEnv scoped(isolated());
    EXPECT_EQ(llmcc::fetch_data_files(llmcc::gpt2_tokenizer_files(), "test"), cache / "gpt2");
  }
  fs::remove_all(cache);
  EXPECT_NE(std::system((vars + "LLMCC_OFFLINE=1 bash " + script + " gpt2 >" + out + " 2>&1").c_str()), 0);
  EXPECT_NE(slurp(out).find("LLMCC_OFFLINE=1"), std::string::npos) << slurp(out);
}

// What a user without ../shared meets: `llmcc tokenize` and `llmcc prepare` fetch what they need.
TEST_F(DataFiles, TheCommandsFetchWhatTheyNeed) {
  std::string vars;
  for (const auto& [name, value] : isolated()) vars += value ? name + "=" + llmcc::test::shell_quote(*value) + " " : "";
  llmcc::test::CliResult r = llmcc::test::run_llmcc_after(tmp, "export " + vars, {"tokenize", "--text", "hello"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("downloading file://"), std::string::npos) << r.err;
  if (mirror.real_gpt2) {
    EXPECT_EQ(r.out, "31373\n");  // GPT-2's id of "hello"
  }
  EXPECT_TRUE(fs::exists(cache / "gpt2/encoder.json"));
  r = llmcc::test::run_llmcc_after(tmp, "export " + vars + " LLMCC_OFFLINE=1",
                                   {"tokenize", "--text", "hello"});  // now from the cache
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
