#include "train_options.h"

#include <glob.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <system_error>

#include "llmcc/error.h"
#include "models/registry.h"

namespace llmcc::cli {

namespace {

constexpr const char* kWhere = "llmcc train";

[[noreturn]] void bad(const std::string& message) { fail(kWhere, message); }

// ---- numbers as text ---------------------------------------------------------------------

std::string to_text(int v) { return std::to_string(v); }
std::string to_text(std::int64_t v) { return std::to_string(v); }
std::string to_text(std::uint64_t v) { return std::to_string(v); }
std::string to_text(float v) { return format_number(v); }
std::string to_text(double v) { return format_number(v); }
std::string to_text(const std::string& v) { return v; }
std::string to_text(bool v) { return v ? "true" : "false"; }

// Strict parses of stored values (the whole text, nothing else); false when malformed.
template <class T>
bool from_text(const std::string& s, T* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    char* stop = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &stop);
    if (errno != 0 || stop != end || !std::isfinite(v)) return false;
    *out = static_cast<T>(v);
    return true;
  } else {
    T v{};
    const auto [ptr, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc() || ptr != end) return false;
    *out = v;
    return true;
  }
}
bool from_text(const std::string& s, std::string* out) {
  *out = s;
  return true;
}
bool from_text(const std::string& s, bool* out) {
  if (s != "true" && s != "false") return false;
  *out = s == "true";
  return true;
}

// One hyper-parameter stored in checkpoints: its flag, its key and how to move it.
struct Stored {
  const char* flag;
  const char* key;
  std::function<std::string(const TrainOptions&)> get;
  std::function<bool(TrainOptions&, const std::string&)> set;  // false: malformed text
};

template <class T>
Stored stored(const char* flag, const char* key, T TrainOptions::* member) {
  return {flag, key, [member](const TrainOptions& o) { return to_text(o.*member); },
          [member](TrainOptions& o, const std::string& s) { return from_text(s, &(o.*member)); }};
}

const std::vector<Stored>& stored_options() {
  static const std::vector<Stored> table = {
      // The global micro-batch (all ranks' sequences), so a run resumes on another number of ranks.
      {"--batch-size", "train.batch_size",
       [](const TrainOptions& o) { return to_text(std::int64_t{o.batch_size} * o.ranks); },
       [](TrainOptions& o, const std::string& s) {
         std::int64_t global = 0;
         if (!from_text(s, &global) || global < 1) return false;
         if (global % o.ranks != 0)
           bad("the checkpoint's batch of " + s + " sequences (all ranks together) does not split over " +
               std::to_string(o.ranks) + " ranks; give --batch-size (sequences per rank)");
         o.batch_size = static_cast<int>(global / o.ranks);
         return true;
       }},
      stored("--seq-len", "train.seq_len", &TrainOptions::seq_len),
      stored("--steps", "train.steps", &TrainOptions::steps),
      stored("--grad-accum", "train.grad_accum", &TrainOptions::grad_accum),
      stored("--seed", "train.seed", &TrainOptions::seed),
      stored("--sampling", "data.sampling", &TrainOptions::sampling),
      stored("--dtype", "train.dtype", &TrainOptions::dtype),
      stored("--base-dtype", "train.base_dtype", &TrainOptions::base_dtype),
      stored("--checkpoint-activations", "train.checkpoint_activations", &TrainOptions::checkpoint_activations),
      stored("--lr", "train.lr", &TrainOptions::lr),
      stored("--min-lr", "train.min_lr", &TrainOptions::min_lr),
      stored("--warmup-steps", "train.warmup_steps", &TrainOptions::warmup_steps),
      stored("--weight-decay", "train.weight_decay", &TrainOptions::weight_decay),
      stored("--beta1", "train.beta1", &TrainOptions::beta1),
      stored("--beta2", "train.beta2", &TrainOptions::beta2),
      stored("--eps", "train.eps", &TrainOptions::eps),
      stored("--grad-clip", "train.grad_clip", &TrainOptions::grad_clip),
      stored("--val-every", "train.val_every", &TrainOptions::val_every),
      stored("--val-steps", "train.val_steps", &TrainOptions::val_steps),
      stored("--sample-every", "train.sample_every", &TrainOptions::sample_every),
      stored("--sample-tokens", "train.sample_tokens", &TrainOptions::sample_tokens),
      stored("--sample-temperature", "train.sample_temperature", &TrainOptions::sample_temperature),
      stored("--sample-top-k", "train.sample_top_k", &TrainOptions::sample_top_k),
      stored("--ckpt-every", "train.ckpt_every", &TrainOptions::ckpt_every),
      stored("--keep-last", "train.keep_last", &TrainOptions::keep_last),
  };
  return table;
}

