#include "run_training.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/dist/communicator.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/grad_clip.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/schedule.h"
#include "llmcc/train/trainer.h"
#include "run_tokenizer.h"
#include "llmcc/train/train_log.h"
#include "train_sample.h"

namespace llmcc::cli {

namespace {

constexpr const char* kWhere = "llmcc train";

// ---- seeds ------------------------------------------------------------------------------

// The run's random streams (weights, batches, samples) come from one --seed through SplitMix64,
// so they are independent of each other and a given seed always gives the same three.
struct Seeds {
  std::uint64_t init, data, sample;
};
Seeds derive_seeds(std::uint64_t seed) {
  Rng r(seed);
  const std::uint64_t init = r.next_u64(), data = r.next_u64(), sample = r.next_u64();
  return {init, data, sample};
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// ---- where the model comes from ----------------------------------------------------------

struct Origin {
  ModelConfig config;
  std::string resume_path;      // non-empty: resume from this checkpoint
  std::unique_ptr<Model> init;  // --init-from weights, or a resumed run's base with its adapters
  bool fresh_adapters = false;  // init has new LoRA adapters (to draw)
  std::vector<std::string> warnings;
};

Origin resolve_origin(TrainOptions& o) {
  namespace fs = std::filesystem;
  Origin out;
  if (o.resume == "auto") {
    if (o.out_dir.empty()) fail(kWhere, "--resume auto needs --out-dir (the directory to look in)");
    // The newest confirmed checkpoint (or one from before statuses); newer unconfirmed ones
    // are named and skipped.
    std::vector<std::string> skipped;
    for (const CheckpointEntry& e : list_checkpoint_entries(o.out_dir)) {
      if (usable(e.status)) {
        out.resume_path = e.path;
        skipped.clear();
      } else {
        skipped.push_back(e.path);
      }
    }
    if (!skipped.empty() && out.resume_path.empty())
      fail(kWhere, "--resume auto: " + o.out_dir + " holds only unconfirmed checkpoints (the newest " + skipped.back() +
                       "): the guard judged none of their states good; --resume FILE takes one anyway");
    for (const std::string& path : skipped)
      out.warnings.push_back("--resume auto: skipping " + path + ", written after " + out.resume_path +
                             " but unconfirmed (the guard did not judge its state good)");
  } else if (!o.resume.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(o.resume, ec)) fail(kWhere, "--resume: no such checkpoint file '" + o.resume + "'");
    out.resume_path = o.resume;
    if (checkpoint_status(o.resume) == CheckpointStatus::unconfirmed)
      out.warnings.push_back("--resume: " + o.resume +
                             " is unconfirmed (the guard did not judge its state good when it was written: see its "
                             "line in log.jsonl); resuming it as asked");
    if (o.out_dir.empty()) {
      const fs::path parent = fs::path(o.resume).parent_path();
      o.out_dir = parent.empty() ? "." : parent.string();
    }
  }
  if (!out.resume_path.empty()) {
    if (!o.init_from.empty()) fail(kWhere, "--resume and --init-from exclude each other");
    CheckpointReader reader(out.resume_path);
    if (!reader.has("config") || !reader.has("state") || !reader.has("adamw.m"))
      fail(kWhere, "--resume: " + out.resume_path +
                       " holds weights only, not a training state (use --init-from to start from its weights)");
    const KeyValues kv = parse_key_values(reader.blob("config"), out.resume_path + " [config]");
    out.config = model_config_from_kv(kv, out.resume_path);
    o.model.check_matches(out.config, "the checkpoint " + out.resume_path, kWhere);
    for (std::string& w : restore_train_options(o, kv, out.resume_path)) out.warnings.push_back(std::move(w));
    const std::optional<LoraInfo> lora = lora_from_kv(kv, out.resume_path);
    if (o.lora_rank > 0 && !lora)
      fail(kWhere, "--lora-rank: " + out.resume_path + " trains every weight, not LoRA adapters");
    if (lora) {
      if (o.was_given("--lora-rank") && o.lora_rank != lora->cfg.rank)
        fail(kWhere, "--lora-rank " + std::to_string(o.lora_rank) + ": " + out.resume_path +
                         " holds adapters of rank " + std::to_string(lora->cfg.rank));
      if (o.was_given("--lora-dropout") && o.lora_dropout != lora->cfg.dropout)
        fail(kWhere, "--lora-dropout " + format_number(o.lora_dropout) + ": " + out.resume_path +
                         " trains its adapters with dropout " + format_number(lora->cfg.dropout));
      out.init = load_model(out.resume_path);  // the base, checked against its CRC-32, and the adapters
    }
    return out;
  }
  if (!o.init_from.empty()) {
    check_model_path(o.init_from, "--init-from", kWhere);
    out.init = load_model(o.init_from);
    out.config = out.init->config();
    o.model.check_matches(out.config, "--init-from " + o.init_from, kWhere);
    if (o.lora_rank > 0) {
      LoraConfig cfg;
      cfg.rank = o.lora_rank;
      cfg.alpha = o.lora_alpha;
      cfg.dropout = o.lora_dropout;
      if (!(cfg.dropout >= 0.0f && cfg.dropout < 1.0f))
        fail(kWhere, "--lora-dropout must be a probability in [0, 1), got " + format_number(cfg.dropout));
      cfg.targets = o.lora_targets.empty() ? out.config.family().lora_targets()
                                           : models::lora_targets_from(o.lora_targets, "--lora-targets");
      out.init = add_lora(std::move(out.init), o.init_from, cfg);
      out.fresh_adapters = true;
    }
    return out;
  }
  out.config = o.model.config();
  return out;
}

// ---- the tokenizer ----------------------------------------------------------------------

// --tokenizer, else the resumed checkpoint's, else the record next to the shards, else the
// --init-from checkpoint's; none is fine (samples are then ids unless the vocabulary is GPT-2's).
// A checkpoint's and the data's that differ are an error unless --tokenizer chooses.
RunTokenizer resolve_tokenizer(const TrainOptions& o, const Origin& origin, const std::vector<std::string>& data,
                               std::vector<std::string>& warnings) {
  std::optional<RunTokenizer> from_data = data_tokenizer(data);
  if (!o.tokenizer.empty()) {
    RunTokenizer t{load_text_tokenizer(o.tokenizer), "--tokenizer " + o.tokenizer};
    if (from_data && !same_tokenizer(*t.tok, *from_data->tok))
      warnings.push_back("--tokenizer " + t.tok->describe() + " is not the tokenizer the shards were prepared with (" +
                         from_data->tok->describe() + ", " + from_data->source + ")");
    return t;
  }
  const std::string ckpt = !origin.resume_path.empty() ? origin.resume_path : o.init_from;
  std::optional<RunTokenizer> from_ckpt = ckpt.empty() ? std::nullopt : checkpoint_tokenizer(ckpt);
  if (from_ckpt && from_data && !same_tokenizer(*from_ckpt->tok, *from_data->tok))
    fail(kWhere, "the shards were prepared with " + from_data->tok->describe() + " (" + from_data->source + ") but " +
                     ckpt + " was trained with " + from_ckpt->tok->describe() +
                     "; prepare the data with the checkpoint's tokenizer, or give --tokenizer to choose");
  if (from_ckpt && !origin.resume_path.empty()) return std::move(*from_ckpt);
  if (from_data) return std::move(*from_data);
  if (from_ckpt) return std::move(*from_ckpt);
  return {};
}

// ---- the trainer ------------------------------------------------------------------------

// `llmcc train`: resolves where the model comes from, the data, the tokenizer and the seeds, then
// hands the run to the library's Trainer (llmcc/train/trainer.h) through the family's Model.
class CliTrainer {
 public:
  explicit CliTrainer(TrainOptions options);
  TrainResult run();

