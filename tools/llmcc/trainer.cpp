#include "trainer.h"

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
#include <unistd.h>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/checkpoint.h"
#include "llmcc/train/grad_clip.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/schedule.h"
#include "run_tokenizer.h"
#include "train_log.h"
#include "train_sample.h"

namespace llmcc::cli {

namespace {

constexpr const char* kWhere = "llmcc train";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- SIGINT / SIGTERM: finish the step, checkpoint, stop ---------------------------------

std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int sig) {
  g_stop_requested.store(true);
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
}

// Installs the handlers for the trainer's lifetime and restores the previous ones after.
class StopSignals {
 public:
  StopSignals() {
    g_stop_requested.store(false);
    old_int_ = std::signal(SIGINT, on_stop_signal);
    old_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Bytes of memory a new allocation can use now: Linux's MemAvailable, else physical memory
// (0 when unknown).
std::size_t available_memory_bytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f) != nullptr)
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(f);
    if (kib > 0) return static_cast<std::size_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

// ---- where the model comes from ----------------------------------------------------------

struct Origin {
  ModelConfig config;
  std::string resume_path;      // non-empty: resume from this checkpoint
  std::unique_ptr<Model> init;  // --init-from weights
  std::vector<std::string> warnings;
};

Origin resolve_origin(TrainOptions& o) {
  namespace fs = std::filesystem;
  Origin out;
  if (o.resume == "auto") {
    if (o.out_dir.empty()) fail(kWhere, "--resume auto needs --out-dir (the directory to look in)");
    if (auto last = latest_checkpoint(o.out_dir)) out.resume_path = *last;
  } else if (!o.resume.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(o.resume, ec))
      fail(kWhere, "--resume: no such checkpoint file '" + o.resume + "'");
    out.resume_path = o.resume;
    if (o.out_dir.empty()) {
      const fs::path parent = fs::path(o.resume).parent_path();
      o.out_dir = parent.empty() ? "." : parent.string();
    }
  }
  if (!out.resume_path.empty()) {
    if (!o.init_from.empty()) fail(kWhere, "--resume and --init-from exclude each other");
    CheckpointReader reader(out.resume_path);
    if (!reader.has("config") || !reader.has("state") || !reader.has("adamw.m"))
      fail(kWhere,
           "--resume: " + out.resume_path +
               " holds weights only, not a training state (use --init-from to start from its weights)");
    const KeyValues kv = parse_key_values(reader.blob("config"), out.resume_path + " [config]");
    out.config = model_config_from_kv(kv, out.resume_path);
    o.model.check_matches(out.config, "the checkpoint " + out.resume_path, kWhere);
    out.warnings = restore_train_options(o, kv, out.resume_path);
    return out;
  }
  if (!o.init_from.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(o.init_from, ec))
      fail(kWhere, "--init-from: no such file '" + o.init_from + "'");
    out.init = load_model(o.init_from);
    out.config = out.init->config();
    o.model.check_matches(out.config, "--init-from " + o.init_from, kWhere);
    return out;
  }
  out.config = o.model.config();
  return out;
}

// ---- the tokenizer ----------------------------------------------------------------------

// --tokenizer, else the resumed checkpoint's, else the record next to the shards, else the
// --init-from checkpoint's; none is fine (samples are then ids unless the vocabulary is GPT-2's).
// A checkpoint's and the data's that differ are an error unless --tokenizer chooses.
RunTokenizer resolve_tokenizer(const TrainOptions& o, const Origin& origin,
                               const std::vector<std::string>& data, std::vector<std::string>& warnings) {
  std::optional<RunTokenizer> from_data = data_tokenizer(data);
  if (!o.tokenizer.empty()) {
    RunTokenizer t{load_text_tokenizer(o.tokenizer), "--tokenizer " + o.tokenizer};
    if (from_data && !same_tokenizer(*t.tok, *from_data->tok))
      warnings.push_back("--tokenizer " + t.tok->describe() +
                         " is not the tokenizer the shards were prepared with (" + from_data->tok->describe() +
                         ", " + from_data->source + ")");
    return t;
  }
  const std::string ckpt = !origin.resume_path.empty() ? origin.resume_path : o.init_from;
  std::optional<RunTokenizer> from_ckpt = ckpt.empty() ? std::nullopt : checkpoint_tokenizer(ckpt);
  if (from_ckpt && from_data && !same_tokenizer(*from_ckpt->tok, *from_data->tok))
    fail(kWhere, "the shards were prepared with " + from_data->tok->describe() + " (" + from_data->source +
                     ") but " + ckpt + " was trained with " + from_ckpt->tok->describe() +
                     "; prepare the data with the checkpoint's tokenizer, or give --tokenizer to choose");
  if (from_ckpt && !origin.resume_path.empty()) return std::move(*from_ckpt);
  if (from_data) return std::move(*from_data);
  if (from_ckpt) return std::move(*from_ckpt);
  return {};
}

