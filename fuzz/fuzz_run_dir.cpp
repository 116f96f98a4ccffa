// What a run directory holds besides checkpoints and is read back on resume: checkpoints.txt
// (the order checkpoints were written; llmcc/io/checkpoint.h list_checkpoints,
// latest_checkpoint) and the training log (llmcc/train/train_log.h: TrainLog keeps the lines up
// to the resumed step). The input's parts are the two files (fuzz_common.h: kPartSeparator); the
// directory also holds three (empty) checkpoint files, which every listing must name once.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "fuzz_common.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/train_log.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string dir = [] {
    const std::string d = llmcc::fuzz::scratch_path("run");
    std::filesystem::create_directories(d);
    for (std::int64_t step : {1, 10, 100}) llmcc::fuzz::write_file(llmcc::checkpoint_path(d, step), "");
    return d;
  }();
  const auto parts = llmcc::fuzz::split_parts(data, size, 2);
  llmcc::fuzz::write_file(dir + "/checkpoints.txt", parts[0]);
  llmcc::fuzz::write_file(dir + "/log.jsonl", parts[1]);
  expect_error_or_ok([&] {
    const auto listed = llmcc::list_checkpoints(dir);
    std::set<std::string> paths;
    for (const auto& [step, path] : listed) paths.insert(path);
    if (listed.size() != 3 || paths.size() != 3) __builtin_trap();
    const auto latest = llmcc::latest_checkpoint(dir);
    if (!latest || *latest != listed.back().second) __builtin_trap();
  });
  expect_error_or_ok([&] {
    llmcc::TrainLog log(dir + "/log.jsonl", 5);
    log.write("{\"step\": 6}");
  });
  return 0;
}