// data.train.0, data.train.1, ... <-> a list of paths.
void list_to_kv(const std::vector<std::string>& paths, const std::string& prefix, KeyValues& kv) {
  kv[prefix + ".count"] = std::to_string(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) kv[prefix + "." + std::to_string(i)] = paths[i];
}

bool list_from_kv(const KeyValues& kv, const std::string& prefix, const std::string& source,
                  std::vector<std::string>* out) {
  const auto it = kv.find(prefix + ".count");
  if (it == kv.end()) return false;
  std::size_t n = 0;
  if (!from_text(it->second, &n))
    bad(source + ": config key " + prefix + ".count = '" + it->second + "' is not a count");
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < n; ++i) {
    const auto p = kv.find(prefix + "." + std::to_string(i));
    if (p == kv.end()) bad(source + ": config has no " + prefix + "." + std::to_string(i));
    paths.push_back(p->second);
  }
  *out = std::move(paths);
  return true;
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::string format_number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}

std::string format_number(float v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}

void add_train_flags(ArgParser& p, TrainOptions& o) {
  p.section("Data");
  p.add("--train-data", &o.train_data,
        "training token shards: files or glob patterns (llm.c format, see llmcc prepare)");
  p.add("--val-data", &o.val_data, "validation token shards: files or glob patterns");
  p.add("--sampling", &o.sampling,
        "how training batches are drawn: random (windows anywhere, seeded) or sequential (llm.c)");
  p.add("--recipe", &o.recipe,
        "'llmc': llm.c's train_gpt2.c recipe for the flags not given: --lr 1e-4 constant (--min-lr 1e-4, "
        "--warmup-steps 0), --beta2 0.999, --weight-decay 0, --grad-clip 0, --sampling sequential");
  p.add("--tokenizer", &o.tokenizer,
        "the data's tokenizer, for samples and checkpoints: gpt2, gpt2:DIR, sp:MODEL or hf:FILE [default: the "
        "resumed checkpoint's, else the tokenizer.txt llmcc prepare wrote next to the shards]");

  add_model_flags(p, o.model);

  p.section("Run");
  p.add("--out-dir", &o.out_dir, "directory for checkpoints and log.jsonl (required unless --resume FILE)");
  p.add("--steps", &o.steps, "optimizer steps of the whole run (also the end of the cosine schedule)");
  p.add("--batch-size", &o.batch_size,
        "sequences per micro-batch (B); per rank under mpirun, where N ranks together take N x B");
  p.add("--seq-len", &o.seq_len, "tokens per sequence (T), at most the model's --max-seq-len");
  p.add("--grad-accum", &o.grad_accum, "micro-batches per optimizer step; their gradients are averaged");
  p.add("--seed", &o.seed, "seed of the weight initialisation, batch sampling and text samples");
  p.add("--threads", &o.threads, "worker threads (0: all cores)");
  p.add("--zero", &o.zero,
        "under mpirun: 1 shards AdamW's state over the ranks (ZeRO-1), 0 replicates it [default: 1 with "
        "more than one rank]");
  p.add("--bucket-mb", &o.bucket_mb, "under mpirun: MiB of gradients per all-reduce bucket");
  p.add("--comm", &o.comm,
        "under mpirun: 'auto' lets ranks on one machine share weights and gradients in memory (with --zero 1), "
        "'mpi' uses MPI collectives everywhere");
  p.add("--gemm-tune", &o.gemm_tune,
        "the GEMM's cache blocking: 'auto' uses this CPU's cached measurement or measures it (about a second, "
        "once per CPU and build), 'off' the built-in blocking, 'redo' measures again (docs/perf.md) "
        "[default: $LLMCC_GEMM_TUNE, else auto]");
  p.add("--dtype", &o.dtype,
        "matrix products in fp32 or bf16 (bf16 operands, fp32 sums; weights, gradients and AdamW stay fp32), or "
        "'auto': bf16 where this CPU runs it faster (AVX512_BF16 with a higher measured peak), else fp32");
  p.add("--resume", &o.resume,
        "continue from a checkpoint file, or 'auto': the newest in --out-dir (a fresh start if none)");
  p.add("--init-from", &o.init_from,
        "start from the weights of this model (fresh optimizer, step 0): " + models::model_path_help());
  p.add("--lora-rank", &o.lora_rank,
        "train LoRA adapters of this rank over the frozen --init-from weights instead of every weight (0: off); "
        "checkpoints then hold the adapters and the base's path and CRC-32");
  p.add("--lora-alpha", &o.lora_alpha, "LoRA's alpha: the adapters' updates are scaled by alpha / rank");
  p.add("--lora-targets", &o.lora_targets,
        "the maps that get adapters, comma-separated: q, k, v, o, gate, up, down for Llama [default: all of them]");
  p.add("--lora-dropout", &o.lora_dropout,
        "dropout on each adapter's input in training steps (PEFT's lora_dropout; validation and generation run "
        "without it)");
  p.add("--base-dtype", &o.base_dtype,
        "with --lora-rank: store the frozen base's matrices in f32 or bf16 (rounded once, half their memory; the "
        "products widen them a block at a time, so the arithmetic stays --dtype's)");
  p.add("--checkpoint-activations", &o.checkpoint_activations,
        "save each block's input only and run the block's forward again in the backward: the step's activations "
        "shrink to one block's, for one more forward of the blocks (the same gradients, bit for bit)");
  p.add("--stop-after", &o.stop_after,
        "end this invocation after N steps, with a checkpoint, as if interrupted (0: run to --steps)");
  p.add("--log", &o.log_path, "JSON-lines log, one line per step (default <out-dir>/log.jsonl)");
  p.add("--quiet", &o.quiet, "print nothing but errors");

  p.section("Optimizer (AdamW, warmup + cosine schedule)");
  p.add("--lr", &o.lr, "peak learning rate");
  p.add("--min-lr", &o.min_lr, "learning rate at the end of the cosine decay");
  p.add("--warmup-steps", &o.warmup_steps, "steps of linear warmup to --lr");
  p.add("--weight-decay", &o.weight_decay, "AdamW weight decay (2-D weights only; biases and norms are not decayed)");
  p.add("--beta1", &o.beta1, "AdamW beta1");
  p.add("--beta2", &o.beta2, "AdamW beta2");
  p.add("--eps", &o.eps, "AdamW epsilon");
  p.add("--grad-clip", &o.grad_clip, "clip the global gradient norm to this (0: off)");
  p.add("--force-resume", &o.force_resume,
        "resume even from a checkpoint with non-finite weights or moments, or negative second moments");
  p.add("--loss-spike", &o.loss_spike,
        "stop when a step's loss exceeds this times the mean of the previous steps', or a validation "
        "loss this times the previous one (0: off); a non-finite loss, gradient or update always "
        "stops the run, before anything is saved");
  p.add("--max-update", &o.max_update,
        "a checkpoint is confirmed (kept, returned to by --rollbacks and --resume auto) only when the "
        "update before it changed the weights by at most this times their norm, and its validation "
        "or next batch's loss is within --loss-spike (0: no update check)");
  p.add("--rollbacks", &o.rollbacks,
        "instead of stopping at a divergence, roll back to the last confirmed checkpoint and drop the "
        "batches of the step that tripped, up to N times (0: stop)");

  p.section("Validation, samples and checkpoints");
  p.add("--val-every", &o.val_every, "validation loss every N steps (and at the start and end; 0: end only)");
  p.add("--val-steps", &o.val_steps, "validation batches per evaluation (0: one pass over --val-data)");
  p.add("--sample-every", &o.sample_every, "print a generated sample every N steps, and at the end (0: never)");
  p.add("--sample-tokens", &o.sample_tokens, "tokens per sample");
  p.add("--sample-temperature", &o.sample_temperature, "sampling temperature (0: greedy)");
  p.add("--sample-top-k", &o.sample_top_k, "sample among the k most likely tokens (0: all)");
  p.add("--ckpt-every", &o.ckpt_every, "checkpoint every N steps (0: only at the end)");
  p.add("--keep-last", &o.keep_last, "checkpoints kept in --out-dir (older ones are deleted)");

  p.epilogue(
      "Examples:\n"
      "  llmcc prepare --input tinyshakespeare --out data/tinyshakespeare\n"
      "  llmcc train --train-data 'data/tinyshakespeare/train_*.bin' --val-data 'data/tinyshakespeare/val_*.bin' \\\n"
      "      --model gpt2-tiny --out-dir runs/tiny --steps 500 --val-every 50 --sample-every 100\n"
      "  llmcc train --train-data 'data/tinyshakespeare/train_*.bin' --val-data 'data/tinyshakespeare/val_*.bin' \\\n"
      "      --model <any preset above> --vocab-size 50257 --out-dir runs/other --steps 500   # another family\n"
      "  llmcc train --init-from gpt2_124M.bin --recipe llmc --batch-size 4 --seq-len 64 \\\n"
      "      --train-data 'data/tinyshakespeare/train_*.bin' --out-dir runs/llmc   # as llm.c trains\n"
      "  llmcc train --out-dir runs/tiny --resume auto          # continue where it stopped\n"
      "  llmcc train --init-from gpt2_124M.bin --train-data 'data/train_*.bin' --out-dir runs/ft --lr 1e-4\n"
      "See docs/training.md for the log format and checkpoint behaviour.");
}

