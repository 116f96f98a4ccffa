// `llmcc train --lora-rank` run as a user runs it, on a tiny Llama trained here first as the base:
// the checkpoints hold only the adapters (and the base's path and CRC-32), the loss falls, a
// stopped and resumed run equals an uninterrupted one bit for bit, `eval` of the adapters equals
// `eval` of `export --merge-lora`'s merged model, the base stays as it was, a changed base is
// refused by its CRC-32, and bad LoRA flags exit 1 naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/parameters.h"
#include "temp_dir.h"
#include "test_data.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;

using llmcc::test::CliResult;
using llmcc::test::logged;
using llmcc::test::run_llmcc;

constexpr int kVocab = 256;

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class TrainLora : public ::testing::Test {
 protected:
  void SetUp() override {
    llmcc::test::write_progression_shard(dir.file("train.bin"), 20000, 1, kVocab);
    llmcc::test::write_progression_shard(dir.file("val.bin"), 2000, 2, kVocab);
  }
  // Flags shared by the base's run and the adapters' runs.
  std::vector<std::string> data_flags() const {
    return {"--train-data", dir.file("train.bin"),
            "--val-data",   dir.file("val.bin"),
            "--batch-size", "4",
            "--seq-len",    "32",
            "--val-every",  "4",
            "--val-steps",  "2",
            "--seed",       "5",
            "--threads",    "2"};
  }
  // A tiny Llama trained for 6 steps: the base. Returns its checkpoint.
  std::string train_base() {
    const CliResult r = run_llmcc(dir, concat({"train",
                                               "--model",
                                               "llama-tiny",
                                               "--n-layer",
                                               "2",
                                               "--n-embd",
                                               "48",
                                               "--n-head",
                                               "4",
                                               "--n-kv-head",
                                               "2",
                                               "--hidden-dim",
                                               "80",
                                               "--vocab-size",
                                               std::to_string(kVocab),
                                               "--max-seq-len",
                                               "64",
                                               "--steps",
                                               "6",
                                               "--lr",
                                               "3e-3",
                                               "--out-dir",
                                               dir.file("base")},
                                              data_flags()));
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    return dir.file("base") + "/ckpt_000006.bin";
  }
  std::vector<std::string> lora_flags(const std::string& base, const std::string& out, int steps = 8) const {
    return concat(
        {"train", "--init-from", base, "--lora-rank", "4", "--lora-alpha", "8", "--lora-targets", "q,v,down", "--steps",
         std::to_string(steps), "--warmup-steps", "2", "--lr", "2e-2", "--grad-clip", "1", "--out-dir", out},
        data_flags());
  }
  llmcc::test::TempDir dir;
};

// The bytes of every tensor of a checkpoint section, in order.
std::string section_bytes(const llmcc::CheckpointReader& r, const std::string& section) {
  std::vector<llmcc::ParameterInfo> infos;
  for (const auto& t : r.tensors(section)) infos.push_back({t.name, t.shape});
  llmcc::ParameterStore store(infos);
  r.read_tensors(section, store);
  std::string out;
  for (std::size_t i = 0; i < store.count(); ++i)
    out.append(static_cast<const char*>(store.tensor(i).raw()), static_cast<std::size_t>(store.tensor(i).nbytes()));
  return out;
}

