// ArgParser: typed flags, defaults, lists, bool negation, and errors that name the flag.
#include <gtest/gtest.h>

#include "args.h"
#include "test_support.h"

namespace {

using llmcc::cli::ArgParser;
using llmcc::test::throws_error;

struct Flags {
  std::string name = "run";
  int steps = 10;
  std::int64_t tokens = 0;
  std::uint64_t seed = 1;
  float lr = 3e-4f;
  double frac = 0.1;
  bool quiet = false;
  bool progress = true;
  std::vector<std::string> files;
};

ArgParser make(Flags& f) {
  ArgParser p("demo", "A demo command.");
  p.section("General");
  p.add("--name", &f.name, "run name");
  p.add("--steps", &f.steps, "steps");
  p.add("--tokens", &f.tokens, "tokens");
  p.add("--seed", &f.seed, "seed");
  p.section("Optimizer");
  p.add("--lr", &f.lr, "learning rate");
  p.add("--frac", &f.frac, "fraction");
  p.add("--quiet", &f.quiet, "no progress");
  p.add("--progress", &f.progress, "progress line");
  p.add("--files", &f.files, "inputs");
  return p;
}

TEST(CliArgs, ParsesEveryKind) {
  Flags f;
  ArgParser p = make(f);
  ASSERT_TRUE(p.parse({"--steps", "20", "--tokens=5000000000", "--seed", "42", "--lr", "1e-3", "--frac=0.25", "--quiet",
                       "--no-progress", "--files", "a.bin", "b.bin", "--name", "x"}));
  EXPECT_EQ(f.steps, 20);
  EXPECT_EQ(f.tokens, 5000000000);
  EXPECT_EQ(f.seed, 42u);
  EXPECT_FLOAT_EQ(f.lr, 1e-3f);
  EXPECT_DOUBLE_EQ(f.frac, 0.25);
  EXPECT_TRUE(f.quiet);
  EXPECT_FALSE(f.progress);
  EXPECT_EQ(f.files, (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(f.name, "x");
  EXPECT_TRUE(p.given("--lr"));
}

TEST(CliArgs, DefaultsStayAndShowInHelp) {
  Flags f;
  ArgParser p = make(f);
  ASSERT_TRUE(p.parse(std::vector<std::string>{}));
  EXPECT_EQ(f.steps, 10);
  EXPECT_FALSE(p.given("--steps"));
  const std::string help = p.help();
  for (const char* s : {"usage: llmcc demo", "General:", "Optimizer:", "--steps <int>", "[default: 10]",
                        "--no-" /* absent: bools are documented by their positive name */}) {
    if (std::string(s) == "--no-") {
      EXPECT_EQ(help.find(s), std::string::npos);
    } else {
      EXPECT_NE(help.find(s), std::string::npos) << s << "\n" << help;
    }
  }
}

TEST(CliArgs, HelpReturnsFalse) {
  Flags f;
  ArgParser p = make(f);
  testing::internal::CaptureStdout();
  EXPECT_FALSE(p.parse({"--steps", "3", "--help"}));
  EXPECT_NE(testing::internal::GetCapturedStdout().find("--frac"), std::string::npos);
}

TEST(CliArgs, ErrorsNameTheFlag) {
  Flags f;
  auto parse = [&](std::vector<std::string> args) {
    ArgParser p = make(f);
    p.require("--name");
    p.parse(args);
  };
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--stpes", "3"}); }, {"llmcc demo", "unknown flag --stpes"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--steps", "ten"}); }, {"--steps", "integer", "'ten'"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--steps", "99999999999"}); }, {"--steps"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--seed", "-1"}); }, {"--seed", "non-negative"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--lr", "1e-3x"}); }, {"--lr", "number"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--lr", "nan"}); }, {"--lr", "number"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--lr"}); }, {"--lr", "expects a value"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--quiet=1"}); }, {"--quiet", "takes no value"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--files"}); }, {"--files", "at least one"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "stray"}); }, {"unexpected argument 'stray'"}));
  EXPECT_TRUE(throws_error([&] { parse({"--steps", "3"}); }, {"--name is required"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--steps", "1", "--steps", "2"}); }, {"--steps given twice"}));
  EXPECT_TRUE(throws_error([&] { parse({"--name", "a", "--no-steps"}); }, {"unknown flag --no-steps"}));
}

}  // namespace