bool parse_train_flags(const std::vector<std::string>& args, TrainOptions& o) {
  ArgParser p("train", "Train a model (any family's preset) on token shards, or resume a run from its checkpoint.");
  add_train_flags(p, o);
  if (!p.parse(args)) return false;
  o.given.clear();
  // Every flag the parser knows, by name: the ones given are what a resume must not overwrite.
  for (const std::string& a : args) {
    if (a.rfind("--", 0) != 0) continue;
    std::string name = a.substr(0, a.find('='));
    if (p.given(name)) o.given.insert(name);
    if (name.rfind("--no-", 0) == 0 && p.given("--" + name.substr(5))) o.given.insert("--" + name.substr(5));
  }
  apply_recipe(o);
  return true;
}

void apply_recipe(TrainOptions& o) {
  if (o.recipe.empty()) return;
  if (o.recipe != "llmc") bad("--recipe must be 'llmc' (llm.c's train_gpt2.c), got '" + o.recipe + "'");
  // Each value counts as given, so a resume keeps it over the checkpoint's.
  const auto set = [&](const char* flag, auto* field, auto value) {
    if (o.given.count(flag) != 0) return;
    *field = value;
    o.given.insert(flag);
  };
  set("--lr", &o.lr, 1e-4);
  set("--min-lr", &o.min_lr, o.lr);
  set("--warmup-steps", &o.warmup_steps, std::int64_t{0});
  set("--beta2", &o.beta2, 0.999f);
  set("--weight-decay", &o.weight_decay, 0.0f);
  set("--grad-clip", &o.grad_clip, 0.0);
  set("--sampling", &o.sampling, std::string("sequential"));
}

