// End to end, as a user runs it: `llmcc prepare` a slice of Tiny Shakespeare, `llmcc train` a
// tiny GPT-2 (GPT-2's full 50,257-token vocabulary) for 100 steps, and read the JSON-lines log:
// the validation loss must fall far below where an untrained model starts (ln 50257 = 10.8).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/train/tokenizer.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `llmcc <args>`; returns the exit code, stdout+stderr in `output`.
int run_llmcc(const llmcc::test::TempDir& dir, const std::vector<std::string>& args, std::string* output) {
  std::string cmd = quote(LLMCC_BINARY);
  for (const std::string& a : args) cmd += " " + quote(a);
  const std::string log = dir.file("cli.txt");
  cmd += " >" + quote(log) + " 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  *output = slurp(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Point {
  long step;
  double value;
};

// Every {"step": S, ..., "<key>": V, ...} line of a JSON-lines log, in order.
std::vector<Point> read_log(const std::string& path, const std::string& key) {
  std::vector<Point> points;
  std::ifstream in(path);
  const std::regex step_re("\"step\": *([0-9]+)");
  const std::regex value_re("\"" + key + "\": *([-+0-9.eE]+|null)");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch s, v;
    if (!std::regex_search(line, v, value_re)) continue;
    if (!std::regex_search(line, s, step_re)) continue;
    const double value = v[1] == "null" ? NAN : std::stod(v[1].str());
    points.push_back({std::stol(s[1].str()), value});
  }
  return points;
}

TEST(TrainE2e, TinyGpt2OnShakespeareLearns) {
  const auto shakespeare = llmcc::find_shared_data("tinyshakespeare/input.txt");
  if (!shakespeare) GTEST_SKIP() << "../shared/data/tinyshakespeare/input.txt not found";
  if (!llmcc::find_shared_data("gpt2/encoder.json") && !std::getenv("LLMCC_GPT2_TOKENIZER_DIR"))
    GTEST_SKIP() << "GPT-2 tokenizer files not found";
  llmcc::test::TempDir dir;

  // The first 200 KB (about 60k tokens): val is its last 10%.
  std::string text = slurp(shakespeare->string());
  text.resize(200'000);
  std::ofstream(dir.file("shakespeare_200k.txt"), std::ios::binary) << text;
  std::string out;
  const std::string data = dir.file("data");
  ASSERT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("shakespeare_200k.txt"), "--out", data}, &out), 0)
      << out;

  const std::string run = dir.file("run");
  const auto t0 = std::chrono::steady_clock::now();
  const int code = run_llmcc(dir,
                             {"train", "--model", "gpt2-tiny", "--n-layer", "2", "--n-embd", "64", "--n-head", "4",
                              "--max-seq-len", "64", "--train-data", data + "/train_000000.bin", "--val-data",
                              data + "/val_000000.bin", "--out-dir", run, "--steps", "100", "--batch-size", "8",
                              "--seq-len", "64", "--lr", "3e-3", "--min-lr", "3e-4", "--warmup-steps", "10",
                              "--val-every", "25", "--val-steps", "8", "--seed", "1"},
                             &out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(code, 0) << out;

  const auto val = read_log(run + "/log.jsonl", "val_loss");
  const auto train = read_log(run + "/log.jsonl", "loss");
  ASSERT_GE(val.size(), 2u) << "expected several val_loss lines in " << run << "/log.jsonl\n" << out;
  ASSERT_EQ(train.size(), 100u) << out;
  std::string curve;
  for (const Point& p : val) curve += " " + std::to_string(p.step) + ":" + std::to_string(p.value);
  std::printf("train e2e: 100 steps in %.1f s; val loss by step:%s\n", seconds, curve.c_str());

  // The trainer validates at step 0 too: an untrained model is near ln(50257) = 10.8. Measured on
  // the development machine (2 cores, about 6 s): 10.82 at step 0, 7.13 at 25, 6.54 at 100;
  // seeds 2 and 3 on one thread end at 6.61. 7.5 leaves a wide margin.
  const double first = val.front().value, last = val.back().value;
  EXPECT_EQ(val.front().step, 0);
  EXPECT_GT(first, 10.0) << curve;
  EXPECT_EQ(val.back().step, 100);
  EXPECT_TRUE(std::isfinite(last)) << curve;
  EXPECT_LT(last, 7.5) << curve;
  EXPECT_LT(last, first - 3.0) << curve;
  EXPECT_TRUE(std::isfinite(train.back().value));
}

}  // namespace
