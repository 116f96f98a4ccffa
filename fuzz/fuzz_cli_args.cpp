// Command-line parsing (tools/llmcc/args.h): the input is an argument vector, arguments separated
// by NUL bytes. Two parsers see it: one with a flag of every kind (string, int, int64, uint64,
// float, double, bool, list; one required), and `llmcc train`'s full flag set, followed by what
// train does with parsed flags before it touches any file: the model configuration, the option
// checks, and the round trip of the options through checkpoint key=values.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "fuzz_common.h"
#include "model_report.h"
#include "train_options.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // --help prints the flag list; keep it out of the fuzzer's log.
  if (std::freopen("/dev/null", "w", stdout) == nullptr) return 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty() || args.empty()) args.push_back(cur);

  expect_error_or_ok([&] {
    std::string s = "x";
    int i = 0;
    std::int64_t i64 = 0;
    std::uint64_t u64 = 0;
    float f = 0;
    double d = 0;
    bool b = false;
    std::vector<std::string> list;
    llmcc::cli::ArgParser p("fuzz", "every kind of flag");
    p.add("--str", &s, "a string");
    p.section("Numbers");
    p.add("--int", &i, "an int");
    p.add("--i64", &i64, "an int64");
    p.add("--u64", &u64, "a uint64");
    p.add("--float", &f, "a float");
    p.add("--double", &d, "a double");
    p.section("Other");
    p.add("--flag", &b, "a bool");
    p.add("--list", &list, "a list");
    p.require("--int");
    p.epilogue("examples");
    (void)p.parse(args);
  });

  expect_error_or_ok([&] {
    llmcc::cli::TrainOptions o;
    if (!llmcc::cli::parse_train_flags(args, o)) return;  // --help
    const llmcc::cli::ModelConfig config = o.model.config();
    llmcc::cli::validate_train_options(o, config);
    const llmcc::KeyValues kv = llmcc::cli::train_options_to_kv(o, config, o.train_data, o.val_data);
    // The options restore from their key=values with nothing to warn about.
    llmcc::cli::TrainOptions back;
    back.model = o.model;
    (void)llmcc::cli::restore_train_options(back, kv, "fuzz");
  });
  return 0;
}