// ---- the trainer ------------------------------------------------------------------------

class Trainer {
 public:
  explicit Trainer(TrainOptions options);
  TrainResult run();

 private:
  void print_header();
  float train_step(std::int64_t step, double* grad_norm);
  float validate(std::int64_t step);
  void sample(std::int64_t step);
  std::string checkpoint(std::int64_t step);

  TrainOptions o_;
  Origin origin_;
  std::vector<std::string> train_files_, val_files_;
  KeyValues config_kv_;
  Seeds seeds_{};
  std::unique_ptr<Model> model_;  // weights, gradient store and the adgen record of its family
  bool grads_zero_ = true;  // the gradient store holds zeros: as made, then after every AdamW step
  std::unique_ptr<AdamW> opt_;
  LrSchedule schedule_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  std::int64_t val_batches_ = 0;
  Rng sample_rng_;
  RunTokenizer tokenizer_;                               // tok null: none known
  std::map<std::string, std::string> tokenizer_files_;  // stored in every checkpoint
  std::unique_ptr<Arena> arena_;
  std::int64_t start_step_ = 0;
  Progress progress_;
  std::unique_ptr<TrainLog> log_;
  JsonLine line_;
};

Trainer::Trainer(TrainOptions options) : o_(std::move(options)), progress_(o_.quiet) {
  origin_ = resolve_origin(o_);
  validate_train_options(o_, origin_.config);
  for (const std::string& warning : origin_.warnings) progress_.warn(warning);
  train_files_ = expand_data_paths(o_.train_data, "--train-data");
  val_files_ = expand_data_paths(o_.val_data, "--val-data");
  const bool resuming = !origin_.resume_path.empty();
  if (!resuming) {
    if (auto existing = latest_checkpoint(o_.out_dir))
      fail(kWhere, "--out-dir " + o_.out_dir + " already holds checkpoints (" + *existing +
                       "); continue that run with --resume auto, or choose another directory");
  }
  if (o_.threads > 0) set_num_threads(o_.threads);
  config_kv_ = train_options_to_kv(o_, origin_.config, train_files_, val_files_);
  // Kernels split work by thread count, which can change float rounding: the count is recorded so
  // that a resume uses it again (restore_train_options).
  config_kv_["run.threads"] = std::to_string(num_threads());
  {
    std::vector<std::string> data = train_files_, warnings;
    data.insert(data.end(), val_files_.begin(), val_files_.end());
    tokenizer_ = resolve_tokenizer(o_, origin_, data, warnings);
    for (const std::string& warning : warnings) progress_.warn(warning);
    if (tokenizer_.tok) {
      const ModelConfig& c = origin_.config;
      check_tokenizer_fits(tokenizer_, c.vocab_size(),
                           std::string("the model (") + c.display_name() + " " + c.str() + ")", kWhere);
      store_tokenizer(*tokenizer_.tok, config_kv_, tokenizer_files_);
    }
  }
  seeds_ = derive_seeds(o_.seed);

  // Model, gradient buffer, optimizer. Weights, gradients and AdamW's moments are touched in
  // full, so a run they cannot fit in is refused before allocating them (the step arena is an
  // upper bound that is touched only as far as used, so it is reported, not counted here).
  const MemoryPlan plan = memory_plan(origin_.config, o_.batch_size, o_.seq_len);
  const std::size_t state_bytes = plan.params_bytes + plan.grads_bytes + plan.optimizer_bytes;
  if (const std::size_t ram = available_memory_bytes(); ram > 0 && state_bytes > ram)
    fail(kWhere, std::string(origin_.config.display_name()) + " " + origin_.config.str() + " needs " +
                     describe(plan) + "; its weights, gradients and AdamW state alone exceed the " +
                     fixed(static_cast<double>(ram) / double(1 << 30), 1) + " GiB of memory available");
  if (origin_.init) {
    model_ = std::move(origin_.init);
  } else {
    model_ = make_model(origin_.config);
    if (!resuming) model_->init(seeds_.init);
  }
  model_->grads();  // allocated (zeroed) before the first step
  opt_ = std::make_unique<AdamW>(
      model_->params(),
      AdamWConfig{.beta1 = o_.beta1, .beta2 = o_.beta2, .eps = o_.eps, .weight_decay = o_.weight_decay});
  schedule_ = LrSchedule{
      .max_lr = o_.lr, .min_lr = o_.min_lr, .warmup_steps = o_.warmup_steps, .max_steps = o_.steps};
  schedule_.validate();

  // Data: shards are opened (and checked) here, so a bad file fails before any training.
  const int V = origin_.config.vocab_size();
  train_loader_ = std::make_unique<DataLoader>(
      train_files_,
      DataLoaderConfig{.B = o_.batch_size,
                       .T = o_.seq_len,
                       .mode = o_.sampling == "random" ? SampleMode::Random : SampleMode::Sequential,
                       .seed = seeds_.data,
                       .vocab_size = V});
  if (!val_files_.empty()) {
    val_loader_ = std::make_unique<DataLoader>(
        val_files_,
        DataLoaderConfig{
            .B = o_.batch_size, .T = o_.seq_len, .mode = SampleMode::Sequential, .vocab_size = V});
    const std::int64_t epoch = val_loader_->batches_per_epoch();
    val_batches_ = o_.val_steps > 0 ? std::min<std::int64_t>(o_.val_steps, epoch) : epoch;
  }
  sample_rng_ = Rng(seeds_.sample);

  if (resuming) {
    const TrainState state = load_checkpoint(origin_.resume_path, model_->params(), opt_.get());
    start_step_ = state.step;
    try {
      train_loader_->set_state(state.data);
    } catch (const Error& e) {
      fail(kWhere, std::string(e.what()) + " (resuming " + origin_.resume_path +
                       " with other --train-data than it was trained on?)");
    }
    if (const auto it = state.rngs.find("sample"); it != state.rngs.end()) sample_rng_.set_state(it->second);
    if (opt_->t() != state.step)
      fail(kWhere, origin_.resume_path + ": AdamW has taken " + std::to_string(opt_->t()) +
                       " steps but the state says " + std::to_string(state.step));
  }

  arena_ = std::make_unique<Arena>(origin_.config.step_arena_bytes(o_.batch_size, o_.seq_len));
  const std::string log_path =
      o_.log_path.empty() ? (std::filesystem::path(o_.out_dir) / "log.jsonl").string() : o_.log_path;
  log_ = std::make_unique<TrainLog>(log_path, resuming ? start_step_ : -1);
}