bool parse_train_flags(int argc, char** argv, TrainOptions& o) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_train_flags(args, o);
}

void validate_train_options(const TrainOptions& o, const ModelConfig& config) {
  auto need = [](bool ok, const std::string& message) {
    if (!ok) bad(message);
  };
  auto n = [](auto v) { return to_text(v); };
  need(!o.train_data.empty(), "--train-data is required (token shards, e.g. from llmcc prepare)");
  need(!o.out_dir.empty(), "--out-dir is required (where checkpoints and log.jsonl go)");
  need(o.resume.empty() || o.init_from.empty(), "--resume and --init-from exclude each other");
  need(o.lora_rank >= 0, "--lora-rank must be >= 0, got " + n(o.lora_rank));
  need(o.lora_rank == 0 || !o.init_from.empty() || !o.resume.empty(),
       "--lora-rank trains adapters over frozen weights: give them with --init-from");
  need(o.lora_rank > 0 || (!o.was_given("--lora-alpha") && !o.was_given("--lora-targets")),
       "--lora-alpha and --lora-targets configure adapters: give --lora-rank with them");
  need(o.lora_rank > 0 || !o.resume.empty() || !o.was_given("--lora-dropout"),
       "--lora-dropout configures adapters: give --lora-rank with it");
  need(o.base_dtype == "f32" || o.base_dtype == "bf16",
       "--base-dtype must be 'f32' or 'bf16', got '" + o.base_dtype + "'");
  need(o.base_dtype == "f32" || o.lora_rank > 0 || !o.resume.empty(),
       "--base-dtype bf16 stores a frozen base: give --lora-rank (training every weight keeps them in f32)");
  need(o.sampling == "random" || o.sampling == "sequential",
       "--sampling must be 'random' or 'sequential', got '" + o.sampling + "'");
  need(o.steps > 0, "--steps must be positive, got " + n(o.steps));
  need(o.stop_after >= 0, "--stop-after must be >= 0, got " + n(o.stop_after));
  need(o.batch_size > 0, "--batch-size must be positive, got " + n(o.batch_size));
  need(o.seq_len > 0, "--seq-len must be positive, got " + n(o.seq_len));
  need(o.seq_len <= config.max_seq_len(), "--seq-len " + n(o.seq_len) + " exceeds the model's max_seq_len " +
                                              n(config.max_seq_len()) + " (raise --max-seq-len or lower --seq-len)");
  need(o.grad_accum > 0, "--grad-accum must be positive, got " + n(o.grad_accum));
  need(o.threads >= 0, "--threads must be >= 0, got " + n(o.threads));
  need(o.zero >= -1 && o.zero <= 1, "--zero must be 0 (replicated optimizer state) or 1 (ZeRO-1), got " + n(o.zero));
  need(o.comm == "auto" || o.comm == "mpi", "--comm must be 'auto' or 'mpi', got '" + o.comm + "'");
  need(o.bucket_mb > 0 && o.bucket_mb <= 1024, "--bucket-mb must be in (0, 1024], got " + n(o.bucket_mb));
  need(o.dtype == "fp32" || o.dtype == "bf16" || o.dtype == "auto",
       "--dtype must be 'fp32', 'bf16' or 'auto', got '" + o.dtype + "'");
  need(o.gemm_tune.empty() || o.gemm_tune == "auto" || o.gemm_tune == "off" || o.gemm_tune == "redo",
       "--gemm-tune must be 'auto', 'off' or 'redo', got '" + o.gemm_tune + "'");
  need(o.lr >= 0, "--lr must be >= 0, got " + n(o.lr));
  need(o.min_lr >= 0, "--min-lr must be >= 0, got " + n(o.min_lr));
  need(o.min_lr <= o.lr, "--min-lr " + n(o.min_lr) + " exceeds --lr " + n(o.lr));
  need(o.warmup_steps >= 0 && o.warmup_steps <= o.steps,
       "--warmup-steps must be in [0, --steps = " + n(o.steps) + "], got " + n(o.warmup_steps));
  need(o.weight_decay >= 0, "--weight-decay must be >= 0, got " + n(o.weight_decay));
  need(o.beta1 >= 0 && o.beta1 < 1, "--beta1 must be in [0, 1), got " + n(o.beta1));
  need(o.beta2 >= 0 && o.beta2 < 1, "--beta2 must be in [0, 1), got " + n(o.beta2));
  need(o.eps > 0, "--eps must be positive, got " + n(o.eps));
  need(o.grad_clip >= 0, "--grad-clip must be >= 0 (0: off), got " + n(o.grad_clip));
  need(o.loss_spike == 0 || o.loss_spike > 1, "--loss-spike must be above 1 (0: off), got " + n(o.loss_spike));
  need(o.max_update >= 0, "--max-update must be >= 0 (0: off), got " + n(o.max_update));
  need(o.rollbacks >= 0, "--rollbacks must be >= 0 (0: stop at a divergence), got " + n(o.rollbacks));
  need(o.val_every >= 0, "--val-every must be >= 0, got " + n(o.val_every));
  need(o.val_steps >= 0, "--val-steps must be >= 0, got " + n(o.val_steps));
  need(o.sample_every >= 0, "--sample-every must be >= 0, got " + n(o.sample_every));
  need(o.sample_tokens > 0, "--sample-tokens must be positive, got " + n(o.sample_tokens));
  need(o.sample_temperature >= 0, "--sample-temperature must be >= 0, got " + n(o.sample_temperature));
  need(o.sample_top_k >= 0 && o.sample_top_k <= config.vocab_size(),
       "--sample-top-k must be in [0, vocab_size = " + n(config.vocab_size()) + "], got " + n(o.sample_top_k));
  need(o.ckpt_every >= 0, "--ckpt-every must be >= 0, got " + n(o.ckpt_every));
  need(o.keep_last > 0, "--keep-last must be positive, got " + n(o.keep_last));
  // The default --val-every is harmless without validation data; asking for it explicitly is not.
  const bool asked_for_val = o.was_given("--val-every") && o.val_every > 0;
  need(!asked_for_val || !o.val_data.empty(), "--val-every needs --val-data (the validation shards)");
}

