// bf16 mixed precision end to end: gpt2-tiny trained 300 steps on a slice of Tiny Shakespeare
// with `--dtype fp32` and with `--dtype bf16` (same seed, data and schedule): the bf16 run's
// validation loss ends at most 2% above the fp32 run's; the bf16 run's header names the kernel it
// ran on; and a bf16 checkpoint resumes in fp32 (checkpoints hold fp32 weights whatever the dtype).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli_run.h"
#include "kernels/cpu/gemm_amx.h"
#include "temp_dir.h"
#include "test_data.h"
#include "train_run.h"

namespace {

using llmcc::test::run_llmcc;

// A 1,024-token vocabulary: GPT-2's 50,257 would make the LM head about 90% of each step's work
// at C=128, and the runs' final losses would spread more over seeds (docs/perf.md).
constexpr const char* kVocab = "1024";

// The first 200 KB of Tiny Shakespeare, prepared into <dir>/data with a SentencePiece BPE
// tokenizer of kVocab tokens trained on it.
std::string prepare_shakespeare(const llmcc::test::TempDir& dir) {
  const std::string text = dir.file("shakespeare_200k.txt");
  llmcc::test::write_shakespeare_200k(text);
  auto r = run_llmcc(dir, {"train-tokenizer", "--input", text, "--vocab-size", kVocab, "--out", dir.file("tok")});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = run_llmcc(dir,
                {"prepare", "--input", text, "--tokenizer", "sp:" + dir.file("tok.model"), "--out", dir.file("data")});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  return dir.file("data");
}

std::vector<std::string> train_args(const std::string& data, const std::string& run, const std::string& dtype,
                                    const std::string& steps) {
  return {"train",
          "--model",
          "gpt2-tiny",
          "--vocab-size",
          kVocab,
          "--train-data",
          data + "/train_000000.bin",
          "--val-data",
          data + "/val_000000.bin",
          "--out-dir",
          run,
          "--steps",
          steps,
          "--batch-size",
          "8",
          "--seq-len",
          "64",
          "--lr",
          "3e-3",
          "--min-lr",
          "3e-4",
          "--warmup-steps",
          "30",
          "--val-every",
          "100",
          "--val-steps",
          "8",
          "--seed",
          "1",
          "--dtype",
          dtype,
          "--threads",
          "2"};
}

TEST(TrainBf16, Gpt2TinyThreeHundredStepsEndsWithinTwoPercentOfFp32) {
  llmcc::test::TempDir dir;
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  const std::string data = prepare_shakespeare(dir);
  std::map<long, std::string> val[2];
  for (int i = 0; i < 2; ++i) {
    const std::string dtype = i == 0 ? "fp32" : "bf16", run = dir.file(dtype);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_llmcc(dir, train_args(data, run, dtype, "300"));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const std::string kernel =
        i == 0 ? std::string("matmuls: fp32") : std::string("matmuls: bf16 on ") + llmcc::cpu::gemm_bf16_kernel_name();
    EXPECT_NE(r.out.find(kernel), std::string::npos) << kernel << " not in\n" << r.out;
    val[i] = llmcc::test::logged(run + "/log.jsonl", "val_loss");
    std::string curve;
    for (const auto& [step, v] : val[i]) curve += " " + std::to_string(step) + ":" + v;
    std::printf("[ note     ] gpt2-tiny %s: 300 steps in %.1f s; val loss by step:%s\n", dtype.c_str(), seconds,
                curve.c_str());
  }
  ASSERT_TRUE(val[0].count(300) && val[1].count(300));
  const double fp32 = std::stod(val[0][300]), bf16 = std::stod(val[1][300]);
  std::printf("[ note     ] final val loss: fp32 %.4f, bf16 %.4f (%+.2f%%)\n", fp32, bf16, 100.0 * (bf16 / fp32 - 1));
  // ln(1024) = 6.93 at the start; both runs end near 4.4.
  EXPECT_LT(fp32, 5.0) << "the fp32 run did not learn";
  EXPECT_LT(bf16, 5.0) << "the bf16 run did not learn";
  // Two runs that round differently follow different trajectories: over seeds 1-8 bf16 ended
  // between 0.13% below and 0.54% above fp32 (docs/perf.md). So the check is one-sided, the
  // quality claim, with about four times that spread as its margin: bf16 is not worse by more
  // than 2% (a bf16 path that rounds wrongly ends far above).
  EXPECT_LE(bf16, 1.02 * fp32);
}

// A checkpoint written by a bf16 run holds fp32 weights: resuming it with --dtype fp32 works, is
// warned about (the run differs from an uninterrupted one), and continues from the step it stopped.
TEST(TrainBf16, ABf16CheckpointResumesInFp32) {
  llmcc::test::TempDir dir;
  const std::string shard = dir.file("tokens.bin");
  llmcc::test::write_progression_shard(shard, 20000, 3, 512);
  const std::string run = dir.file("run");
  const std::vector<std::string> common = {"--model",   "gpt2-tiny", "--vocab-size", "512", "--train-data", shard,
                                           "--out-dir", run,         "--steps",      "8",   "--batch-size", "2",
                                           "--seq-len", "32",        "--threads",    "1"};
  std::vector<std::string> first = {"train"};
  first.insert(first.end(), common.begin(), common.end());
  for (const char* a : {"--dtype", "bf16", "--stop-after", "4"}) first.push_back(a);
  auto r = run_llmcc(dir, first);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::vector<std::string> resume = {"train", "--resume", "auto", "--out-dir", run, "--dtype", "fp32"};
  r = run_llmcc(dir, resume);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("--dtype fp32 replaces the checkpoint's bf16"), std::string::npos) << r.out << r.err;
  const auto loss = llmcc::test::logged(run + "/log.jsonl", "loss");
  EXPECT_EQ(loss.size(), 8u);
  EXPECT_TRUE(loss.count(8));
}

}  // namespace