void Trainer::print_header() {
  const ModelConfig& c = origin_.config;
  std::ostringstream s;
  const char* origin =
      !origin_.resume_path.empty() ? "resumed from " : (!o_.init_from.empty() ? "weights from " : "");
  const std::string from = !origin_.resume_path.empty() ? origin_.resume_path : o_.init_from;
  s << "llmcc train: " << c.display_name() << " " << c.str() << ", "
    << format_count(static_cast<double>(model_->params().parameter_count())) << " parameters"
    << (from.empty() ? std::string(", initialised with seed ") + std::to_string(o_.seed)
                     : std::string(", ") + origin + from +
                           (origin_.resume_path.empty() ? "" : " at step " + std::to_string(start_step_)))
    << "\n";
  s << "  data: " << train_files_.size() << " train shard(s), "
    << format_count(static_cast<double>(train_loader_->num_tokens())) << " tokens, " << o_.sampling
    << " batches";
  if (val_loader_)
    s << "; " << val_files_.size() << " val shard(s), "
      << format_count(static_cast<double>(val_loader_->num_tokens())) << " tokens, " << val_batches_
      << " batches per evaluation";
  s << "\n";
  s << "  tokenizer: "
    << (tokenizer_.tok ? tokenizer_.tok->describe() + " from " + tokenizer_.source
                       : std::string("none recorded (samples ") +
                             (c.vocab_size() == 50257 ? "use GPT-2's if found)" : "are token ids)"))
    << "\n";
  s << "  batch: " << o_.batch_size << " x " << o_.seq_len << " tokens x " << o_.grad_accum
    << (o_.grad_accum == 1 ? " micro-batch = " : " micro-batches = ") << o_.tokens_per_step()
    << " tokens per step; " << o_.steps << " steps ("
    << format_count(static_cast<double>(o_.tokens_per_step()) * static_cast<double>(o_.steps))
    << " tokens)\n";
  s << "  optimizer: AdamW lr " << format_number(o_.lr) << " -> " << format_number(o_.min_lr) << " (warmup "
    << o_.warmup_steps << ", cosine), betas (" << format_number(o_.beta1) << ", " << format_number(o_.beta2)
    << "), eps " << format_number(o_.eps) << ", weight decay " << format_number(o_.weight_decay) << ", clip "
    << (o_.grad_clip > 0 ? format_number(o_.grad_clip) : std::string("off")) << "\n";
  s << "  threads " << num_threads() << "; step arena " << format_mib(arena_->capacity()) << " reserved; "
    << fixed(c.flops_per_step(o_.batch_size, o_.seq_len) * o_.grad_accum / 1e9, 1) << " GFLOP per step\n";
  s << "  memory: " << describe(memory_plan(c, o_.batch_size, o_.seq_len)) << "\n";
  s << "  out: " << o_.out_dir << " (checkpoints "
    << (o_.ckpt_every > 0 ? "every " + std::to_string(o_.ckpt_every) + " steps and at the end"
                          : std::string("at the end"))
    << ", keep " << o_.keep_last << "); log " << (log_->path().empty() ? std::string("off") : log_->path());
  progress_.print(s.str());
}