 private:
  void print_header(const TrainStart& start);
  void choose_gemm_blocking();
  void sample(std::int64_t step);

  TrainOptions o_;
  Origin origin_;
  std::vector<std::string> train_files_, val_files_;
  KeyValues config_kv_;
  Seeds seeds_{};
  std::unique_ptr<Model> model_;  // weights of its family (the Trainer owns gradients and record)
  std::unique_ptr<TokenBatches> train_data_, val_data_;
  Rng sample_rng_;
  RunTokenizer tokenizer_;                              // tok null: none known
  std::map<std::string, std::string> tokenizer_files_;  // stored in every checkpoint
  dist::Communicator& comm_;
  Progress warnings_;
  std::string dtype_note_;              // why --dtype auto chose what it did
  std::size_t base_bf16_released_ = 0;  // fp32 bytes of the base's matrices now stored in bf16
  std::unique_ptr<TrainLoop> trainer_;
};

CliTrainer::CliTrainer(TrainOptions options)
    : o_(std::move(options)), comm_(dist::world()), warnings_(o_.quiet || comm_.rank() != 0) {
  o_.ranks = comm_.size();
  origin_ = resolve_origin(o_);
  validate_train_options(o_, origin_.config);
  for (const std::string& warning : origin_.warnings) warnings_.warn(warning);
  train_files_ = expand_data_paths(o_.train_data, "--train-data", kWhere);
  val_files_ = expand_data_paths(o_.val_data, "--val-data", kWhere);
  const bool resuming = !origin_.resume_path.empty();
  if (!resuming) {
    if (auto existing = latest_checkpoint(o_.out_dir))
      fail(kWhere, "--out-dir " + o_.out_dir + " already holds checkpoints (" + *existing +
                       "); continue that run with --resume auto, or choose another directory");
  }
  if (o_.threads > 0) set_num_threads(o_.threads);
  const MatmulDtypeChoice dtype = choose_matmul_dtype(o_.dtype);
  set_matmul_dtype(dtype.dtype);
  if (o_.dtype == "auto") {
    dtype_note_ = dtype.note;
  } else if (!dtype.note.empty()) {
    warnings_.warn(dtype.note);
  }
  choose_gemm_blocking();
  config_kv_ = train_options_to_kv(o_, origin_.config, train_files_, val_files_);
  // Kernels split work by thread count, which can change float rounding: the count is recorded so
  // that a resume uses it again (restore_train_options).
  config_kv_["run.threads"] = std::to_string(num_threads());
  config_kv_["run.ranks"] = std::to_string(comm_.size());
  config_kv_["run.gemm_blocking"] = to_string(gemm_blocking_info().blocking);
  {
    std::vector<std::string> data = train_files_, warnings;
    data.insert(data.end(), val_files_.begin(), val_files_.end());
    tokenizer_ = resolve_tokenizer(o_, origin_, data, warnings);
    for (const std::string& warning : warnings) warnings_.warn(warning);
    if (tokenizer_.tok) {
      const ModelConfig& c = origin_.config;
      check_tokenizer_fits(tokenizer_, c.vocab_size(),
                           std::string("the model (") + c.display_name() + " " + c.str() + ")", kWhere);
      store_tokenizer(*tokenizer_.tok, config_kv_, tokenizer_files_);
    }
  }
  seeds_ = derive_seeds(o_.seed);

  // Weights, gradients and AdamW's moments are touched in full, so a run they cannot fit in is
  // refused before allocating them (the step arena is measured by the Trainer's planning step).
  const MemoryPlan plan =
      memory_plan(origin_.config, o_.batch_size, o_.seq_len,
                  origin_.init && origin_.init->lora() ? origin_.init->params().parameter_count() : -1);
  const std::size_t state_bytes = plan.params_bytes + plan.grads_bytes + plan.optimizer_bytes;
  if (const std::size_t ram = available_memory_bytes(); ram > 0 && state_bytes > ram)
    fail(kWhere, std::string(origin_.config.display_name()) + " " + origin_.config.str() + " needs " + describe(plan) +
                     "; its weights, gradients and AdamW state alone exceed the " +
                     fixed(static_cast<double>(ram) / double(1 << 30), 1) + " GiB of memory available");
  if (origin_.init) {
    model_ = std::move(origin_.init);
    if (origin_.fresh_adapters) model_->init(seeds_.init);
    if (o_.base_dtype == "bf16") {
      if (!model_->lora()) fail(kWhere, "--base-dtype bf16 stores a frozen base: the run trains every weight");
      base_bf16_released_ = model_->store_base_in_bf16();
    }
  } else {
    model_ = make_model(origin_.config);
    if (!resuming) model_->init(seeds_.init);
  }
  model_->set_checkpoint_activations(o_.checkpoint_activations);

  // Data: shards are opened (and checked) here, so a bad file fails before any training.
  const int V = origin_.config.vocab_size();
  // Each rank reads its rows of every global batch (N ranks x B = one process with N*B).
  train_data_ = std::make_unique<TokenBatches>(
      train_files_, DataLoaderConfig{.B = o_.batch_size,
                                     .T = o_.seq_len,
                                     .mode = o_.sampling == "random" ? SampleMode::Random : SampleMode::Sequential,
                                     .seed = seeds_.data,
                                     .vocab_size = V,
                                     .rank = comm_.rank(),
                                     .ranks = comm_.size()});
  std::int64_t val_batches = 0;
  if (!val_files_.empty()) {
    val_data_ = std::make_unique<TokenBatches>(val_files_, DataLoaderConfig{.B = o_.batch_size,
                                                                            .T = o_.seq_len,
                                                                            .mode = SampleMode::Sequential,
                                                                            .vocab_size = V,
                                                                            .rank = comm_.rank(),
                                                                            .ranks = comm_.size()});
    const std::int64_t epoch = val_data_->batches_per_epoch();
    val_batches = o_.val_steps > 0 ? std::min<std::int64_t>(o_.val_steps, epoch) : epoch;
  }
  sample_rng_ = Rng(seeds_.sample);

  TrainerOptions t;
  t.steps = o_.steps;
  t.stop_after = o_.stop_after;
  t.grad_accum = o_.grad_accum;
  t.schedule = LrSchedule{.max_lr = o_.lr, .min_lr = o_.min_lr, .warmup_steps = o_.warmup_steps, .max_steps = o_.steps};
  t.adamw = AdamWConfig{.beta1 = o_.beta1, .beta2 = o_.beta2, .eps = o_.eps, .weight_decay = o_.weight_decay};
  t.grad_clip = o_.grad_clip;
  t.loss_spike = o_.loss_spike;
  t.max_update = o_.max_update;
  t.rollbacks = o_.rollbacks;
  t.force_resume = o_.force_resume;
  t.val_every = o_.val_every;
  t.val_batches = val_batches;
  t.sample_every = o_.sample_every;
  t.ckpt_every = o_.ckpt_every;
  t.keep_last = o_.keep_last;
  t.out_dir = o_.out_dir;
  t.log_path = o_.log_path.empty() ? (std::filesystem::path(o_.out_dir) / "log.jsonl").string() : o_.log_path;
  t.quiet = o_.quiet;
  if (const LoraInfo* lora = model_->lora()) lora_to_kv(*lora, config_kv_);
  t.config = config_kv_;
  t.files = tokenizer_files_;
  t.comm = &comm_;
  t.zero_stage = o_.zero_stage();
  t.bucket_bytes = static_cast<std::size_t>(o_.bucket_mb * double(1 << 20));
  t.node_shared_memory = o_.comm == "auto";
  t.name = kWhere;
  t.nonfinite_hint = "Try a lower --lr, more --warmup-steps or --grad-clip 1, and resume from a checkpoint";
  t.continue_hint = "continue with --resume auto --out-dir " + o_.out_dir;
  TrainerHooks hooks;
  hooks.header = [this](const TrainStart& start) { print_header(start); };
  hooks.sample = [this](std::int64_t step) { sample(step); };
  hooks.save_state = [this](TrainState& state) { state.rngs["sample"] = sample_rng_.state(); };
  hooks.restore_state = [this](const TrainState& state) {
    if (const auto it = state.rngs.find("sample"); it != state.rngs.end()) sample_rng_.set_state(it->second);
  };
  trainer_ = model_->make_trainer(*train_data_, val_data_.get(), std::move(t), std::move(hooks));
  if (resuming) trainer_->resume(origin_.resume_path);
  // No rank starts (and writes) before every rank has read the output directory's state.
  comm_.barrier();
}

// The GEMM's cache blocking for the run, chosen before the first step (a measurement, if this CPU
// has none cached, is not timed as training): the resumed checkpoint's, which rounds as the run
// did, else --gemm-tune's choice.
void CliTrainer::choose_gemm_blocking() {
  if (!o_.gemm_blocking.empty()) {
    try {
      set_gemm_blocking(parse_gemm_blocking(o_.gemm_blocking), "the checkpoint's run used it");
      return;
    } catch (const Error& e) {
      warnings_.warn(std::string("the checkpoint's GEMM blocking cannot be used with this build: ") + e.what() +
                     "; the run will round differently from an uninterrupted one");
    }
  }
  if (!o_.gemm_tune.empty()) set_gemm_tune(parse_gemm_tune(o_.gemm_tune));
  gemm_blocking_info();
}

void CliTrainer::print_header(const TrainStart& start) {
  const ModelConfig& c = origin_.config;
  std::ostringstream s;
  const char* origin = !origin_.resume_path.empty() ? "resumed from " : (!o_.init_from.empty() ? "weights from " : "");
  const std::string from = !origin_.resume_path.empty() ? origin_.resume_path : o_.init_from;
  s << "llmcc train: " << c.display_name() << " " << c.str() << ", "
    << format_count(static_cast<double>(model_->lora() ? c.parameter_count() : start.parameters)) << " parameters"
    << (from.empty() ? std::string(", initialised with seed ") + std::to_string(o_.seed)
                     : std::string(", ") + origin + from +
                           (origin_.resume_path.empty() ? "" : " at step " + std::to_string(start.step)))
    << "\n";
  if (const LoraInfo* lora = model_->lora()) {
    std::string targets;
    for (const std::string& t : lora->cfg.targets) targets += (targets.empty() ? "" : ",") + t;
    s << "  LoRA: rank " << lora->cfg.rank << ", alpha " << format_number(lora->cfg.alpha)
      << (lora->cfg.dropout > 0.0f ? ", dropout " + format_number(lora->cfg.dropout) : std::string()) << " on "
      << targets << " in every layer: " << format_count(static_cast<double>(start.parameters))
      << " adapter parameters trained; the base's " << format_count(static_cast<double>(c.parameter_count()))
      << " weights frozen (no weight gradients, no AdamW state)\n";
  }
  s << "  data: " << train_files_.size() << " train shard(s), "
    << format_count(static_cast<double>(train_data_->loader().num_tokens())) << " tokens"
    << (train_data_->loader().masked()
            ? " (" + format_count(static_cast<double>(train_data_->loader().trained_tokens())) +
                  " of them trained: loss masks" +
                  (train_data_->loader().row_tokens() > 0
                       ? "; one conversation per row of " + std::to_string(train_data_->loader().row_tokens())
                       : std::string()) +
                  ")"
            : std::string())
    << ", " << o_.sampling << " batches";
  if (val_data_)
    s << "; " << val_files_.size() << " val shard(s), "
      << format_count(static_cast<double>(val_data_->loader().num_tokens())) << " tokens, " << start.val_batches
      << " batches per evaluation";
  s << "\n";
  s << "  tokenizer: "
    << (tokenizer_.tok ? tokenizer_.tok->describe() + " from " + tokenizer_.source
                       : std::string("none recorded (samples ") +
                             (c.vocab_size() == 50257 ? "use GPT-2's if found)" : "are token ids)"))
    << "\n";
  s << "  batch: " << o_.batch_size * o_.ranks << " x " << o_.seq_len << " tokens x " << o_.grad_accum
    << (o_.grad_accum == 1 ? " micro-batch = " : " micro-batches = ") << o_.tokens_per_step() << " tokens per step; "
    << o_.steps << " steps (" << format_count(static_cast<double>(o_.tokens_per_step()) * static_cast<double>(o_.steps))
    << " tokens)\n";
  s << "  optimizer: AdamW lr " << format_number(o_.lr) << " -> " << format_number(o_.min_lr) << " (warmup "
    << o_.warmup_steps << ", cosine), betas (" << format_number(o_.beta1) << ", " << format_number(o_.beta2)
    << "), eps " << format_number(o_.eps) << ", weight decay " << format_number(o_.weight_decay) << ", clip "
    << (o_.grad_clip > 0 ? format_number(o_.grad_clip) : std::string("off")) << "\n";
  s << "  matmuls: " << matmul_dtype_name(matmul_dtype()) << " on " << matmul_kernel_name()
    << (dtype_note_.empty() ? "" : " (" + dtype_note_ + ")") << "\n";
  const GemmBlockingInfo gemm = gemm_blocking_info();
  s << "  gemm blocking: " << to_string(gemm.blocking) << " (" << gemm.source << ")\n";
  if (comm_.distributed())
    s << "  data parallel: " << comm_.size() << " ranks x batch " << o_.batch_size << " over " << comm_.transport()
      << (trainer_->data_parallel()->shares_memory() ? ", weights and gradients in shared memory" : "") << "; "
      << (o_.zero_stage() == 1 ? "ZeRO-1 (AdamW state sharded)" : "AdamW state replicated") << ", "
      << format_number(o_.bucket_mb) << " MiB gradient buckets\n";
  s << "  threads " << num_threads() << "; step arena " << format_mib(start.arena_bytes) << " reserved ("
    << format_mib(start.arena_planned) << " measured by a planning step"
    << (o_.checkpoint_activations ? ", activations checkpointed per block: the blocks' forward runs twice" : "")
    << "); " << fixed(c.flops_per_step(o_.batch_size, o_.seq_len) * o_.grad_accum / 1e9, 1) << " GFLOP per step\n";
  MemoryPlan plan = memory_plan(c, o_.batch_size, o_.seq_len, model_->lora() ? start.parameters : -1);
  plan.arena_bytes = start.arena_bytes;
  if (base_bf16_released_ > 0) {
    plan.frozen_bytes -= base_bf16_released_ / 2;
    plan.frozen_note = "matrices in bf16";
  }
  if (const DataParallel* dp = trainer_->data_parallel()) plan.optimizer_bytes = dp->optimizer_floats() * sizeof(float);
  s << "  memory" << (comm_.distributed() ? " per rank" : "") << ": " << describe(plan) << "\n";
  s << "  out: " << o_.out_dir << " (checkpoints "
    << (o_.ckpt_every > 0 ? "every " + std::to_string(o_.ckpt_every) + " steps and at the end"
                          : std::string("at the end"))
    << ", keep " << o_.keep_last << "); log " << trainer_->options().log_path;
  trainer_->print(s.str());
}

void CliTrainer::sample(std::int64_t step) {
  const SampleText text =
      sample_text(*model_, tokenizer_.tok.get(), o_.sample_tokens, o_.sample_temperature, o_.sample_top_k, sample_rng_);
  trainer_->log_text(step, "sample", text.text);
  trainer_->print("step " + std::to_string(step) + ": sample (" + std::to_string(o_.sample_tokens) + " tokens" +
                  (text.decoded ? "" : ", token ids: no tokenizer for this vocabulary (give --tokenizer)") + "):\n" +
                  text.text + "\n---");
}

TrainResult CliTrainer::run() { return trainer_->run(); }

}  // namespace

TrainResult run_training(TrainOptions options) {
  CliTrainer trainer(std::move(options));
  return trainer.run();
}

}  // namespace llmcc::cli
