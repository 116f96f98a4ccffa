// `llmcc train --resume` from an earlier checkpoint of a directory that holds later ones (an
// abandoned branch): the resumed run's checkpoints are the newest by write order, so
// `--keep-last` keeps them (never the one just written) and `--resume auto` continues them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "llmcc/io/checkpoint.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;

constexpr int kVocab = 512;

TEST(TrainResumeBranch, ResumingAnEarlierCheckpointKeepsTheNewBranch) {
  llmcc::test::TempDir dir;
  llmcc::test::write_progression_shard(dir.file("train.bin"), 20000, 1, kVocab);
  const std::string run = dir.file("run");
  const auto ckpt = [&](int step) { return llmcc::checkpoint_path(run, step); };
  const auto steps = [&] {
    std::vector<std::int64_t> out;
    for (const auto& [step, path] : llmcc::list_checkpoints(run)) out.push_back(step);
    return out;
  };

  // The first run: checkpoints every 2 steps, the last 2 kept, stopped after 6 -> 4 and 6.
  CliResult r = run_llmcc(dir, {"train",
                                "--train-data",
                                dir.file("train.bin"),
                                "--model",
                                "gpt2-tiny",
                                "--n-layer",
                                "2",
                                "--n-embd",
                                "64",
                                "--n-head",
                                "4",
                                "--vocab-size",
                                std::to_string(kVocab),
                                "--max-seq-len",
                                "64",
                                "--batch-size",
                                "4",
                                "--seq-len",
                                "32",
                                "--steps",
                                "8",
                                "--warmup-steps",
                                "2",
                                "--seed",
                                "7",
                                "--threads",
                                "2",
                                "--out-dir",
                                run,
                                "--ckpt-every",
                                "2",
                                "--keep-last",
                                "2",
                                "--stop-after",
                                "6"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  ASSERT_EQ(steps(), (std::vector<std::int64_t>{4, 6}));

  // Back to step 4, one step, keep one: the new step 5 is kept, the abandoned 6 goes.
  r = run_llmcc(dir, {"train", "--resume", ckpt(4), "--keep-last", "1", "--stop-after", "1"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("checkpoint " + ckpt(5)), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(ckpt(5)));
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(llmcc::latest_checkpoint(run), ckpt(5));

  // --resume auto continues the branch at 5, to the end.
  r = run_llmcc(dir, {"train", "--out-dir", run, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("resumed from " + ckpt(5) + " at step 5"), std::string::npos) << r.out;
  EXPECT_EQ(llmcc::latest_checkpoint(run), ckpt(8));
  const auto loss = llmcc::test::logged(run + "/log.jsonl", "loss");
  EXPECT_EQ(loss.size(), 8u);  // each step once, the abandoned 5 and 6 replaced
  EXPECT_EQ(loss.rbegin()->first, 8);
}

}  // namespace