// One optimizer step; returns the mean micro-batch loss and sets *grad_norm (before clipping).
float Trainer::train_step(std::int64_t step, double* grad_norm) {
  const float lr = schedule_.lr(step);
  const float d_loss = 1.0f / static_cast<float>(o_.grad_accum);
  ParameterStore& grads = model_->grads();
  if (!grads_zero_) grads.zero();  // only after a step that stopped before AdamW
  grads_zero_ = false;
  double loss_sum = 0.0;
  for (int micro = 0; micro < o_.grad_accum; ++micro) {
    train_loader_->next_batch();
    const Tokens x = train_loader_->inputs(), y = train_loader_->targets();  // (B, T) each
    arena_->reset();
    ArenaScope scope(*arena_);
    // The gradient of loss / grad_accum: the accumulated gradient is the micro-batches' mean.
    const float loss = model_->loss_and_grad(x, y, d_loss);
    loss_sum += loss;
  }
  arena_->reset();
  const float loss = static_cast<float>(loss_sum / o_.grad_accum);
  *grad_norm = o_.grad_clip > 0 ? clip_grad_norm(grads, o_.grad_clip) : llmcc::grad_norm(grads);
  if (!std::isfinite(loss) || !std::isfinite(*grad_norm)) return loss;  // the caller stops
  opt_->step_zero_grads(model_->params(), grads, lr);  // zeroes the gradients in the same pass
  grads_zero_ = true;
  return loss;
}

float Trainer::validate(std::int64_t step) {
  if (!val_loader_) return kNaN;
  const auto t0 = std::chrono::steady_clock::now();
  const float loss = static_cast<float>(evaluate_loss(*model_, *val_loader_, val_batches_, *arena_));
  log_->write(line_.begin().field("step", step).field("val_loss", loss).end());
  progress_.print("step " + std::to_string(step) + ": val loss " + fixed(loss, 4) + " (" +
                  std::to_string(val_batches_) + " batches, " + fixed(seconds_since(t0), 1) + " s)");
  return loss;
}

void Trainer::sample(std::int64_t step) {
  const SampleText text =
      sample_text(*model_, tokenizer_.tok.get(), o_.sample_tokens, o_.sample_temperature, o_.sample_top_k,
                  sample_rng_);
  log_->write(line_.begin().field("step", step).field("sample", text.text).end());
  progress_.print("step " + std::to_string(step) + ": sample (" + std::to_string(o_.sample_tokens) +
                  " tokens" +
                  (text.decoded ? "" : ", token ids: no tokenizer for this vocabulary (give --tokenizer)") +
                  "):\n" + text.text + "\n---");
}

std::string Trainer::checkpoint(std::int64_t step) {
  TrainState state;
  state.step = step;
  state.data = train_loader_->state();
  state.rngs["sample"] = sample_rng_.state();
  state.config = config_kv_;
  state.files = tokenizer_files_;
  const std::string path =
      save_checkpoint_in_dir(o_.out_dir, o_.keep_last, model_->params(), opt_.get(), state);
  log_->write(line_.begin().field("step", step).field("checkpoint", path).end());
  progress_.print("step " + std::to_string(step) + ": checkpoint " + path);
  return path;
}