std::vector<std::string> expand_data_paths(const std::vector<std::string>& args, const std::string& flag,
                                           const std::string& where) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    if (has_glob_chars(arg) && !fs::exists(arg)) {
      glob_t g{};
      const int rc = ::glob(arg.c_str(), 0, nullptr, &g);  // sorted matches
      if (rc == 0)
        for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
      globfree(&g);
      if (rc == GLOB_NOMATCH) fail(where, flag + ": no file matches '" + arg + "'");
      if (rc != 0) fail(where, flag + ": cannot expand '" + arg + "'");
      continue;
    }
    std::error_code ec;
    if (!fs::exists(arg, ec)) fail(where, flag + ": no such file '" + arg + "'");
    if (fs::is_directory(arg, ec))
      fail(where,
           flag + ": '" + arg + "' is a directory (give shard files, or a pattern like '" + arg + "/*train*.bin')");
    out.push_back(arg);
  }
  for (std::string& path : out) {
    std::error_code ec;
    const fs::path abs = fs::absolute(path, ec);
    if (!ec) path = abs.lexically_normal().string();
  }
  return out;
}

KeyValues train_options_to_kv(const TrainOptions& o, const ModelConfig& config,
                              const std::vector<std::string>& train_files, const std::vector<std::string>& val_files) {
  KeyValues kv;
  config.to_kv(kv);
  for (const Stored& s : stored_options()) kv[s.key] = s.get(o);
  list_to_kv(train_files, "data.train", kv);
  list_to_kv(val_files, "data.val", kv);
  return kv;
}

