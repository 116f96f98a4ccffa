// End to end, as a user runs it: `llmcc prepare` a slice of Tiny Shakespeare, `llmcc train` a
// tiny GPT-2 and a tiny Llama (both on GPT-2's full 50,257-token vocabulary) for 100 steps each,
// and read the JSON-lines log: the validation loss must fall far below where an untrained model
// starts (ln 50257 = 10.8).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/json_reader.h"
#include "llmcc/text/tokenizer.h"
#include "temp_dir.h"
#include "test_data.h"

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

// Every {"step": S, ..., "<key>": V, ...} line of a JSON-lines log, in order (V null: NaN).
std::vector<Point> read_log(const std::string& path, const std::string& key) {
  std::vector<Point> points;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const llmcc::JsonValue record = llmcc::parse_json(line, path, "read_log");
    const llmcc::JsonValue* step = record.find("step");
    const llmcc::JsonValue* value = record.find(key);
    if (step == nullptr || value == nullptr) continue;
    points.push_back(
        {static_cast<long>(step->integer), value->kind == llmcc::JsonValue::Kind::Null ? NAN : value->number});
  }
  return points;
}

// Prepares the first 200 KB of Tiny Shakespeare (about 60k tokens; val is the last 10%) into
// <dir>/data; the caller has checked that the data is there (LLMCC_REQUIRE_DATA).
void prepare_shakespeare(const llmcc::test::TempDir& dir, std::string* data) {
  llmcc::test::write_shakespeare_200k(dir.file("shakespeare_200k.txt"));
  std::string out;
  *data = dir.file("data");
  EXPECT_EQ(run_llmcc(dir, {"prepare", "--input", dir.file("shakespeare_200k.txt"), "--out", *data}, &out), 0) << out;
}

std::string curve_text(const std::vector<Point>& val) {
  std::string curve;
  for (const Point& p : val) curve += " " + std::to_string(p.step) + ":" + std::to_string(p.value);
  return curve;
}

// Trains 100 steps with `model_flags` on the prepared data (validation every 25 steps) and
// returns the val_loss points; fails the test on a non-zero exit or a short log.
std::vector<Point> train_100_steps(const llmcc::test::TempDir& dir, const std::string& data, const std::string& name,
                                   const std::vector<std::string>& model_flags) {
  const std::string run = dir.file(name);
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), model_flags.begin(), model_flags.end());
  for (const std::string& a : std::vector<std::string>{"--train-data",   data + "/train_000000.bin",
                                                       "--val-data",     data + "/val_000000.bin",
                                                       "--out-dir",      run,
                                                       "--steps",        "100",
                                                       "--batch-size",   "8",
                                                       "--seq-len",      "64",
                                                       "--lr",           "3e-3",
                                                       "--min-lr",       "3e-4",
                                                       "--warmup-steps", "10",
                                                       "--val-every",    "25",
                                                       "--val-steps",    "8",
                                                       "--seed",         "1"})
    args.push_back(a);
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  const int code = run_llmcc(dir, args, &out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(code, 0) << out;
  const auto val = read_log(run + "/log.jsonl", "val_loss");
  const auto train = read_log(run + "/log.jsonl", "loss");
  EXPECT_GE(val.size(), 2u) << "expected several val_loss lines in " << run << "/log.jsonl\n" << out;
  EXPECT_EQ(train.size(), 100u) << out;
  if (!train.empty()) {
    EXPECT_TRUE(std::isfinite(train.back().value));
  }
  std::printf("train e2e (%s): 100 steps in %.1f s; val loss by step:%s\n", name.c_str(), seconds,
              curve_text(val).c_str());
  return val;
}

TEST(TrainE2e, TinyGpt2OnShakespeareLearns) {
  llmcc::test::TempDir dir;
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  LLMCC_REQUIRE_DATA("gpt2/encoder.json");
  std::string data;
  prepare_shakespeare(dir, &data);
  const auto val = train_100_steps(
      dir, data, "gpt2",
      {"--model", "gpt2-tiny", "--n-layer", "2", "--n-embd", "64", "--n-head", "4", "--max-seq-len", "64"});
  ASSERT_GE(val.size(), 2u);
  const std::string curve = curve_text(val);

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
}

// The same for a Llama (RMSNorm, RoPE, GQA with 4 query heads over 2 key/value heads, SwiGLU,
// untied head), trained on GPT-2 tokens: any token file whose ids are below --vocab-size works.
TEST(TrainE2e, TinyLlamaOnShakespeareLearns) {
  llmcc::test::TempDir dir;
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  LLMCC_REQUIRE_DATA("gpt2/encoder.json");
  std::string data;
  prepare_shakespeare(dir, &data);
  const auto val =
      train_100_steps(dir, data, "llama",
                      {"--model", "llama-tiny", "--n-layer", "2", "--n-embd", "64", "--n-head", "4", "--n-kv-head", "2",
                       "--hidden-dim", "176", "--max-seq-len", "64", "--vocab-size", "50257"});
  ASSERT_GE(val.size(), 2u);
  const std::string curve = curve_text(val);
  const double first = val.front().value, last = val.back().value;
  EXPECT_EQ(val.front().step, 0);
  EXPECT_GT(first, 10.0) << curve;
  EXPECT_EQ(val.back().step, 100);
  EXPECT_TRUE(std::isfinite(last)) << curve;
  EXPECT_LT(last, 7.5) << curve;
  EXPECT_LT(last, first - 3.0) << curve;
}

}  // namespace