TrainResult Trainer::run() {
  StopSignals signals;
  TrainResult result;
  result.step = start_step_;
  result.last_loss = kNaN;
  result.val_loss = kNaN;

  // The run's configuration as the first line of this invocation.
  std::string config_json = "{";
  for (const auto& [k, v] : config_kv_) {
    if (config_json.size() > 1) config_json += ", ";
    append_json_string(config_json, k);
    config_json += ": ";
    append_json_string(config_json, v);
  }
  config_json += "}";
  line_.begin().field("step", start_step_).field("event", origin_.resume_path.empty() ? "start" : "resume");
  if (!origin_.resume_path.empty()) line_.field("from", origin_.resume_path);
  log_->write(line_.field("params", model_->params().parameter_count()).raw_field("config", config_json).end());
  print_header();

  if (start_step_ >= o_.steps) {
    progress_.print("the checkpoint is at step " + std::to_string(start_step_) + " of " +
                    std::to_string(o_.steps) + ": nothing to train (raise --steps to continue)");
    return result;
  }
  // A fresh run's starting point (a resumed one logged it before its checkpoint).
  if (start_step_ == 0 && o_.val_every > 0) result.val_loss = validate(0);

  const std::int64_t tokens = o_.tokens_per_step();
  double timed_seconds = 0.0;  // steps after the first of this invocation, for the ETA
  std::int64_t timed_steps = 0;
  std::int64_t step = start_step_;
  while (step < o_.steps) {
    const auto t0 = std::chrono::steady_clock::now();
    const float lr = schedule_.lr(step);
    double norm = 0.0;
    const float loss = train_step(step, &norm);
    ++step;
    const double seconds = seconds_since(t0);
    if (step > start_step_ + 1) {
      timed_seconds += seconds;
      ++timed_steps;
    }
    const double per_step = timed_steps > 0 ? timed_seconds / static_cast<double>(timed_steps) : seconds;
    const double tok_s = static_cast<double>(tokens) / seconds;
    log_->write(line_.begin()
                    .field("step", step)
                    .field("loss", loss)
                    .field("lr", lr)
                    .field("grad_norm", norm)
                    .field("tokens_per_s", std::round(tok_s * 10.0) / 10.0)
                    .field("ms", std::round(seconds * 1e6) / 1e3)
                    .end());
    progress_.step(step, o_.steps, loss, lr, norm, seconds * 1e3, tok_s,
                   per_step * static_cast<double>(o_.steps - step));
    result.step = step;
    result.last_loss = loss;
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      progress_.finish();
      fail(kWhere,
           "step " + std::to_string(step) + ": the " + (std::isfinite(loss) ? "gradient norm" : "loss") +
               " is not finite (lr " + format_number(lr) +
               "); the weights were not updated. Try a lower --lr, more --warmup-steps or --grad-clip 1" +
               (result.checkpoint.empty() ? std::string() : "; last checkpoint " + result.checkpoint));
    }
    if (step == start_step_ + 1) {
      progress_.print("step arena: high-water " + format_mib(arena_->high_water()) + " of " +
                      format_mib(arena_->capacity()) + " reserved (+ " +
                      format_mib(adgen::scratch_high_water()) + " adgen scratch)");
    }

    const bool last = step == o_.steps;
    const bool stop_after = o_.stop_after > 0 && step - start_step_ >= o_.stop_after;
    const bool interrupted = g_stop_requested.load();
    if (val_loader_ && (last || (o_.val_every > 0 && step % o_.val_every == 0)))
      result.val_loss = validate(step);
    if (o_.sample_every > 0 && (last || step % o_.sample_every == 0)) sample(step);
    if (last || stop_after || interrupted || (o_.ckpt_every > 0 && step % o_.ckpt_every == 0))
      result.checkpoint = checkpoint(step);
    if (interrupted) {
      result.interrupted = true;
      progress_.print("interrupted at step " + std::to_string(step) +
                      "; continue with --resume auto --out-dir " + o_.out_dir);
      break;
    }
    if (stop_after && !last) {
      progress_.print("stopped after " + std::to_string(step - start_step_) +
                      " steps (--stop-after); continue with "
                      "--resume auto --out-dir " +
                      o_.out_dir);
      break;
    }
  }
  progress_.finish();
  return result;
}

}  // namespace

double evaluate_loss(const Model& model, DataLoader& loader, std::int64_t batches, Arena& arena) {
  loader.reset();
  double sum = 0.0;
  for (std::int64_t i = 0; i < batches; ++i) {
    loader.next_batch();
    arena.reset();
    ArenaScope scope(arena);
    sum += model.loss(loader.inputs(), loader.targets());
  }
  arena.reset();
  return batches > 0 ? sum / static_cast<double>(batches) : std::numeric_limits<double>::quiet_NaN();
}

TrainResult run_training(TrainOptions options) {
  Trainer trainer(std::move(options));
  return trainer.run();
}

}  // namespace llmcc::cli