std::vector<std::string> restore_train_options(TrainOptions& o, const KeyValues& kv, const std::string& source) {
  std::vector<std::string> warnings;
  for (const Stored& s : stored_options()) {
    const auto it = kv.find(s.key);
    if (it == kv.end()) continue;  // an older or hand-made checkpoint: keep the flag's value
    if (o.was_given(s.flag)) {
      TrainOptions probe = o;
      if (!s.set(probe, it->second))
        bad(source + ": config key " + std::string(s.key) + " = '" + it->second + "' is malformed");
      if (s.get(probe) != s.get(o))
        warnings.push_back(std::string(s.flag) + " " + s.get(o) + " replaces the checkpoint's " + it->second +
                           " (the run will differ from an uninterrupted one)");
      continue;
    }
    if (!s.set(o, it->second))
      bad(source + ": config key " + std::string(s.key) + " = '" + it->second + "' is malformed");
  }
  // The thread count the checkpoint's run used (kernels may round differently with another).
  if (const auto it = kv.find("run.threads"); it != kv.end()) {
    int threads = 0;
    if (!from_text(it->second, &threads) || threads < 1)
      bad(source + ": config key run.threads = '" + it->second + "' is malformed");
    if (!o.was_given("--threads"))
      o.threads = threads;
    else if (o.threads != threads)
      warnings.push_back("--threads " + std::to_string(o.threads) + " differs from the checkpoint's run (" +
                         it->second +
                         " threads): kernels may round differently, so the run may differ from an uninterrupted one");
  }
  // The GEMM blocking the checkpoint's run used (another one rounds differently).
  if (const auto it = kv.find("run.gemm_blocking"); it != kv.end() && !o.was_given("--gemm-tune"))
    o.gemm_blocking = it->second;
  std::vector<std::string> paths;
  if (list_from_kv(kv, "data.train", source, &paths)) {
    if (!o.was_given("--train-data"))
      o.train_data = paths;
    else if (expand_data_paths(o.train_data, "--train-data", kWhere) != paths)
      warnings.push_back("--train-data differs from the checkpoint's shards (the data position may not carry over)");
  }
  if (list_from_kv(kv, "data.val", source, &paths) && !o.was_given("--val-data")) o.val_data = paths;
  return warnings;
}

}  // namespace llmcc::cli
