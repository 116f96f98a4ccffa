// The divergence guard, as a user meets it through `llmcc train`: a learning rate that makes the
// weights non-finite (3e38) or the loss explode (1e6) stops the run with a message saying why,
// and no checkpoint ever holds a non-finite weight or moment; good checkpoints written before a
// diverging resume survive it; an update that explodes the weights (finite), a validation that
// spikes and a state whose next batch spikes are never the checkpoint named or returned to; --rollbacks returns to the
// last checkpoint until they run out; a full disk while a resume rewrites the log keeps the log and leaves no temporary
// file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;
constexpr int kVocab = 256;

std::vector<std::string> flags(const llmcc::test::TempDir& dir, const std::string& lr, const std::string& steps) {
  return {"train",
          "--train-data",
          dir.file("train.bin"),
          "--model",
          "gpt2-tiny",
          "--n-layer",
          "2",
          "--n-embd",
          "32",
          "--n-head",
          "2",
          "--vocab-size",
          std::to_string(kVocab),
          "--max-seq-len",
          "32",
          "--batch-size",
          "4",
          "--seq-len",
          "16",
          "--steps",
          steps,
          "--lr",
          lr,
          "--min-lr",
          "0",
          "--grad-clip",
          "0",
          "--ckpt-every",
          "1",
          "--keep-last",
          "3",
          "--val-every",
          "0",
          "--seed",
          "3",
          "--threads",
          "1",
          "--out-dir",
          dir.file("run")};
}

