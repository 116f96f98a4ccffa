// Data-parallel training as a user runs it: `mpirun -np N llmcc train ...` against one process
// with the same global batch. N ranks with --batch-size B see exactly the tokens one process sees
// with N*B, and their summed gradients are the global batch's, so losses and weights agree to
// float rounding (the sums are formed in another order): 1e-5 relative for every step's loss,
// 1e-5 absolute for every weight and AdamW moment. Both ways of summing are covered: shared
// memory between the ranks of one machine (--comm auto, the default with ZeRO-1) and MPI
// collectives started while the backward runs (--comm mpi, or --zero 0). Also: ZeRO-1 against
// replicated AdamW, three ranks with buckets that do not divide evenly, gradient accumulation,
// the TCP transport, a checkpoint written by two ranks resumed by one and by three, a rank
// killed mid-run, and an error on every rank.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;
using llmcc::test::CliResult;
using llmcc::test::shell_quote;
using llmcc::test::TempDir;

constexpr int kVocab = 256;
constexpr double kLossTolerance = 1e-5;    // relative, per step
constexpr double kWeightTolerance = 1e-5;  // absolute, per weight and moment
constexpr int kEmbd = 64;

// Attention's key bias adds q.b to every score of a query's row, which softmax cancels: its
// gradient is zero, and what the backward computes for it is rounding noise (|g| ~ 1e-9) that
// depends on the order of the sums. AdamW divides by sqrt(v), so noise moves those weights by up
// to lr per step, differently in every summation order. Those kEmbd weights per layer are exempt
// from the weight comparison; that their first moments are noise (below kNoiseMoment in both runs)
// is checked instead.
constexpr double kNoiseMoment = 1e-6;
bool is_key_bias(const std::string& tensor, std::int64_t i) {
  return tensor.ends_with("attn.c_attn.bias") && i >= kEmbd && i < 2 * kEmbd;
}

// mpirun with N ranks on this machine, whatever its core count (--oversubscribe, no binding),
// as root too; every run is bounded by `timeout`, so a hang fails the test instead of blocking it.
std::string mpirun(int np, const std::string& extra = "") {
  std::string cmd =
      "timeout 300 " + shell_quote(LLMCC_MPIRUN) + " -np " + std::to_string(np) + " --oversubscribe --bind-to none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd + (extra.empty() ? "" : " " + extra);
}

// `prefix llmcc args` (prefix empty: one process without mpirun), output captured in dir.
CliResult run(const TempDir& dir, const std::string& prefix, const std::vector<std::string>& args) {
  return llmcc::test::run_llmcc_under(dir, prefix.empty() ? "timeout 300" : prefix, args);
}

// A 2-layer GPT-2 small enough for seconds per run.
const std::vector<std::string> kGpt2 = {"--model",  "gpt2-tiny",           "--n-layer", "2",
                                        "--n-embd", std::to_string(kEmbd), "--n-head",  "2"};
// A 2-layer Llama: RMSNorm, RoPE, grouped-query attention, SwiGLU, an untied head.
const std::vector<std::string> kLlama = {"--model",  "llama-tiny", "--n-layer",   "2", "--n-embd",     "64",
                                         "--n-head", "4",          "--n-kv-head", "2", "--hidden-dim", "96"};

