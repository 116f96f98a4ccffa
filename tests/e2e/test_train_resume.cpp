// `llmcc train` run as a user runs it (the built binary, LLMCC_BINARY) on a tiny GPT-2 (and a
// tiny Llama for the resume, the family recorded in the checkpoint):
// N steps, a checkpoint and a resumed run of M steps give the same weights, AdamW moments, data
// position and per-step losses, bit for bit, as N + M steps in one go (with gradient
// accumulation and clipping on); bad flags, missing data and a resume that would change the
// model's shape exit 1 with a message naming the problem; `llmcc eval` reproduces the logged
// validation loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/rng.h"
#include "llmcc/io/token_file.h"
#include "llmcc/text/tokenizer.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "test_data.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;
using llmcc::test::slurp;

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr int kVocab = 512;

void write_shard(const std::string& path, std::size_t n, std::uint64_t seed) {
  llmcc::test::write_progression_shard(path, n, seed, kVocab);
}

// A tiny model and a short schedule that exercises everything resume must carry: warmup then
// cosine, two micro-batches per step, clipping (the norm starts well above 0.5), random batches,
// validation in between. `changes` replaces flags' values (or adds flags).
std::vector<std::string> run_flags(const llmcc::test::TempDir& dir,
                                   const std::vector<std::pair<std::string, std::string>>& changes = {}) {
  std::vector<std::pair<std::string, std::string>> flags = {{"--train-data", dir.file("train.bin")},
                                                            {"--val-data", dir.file("val.bin")},
                                                            {"--model", "gpt2-tiny"},
                                                            {"--n-layer", "2"},
                                                            {"--n-embd", "64"},
                                                            {"--n-head", "4"},
                                                            {"--vocab-size", std::to_string(kVocab)},
                                                            {"--max-seq-len", "64"},
                                                            {"--batch-size", "4"},
                                                            {"--seq-len", "32"},
                                                            {"--grad-accum", "2"},
                                                            {"--grad-clip", "0.5"},
                                                            {"--steps", "8"},
                                                            {"--warmup-steps", "2"},
                                                            {"--lr", "3e-3"},
                                                            {"--min-lr", "3e-4"},
                                                            {"--val-every", "3"},
                                                            {"--val-steps", "2"},
                                                            {"--seed", "7"},
                                                            {"--threads", "2"}};
  for (const auto& [flag, value] : changes) {
    bool replaced = false;
    for (auto& f : flags)
      if (f.first == flag) f.second = value, replaced = true;
    if (!replaced) flags.emplace_back(flag, value);
  }
  std::vector<std::string> args = {"train"};
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    args.push_back(value);
  }
  return args;
}

using llmcc::test::logged;

// Every tensor of a section, read through CheckpointReader (which validates the file).
llmcc::ParameterStore read_section(const llmcc::CheckpointReader& r, const std::string& section) {
  std::vector<llmcc::ParameterInfo> infos;
  for (const auto& t : r.tensors(section)) infos.push_back({t.name, t.shape});
  llmcc::ParameterStore store(infos);
  r.read_tensors(section, store);
  return store;
}

// Names the first tensor whose bytes differ.
::testing::AssertionResult same_tensors(const std::string& a_path, const std::string& b_path,
                                        const std::string& section) {
  const llmcc::CheckpointReader a(a_path), b(b_path);
  const llmcc::ParameterStore sa = read_section(a, section), sb = read_section(b, section);
  if (sa.count() != sb.count()) return ::testing::AssertionFailure() << section << ": tensor counts differ";
  for (std::size_t i = 0; i < sa.count(); ++i) {
    const llmcc::Tensor ta = sa.tensor(i), tb = sb.tensor(i);
    if (sa.name(i) != sb.name(i) || ta.numel() != tb.numel())
      return ::testing::AssertionFailure() << section << ": tensor " << i << " differs in name or size";
    if (std::memcmp(ta.raw(), tb.raw(), ta.nbytes()) != 0) {
      std::int64_t k = 0;
      while (ta.f32()[k] == tb.f32()[k]) ++k;
      return ::testing::AssertionFailure()
             << section << "." << sa.name(i) << "[" << k << "]: " << ta.f32()[k] << " vs " << tb.f32()[k];
    }
  }
  return ::testing::AssertionSuccess();
}