// Whether every tensor of every section of the checkpoint is finite (and AdamW's second moments
// are not negative).
::testing::AssertionResult finite_checkpoint(const std::string& path) {
  const llmcc::CheckpointReader r(path);
  for (const char* section : {"params", "adamw.m", "adamw.v"}) {
    std::vector<llmcc::ParameterInfo> infos;
    for (const auto& t : r.tensors(section)) infos.push_back({t.name, t.shape});
    llmcc::ParameterStore store(infos);
    r.read_tensors(section, store);
    for (std::size_t i = 0; i < store.size(); ++i) {
      const float x = store.data()[i];
      if (!std::isfinite(x) || (std::string(section) == "adamw.v" && x < 0))
        return ::testing::AssertionFailure() << path << " [" << section << "] holds " << x;
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::string> checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& [step, path] : llmcc::list_checkpoints(dir)) out.push_back(path);
  return out;
}

// The largest weight magnitude in the checkpoint (the tiny model's start at most about 1).
float max_abs_weight(const std::string& path) {
  const llmcc::CheckpointReader r(path);
  std::vector<llmcc::ParameterInfo> infos;
  for (const auto& t : r.tensors("params")) infos.push_back({t.name, t.shape});
  llmcc::ParameterStore store(infos);
  r.read_tensors("params", store);
  float m = 0.0f;
  for (std::size_t i = 0; i < store.size(); ++i) m = std::max(m, std::abs(store.data()[i]));
  return m;
}

// Every checkpoint in dir holds finite weights no larger than a trained tiny model's.
::testing::AssertionResult unexploded(const std::string& dir) {
  for (const std::string& path : checkpoints(dir)) {
    if (auto finite = finite_checkpoint(path); !finite) return finite;
    if (const float m = max_abs_weight(path); m > 10.0f)
      return ::testing::AssertionFailure() << path << " holds a weight of magnitude " << m;
  }
  return ::testing::AssertionSuccess();
}

// flags() with validation on the training shard every `every` steps.
std::vector<std::string> validated(std::vector<std::string> args, const llmcc::test::TempDir& dir,
                                   const std::string& every) {
  const auto at = std::find(args.begin(), args.end(), "--val-every");
  *(at + 1) = every;
  args.insert(args.end(), {"--val-data", dir.file("train.bin")});
  return args;
}

class TrainDivergence : public ::testing::Test {
 protected:
  void SetUp() override { llmcc::test::write_progression_shard(dir.file("train.bin"), 5000, 1, kVocab); }
  llmcc::test::TempDir dir;
};

TEST_F(TrainDivergence, AnUpdateThatOverflowsStopsBeforeItIsSaved) {
  const llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, flags(dir, "3e38", "5"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("step 1: the update made weights or AdamW moments non-finite"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("were not saved"), std::string::npos) << r.err;
  for (const std::string& path : checkpoints(dir.file("run"))) EXPECT_TRUE(finite_checkpoint(path));
  EXPECT_TRUE(checkpoints(dir.file("run")).empty());
}

TEST_F(TrainDivergence, AnExplodingLossStops) {
  const llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, flags(dir, "1e6", "20"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(r.err.find("times the mean of the last") != std::string::npos ||
              r.err.find("not finite") != std::string::npos || r.err.find("non-finite") != std::string::npos)
      << r.err;
  for (const std::string& path : checkpoints(dir.file("run"))) EXPECT_TRUE(finite_checkpoint(path));
}

TEST_F(TrainDivergence, GoodCheckpointsSurviveADivergingResume) {
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, flags(dir, "1e-3", "5"));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir.file("run") + "/ckpt_000005.bin"));
  r = llmcc::test::run_llmcc(dir, {"train", "--out-dir", dir.file("run"), "--resume", "auto", "--steps", "40", "--lr",
                                   "1e6", "--min-lr", "1e6"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("llmcc train"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir.file("run") + "/ckpt_000005.bin")) << "the last good checkpoint was pruned";
  EXPECT_TRUE(finite_checkpoint(dir.file("run") + "/ckpt_000005.bin"));
  for (const std::string& path : checkpoints(dir.file("run"))) EXPECT_TRUE(finite_checkpoint(path));
}

// An update that explodes the weights without overflowing them (lr 1e6) on a fresh run: the
// checkpoint of that state is written unconfirmed, the validated starting point is kept
// (confirmed) and is what the error names and --rollbacks return to.
TEST_F(TrainDivergence, AnExplodingFreshRunKeepsItsStartingPointAndNamesIt) {
  const std::string start = dir.file("run") + "/ckpt_000000.bin";
  const std::string exploded = dir.file("run") + "/ckpt_000001.bin";
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, validated(flags(dir, "1e6", "10"), dir, "2"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("checkpoint " + exploded + " (unconfirmed: the update before it changed the weights by"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("step 2: the loss"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last confirmed checkpoint " + start), std::string::npos) << r.err;
  EXPECT_EQ(checkpoints(dir.file("run")), (std::vector<std::string>{start, exploded}));
  EXPECT_EQ(llmcc::checkpoint_status(start), llmcc::CheckpointStatus::confirmed);
  EXPECT_EQ(llmcc::checkpoint_status(exploded), llmcc::CheckpointStatus::unconfirmed);
  EXPECT_TRUE(finite_checkpoint(start));
  EXPECT_LT(max_abs_weight(start), 10.0f);
  EXPECT_GT(max_abs_weight(exploded), 1e3f);

  fs::remove_all(dir.file("run"));
  auto args = validated(flags(dir, "1e6", "10"), dir, "2");
  args.insert(args.end(), {"--rollbacks", "2"});
  r = llmcc::test::run_llmcc(dir, args);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rolled back to " + start + " (step 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(rollback 2 of 2)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("after 2 rollbacks; last confirmed checkpoint " + start), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(start));
  EXPECT_LT(max_abs_weight(start), 10.0f);
}

// Good steps, then a resume whose first update explodes the weights: the validation at step 6
// spikes against the one at step 5 (carried in checkpoint 5), so nothing holding those weights is
// written; the error names checkpoint 5 and every rollback returns to it.
TEST_F(TrainDivergence, AnExplodingResumeNamesAndReturnsToTheGoodCheckpoint) {
  const std::string good = dir.file("run") + "/ckpt_000005.bin";
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, validated(flags(dir, "1e-3", "5"), dir, "2"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> resume = {"train", "--out-dir", dir.file("run"), "--resume", "auto", "--steps",
                                           "40",    "--lr",      "1e6",           "--min-lr", "1e6"};
  r = llmcc::test::run_llmcc(dir, resume);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("step 6: the validation loss"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("times the previous validation's"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the updated weights were not saved"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last confirmed checkpoint " + good), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run") + "/ckpt_000006.bin"));
  EXPECT_TRUE(unexploded(dir.file("run")));

  auto rolled = resume;
  rolled.insert(rolled.end(), {"--rollbacks", "3"});
  r = llmcc::test::run_llmcc(dir, rolled);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rolled back to " + good + " (step 5)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("after 3 rollbacks; last confirmed checkpoint " + good), std::string::npos) << r.err;
  EXPECT_TRUE(unexploded(dir.file("run")));
}

// The same resume without validation: the exploded state's checkpoint is written but
// unconfirmed, by the size of the update that made it or (that check off) by the next batch's
// loss on it; the error, a rollback and --resume auto use checkpoint 5, which pruning keeps;
// --resume FILE takes the unconfirmed one with a warning.
TEST_F(TrainDivergence, AnExplodedStateIsNeverTheCheckpointNamedOrResumed) {
  const std::string good = dir.file("run") + "/ckpt_000005.bin";
  const std::string exploded = dir.file("run") + "/ckpt_000006.bin";
  ASSERT_EQ(llmcc::test::run_llmcc(dir, flags(dir, "1e-3", "5")).code, 0);
  std::vector<std::string> resume = {"train", "--out-dir", dir.file("run"), "--resume", "auto", "--steps",
                                     "40",    "--lr",      "1e6",           "--min-lr", "1e6"};
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, resume);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("checkpoint " + exploded + " (unconfirmed: the update before it changed the weights by"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("step 7: the loss"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last confirmed checkpoint " + good), std::string::npos) << r.err;
  EXPECT_EQ(llmcc::checkpoint_status(exploded), llmcc::CheckpointStatus::unconfirmed);
  EXPECT_GT(max_abs_weight(exploded), 1e3f);

  resume.insert(resume.end(), {"--max-update", "0"});
  r = llmcc::test::run_llmcc(dir, resume);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("--resume auto: skipping " + exploded + ", written after " + good + " but unconfirmed"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("resumed from " + good), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint " + exploded + " (unconfirmed: the loss of the next step's batch"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("last confirmed checkpoint " + good), std::string::npos) << r.err;

  resume.insert(resume.end(), {"--rollbacks", "1"});
  r = llmcc::test::run_llmcc(dir, resume);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rolled back to " + good + " (step 5)"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(good));
  EXPECT_TRUE(finite_checkpoint(good));
  EXPECT_LT(max_abs_weight(good), 10.0f);

  r = llmcc::test::run_llmcc(dir, {"train", "--resume", exploded, "--steps", "6"});
  EXPECT_NE(r.err.find("--resume: " + exploded + " is unconfirmed"), std::string::npos) << r.err;
}

// A checkpoint altered to hold a negative second moment, or a NaN weight, with a valid CRC.
std::string altered_copy(const std::string& good, const std::string& out, bool nan_weight) {
  const llmcc::CheckpointReader r(good);
  std::vector<llmcc::ParameterInfo> infos;
  for (const auto& t : r.tensors("params")) infos.push_back({t.name, t.shape});
  llmcc::ParameterStore params(infos);
  llmcc::AdamW opt(params);
  const llmcc::TrainState state = llmcc::load_checkpoint(good, params, &opt);
  if (nan_weight)
    params.data()[3] = std::nanf("");
  else
    opt.v().data()[3] = -1.0f;
  llmcc::save_checkpoint(out, params, &opt, state);
  return out;
}

TEST_F(TrainDivergence, ANonFiniteCheckpointIsRefusedOrWarnedAbout) {
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, flags(dir, "1e-3", "2"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string good = dir.file("run") + "/ckpt_000002.bin";
  const std::string negative_v = altered_copy(good, dir.file("negative_v.bin"), false);
  const std::string nan_weight = altered_copy(good, dir.file("nan_weight.bin"), true);
  // Resuming refuses both, naming the section and tensor.
  r = llmcc::test::run_llmcc(dir, {"train", "--resume", negative_v, "--out-dir", dir.file("b"), "--steps", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[adamw.v] wte holds -1; training on from it could only give NaN"), std::string::npos) << r.err;
  r = llmcc::test::run_llmcc(dir, {"train", "--resume", nan_weight, "--out-dir", dir.file("c"), "--steps", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[params] wte holds nan"), std::string::npos) << r.err;
  // --force-resume goes on, and the guard then stops the run before it saves a NaN.
  r = llmcc::test::run_llmcc(
      dir, {"train", "--resume", nan_weight, "--out-dir", dir.file("c"), "--steps", "4", "--force-resume"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.find("could only give NaN"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not finite"), std::string::npos) << r.err;
  for (const std::string& path : checkpoints(dir.file("c"))) EXPECT_TRUE(finite_checkpoint(path));
  // eval, generate and export read it, with a warning.
  r = llmcc::test::run_llmcc(dir, {"eval", "--ckpt", nan_weight, "--val-data", dir.file("train.bin"), "--steps", "1"});
  EXPECT_NE(r.err.find("llmcc eval: warning: " + nan_weight + " holds 1 non-finite weights, the first in wte"),
            std::string::npos)
      << r.err;
  r = llmcc::test::run_llmcc(dir, {"export", "--ckpt", nan_weight, "--out", dir.file("x.bin")});
  EXPECT_NE(r.err.find("holds 1 non-finite weights"), std::string::npos) << r.err;
}

// --rollbacks: each trip goes back to the last checkpoint (the saved starting point at first)
// and is logged; when they run out the run stops as without them, every checkpoint finite.
TEST_F(TrainDivergence, RollbacksAreLoggedAndRunOut) {
  auto args = flags(dir, "3e38", "5");
  args.insert(args.end(), {"--rollbacks", "2"});
  const llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, args);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("after 2 rollbacks"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("rolled back to " + dir.file("run") + "/ckpt_000000.bin (step 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(rollback 2 of 2)"), std::string::npos) << r.out;
  const auto saved = checkpoints(dir.file("run"));
  EXPECT_EQ(saved.size(), 1u);
  for (const std::string& path : saved) EXPECT_TRUE(finite_checkpoint(path));
}

// A resume rewrites the log without the lines after its checkpoint. When the disk fills during
// that rewrite, the run stops naming the log, which is kept as it was, and no log.jsonl.tmp stays.
TEST_F(TrainDivergence, AFullDiskWhileTheLogIsRewrittenKeepsIt) {
  ASSERT_EQ(llmcc::test::run_llmcc(dir, flags(dir, "1e-3", "12")).code, 0);
  const std::string log = dir.file("run") + "/log.jsonl";
  const std::string before = llmcc::test::slurp(log);
  ASSERT_GT(before.size(), 2048u);  // more than ulimit -f 2 allows, in 512- or 1024-byte blocks
  auto args = flags(dir, "1e-3", "12");
  args.insert(args.end(), {"--resume", dir.file("run") + "/ckpt_000011.bin"});
  const llmcc::test::CliResult r = llmcc::test::run_llmcc_after(dir, "ulimit -f 2; trap '' XFSZ", args);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("log.jsonl.tmp"), std::string::npos) << r.err;
  EXPECT_EQ(llmcc::test::slurp(log), before);
  EXPECT_FALSE(fs::exists(log + ".tmp"));
}

TEST_F(TrainDivergence, GuardFlagsAreValidated) {
  auto args = flags(dir, "1e-3", "5");
  args.insert(args.end(), {"--loss-spike", "0.5"});
  llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--loss-spike must be above 1 (0: off), got 0.5"), std::string::npos) << r.err;
  args = flags(dir, "1e-3", "5");
  args.insert(args.end(), {"--rollbacks", "-1"});
  r = llmcc::test::run_llmcc(dir, args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--rollbacks must be >= 0"), std::string::npos) << r.err;
}

}  // namespace
