// How the command line reports errors: "llmcc <command>: error: <message>", the command's name
// once (its own errors carry it as a prefix, which is not repeated), errors of shared code named
// after the command that ran it, and other components' prefixes kept ("[checkpoint] ...").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_run.h"
#include "temp_dir.h"

namespace {

using llmcc::test::run_llmcc;

TEST(CliErrors, TheCommandIsNamedOnce) {
  const llmcc::test::TempDir dir;
  for (const char* command : {"train", "eval", "generate", "prepare", "tokenize", "export", "bench", "plot"}) {
    const llmcc::test::CliResult r = run_llmcc(dir, {command, "--no-such-flag"});
    EXPECT_EQ(r.code, 1) << command;
    EXPECT_EQ(r.err, std::string("llmcc ") + command + ": error: unknown flag --no-such-flag (see llmcc " + command +
                         " --help)\n");
  }
}

TEST(CliErrors, SharedCodeNamesTheCommandThatRanIt) {
  const llmcc::test::TempDir dir;
  llmcc::test::CliResult r =
      run_llmcc(dir, {"eval", "--ckpt", dir.file("none.bin"), "--val-data", dir.file("none.bin")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("llmcc eval: error: --val-data: no such file", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("llmcc train"), std::string::npos) << r.err;

  r = run_llmcc(dir, {"generate", "--ckpt", dir.path.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.find("[llmcc generate]"), std::string::npos) << r.err;
}

// --dtype takes fp32 or bf16; anything else is refused by name before any work, by every
// command that has the flag.
TEST(CliErrors, AnUnknownDtypeNamesTheAcceptedOnes) {
  const llmcc::test::TempDir dir;
  const std::vector<std::vector<std::string>> commands = {
      {"train", "--model", "gpt2-tiny", "--train-data", dir.file("none.bin"), "--out-dir", dir.file("run")},
      {"eval", "--ckpt", dir.file("none.bin"), "--val-data", dir.file("none.bin")},
      {"bench", "--model", "gpt2-tiny"}};
  for (std::vector<std::string> args : commands) {
    for (const char* a : {"--dtype", "fp16"}) args.push_back(a);
    const llmcc::test::CliResult r = run_llmcc(dir, args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_EQ(r.err, "llmcc " + args[0] + ": error: --dtype must be 'fp32', 'bf16' or 'auto', got 'fp16'\n");
  }
}

}  // namespace