class TrainResume : public ::testing::Test {
 protected:
  void SetUp() override {
    write_shard(dir.file("train.bin"), 20000, 1);
    write_shard(dir.file("val.bin"), 2000, 2);
  }
  llmcc::test::TempDir dir;
};

TEST_F(TrainResume, StopAndResumeEqualsOneRun) {
  const auto flags = run_flags(dir, {{"--ckpt-every", "3"}});
  const std::string a = dir.file("a"), b = dir.file("b"), c = dir.file("c");

  // A: 8 steps in one invocation, with periodic checkpoints at steps 3 and 6 as well.
  CliResult r = run_llmcc(dir, concat(flags, {"--out-dir", a}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step arena: high-water"), std::string::npos) << r.out;
  // B: the same run stopped after 3 steps (a new process), then resumed in its directory with no
  // training flags at all: everything comes back from the checkpoint (the thread count too).
  r = run_llmcc(dir, concat(flags, {"--out-dir", b, "--stop-after", "3"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  ASSERT_TRUE(fs::exists(b + "/ckpt_000003.bin"));
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");  // nothing overridden, so no warning
  EXPECT_NE(r.out.find("threads 2"), std::string::npos) << r.out;
  // C: resumed from A's mid-run checkpoint into a fresh directory.
  r = run_llmcc(dir, {"train", "--resume", a + "/ckpt_000003.bin", "--out-dir", c, "--threads", "2"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;

  const std::string final_a = a + "/ckpt_000008.bin";
  for (const std::string& other : {b + "/ckpt_000008.bin", c + "/ckpt_000008.bin"}) {
    SCOPED_TRACE(other);
    ASSERT_TRUE(fs::exists(other));
    EXPECT_TRUE(same_tensors(final_a, other, "params"));
    EXPECT_TRUE(same_tensors(final_a, other, "adamw.m"));
    EXPECT_TRUE(same_tensors(final_a, other, "adamw.v"));
    const llmcc::CheckpointReader ra(final_a), ro(other);
    EXPECT_EQ(ra.blob("state"), ro.blob("state"));    // step, AdamW t, data position, rngs
    EXPECT_EQ(ra.blob("config"), ro.blob("config"));  // the same run, hyper-parameters included
    EXPECT_TRUE(slurp(final_a) == slurp(other)) << "checkpoint files differ byte-wise";
  }

  // Per-step losses, learning rates and gradient norms, as logged text (shortest exact form).
  const auto loss_a = logged(a + "/log.jsonl", "loss"), loss_b = logged(b + "/log.jsonl", "loss"),
             loss_c = logged(c + "/log.jsonl", "loss");
  ASSERT_EQ(loss_a.size(), 8u);
  EXPECT_EQ(loss_a, loss_b);  // B's log: steps 1-3 of the first invocation, 4-8 of the resumed one
  ASSERT_EQ(loss_c.size(), 5u);
  for (const auto& [step, loss] : loss_c) EXPECT_EQ(loss, loss_a.at(step)) << "step " << step;
  EXPECT_EQ(logged(a + "/log.jsonl", "grad_norm"), logged(b + "/log.jsonl", "grad_norm"));
  EXPECT_EQ(logged(a + "/log.jsonl", "lr"), logged(b + "/log.jsonl", "lr"));
  EXPECT_EQ(logged(a + "/log.jsonl", "val_loss"), logged(b + "/log.jsonl", "val_loss"));
  // Clipping was active (the logged norm is before clipping) and training moved the loss.
  EXPECT_GT(std::stod(logged(a + "/log.jsonl", "grad_norm").at(1)), 0.5);
  EXPECT_LT(std::stod(loss_a.at(8)), std::stod(loss_a.at(1)));
  // A step line carries every documented field.
  const std::string log = slurp(a + "/log.jsonl");
  for (const char* field : {"\"loss\": ", "\"lr\": ", "\"grad_norm\": ", "\"tokens_per_s\": ", "\"ms\": "})
    EXPECT_NE(log.find(field), std::string::npos) << field;

  // Resuming a finished run has nothing to do and changes nothing.
  r = run_llmcc(dir, {"train", "--out-dir", a, "--resume", "auto"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing to train"), std::string::npos) << r.out;

  // eval over the same batches reproduces the final logged validation loss.
  r = run_llmcc(dir, {"eval", "--ckpt", final_a, "--val-data", dir.file("val.bin"), "--steps", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Both print exact values: the double eval computes is the one the trainer logged as a float.
  const double eval_loss = std::stod(r.out.substr(r.out.find("\"loss\": ") + 8));
  EXPECT_EQ(static_cast<float>(eval_loss), std::stof(logged(a + "/log.jsonl", "val_loss").at(8))) << r.out;
}

TEST_F(TrainResume, SequentialBatchesResumeExactlyAndSamplesChangeNothing) {
  // The sequential loader's position (shard, offset) instead of the random loader's Rng; B also
  // prints samples, which draw from their own Rng and must not move the training trajectory.
  const auto flags = run_flags(dir, {{"--sampling", "sequential"}, {"--grad-accum", "3"}, {"--val-every", "0"}});
  const std::string a = dir.file("a"), b = dir.file("b");
  CliResult r = run_llmcc(dir, concat(flags, {"--out-dir", a}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir,
                concat(flags, {"--out-dir", b, "--stop-after", "5", "--sample-every", "2", "--sample-tokens", "8"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step 4: sample (8 tokens, token ids"), std::string::npos) << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto", "--threads", "2"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* section : {"params", "adamw.m", "adamw.v"})
    EXPECT_TRUE(same_tensors(a + "/ckpt_000008.bin", b + "/ckpt_000008.bin", section));
  EXPECT_EQ(logged(a + "/log.jsonl", "loss"), logged(b + "/log.jsonl", "loss"));
  // The sampling Rng resumes too: the same samples as an uninterrupted run that samples.
  const std::string c = dir.file("c");
  r = run_llmcc(dir, concat(flags, {"--out-dir", c, "--sample-every", "2", "--sample-tokens", "8"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(logged(b + "/log.jsonl", "sample").size(), 4u);  // steps 2, 4, 6 and 8
  EXPECT_EQ(logged(b + "/log.jsonl", "sample"), logged(c + "/log.jsonl", "sample"));
}

// The same exactness for a Llama (GQA, RoPE, SwiGLU): the checkpoint records the family and its
// fields, so a resume with no flags at all rebuilds the same model; eval and generate read it.
TEST_F(TrainResume, LlamaStopAndResumeEqualsOneRun) {
  const auto flags = run_flags(
      dir, {{"--model", "llama-tiny"}, {"--n-kv-head", "2"}, {"--hidden-dim", "96"}, {"--rope-theta", "500"}});
  const std::string a = dir.file("a"), b = dir.file("b");
  CliResult r = run_llmcc(dir, concat(flags, {"--out-dir", a}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("llmcc train: Llama L2 H4/2 C64 F96 T64 V512 theta 500"), std::string::npos) << r.out;
  r = run_llmcc(dir,
                concat(flags, {"--out-dir", b, "--stop-after", "3", "--sample-every", "2", "--sample-tokens", "4"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step 2: sample (4 tokens"), std::string::npos) << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");
  const llmcc::CheckpointReader ckpt(a + "/ckpt_000008.bin");
  EXPECT_NE(ckpt.blob("config").find("model.family=llama"), std::string::npos) << ckpt.blob("config");
  for (const char* section : {"params", "adamw.m", "adamw.v"})
    EXPECT_TRUE(same_tensors(a + "/ckpt_000008.bin", b + "/ckpt_000008.bin", section));
  EXPECT_EQ(logged(a + "/log.jsonl", "loss"), logged(b + "/log.jsonl", "loss"));
  EXPECT_EQ(logged(a + "/log.jsonl", "val_loss"), logged(b + "/log.jsonl", "val_loss"));
  EXPECT_LT(std::stod(logged(a + "/log.jsonl", "loss").at(8)), std::stod(logged(a + "/log.jsonl", "loss").at(1)));

  // eval reproduces the logged validation loss; a GPT-2 preset on resume is refused by name.
  r = run_llmcc(
      dir, {"eval", "--ckpt", a + "/ckpt_000008.bin", "--val-data", dir.file("val.bin"), "--steps", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const double eval_loss = std::stod(r.out.substr(r.out.find("\"loss\": ") + 8));
  EXPECT_NEAR(eval_loss, std::stod(logged(a + "/log.jsonl", "val_loss").at(8)), 1e-5) << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", a, "--resume", "auto", "--steps", "9", "--model", "gpt2-tiny"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--model gpt2-tiny (GPT-2) conflicts with the checkpoint"), std::string::npos) << r.err;

  // generate samples from it (GPT-2's tokenizer decodes ids below 512; "a" is id 64).
  if (!llmcc::test::have_data("gpt2/encoder.json")) {
    llmcc::test::note_missing_data("gpt2/encoder.json", "the generate part of this test");
    return;
  }
  r = run_llmcc(dir, {"generate", "--ckpt", a + "/ckpt_000008.bin", "--prompt", "a", "--max-tokens", "70",
                      "--no-stop-at-eot", "--seed", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("model Llama L2 H4/2 C64 F96 T64 V512"), std::string::npos) << r.err;
  // The context is 64 tokens: 'stop' ends after 64 new ones, the last predicted from the full
  // context and never fed back (the KV-cache generator, as GPT-2's).
  EXPECT_NE(r.err.find("decode: 64 new tokens, 63 cached steps"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reached the model's context of 64 tokens"), std::string::npos) << r.err;
}

TEST_F(TrainResume, BadInputIsAClearError) {
  const auto flags = run_flags(dir);
  // Unknown flag.
  CliResult r = run_llmcc(dir, concat(flags, {"--out-dir", dir.file("x"), "--bogus-flag", "1"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown flag --bogus-flag"), std::string::npos) << r.err;
  // Malformed value.
  r = run_llmcc(dir, concat(run_flags(dir, {{"--lr", "fast"}}), {"--out-dir", dir.file("x")}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--lr expects a number, got 'fast'"), std::string::npos) << r.err;
  // Missing data file, named.
  r = run_llmcc(dir,
                {"train", "--train-data", dir.file("missing.bin"), "--model", "gpt2-tiny", "--out-dir", dir.file("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing.bin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--train-data"), std::string::npos) << r.err;
  r = run_llmcc(
      dir, {"train", "--train-data", dir.file("nothing_*.bin"), "--model", "gpt2-tiny", "--out-dir", dir.file("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no file matches"), std::string::npos) << r.err;
  // A combination out of range, named.
  r = run_llmcc(dir, concat(run_flags(dir, {{"--seq-len", "65"}}), {"--out-dir", dir.file("x")}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--seq-len 65 exceeds the model's max_seq_len 64"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("x") + "/log.jsonl")) << "a rejected run wrote a log";

  // Resume with a conflicting model shape.
  r = run_llmcc(dir, concat(flags, {"--out-dir", dir.file("r"), "--stop-after", "1"}));
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_llmcc(dir, {"train", "--out-dir", dir.file("r"), "--resume", "auto", "--n-layer", "3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--n-layer 3 conflicts with the checkpoint"), std::string::npos) << r.err;
  // A fresh run into a directory that holds a run: refused, pointing at --resume.
  r = run_llmcc(dir, concat(flags, {"--out-dir", dir.file("r")}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--resume auto"), std::string::npos) << r.err;
  // A changed hyper-parameter on resume is allowed, with a warning naming it.
  r = run_llmcc(dir, {"train", "--out-dir", dir.file("r"), "--resume", "auto", "--lr", "1e-3", "--stop-after", "1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("--lr 0.001 replaces the checkpoint's 0.003"), std::string::npos) << r.err;
}

}  // namespace