double eval_loss(const llmcc::test::TempDir& dir, const std::string& ckpt, int batches = 3) {
  const CliResult r = run_llmcc(dir, {"eval", "--ckpt", ckpt, "--val-data", dir.file("val.bin"), "--batch-size", "4",
                                      "--seq-len", "32", "--steps", std::to_string(batches), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  return std::stod(r.out.substr(r.out.find("\"loss\": ") + 8));
}

TEST_F(TrainLora, AdaptersTrainResumeExactlyAndMergeIntoThePlainModel) {
  const std::string base = train_base();
  const std::string base_bytes = llmcc::test::slurp(base);
  const std::string a = dir.file("a"), b = dir.file("b");
  CliResult r = run_llmcc(dir, lora_flags(base, a));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("LoRA: rank 4, alpha 8 on q,v,down in every layer"), std::string::npos) << r.out;
  EXPECT_EQ(llmcc::test::slurp(base), base_bytes) << "the base changed";

  // The checkpoint: the adapters only (2 layers x 3 maps x A and B), their config and base.
  const llmcc::CheckpointReader ckpt(a + "/ckpt_000008.bin");
  const auto tensors = ckpt.tensors("params");
  ASSERT_EQ(tensors.size(), 12u);
  EXPECT_EQ(tensors[0].name, "layers.0.wq.lora_A.weight");
  EXPECT_EQ(tensors[0].shape, llmcc::Shape({4, 48}));
  EXPECT_EQ(tensors[1].name, "layers.0.wq.lora_B.weight");
  EXPECT_EQ(tensors[5].name, "layers.0.w2.lora_B.weight");
  EXPECT_EQ(tensors[5].shape, llmcc::Shape({48, 4}));
  const std::string config = ckpt.blob("config");
  EXPECT_NE(config.find("lora.rank=4\n"), std::string::npos) << config;
  EXPECT_NE(config.find("lora.targets=q,v,down\n"), std::string::npos) << config;
  EXPECT_NE(config.find("lora.base=" + fs::absolute(base).lexically_normal().string() + "\n"), std::string::npos)
      << config;
  EXPECT_NE(config.find("lora.base_crc32="), std::string::npos) << config;
  const auto val = logged(a + "/log.jsonl", "val_loss");
  EXPECT_LT(std::stod(val.at(8)), std::stod(val.at(0)));

  // Stopped after 3 steps and resumed: the same adapters, moments and losses.
  r = run_llmcc(dir, concat(lora_flags(base, b), {"--stop-after", "3"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");
  const llmcc::CheckpointReader resumed(b + "/ckpt_000008.bin");
  for (const char* section : {"params", "adamw.m", "adamw.v"})
    EXPECT_EQ(section_bytes(ckpt, section), section_bytes(resumed, section)) << section;
  EXPECT_EQ(logged(a + "/log.jsonl", "loss"), logged(b + "/log.jsonl", "loss"));

  // eval of the adapters = eval of the merged model; both differ from the base's.
  r = run_llmcc(dir, {"export", "--ckpt", a + "/ckpt_000008.bin", "--format", "llmcc", "--out", dir.file("m.ckpt")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds LoRA adapters over"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give --merge-lora"), std::string::npos) << r.err;
  r = run_llmcc(dir, {"export", "--ckpt", a + "/ckpt_000008.bin", "--merge-lora", "--format", "llmcc", "--out",
                      dir.file("m.ckpt")});
  ASSERT_EQ(r.code, 0) << r.err;
  const double adapted = eval_loss(dir, a + "/ckpt_000008.bin"), merged = eval_loss(dir, dir.file("m.ckpt"));
  EXPECT_NEAR(adapted, merged, 1e-5 * adapted);
  EXPECT_GT(std::abs(adapted - eval_loss(dir, base)), 1e-4);
  EXPECT_EQ(llmcc::CheckpointReader(dir.file("m.ckpt")).tensors("params").size(),
            llmcc::CheckpointReader(base).tensors("params").size());
  r = run_llmcc(dir, {"export", "--ckpt", base, "--merge-lora", "--format", "llmcc", "--out", dir.file("x.ckpt")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds a model without LoRA adapters"), std::string::npos) << r.err;

  // generate decodes with the adapters (the KV cache through them): greedy text equal to the
  // merged model's.
  if (!llmcc::test::have_data("gpt2/encoder.json")) {
    llmcc::test::note_missing_data("gpt2/encoder.json", "the generate part of this test");
    return;
  }
  const auto greedy = [&](const std::string& ckpt) {
    const CliResult g = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", "a", "--max-tokens", "24",
                                        "--temperature", "0", "--no-stop-at-eot"});
    EXPECT_EQ(g.code, 0) << g.err;
    return g.out;
  };
  const std::string with_adapters = greedy(a + "/ckpt_000008.bin");
  EXPECT_EQ(with_adapters, greedy(dir.file("m.ckpt")));
  EXPECT_GT(with_adapters.size(), 2u);
}

// --lora-dropout: training steps draw masks (the losses differ from a run without), validation
// does not (the logged validation loss is eval's of the same checkpoint), the value is recorded in
// the checkpoint and PEFT's adapter_config.json, a stopped and resumed run equals an uninterrupted
// one bit for bit, and a probability out of range is refused.
TEST_F(TrainLora, DropoutTrainsResumesExactlyAndLeavesValidationAlone) {
  const std::string base = train_base();
  const std::string plain = dir.file("plain"), a = dir.file("a"), b = dir.file("b");
  CliResult r = run_llmcc(dir, lora_flags(base, plain, 4));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, concat(lora_flags(base, a, 4), {"--lora-dropout", "0.25"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("LoRA: rank 4, alpha 8, dropout 0.25 on q,v,down"), std::string::npos) << r.out;
  // The first step's loss is the base's either way (B is zero); the second's differs with masks.
  const auto with = logged(a + "/log.jsonl", "loss"), without = logged(plain + "/log.jsonl", "loss");
  ASSERT_EQ(with.size(), 4u);
  EXPECT_EQ(with.at(1), without.at(1));
  EXPECT_NE(with.at(2), without.at(2));
  const auto val = logged(a + "/log.jsonl", "val_loss");
  EXPECT_NEAR(std::stod(val.at(4)), eval_loss(dir, a + "/ckpt_000004.bin", 2), 1e-4);
  EXPECT_NE(llmcc::CheckpointReader(a + "/ckpt_000004.bin").blob("config").find("lora.dropout=0.25\n"),
            std::string::npos);
  r = run_llmcc(dir, {"export", "--ckpt", a + "/ckpt_000004.bin", "--format", "peft", "--out", dir.file("peft")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(llmcc::test::slurp(dir.file("peft") + "/adapter_config.json").find("\"lora_dropout\": 0.25,"),
            std::string::npos);

  r = run_llmcc(dir, concat(lora_flags(base, b, 4), {"--lora-dropout", "0.25", "--stop-after", "2"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const llmcc::CheckpointReader whole(a + "/ckpt_000004.bin"), resumed(b + "/ckpt_000004.bin");
  for (const char* section : {"params", "adamw.m", "adamw.v"})
    EXPECT_EQ(section_bytes(whole, section), section_bytes(resumed, section)) << section;
  EXPECT_EQ(logged(a + "/log.jsonl", "loss"), logged(b + "/log.jsonl", "loss"));
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto", "--lora-dropout", "0.1", "--steps", "6"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--lora-dropout 0.1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("trains its adapters with dropout 0.25"), std::string::npos) << r.err;

  for (const char* p : {"1", "-0.5"}) {
    r = run_llmcc(dir, concat(lora_flags(base, dir.file("bad"), 2), {"--lora-dropout", p}));
    EXPECT_EQ(r.code, 1) << p;
    EXPECT_NE(r.err.find("--lora-dropout must be a probability in [0, 1)"), std::string::npos) << r.err;
  }
}

// --base-dtype bf16: the base's matrices stored rounded (the memory line says so), the run
// resumes exactly with the setting restored from its checkpoint, and training every weight with
// it is refused.
TEST_F(TrainLora, ABf16BaseTrainsResumesExactlyAndIsRefusedWithoutAdapters) {
  const std::string base = train_base();
  const std::string a = dir.file("a"), b = dir.file("b");
  CliResult r = run_llmcc(dir, concat(lora_flags(base, a, 6), {"--base-dtype", "bf16"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("frozen base "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(matrices in bf16) + adapters "), std::string::npos) << r.out;
  const auto val = logged(a + "/log.jsonl", "val_loss");
  EXPECT_LT(std::stod(val.at(4)), std::stod(val.at(0)));
  EXPECT_NE(llmcc::CheckpointReader(a + "/ckpt_000006.bin").blob("config").find("train.base_dtype=bf16\n"),
            std::string::npos);

  r = run_llmcc(dir, concat(lora_flags(base, b, 6), {"--base-dtype", "bf16", "--stop-after", "2"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", b, "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("(matrices in bf16)"), std::string::npos) << r.out;
  EXPECT_EQ(logged(a + "/log.jsonl", "loss"), logged(b + "/log.jsonl", "loss"));
  const llmcc::CheckpointReader done(a + "/ckpt_000006.bin"), resumed(b + "/ckpt_000006.bin");
  EXPECT_EQ(section_bytes(done, "params"), section_bytes(resumed, "params"));

  // Differs from the f32 base's run (a trained base is not exactly bf16), but not by much.
  r = run_llmcc(dir, lora_flags(base, dir.file("f"), 6));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const double f32_loss = std::stod(logged(dir.file("f") + "/log.jsonl", "val_loss").at(6));
  EXPECT_NEAR(std::stod(val.at(6)), f32_loss, 0.05 * f32_loss);

  r = run_llmcc(
      dir, concat({"train", "--init-from", base, "--steps", "1", "--base-dtype", "bf16", "--out-dir", dir.file("x")},
                  data_flags()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--base-dtype bf16 stores a frozen base: give --lora-rank"), std::string::npos) << r.err;
  r = run_llmcc(dir, concat(lora_flags(base, dir.file("y"), 1), {"--base-dtype", "fp16"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--base-dtype must be 'f32' or 'bf16', got 'fp16'"), std::string::npos) << r.err;
}

// --checkpoint-activations: the same losses and adapters, bit for bit, as the plain run; the
// header says the blocks' forward runs twice; a resumed run keeps the setting.
TEST_F(TrainLora, CheckpointedActivationsTrainTheSameAdapters) {
  const std::string base = train_base();
  CliResult r = run_llmcc(dir, lora_flags(base, dir.file("a"), 4));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, concat(lora_flags(base, dir.file("b"), 4), {"--checkpoint-activations", "--stop-after", "2"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("activations checkpointed per block: the blocks' forward runs twice"), std::string::npos)
      << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", dir.file("b"), "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("activations checkpointed per block"), std::string::npos) << r.out;
  EXPECT_EQ(logged(dir.file("a") + "/log.jsonl", "loss"), logged(dir.file("b") + "/log.jsonl", "loss"));
  EXPECT_EQ(section_bytes(llmcc::CheckpointReader(dir.file("a") + "/ckpt_000004.bin"), "params"),
            section_bytes(llmcc::CheckpointReader(dir.file("b") + "/ckpt_000004.bin"), "params"));
}

// Qwen3 through the same registry path: adapters on every map by default, eval of the adapters
// equal to eval of the merged model.
TEST_F(TrainLora, Qwen3AdaptersMergeIntoThePlainModel) {
  CliResult r =
      run_llmcc(dir, concat({"train", "--model", "qwen3-tiny", "--n-layer", "2", "--vocab-size", std::to_string(kVocab),
                             "--max-seq-len", "64", "--steps", "2", "--out-dir", dir.file("qbase")},
                            data_flags()));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, concat({"train", "--init-from", dir.file("qbase") + "/ckpt_000002.bin", "--lora-rank", "2",
                             "--steps", "3", "--lr", "1e-2", "--out-dir", dir.file("q")},
                            data_flags()));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("LoRA: rank 2, alpha 16 on q,k,v,o,gate,up,down in every layer"), std::string::npos) << r.out;
  EXPECT_EQ(llmcc::CheckpointReader(dir.file("q") + "/ckpt_000003.bin").tensors("params").front().name,
            "layers.0.q_proj.lora_A.weight");
  r = run_llmcc(dir, {"export", "--ckpt", dir.file("q") + "/ckpt_000003.bin", "--merge-lora", "--format", "llmcc",
                      "--out", dir.file("qm.ckpt")});
  ASSERT_EQ(r.code, 0) << r.err;
  const double adapted = eval_loss(dir, dir.file("q") + "/ckpt_000003.bin");
  EXPECT_NEAR(adapted, eval_loss(dir, dir.file("qm.ckpt")), 1e-5 * adapted);
}

// GPT-2's adapters (c_attn, c_proj, c_fc; each map keeps its bias): train with dropout, resume
// exactly, merge into the plain model, export in PEFT's layout (Conv1D maps: fan_in_fan_out) and
// read that back as a model path, and generate as the merged model does.
TEST_F(TrainLora, Gpt2AdaptersTrainResumeMergeAndExport) {
  const std::vector<std::string> shape = {"--model",       "gpt2-tiny",
                                          "--n-layer",     "2",
                                          "--n-embd",      "48",
                                          "--n-head",      "4",
                                          "--vocab-size",  std::to_string(kVocab),
                                          "--max-seq-len", "64"};
  CliResult r =
      run_llmcc(dir, concat(concat({"train", "--steps", "3", "--out-dir", dir.file("gbase")}, shape), data_flags()));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const std::string base = dir.file("gbase") + "/ckpt_000003.bin";
  const auto lora = [&](const std::string& out, std::vector<std::string> extra) {
    return concat(concat({"train", "--init-from", base, "--lora-rank", "4", "--lora-dropout", "0.1", "--steps", "4",
                          "--lr", "1e-2", "--out-dir", out},
                         extra),
                  data_flags());
  };
  r = run_llmcc(dir, lora(dir.file("g"), {}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("LoRA: rank 4, alpha 16, dropout 0.1 on c_attn,c_proj,c_fc in every layer"), std::string::npos)
      << r.out;
  const std::string ckpt = dir.file("g") + "/ckpt_000004.bin";
  const llmcc::CheckpointReader reader(ckpt);
  const auto tensors = reader.tensors("params");
  ASSERT_EQ(tensors.size(), 16u);  // 2 layers x 4 maps x (A, B)
  EXPECT_EQ(tensors[0].name, "h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(tensors[1].shape, llmcc::Shape({144, 4}));
  EXPECT_EQ(tensors[7].name, "h.0.mlp.c_proj.lora_B.weight");

  r = run_llmcc(dir, lora(dir.file("g2"), {"--stop-after", "2"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = run_llmcc(dir, {"train", "--out-dir", dir.file("g2"), "--resume", "auto"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* section : {"params", "adamw.m", "adamw.v"})
    EXPECT_EQ(section_bytes(reader, section),
              section_bytes(llmcc::CheckpointReader(dir.file("g2") + "/ckpt_000004.bin"), section))
        << section;

  r = run_llmcc(dir, {"export", "--ckpt", ckpt, "--merge-lora", "--format", "llmcc", "--out", dir.file("gm.ckpt")});
  ASSERT_EQ(r.code, 0) << r.err;
  const double adapted = eval_loss(dir, ckpt);
  EXPECT_NEAR(adapted, eval_loss(dir, dir.file("gm.ckpt")), 1e-5 * adapted);
  EXPECT_GT(std::abs(adapted - eval_loss(dir, base)), 1e-4);
  r = run_llmcc(dir, {"export", "--ckpt", ckpt, "--format", "peft", "--out", dir.file("gpeft")});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string config = llmcc::test::slurp(dir.file("gpeft") + "/adapter_config.json");
  EXPECT_NE(config.find("\"fan_in_fan_out\": true,"), std::string::npos) << config;
  EXPECT_NE(config.find("\"target_modules\": [\"c_attn\", \"c_proj\", \"c_fc\"]"), std::string::npos) << config;
  EXPECT_NEAR(eval_loss(dir, dir.file("gpeft")), adapted, 1e-6 * adapted);

  if (!llmcc::test::have_data("gpt2/encoder.json")) {
    llmcc::test::note_missing_data("gpt2/encoder.json", "the generate part of this test");
    return;
  }
  const auto greedy = [&](const std::string& model) {
    const CliResult g = run_llmcc(dir, {"generate", "--ckpt", model, "--prompt", "a", "--max-tokens", "60",
                                        "--temperature", "0", "--no-stop-at-eot"});
    EXPECT_EQ(g.code, 0) << g.err;
    return g.out;
  };
  const std::string with_adapters = greedy(ckpt);
  EXPECT_EQ(with_adapters, greedy(dir.file("gm.ckpt")));
  EXPECT_GT(with_adapters.size(), 2u);
}

// llmcc bench times LoRA steps: its FLOP count is the base's forward and input gradients (4 per
// matrix weight per token) plus the adapters' 6, against training every weight (6 per weight).
TEST_F(TrainLora, BenchCountsNoWeightGradientsOfTheBase) {
  const CliResult r = run_llmcc(
      dir, {"bench", "--model",        "llama-tiny", "--n-layer",   "2", "--batch-size",   "2",  "--seq-len",
            "32",    "--threads",      "2",          "--steps",     "2", "--warmup",       "1",  "--profile-steps",
            "1",     "--peak-seconds", "0.05",       "--lora-rank", "4", "--lora-targets", "q,v"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("LoRA: rank 4, alpha 16 on q,v:"), std::string::npos) << r.out;
  // llama-tiny with 2 layers: C 128, kv 64, F 352, V 32000: 2 (2 C^2 + 2 kv C + 3 F C) + V C
  // matrix weights; adapters 2 layers x (q: 4 x 128 + 128 x 4, v: 4 x 128 + 64 x 4).
  const double C = 128, kv = 64, F = 352, V = 32000, tokens = 2 * 32;
  const double matmul = 2 * (2 * C * C + 2 * kv * C + 3 * F * C) + V * C,
               adapters = 2 * (4 * 128 * 2 + 4 * 128 + 64 * 4);
  const double attention = 2 * 2.0 * 32 * C * 3.0;
  const double full = tokens * (6 * matmul + attention), lora = full - tokens * 2 * matmul + tokens * 6 * adapters;
  char want[128];
  std::snprintf(want, sizeof want, "GFLOP/step: %.2f;", lora * 1e-9);
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  std::snprintf(want, sizeof want, "training every weight instead: %.2f (LoRA: %.2fx", full * 1e-9, lora / full);
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST_F(TrainLora, AChangedBaseAndBadFlagsAreRefusedByName) {
  const std::string base = train_base();
  const std::string copy = dir.file("copy.ckpt");
  fs::copy_file(base, copy);
  CliResult r = run_llmcc(dir, lora_flags(copy, dir.file("a"), 2));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  // The base file replaced by other weights (the base's training at another step).
  ASSERT_EQ(run_llmcc(dir, concat({"train", "--init-from", base, "--steps", "1", "--out-dir", dir.file("other")},
                                  data_flags()))
                .code,
            0);
  fs::copy_file(dir.file("other") + "/ckpt_000001.bin", copy, fs::copy_options::overwrite_existing);
  r = run_llmcc(dir, {"eval", "--ckpt", dir.file("a") + "/ckpt_000002.bin", "--val-data", dir.file("val.bin")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the adapters were trained on weights with CRC-32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("adapters apply only to the weights they were trained on"), std::string::npos) << r.err;
  fs::remove(copy);
  r = run_llmcc(dir, {"eval", "--ckpt", dir.file("a") + "/ckpt_000002.bin", "--val-data", dir.file("val.bin")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("(lora.base) does not exist"), std::string::npos) << r.err;

  const auto refused = [&](const std::vector<std::string>& args, const std::string& what) {
    const CliResult bad = run_llmcc(dir, args);
    EXPECT_EQ(bad.code, 1) << what;
    EXPECT_NE(bad.err.find(what), std::string::npos) << bad.err;
  };
  refused(concat({"train", "--model", "llama-tiny", "--lora-rank", "4", "--out-dir", dir.file("x")}, data_flags()),
          "--lora-rank trains adapters over frozen weights: give them with --init-from");
  const auto with_lora = [&](const std::string& rank, const std::string& targets) {
    return concat(
        {"train", "--init-from", base, "--lora-rank", rank, "--lora-targets", targets, "--out-dir", dir.file("y")},
        data_flags());
  };
  refused(with_lora("4", "q,qq"), "unknown target map 'qq'; this family's are q, k, v, o, gate, up, down");
  refused(with_lora("4", "q,,v"), "[--lora-targets] the target list 'q,,v' has an empty item");
  refused(with_lora("4", "q,v,q"), "target map 'q' is named twice");
  refused(with_lora("-1", "q"), "--lora-rank must be >= 0, got -1");
  refused(concat({"train", "--init-from", base, "--lora-alpha", "4", "--out-dir", dir.file("z")}, data_flags()),
          "--lora-alpha and --lora-targets configure adapters: give --lora-rank with them");
}

}  // namespace
