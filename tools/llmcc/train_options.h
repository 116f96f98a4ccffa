// The options of `llmcc train`: flags, validation, and their round trip through a checkpoint.
//
// Every training hyper-parameter is also a checkpoint config key ("train.lr", "data.train.0",
// ...; the model's shape under "model.*"). Resuming restores each one from the checkpoint unless
// the flag is given again; a given flag whose value differs wins and gets a warning, because the
// run then no longer matches an uninterrupted one. The thread count the run used is kept too
// ("run.threads", restored unless --threads is given): kernels may round differently with another;
// so is the GEMM's cache blocking ("run.gemm_blocking", restored unless --gemm-tune is given).
// Run-local flags (--out-dir, --log, --quiet, --resume, --init-from, --stop-after, --tokenizer,
// --loss-spike, --max-update, --force-resume, --zero, --bucket-mb, --comm) are not stored (a checkpoint stores the
// tokenizer itself: run_tokenizer.h).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "args.h"
#include "llmcc/io/checkpoint.h"
#include "model_flags.h"

namespace llmcc::cli {

struct TrainOptions {
  ModelFlags model;

  // Data.
  std::vector<std::string> train_data;  // files or glob patterns (expanded by expand_data_paths)
  std::vector<std::string> val_data;
  std::string sampling = "random";  // random | sequential
  std::string recipe;               // "llmc": llm.c's train_gpt2.c defaults for the flags not given
  // Tokenizer spec (gpt2, gpt2:DIR, sp:MODEL); empty: the resumed checkpoint's, else the one
  // llmcc prepare recorded next to the shards (run_tokenizer.h). Run-local: checkpoints carry it.
  std::string tokenizer;

  // Run.
  std::string out_dir;
  std::string log_path;   // empty: <out_dir>/log.jsonl
  std::string resume;     // checkpoint path, "auto", or empty
  std::string init_from;  // weights file, or empty
  // LoRA (models/lora.h): rank 0 trains every weight; above 0 trains adapters of this rank on the
  // maps lora_targets names (comma-separated short names; empty: all of the family's) over the
  // frozen --init-from weights. A resumed run takes them from its checkpoint.
  int lora_rank = 0;
  float lora_alpha = 16.0f;
  float lora_dropout = 0.0f;
  std::string lora_targets;
  // How a LoRA run stores the frozen base's matrices: "f32", or "bf16" (rounded once, half the
  // memory; the products widen them a block at a time). Recorded in checkpoints.
  std::string base_dtype = "f32";
  // Activation checkpointing per block: the step's activations shrink to one block's, for one
  // more forward of the blocks. Recorded in checkpoints.
  bool checkpoint_activations = false;
  std::int64_t steps = 1000;
  std::int64_t stop_after = 0;  // stop (with a checkpoint) after this many steps of this run
  int batch_size = 4;
  int seq_len = 64;
  int grad_accum = 1;
  std::uint64_t seed = 1337;
  int threads = 0;  // 0: OpenMP's default (all cores)
  // The matrix products' operand type, fp32 or bf16 (llmcc::MatmulDtype); weights, gradients
  // and the optimizer stay fp32, so checkpoints are the same and a run resumes with either.
  std::string dtype = "fp32";
  bool quiet = false;
  // Data-parallel runs (mpirun -np N llmcc train ...): the number of ranks (set from the run's
  // communicator, not a flag), ZeRO stage (-1: 1 when ranks > 1) and gradient bucket size; all
  // run-local. batch_size is per rank; checkpoints store the global batch (train.batch_size =
  // ranks * batch_size), so a run resumes with any number of ranks that divides it.
  int ranks = 1;
  int zero = -1;
  double bucket_mb = 16.0;
  // auto: ranks on one machine share weights and gradients in memory (ZeRO-1); mpi: MPI
  // collectives everywhere.
  std::string comm = "auto";
  // The GEMM's cache blocking: --gemm-tune (auto, off, redo; llmcc::GemmTune), and the blocking
  // a resumed run's checkpoint recorded ("run.gemm_blocking", restored unless --gemm-tune is
  // given): another blocking rounds differently.
  std::string gemm_tune;  // empty: $LLMCC_GEMM_TUNE, else auto
  std::string gemm_blocking;

  // Optimizer and schedule.
  double lr = 6e-4;
  double min_lr = 6e-5;
  std::int64_t warmup_steps = 0;
  float weight_decay = 0.1f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  double grad_clip = 1.0;     // 0: off
  double loss_spike = 10.0;   // the divergence guard's factor (0: off); run-local
  double max_update = 1.0;    // a confirmed checkpoint's largest update, times the weights' norm (0: off); run-local
  int rollbacks = 0;          // rollbacks to the last checkpoint instead of stopping; run-local
  bool force_resume = false;  // resume from a non-finite checkpoint; run-local

  // Validation, samples, checkpoints.
  std::int64_t val_every = 100;   // 0: only at the end
  int val_steps = 20;             // 0: one full pass over the validation shards
  std::int64_t sample_every = 0;  // 0: never
  int sample_tokens = 64;
  float sample_temperature = 1.0f;
  int sample_top_k = 0;
  std::int64_t ckpt_every = 0;  // 0: only at the end
  int keep_last = 3;

  std::set<std::string> given;  // the flags given on the command line ("--lr", ...)

  bool was_given(const std::string& flag) const { return given.count(flag) != 0; }
  // All ranks' tokens.
  std::int64_t tokens_per_step() const { return std::int64_t{batch_size} * ranks * seq_len * grad_accum; }
  int zero_stage() const { return zero >= 0 ? zero : (ranks > 1 ? 1 : 0); }
};

// Adds every train flag (model flags included) to `p`, grouped by section, with its default.
void add_train_flags(ArgParser& p, TrainOptions& o);
// Parses argv into `o` (given flags recorded). Returns false when --help was printed.
bool parse_train_flags(int argc, char** argv, TrainOptions& o);
bool parse_train_flags(const std::vector<std::string>& args, TrainOptions& o);
// --recipe llmc: llm.c's train_gpt2.c values for the flags not given (marked as given).
void apply_recipe(TrainOptions& o);

// Checks every value and combination against the model's configuration; throws llmcc::Error
// ("[llmcc train] --seq-len 512 exceeds the model's max_seq_len 256 ...") naming the flag.
void validate_train_options(const TrainOptions& o, const ModelConfig& config);

// Files named by `args` (paths or glob patterns, in order; each pattern's matches sorted). A
// missing file or a pattern matching nothing throws llmcc::Error("[where] <flag>: ...") naming
// the path.
std::vector<std::string> expand_data_paths(const std::vector<std::string>& args, const std::string& flag,
                                           const std::string& where);

// The run's configuration as checkpoint key=values: the model's (ModelConfig::to_kv, which
// records the family) and every
// stored hyper-parameter; data paths as given to the loader (data.train.N, data.val.N). The
// trainer adds "run.threads" (the count actually used).
KeyValues train_options_to_kv(const TrainOptions& o, const ModelConfig& config,
                              const std::vector<std::string>& train_files, const std::vector<std::string>& val_files);
// For a resume: sets every stored option not given on the command line from `kv`; returns one
// warning per given flag whose value differs from the checkpoint's. Throws llmcc::Error naming
// `source` and the key for a malformed value.
std::vector<std::string> restore_train_options(TrainOptions& o, const KeyValues& kv, const std::string& source);

// Shortest text that reads back to the same value (for logs and checkpoint keys).
std::string format_number(double v);
std::string format_number(float v);

}  // namespace llmcc::cli