// `model` trained on the progression shard with clipping on (the norm crosses 1).
std::vector<std::string> train_flags(const TempDir& dir, const std::string& out, int batch, int steps,
                                     std::vector<std::string> extra = {},
                                     const std::vector<std::string>& model = kGpt2) {
  std::vector<std::string> f = {"train",
                                "--train-data",
                                dir.file("train.bin"),
                                "--vocab-size",
                                std::to_string(kVocab),
                                "--max-seq-len",
                                "32",
                                "--seq-len",
                                "16",
                                "--steps",
                                std::to_string(steps),
                                "--lr",
                                "3e-3",
                                "--warmup-steps",
                                "2",
                                "--grad-clip",
                                "1",
                                "--val-every",
                                "0",
                                "--seed",
                                "3",
                                "--threads",
                                "1",
                                "--out-dir",
                                dir.file(out)};
  f.insert(f.end(), model.begin(), model.end());
  if (batch > 0) {
    f.push_back("--batch-size");
    f.push_back(std::to_string(batch));
  }
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

std::map<long, double> losses(const TempDir& dir, const std::string& out) {
  std::map<long, double> l;
  for (const auto& [step, text] : llmcc::test::logged(dir.file(out + "/log.jsonl"), "loss")) l[step] = std::stod(text);
  return l;
}

// Every step's loss of `b` within kLossTolerance of `a`'s, over steps [first, last].
void expect_same_losses(const std::map<long, double>& a, const std::map<long, double>& b, long first, long last,
                        const std::string& what) {
  for (long s = first; s <= last; ++s) {
    ASSERT_TRUE(a.count(s) && b.count(s)) << what << ": step " << s << " missing from a log";
    EXPECT_LE(std::abs(a.at(s) - b.at(s)), kLossTolerance * std::abs(a.at(s)))
        << what << ": step " << s << " loss " << a.at(s) << " vs " << b.at(s);
  }
}

llmcc::ParameterStore read_section(const std::string& path, const std::string& section) {
  const llmcc::CheckpointReader r(path);
  std::vector<llmcc::ParameterInfo> infos;
  for (const auto& t : r.tensors(section)) infos.push_back({t.name, t.shape});
  llmcc::ParameterStore store(infos);
  r.read_tensors(section, store);
  return store;
}

// The weights and both AdamW moments of the two runs' last checkpoints within kWeightTolerance.
void expect_same_state(const TempDir& dir, const std::string& a, const std::string& b, const std::string& what) {
  const auto pa = llmcc::latest_checkpoint(dir.file(a)), pb = llmcc::latest_checkpoint(dir.file(b));
  ASSERT_TRUE(pa && pb) << what << ": a run wrote no checkpoint";
  EXPECT_EQ(fs::path(*pa).filename(), fs::path(*pb).filename()) << what;
  for (const char* section : {"params", "adamw.m", "adamw.v"}) {
    const llmcc::ParameterStore x = read_section(*pa, section), y = read_section(*pb, section);
    ASSERT_EQ(x.count(), y.count()) << what << " [" << section << "]";
    for (std::size_t t = 0; t < x.count(); ++t) {
      const llmcc::Tensor tx = x.tensor(t), ty = y.tensor(t);
      double worst = 0.0;
      std::int64_t at = 0;
      for (std::int64_t i = 0; i < tx.numel(); ++i) {
        if (is_key_bias(x.name(t), i)) {
          if (std::string(section) == "adamw.m") {
            EXPECT_TRUE(std::abs(tx.f32()[i]) < kNoiseMoment && std::abs(ty.f32()[i]) < kNoiseMoment)
                << what << ": the key bias's first moment " << tx.f32()[i] << ", " << ty.f32()[i]
                << " is not rounding noise";
          }
          continue;
        }
        const double d = std::abs(static_cast<double>(tx.f32()[i]) - ty.f32()[i]);
        if (d > worst) worst = d, at = i;
      }
      EXPECT_LE(worst, kWeightTolerance) << what << " [" << section << "] " << x.name(t) << " element " << at << ": "
                                         << tx.f32()[at] << " vs " << ty.f32()[at];
    }
  }
}

class TrainMpi : public ::testing::Test {
 protected:
  void SetUp() override { llmcc::test::write_progression_shard(dir.file("train.bin"), 40000, 1, kVocab); }

  // Trains with `prefix` (mpirun or one process) and expects success.
  void train(const std::string& prefix, const std::vector<std::string>& args) {
    const CliResult r = run(dir, prefix, args);
    ASSERT_EQ(r.code, 0) << prefix << "\n" << r.out << r.err;
    last_out = r.out;
  }

  TempDir dir;
  std::string last_out;
};

TEST_F(TrainMpi, TwoRanksMatchOneProcessWithTheGlobalBatch) {
  train("", train_flags(dir, "one", 4, 20));
  train(mpirun(2), train_flags(dir, "two", 2, 20));
  EXPECT_NE(last_out.find("data parallel: 2 ranks x batch 2"), std::string::npos) << last_out;
  EXPECT_NE(last_out.find("ZeRO-1"), std::string::npos) << last_out;
  EXPECT_NE(last_out.find("weights and gradients in shared memory"), std::string::npos) << last_out;
  // Rank 0 alone prints: one header.
  EXPECT_EQ(last_out.find("llmcc train:"), last_out.rfind("llmcc train:")) << last_out;
  expect_same_losses(losses(dir, "one"), losses(dir, "two"), 1, 20, "np=1 B=4 vs np=2 B=2");
  expect_same_state(dir, "one", "two", "np=1 B=4 vs np=2 B=2");
}

TEST_F(TrainMpi, ZeroOneAndReplicatedAdamWAgree) {
  // One tensor per bucket: every collective starts at its tensor's notification, so one that came
  // too early would sum a gradient still being accumulated.
  train(mpirun(2), train_flags(dir, "zero0", 2, 20, {"--zero", "0", "--bucket-mb", "0.001"}));
  EXPECT_NE(last_out.find("AdamW state replicated"), std::string::npos) << last_out;
  train(mpirun(2), train_flags(dir, "zero1", 2, 20, {"--zero", "1", "--bucket-mb", "0.001", "--comm", "mpi"}));
  EXPECT_EQ(last_out.find("shared memory"), std::string::npos) << last_out;
  train(mpirun(2), train_flags(dir, "shared", 2, 20, {"--zero", "1", "--bucket-mb", "0.001"}));
  expect_same_losses(losses(dir, "zero0"), losses(dir, "zero1"), 1, 20, "--zero 0 vs --zero 1");
  expect_same_state(dir, "zero0", "zero1", "--zero 0 vs --zero 1");
  expect_same_losses(losses(dir, "zero1"), losses(dir, "shared"), 1, 20, "--zero 1 over MPI vs shared memory");
  expect_same_state(dir, "zero1", "shared", "--zero 1 over MPI vs shared memory");
}

TEST_F(TrainMpi, ThreeRanksWithSmallBucketsMatchOneProcess) {
  train("", train_flags(dir, "one", 6, 20));
  for (const char* comm : {"auto", "mpi"}) {
    const std::string out = std::string("three_") + comm, what = std::string("np=1 B=6 vs np=3 B=2 --comm ") + comm;
    train(mpirun(3), train_flags(dir, out, 2, 20, {"--bucket-mb", "0.02", "--comm", comm}));
    expect_same_losses(losses(dir, "one"), losses(dir, out), 1, 20, what);
    expect_same_state(dir, "one", out, what);
  }
}

TEST_F(TrainMpi, GradientAccumulationAndSequentialBatchesMatchOneProcess) {
  const std::vector<std::string> extra = {"--grad-accum", "2", "--sampling", "sequential"};
  train("", train_flags(dir, "one", 2, 20, extra));
  std::vector<std::string> two = train_flags(dir, "two", 1, 20, extra);
  two.insert(two.end(), {"--comm", "mpi", "--bucket-mb", "0.05"});
  train(mpirun(2), two);
  expect_same_losses(losses(dir, "one"), losses(dir, "two"), 1, 20, "np=1 B=2 x 2 vs np=2 B=1 x 2");
  expect_same_state(dir, "one", "two", "np=1 B=2 x 2 vs np=2 B=1 x 2");
}

TEST_F(TrainMpi, TcpTransportMatchesOneProcess) {
  train("", train_flags(dir, "one", 4, 20));
  train(mpirun(2, "--mca btl tcp,self"), train_flags(dir, "tcp", 2, 20, {"--comm", "mpi"}));
  expect_same_losses(losses(dir, "one"), losses(dir, "tcp"), 1, 20, "np=1 B=4 vs np=2 B=2 over TCP");
  expect_same_state(dir, "one", "tcp", "np=1 B=4 vs np=2 B=2 over TCP");
}

TEST_F(TrainMpi, CheckpointOfTwoRanksResumesOnOneAndOnThree) {
  // Global batch 6: 2 x 3, 1 x 6, 3 x 2. The reference runs 20 steps uninterrupted.
  train(mpirun(2), train_flags(dir, "whole", 3, 20));
  train(mpirun(2), train_flags(dir, "half", 3, 20, {"--stop-after", "10"}));
  ASSERT_TRUE(llmcc::latest_checkpoint(dir.file("half")));
  for (const char* copy : {"on1", "on3"}) fs::copy(dir.file("half"), dir.file(copy), fs::copy_options::recursive);
  // No --batch-size: the checkpoint's global batch is split over the ranks resuming it.
  train("", train_flags(dir, "on1", 0, 20, {"--resume", "auto"}));
  EXPECT_NE(last_out.find("batch: 6 x 16"), std::string::npos) << last_out;
  train(mpirun(3), train_flags(dir, "on3", 0, 20, {"--resume", "auto"}));
  EXPECT_NE(last_out.find("data parallel: 3 ranks x batch 2"), std::string::npos) << last_out;
  const auto whole = losses(dir, "whole");
  expect_same_losses(whole, losses(dir, "on1"), 11, 20, "np=2 resumed at np=1");
  expect_same_losses(whole, losses(dir, "on3"), 11, 20, "np=2 resumed at np=3");
  expect_same_state(dir, "whole", "on1", "np=2 resumed at np=1");
  expect_same_state(dir, "whole", "on3", "np=2 resumed at np=3");
}

TEST_F(TrainMpi, AGlobalBatchThatDoesNotSplitIsRefused) {
  train(mpirun(2), train_flags(dir, "run", 2, 4, {"--stop-after", "2"}));
  const CliResult r = run(dir, mpirun(3), train_flags(dir, "run", 0, 4, {"--resume", "auto"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("batch of 4 sequences (all ranks together) does not split over 3 ranks"), std::string::npos)
      << r.err;
}

TEST_F(TrainMpi, AnErrorEndsTheJobWithEachRanksLine) {
  std::vector<std::string> args = train_flags(dir, "run", 2, 4);
  args.push_back("--no-such-flag");
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run(dir, mpirun(2), args);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "timed out: the job hung";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_NE(r.err.find("llmcc train [rank "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of 2]: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST_F(TrainMpi, LlamaTwoRanksMatchOneProcess) {
  train("", train_flags(dir, "one", 4, 20, {}, kLlama));
  train(mpirun(2), train_flags(dir, "two", 2, 20, {}, kLlama));
  EXPECT_NE(last_out.find("Llama"), std::string::npos) << last_out;
  expect_same_losses(losses(dir, "one"), losses(dir, "two"), 1, 20, "Llama np=1 B=4 vs np=2 B=2");
  expect_same_state(dir, "one", "two", "Llama np=1 B=4 vs np=2 B=2");
  train(mpirun(2), train_flags(dir, "mpi", 2, 20, {"--comm", "mpi", "--bucket-mb", "0.02"}, kLlama));
  expect_same_losses(losses(dir, "one"), losses(dir, "mpi"), 1, 20, "Llama np=1 B=4 vs np=2 B=2 --comm mpi");
  expect_same_state(dir, "one", "mpi", "Llama np=1 B=4 vs np=2 B=2 --comm mpi");
}

TEST_F(TrainMpi, RanksStartedWithDifferentFlagsAreRefused) {
  // mpirun's multiple-program form: rank 1 gets another weight decay.
  const std::string cmd = mpirun(1) + " " + llmcc::test::llmcc_command(train_flags(dir, "run", 2, 4)) + " : -np 1";
  const CliResult r = run(dir, cmd, [&] {
    std::vector<std::string> f = train_flags(dir, "run", 2, 4);
    f.insert(f.end(), {"--weight-decay", "0.05"});
    return f;
  }());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("rank 1 of 2: this rank's configuration or training data position differs from rank 0's"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(llmcc::latest_checkpoint(dir.file("run")));
}

// The pid of the rank `rank` of a run whose command line holds `marker`, from /proc (0: none).
pid_t find_rank(const std::string& marker, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = llmcc::test::slurp(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.rfind(LLMCC_BINARY, 0) != 0 || cmdline.find(marker) == std::string::npos) continue;
    std::string environ = llmcc::test::slurp(entry.path() / "environ");
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (("\n" + environ).find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

TEST_F(TrainMpi, AKilledRankEndsTheJobAndKeepsTheLastCheckpoint) {
  const std::string out = dir.file("run");
  std::string cmd =
      "exec " + mpirun(2) + " " +
      llmcc::test::llmcc_command(train_flags(dir, "run", 2, 100000, {"--ckpt-every", "3", "--keep-last", "2"}));
  cmd += " >" + shell_quote(dir.file("job.out")) + " 2>" + shell_quote(dir.file("job.err")) + " </dev/null";
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Two checkpoints written, then rank 1 dies while the run trains on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (llmcc::list_checkpoints(out).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(llmcc::list_checkpoints(out).size(), 2u) << llmcc::test::slurp(dir.file("job.err"));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const pid_t victim = find_rank(out, 1);
  ASSERT_GT(victim, 0) << "rank 1 of the job not found";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  // The job ends (mpirun stops rank 0) instead of waiting for the dead rank.
  int status = 0;
  pid_t done = 0;
  const auto end_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = waitpid(job, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    kill(job, SIGKILL);
    waitpid(job, &status, 0);
    FAIL() << "the job did not end within 60 s of a rank's death";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status;
  // Every checkpoint left is whole (the reader checks sizes and checksums), no temporary file is
  // left as a checkpoint, and the newest resumes.
  const auto left = llmcc::list_checkpoints(out);
  ASSERT_FALSE(left.empty());
  for (const auto& [step, path] : left) EXPECT_NO_THROW(llmcc::CheckpointReader{path}) << path;
  const std::int64_t last = left.back().first;
  const CliResult r = run(dir, "", train_flags(dir, "run", 0, static_cast<int>(last) + 2, {"--resume", "auto"}));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("at step " + std::to_string(last)), std::string::npos) << r.out;
}

}  // namespace
