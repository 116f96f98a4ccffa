#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "llmcc/adgen.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/train/grad_clip.h"
#include "llmcc/train/train_log.h"
#include "io/crc32.h"
#include "llmcc/train/trainer.h"

namespace llmcc {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- SIGINT / SIGTERM: finish the step, checkpoint, stop ---------------------------------

std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int sig) {
  g_stop_requested.store(true);
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
}

// Installs the handlers for the run's lifetime and restores the previous ones after.
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

// ---- arena planning -----------------------------------------------------------------------

std::size_t measure_step_arena(const std::function<void()>& step, const std::string& what) {
  // The probe reserves what the machine has free: pages are touched only as the step uses them,
  // so the reservation costs address space, and a step that needs more fails here, by name,
  // before training starts.
  // Under strict overcommit a reservation that large can be refused: half as much is tried then.
  const std::size_t available = available_memory_bytes();
  std::size_t probe_bytes = std::max<std::size_t>(available, std::size_t{256} << 20);
  std::unique_ptr<Arena> reserved;
  while (!reserved) {
    try {
      reserved = std::make_unique<Arena>(probe_bytes);
    } catch (const Error&) {
      if (probe_bytes <= (std::size_t{256} << 20)) throw;
      probe_bytes /= 2;
    }
  }
  Arena& probe = *reserved;
  try {
    ArenaScope scope(probe);
    step();
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("[arena]", 0) != 0) throw;
    fail(what, "one step needs more than the " + format_mib(probe.capacity()) +
                   " of memory available for activations (" + e.what() + "); use smaller batches or sequences");
  }
  return probe.high_water();
}

std::size_t arena_capacity_for(std::size_t high_water) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t want = high_water + high_water / 16;
  return (want + kMiB - 1) / kMiB * kMiB + kMiB;
}

// ---- the loop -----------------------------------------------------------------------------

struct TrainLoop::Output {
  explicit Output(const TrainerOptions& o) : progress(o.quiet, o.name) { progress.set_rate_unit(o.rate_unit); }
  Progress progress;
  std::unique_ptr<TrainLog> log;
  JsonLine line;
};

namespace {
// Data-parallel ranks other than 0 print nothing but warnings and errors.
TrainerOptions for_this_rank(TrainerOptions o) {
  if (o.comm != nullptr && o.comm->distributed() && o.comm->rank() != 0) o.quiet = true;
  return o;
}
}  // namespace

TrainLoop::TrainLoop(TrainerOptions options, TrainerHooks hooks)
    : o_(for_this_rank(std::move(options))), hooks_(std::move(hooks)), out_(std::make_unique<Output>(o_)) {
  set_flush_denormals(true);  // llmcc/runtime.h: steps that meet subnormals would slow several times over
  const std::string& w = o_.name;
  if (o_.steps < 1) fail(w, "steps must be at least 1, got " + std::to_string(o_.steps));
  if (o_.grad_accum < 1) fail(w, "grad_accum must be at least 1, got " + std::to_string(o_.grad_accum));
  if (o_.stop_after < 0) fail(w, "stop_after must be >= 0, got " + std::to_string(o_.stop_after));
  if (!(o_.grad_clip >= 0)) fail(w, "grad_clip must be >= 0 (0: off), got " + number(o_.grad_clip));
  if (!(o_.loss_spike == 0 || o_.loss_spike > 1))
    fail(w, "loss_spike must be above 1 (0: no spike check), got " + number(o_.loss_spike));
  if (!(o_.max_update >= 0)) fail(w, "max_update must be >= 0 (0: no check), got " + number(o_.max_update));
  if (o_.val_every < 0 || o_.val_batches < 0 || o_.sample_every < 0 || o_.ckpt_every < 0)
    fail(w, "val_every, val_batches, sample_every and ckpt_every must be >= 0");
  if (o_.keep_last < 1) fail(w, "keep_last must be at least 1, got " + std::to_string(o_.keep_last));
  if (o_.ckpt_every > 0 && o_.out_dir.empty()) fail(w, "ckpt_every needs out_dir (where checkpoints go)");
  if (o_.rollbacks < 0) fail(w, "rollbacks must be >= 0 (0: stop at a trip), got " + std::to_string(o_.rollbacks));
  if (o_.rollbacks > 0 && o_.out_dir.empty())
    fail(w, "rollbacks needs out_dir (the checkpoints a rollback returns to)");
  o_.schedule.max_steps = o_.steps;
  o_.schedule.validate();
  if (o_.zero_stage != 0 && o_.zero_stage != 1)
    fail(w, "zero_stage must be 0 (replicated optimizer state) or 1 (sharded, ZeRO-1), got " +
                std::to_string(o_.zero_stage));
  if (o_.comm != nullptr && o_.comm->distributed()) rank0_ = o_.comm->rank() == 0;
  if (o_.continue_hint.empty())
    o_.continue_hint = "continue with resume(\"" + (o_.out_dir.empty() ? std::string("<checkpoint>") : o_.out_dir) +
                       "/ckpt_<step>.bin\")";
}

TrainLoop::~TrainLoop() = default;

void TrainLoop::print(const std::string& text) { out_->progress.print(text); }
void TrainLoop::warn(const std::string& text) { out_->progress.warn(text); }
void TrainLoop::log_text(std::int64_t step, const std::string& key, const std::string& text) {
  if (out_->log) out_->log->write(out_->line.begin().field("step", step).field(key, text).end());
}

void TrainLoop::attach(ParameterStore& params, ParameterStore& grads, ForwardBackward forward_backward,
                       std::function<float()> forward_validation, Data data, RebindTensors rebind) {
  params_ = &params;
  grads_ = &grads;
  forward_backward_ = std::move(forward_backward);
  forward_validation_ = std::move(forward_validation);
  data_ = std::move(data);
  if (o_.comm != nullptr && o_.comm->distributed())
    dp_ = std::make_unique<DataParallel>(
        *o_.comm, params, grads, o_.adamw,
        DataParallelOptions{
            .zero_stage = o_.zero_stage, .bucket_bytes = o_.bucket_bytes, .node_shared_memory = o_.node_shared_memory},
        std::move(rebind));
  else
    opt_ = std::make_unique<AdamW>(params, o_.adamw);
  if (data_.has_val && o_.val_batches == 0 && data_.val_per_epoch == 0)
    fail(o_.name,
         "val_batches 0 means one pass over the validation data, but its source has no end; "
         "give val_batches > 0");
}

void TrainLoop::resume(const std::string& checkpoint) {
  restore(checkpoint);
  resumed_from_ = checkpoint;
}

AdamW& TrainLoop::optimizer() {
  if (!opt_) fail(o_.name, "a data-parallel run keeps its optimizer in data_parallel()");
  return *opt_;
}

void TrainLoop::restore(const std::string& checkpoint) {
  // Every rank reads the whole state; a data-parallel rank then keeps its part of AdamW's.
  std::unique_ptr<AdamW> whole;
  if (dp_) whole = std::make_unique<AdamW>(*params_, o_.adamw);
  AdamW& opt = dp_ ? *whole : *opt_;
  const TrainState state = load_checkpoint(checkpoint, *params_, &opt);
  if (!o_.force_resume) {
    const std::pair<const char*, ParameterStore::BadValues> checks[] = {
        {"params", params_->bad_values()}, {"adamw.m", opt.m().bad_values()}, {"adamw.v", opt.v().bad_values(true)}};
    for (const auto& [section, bad] : checks)
      if (bad.count > 0)
        fail(o_.name, checkpoint + ": [" + section + "] " + bad.first_tensor + " holds " + number(bad.first_value) +
                          "; training on from it could only give NaN (resume from an earlier checkpoint, or force it)");
  }
  step_ = state.step;
  last_val_ = state.val_loss.value_or(kNaN);
  try {
    data_.set_state(state.data);
  } catch (const Error& e) {
    fail(o_.name,
         std::string(e.what()) + " (resuming " + checkpoint + " with other training data than it was trained on?)");
  }
  if (hooks_.restore_state) hooks_.restore_state(state);
  if (opt.t() != state.step)
    fail(o_.name, checkpoint + ": AdamW has taken " + std::to_string(opt.t()) + " steps but the state says " +
                      std::to_string(state.step));
  if (dp_) dp_->scatter_optimizer(opt);
}

Arena& TrainLoop::arena() {
  if (!arena_) plan_arena();
  return *arena_;
}

void TrainLoop::plan_arena() {
  // One forward and backward of the first training batch, then everything put back: the data
  // position (the run then sees that batch again) and the gradients (zero again). A capacity
  // given in the options is checked against it, so a too-small one fails here, not mid-step.
  const DataLoaderState where = data_.state();
  arena_planned_ = measure_step_arena([&] { forward_backward_(1.0f, nullptr); }, o_.name + ": planning the step arena");
  data_.set_state(where);
  grads_->zero();
  // Validation runs the plain forward in the same arena, and it can take more than a training step
  // (a loss holding jvps: the gradient may call a cheaper specialised plan than the plain call).
  // evaluate() starts the validation data from its beginning each time, so nothing to put back.
  if (data_.has_val) {
    data_.reset_val();
    arena_planned_ = std::max(arena_planned_, measure_step_arena([&] { (void)forward_validation_(); },
                                                                 o_.name + ": planning the step arena"));
  }
  if (o_.arena_bytes > 0 && o_.arena_bytes < arena_planned_)
    fail(o_.name, "arena_bytes " + format_mib(o_.arena_bytes) + " is less than the " + format_mib(arena_planned_) +
                      " one step uses (measured by a planning step); give 0 to reserve what is measured");
  arena_ = std::make_unique<Arena>(o_.arena_bytes > 0 ? o_.arena_bytes : arena_capacity_for(arena_planned_));
}

double sum_of_losses(std::int64_t batches, Arena& arena, const std::function<float()>& next_loss) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < batches; ++i) {
    arena.reset();
    ArenaScope scope(arena);
    sum += next_loss();
  }
  arena.reset();
  return sum;
}

double TrainLoop::evaluate(std::int64_t batches) {
  if (!data_.has_val) return std::numeric_limits<double>::quiet_NaN();
  if (batches == 0) batches = data_.val_per_epoch;
  data_.reset_val();
  double sum = sum_of_losses(batches, arena(), forward_validation_);
  // Data-parallel: each rank evaluated its rows of every batch; the mean over the ranks is the
  // batches' mean.
  if (dp_) sum = dp_->comm().sum(sum) / dp_->comm().size();
  return batches > 0 ? sum / static_cast<double>(batches) : std::numeric_limits<double>::quiet_NaN();
}

float TrainLoop::train_step(std::int64_t step, double* grad_norm, StepTimes* times) {
  const float lr = o_.schedule.lr(step);
  // Data-parallel ranks' gradients are summed, so each scales its own by 1 / ranks too.
  const int ranks = dp_ ? dp_->comm().size() : 1;
  const float d_loss = 1.0f / static_cast<float>(o_.grad_accum * ranks);
  if (!grads_zero_) grads_->zero();  // only after a step that stopped before AdamW
  grads_zero_ = false;
  trip_.clear();
  trip_after_update_ = false;
  // Batches that tripped the guard before a rollback are drawn and dropped, every time the run
  // reaches their step again.
  if (const auto skip = skip_at_.find(step); skip != skip_at_.end()) {
    for (int k = 0; k < skip->second * o_.grad_accum; ++k) data_.skip();
  }
  double loss_sum = 0.0;
  for (int micro = 0; micro < o_.grad_accum; ++micro) {
    arena_->reset();
    ArenaScope scope(*arena_);
    // The gradient of loss / grad_accum: the accumulated gradient is the micro-batches' mean.
    // Data-parallel: the last micro-batch's backward announces final gradients, and their
    // buckets are reduced while it runs.
    const bool last = micro + 1 == o_.grad_accum;
    if (hooks_.training) {
      const auto rank = static_cast<std::uint64_t>(dp_ ? dp_->comm().rank() : 0);
      hooks_.training(true, (static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(o_.grad_accum) +
                             static_cast<std::uint64_t>(micro)) *
                                    static_cast<std::uint64_t>(ranks) +
                                rank);
    }
    if (dp_ && last) {
      dp_->begin_backward();
      adgen::GradFinalScope notify(dp_.get());
      loss_sum += forward_backward_(d_loss, times);
    } else {
      loss_sum += forward_backward_(d_loss, times);
    }
  }
  if (hooks_.training) hooks_.training(false, 0);
  // The update's time: whatever the step does after its last backward, on every return path.
  struct UpdateTimer {
    StepTimes* times;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    ~UpdateTimer() {
      if (times != nullptr) times->update += seconds_since(t0);
    }
  } update_timer{times};
  arena_->reset();
  if (dp_) {
    dp_->finish_backward();
    loss_sum = dp_->comm().sum(loss_sum) / ranks;
  }
  const float loss = static_cast<float>(loss_sum / o_.grad_accum);
  // Clipping is a factor AdamW applies as it reads each gradient, in the update's pass.
  *grad_norm = dp_ ? dp_->grad_norm() : llmcc::grad_norm(*grads_);
  const float clip = clip_factor(*grad_norm, o_.grad_clip);
  // The guard, before the update: a non-finite loss or norm, or a spike.
  if (!std::isfinite(loss) || !std::isfinite(*grad_norm)) {
    trip_ = std::string("the ") + (std::isfinite(loss) ? "gradient norm" : "loss") + " is not finite";
    return loss;
  }
  // From the second step of a call on (a resumed run's window starts empty): a rise of that size
  // within a run is divergence, not noise.
  if (const std::string spike = loss_spike(loss); !spike.empty()) {
    trip_ = "the loss " + number(loss) + spike;
    return loss;
  }
  // The update, which reports in the same pass whether it left every weight and moment finite,
  // and how far it moved the weights (what a checkpoint of the new state is judged by).
  UpdateSize size;
  UpdateSize* measure = o_.max_update > 0 ? &size : nullptr;
  if (!(dp_ ? dp_->step(lr, measure, clip) : opt_->step_zero_grads(*params_, *grads_, lr, measure, clip))) {
    trip_ = "the update made weights or AdamW moments non-finite";
    trip_after_update_ = true;
  }
  last_update_ratio_ = size.ratio();
  grads_zero_ = true;
  recent_losses_[recent_next_] = loss;
  recent_next_ = (recent_next_ + 1) % kLossWindow;
  if (recent_count_ < kLossWindow) ++recent_count_;
  return loss;
}

float TrainLoop::step_once(StepTimes* times) {
  arena();
  double norm = 0.0;
  const float loss = train_step(step_, &norm, times);
  if (!trip_.empty())
    fail(o_.name, "step " + std::to_string(step_ + 1) + ": " + trip_ + (trip_after_update_ ? "" : "; nothing updated"));
  ++step_;
  return loss;
}

float TrainLoop::validate(std::int64_t step) {
  if (!data_.has_val && !hooks_.metrics) return kNaN;
  Output& out = *out_;
  float loss = kNaN;
  if (data_.has_val) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t batches = o_.val_batches > 0 ? o_.val_batches : data_.val_per_epoch;
    loss = static_cast<float>(evaluate(batches));
    out.log->write(out.line.begin().field("step", step).field("val_loss", loss).end());
    out.progress.print("step " + std::to_string(step) + ": val loss " + fixed(loss, 4) + " (" +
                       std::to_string(batches) + " batches, " + fixed(seconds_since(t0), 1) + " s)");
  }
  if (hooks_.metrics) {
    for (const auto& [name, value] : hooks_.metrics(step)) {
      out.log->write(out.line.begin().field("step", step).field(name, value).end());
      out.progress.print("step " + std::to_string(step) + ": " + name + " " + fixed(value, 4));
    }
  }
  return loss;
}

std::string TrainLoop::judge_validation(float loss) const {
  if (!std::isfinite(loss)) return "the validation loss is not finite";
  if (o_.loss_spike > 0 && std::isfinite(last_val_) && last_val_ > 0 && loss > o_.loss_spike * last_val_)
    return "the validation loss " + number(loss) + " is more than " + number(o_.loss_spike) +
           " times the previous validation's (" + number(last_val_) + "; loss_spike sets the factor, 0 turns it off)";
  return "";
}

std::string TrainLoop::judge_next_batch(std::int64_t step) {
  // The next step's first micro-batch, after the batches it will drop: the batch that step
  // trains on first. The data position is put back, so the run goes on as if unjudged.
  const DataLoaderState where = data_.state();
  if (const auto skip = skip_at_.find(step); skip != skip_at_.end()) {
    for (int k = 0; k < skip->second * o_.grad_accum; ++k) data_.skip();
  }
  double loss = 0.0;
  arena_->reset();
  {
    ArenaScope scope(*arena_);
    loss = data_.train_loss();
  }
  arena_->reset();
  data_.set_state(where);
  if (dp_) loss = dp_->comm().sum(loss) / dp_->comm().size();
  if (!std::isfinite(loss)) return "the loss of the next step's batch on these weights is not finite";
  if (const std::string spike = loss_spike(loss); !spike.empty())
    return "the loss of the next step's batch on these weights, " + number(loss) + "," + spike;
  return "";
}

std::string TrainLoop::loss_spike(double loss) const {
  if (o_.loss_spike <= 0 || recent_count_ == 0) return "";
  double mean = 0.0;
  for (int i = 0; i < recent_count_; ++i) mean += recent_losses_[i];
  mean /= recent_count_;
  if (!(mean > 0 && loss > o_.loss_spike * mean)) return "";
  return " is more than " + number(o_.loss_spike) + " times the mean of the last " + std::to_string(recent_count_) +
         " steps (" + number(mean) + "; loss_spike sets the factor, 0 turns it off)";
}

void TrainLoop::roll_back(const std::string& checkpoint, std::int64_t tripped) {
  restore(checkpoint);
  ++skip_at_[tripped];
  ++rollbacks_done_;
  grads_->zero();
  grads_zero_ = true;
  recent_count_ = 0;  // the spike window restarts, as after a resume
  recent_next_ = 0;
}

std::string TrainLoop::checkpoint(std::int64_t step, const std::string& unconfirmed) {
  if (o_.out_dir.empty()) return "";
  TrainState state;
  state.step = step;
  state.data = data_.state();
  state.config = o_.config;
  state.files = o_.files;
  if (std::isfinite(last_val_)) state.val_loss = last_val_;
  if (hooks_.save_state) hooks_.save_state(state);
  std::string path;
  if (dp_) {
    // The whole AdamW state is assembled on rank 0, which writes; the others learn the path.
    std::unique_ptr<AdamW> whole;
    if (rank0_) whole = std::make_unique<AdamW>(*params_, o_.adamw);
    dp_->gather_optimizer(whole.get(), 0);
    if (rank0_)
      path = save_checkpoint_in_dir(o_.out_dir, o_.keep_last, *params_, whole.get(), state, unconfirmed.empty());
    std::uint64_t length = path.size();
    dp_->comm().broadcast(&length, sizeof length, 0);
    path.resize(length);
    dp_->comm().broadcast(path.data(), length, 0);
  } else {
    path = save_checkpoint_in_dir(o_.out_dir, o_.keep_last, *params_, opt_.get(), state, unconfirmed.empty());
  }
  out_->line.begin().field("step", step).field("checkpoint", path);
  if (!unconfirmed.empty()) out_->line.field("unconfirmed", unconfirmed);
  out_->log->write(out_->line.end());
  out_->progress.print("step " + std::to_string(step) + ": checkpoint " + path +
                       (unconfirmed.empty() ? std::string() : " (unconfirmed: " + unconfirmed + ")"));
  return path;
}

void TrainLoop::check_ranks_agree() {
  // Every rank must train the same run: the same configuration, data position and weights. A rank
  // started with other flags, other data or another checkpoint would otherwise train on apart
  // from the others, silently. Ranks that share the weights hold them once, so only theirs are
  // not compared.
  detail::Crc32 config;
  for (const auto& [key, value] : o_.config) {
    // Ranks on CPUs of other models may choose other GEMM blockings: other rounding, same run.
    if (key == "run.gemm_blocking") continue;
    config.update(key.data(), key.size());
    config.update("=", 1);
    config.update(value.data(), value.size());
    config.update("\n", 1);
  }
  const std::string data = data_.state().to_string();
  config.update(data.data(), data.size());
  detail::Crc32 weights;
  if (!dp_->shares_memory()) weights.update(params_->data(), params_->size() * sizeof(float));
  std::uint32_t mine[2] = {config.value(), weights.value()};
  std::uint32_t root[2] = {mine[0], mine[1]};
  dist::Communicator& comm = dp_->comm();
  comm.broadcast(root, sizeof root, 0);
  for (int what = 0; what < 2; ++what) {
    const bool same = mine[what] == root[what];
    if (comm.all(same)) continue;
    const char* thing = what == 0 ? "configuration or training data position" : "initial weights";
    fail(o_.name, same ? std::string("another rank's ") + thing + " differs from rank 0's; every rank must be " +
                             "started with the same flags, data and checkpoint"
                       : comm.describe() + ": this rank's " + thing + " differs from rank 0's; every rank must be " +
                             "started with the same flags, data and checkpoint");
  }
}

void TrainLoop::print_comm_summary(const TrainResult& result, std::int64_t timed_steps) {
  // Every rank's means, summed into its own slots.
  dist::Communicator& comm = dp_->comm();
  const auto n = static_cast<std::size_t>(comm.size());
  comm_summary_.assign(2 * n, 0.0);
  comm_summary_[2 * static_cast<std::size_t>(comm.rank())] = result.step_ms;
  comm_summary_[2 * static_cast<std::size_t>(comm.rank()) + 1] = result.exposed_comm_ms;
  comm.sum(comm_summary_.data(), static_cast<int>(comm_summary_.size()));
  if (timed_steps == 0) return;
  std::ostringstream s;
  s << "data parallel: " << n << " ranks, " << (o_.zero_stage == 1 ? "ZeRO-1" : "replicated AdamW") << ", "
    << dp_->buckets() << " gradient buckets; mean over " << timed_steps << " steps, exposed communication of step:";
  for (std::size_t r = 0; r < n; ++r)
    s << (r == 0 ? " " : ", ") << "rank " << r << " " << fixed(comm_summary_[2 * r + 1], 1) << " of "
      << fixed(comm_summary_[2 * r], 1) << " ms";
  // When the last step's buckets started (MPI collectives): how much of the backward is left
  // to hide their communication behind.
  const auto& timeline = dp_->last_step_timeline();
  if (!dp_->shares_memory() && !timeline.empty()) {
    s << "\n  last step's buckets started at (ms after its forward began, MB):";
    for (const auto& b : timeline) s << " " << fixed(b.started_ms, 0) << ":" << fixed(b.bytes / 1e6, 1);
    s << "; backward ended at " << fixed(dp_->last_backward_end_ms(), 0) << " ms";
  }
  out_->progress.print(s.str());
}

void TrainLoop::print_default_header(const TrainStart& s) {
  std::ostringstream h;
  h << o_.name << ": " << format_count(static_cast<double>(s.parameters)) << " parameters"
    << (s.resumed_from.empty() ? std::string()
                               : ", resumed from " + s.resumed_from + " at step " + std::to_string(s.step))
    << "; " << o_.steps << " steps of " << o_.grad_accum << " micro-batch" << (o_.grad_accum == 1 ? "" : "es")
    << "; AdamW lr " << number(o_.schedule.max_lr) << " -> " << number(o_.schedule.min_lr) << " (warmup "
    << o_.schedule.warmup_steps << ", cosine), clip " << (o_.grad_clip > 0 ? number(o_.grad_clip) : std::string("off"))
    << "\n  step arena " << format_mib(s.arena_bytes) << " reserved";
  if (s.arena_planned > 0) h << " (a planned step's high-water mark " << format_mib(s.arena_planned) << ")";
  if (!o_.out_dir.empty()) h << "; out " << o_.out_dir;
  out_->progress.print(h.str());
}

TrainResult TrainLoop::run() {
  StopSignals signals;
  Output& out = *out_;
  TrainResult result;
  result.step = step_;
  result.last_loss = kNaN;
  result.val_loss = kNaN;
  const std::int64_t start_step = step_;
  const bool resumed = !resumed_from_.empty();

  arena();  // planned before the first step, so a step that cannot fit fails here
  if (dp_) check_ranks_agree();
  const std::string log_path = !rank0_                ? std::string()
                               : !o_.log_path.empty() ? o_.log_path
                               : !o_.out_dir.empty()  ? (std::filesystem::path(o_.out_dir) / "log.jsonl").string()
                                                      : std::string();
  if (!out.log) out.log = std::make_unique<TrainLog>(log_path, resumed ? start_step : -1);

  // The run's configuration as the first line of this call.
  std::string config_json = "{";
  for (const auto& [k, v] : o_.config) {
    if (config_json.size() > 1) config_json += ", ";
    append_json_string(config_json, k);
    config_json += ": ";
    append_json_string(config_json, v);
  }
  config_json += "}";
  out.line.begin().field("step", start_step).field("event", resumed ? "resume" : "start");
  if (resumed) out.line.field("from", resumed_from_);
  out.log->write(out.line.field("params", params_->parameter_count()).raw_field("config", config_json).end());

  TrainStart start;
  start.step = start_step;
  start.resumed_from = resumed_from_;
  start.parameters = params_->parameter_count();
  start.arena_bytes = arena_->capacity();
  start.arena_planned = arena_planned_;
  start.val_batches = !data_.has_val ? 0 : (o_.val_batches > 0 ? o_.val_batches : data_.val_per_epoch);
  if (hooks_.header)
    hooks_.header(start);
  else
    print_default_header(start);

  if (start_step >= o_.steps) {
    out.progress.print("the checkpoint is at step " + std::to_string(start_step) + " of " + std::to_string(o_.steps) +
                       ": nothing to train (raise the step count to continue)");
    return result;
  }
  // A fresh run's starting point (a resumed one logged it before its checkpoint).
  const bool validated_start = start_step == 0 && o_.val_every > 0 && data_.has_val;
  if (start_step == 0 && o_.val_every > 0) {
    result.val_loss = validate(0);
    if (validated_start && std::isfinite(result.val_loss)) last_val_ = result.val_loss;
  }
  // What a rollback returns to: the last confirmed checkpoint of this call, else the one resumed
  // from, else the starting point, saved now. A run that validated its starting point saves it
  // with its checkpoints too, so an update that explodes the weights leaves a state to go back to.
  std::string last_good = resumed_from_;
  if (last_good.empty() && !o_.out_dir.empty() && (o_.rollbacks > 0 || (o_.ckpt_every > 0 && validated_start)))
    last_good = result.checkpoint = checkpoint(start_step, judge_next_batch(start_step));

  // A source that does not count its items gets steps per second.
  const bool counted = data_.items_per_batch > 0;
  // Data-parallel: the throughput is the ranks' together (each serves items_per_batch); steps
  // per second are the same on every rank.
  const double ranks = dp_ && counted ? static_cast<double>(dp_->comm().size()) : 1.0;
  const double items = counted ? data_.items_per_batch * o_.grad_accum : 1.0;
  const std::string rate_field = counted ? o_.rate_field : "steps_per_s";
  out.progress.set_rate_unit(counted ? o_.rate_unit : "step");
  double timed_seconds = 0.0;  // steps after the first of this call, for the ETA
  std::int64_t timed_steps = 0;
  double timed_exposed_ms = 0.0;
  std::int64_t step = start_step;
  while (step < o_.steps) {
    const auto t0 = std::chrono::steady_clock::now();
    const float lr = o_.schedule.lr(step);
    double norm = 0.0;
    const float loss = train_step(step, &norm);
    ++step;
    step_ = step;
    const double seconds = seconds_since(t0);
    if (step > start_step + 1) {
      timed_seconds += seconds;
      ++timed_steps;
      if (dp_) timed_exposed_ms += dp_->last_step_times().exposed_ms;
    }
    const double per_step = timed_steps > 0 ? timed_seconds / static_cast<double>(timed_steps) : seconds;
    const double rate = items / seconds;  // this rank's
    out.line.begin()
        .field("step", step)
        .field("loss", loss)
        .field("lr", lr)
        .field("grad_norm", norm)
        .field(rate_field, std::round(rate * 10.0 * ranks) / 10.0)
        .field("ms", std::round(seconds * 1e6) / 1e3);
    if (dp_) {
      const CommTimes& c = dp_->last_step_times();
      out.line.field("comm_ms", std::round(c.in_flight_ms * 1e3) / 1e3)
          .field("progress_ms", std::round(c.progress_ms * 1e3) / 1e3)
          .field("exposed_comm_ms", std::round(c.exposed_ms * 1e3) / 1e3);
    }
    out.log->write(out.line.end());
    out.progress.step(step, o_.steps, loss, lr, norm, seconds * 1e3, rate * ranks,
                      per_step * static_cast<double>(o_.steps - step));
    result.step = step;
    result.last_loss = loss;
    // A trip rolls back (true: go on from the restored step) or stops the run.
    bool validation_trip = false;
    const auto on_trip = [&]() -> bool {
      if (rollbacks_done_ < o_.rollbacks) {
        const std::int64_t tripped = step - 1;
        roll_back(last_good, tripped);
        step = step_;
        // The log goes back with the run (each step logged once, as after a resume); the line
        // that replaces the dropped ones says what happened.
        out.log.reset();
        out.log = std::make_unique<TrainLog>(log_path, step);
        out.log->write(out.line.begin()
                           .field("step", step)
                           .field("event", "rollback")
                           .field("tripped_at", tripped + 1)
                           .field("reason", trip_)
                           .field("to", last_good)
                           .end());
        out.progress.print("step " + std::to_string(tripped + 1) + ": " + trip_ + "; rolled back to " + last_good +
                           " (step " + std::to_string(step) + "), step " + std::to_string(tripped + 1) +
                           "'s batches will be dropped (rollback " + std::to_string(rollbacks_done_) + " of " +
                           std::to_string(o_.rollbacks) + ")");
        return true;
      }
      out.progress.finish();
      fail(o_.name, "step " + std::to_string(step) + ": " + trip_ + " (lr " + number(lr) + "); " +
                        (trip_after_update_ ? "the weights in memory are not finite and were not saved"
                         : validation_trip  ? "the updated weights were not saved"
                                            : "the weights were not updated") +
                        ". " + o_.nonfinite_hint +
                        (rollbacks_done_ > 0 ? "; after " + std::to_string(rollbacks_done_) + " rollback" +
                                                   (rollbacks_done_ == 1 ? "" : "s")
                                             : std::string()) +
                        (last_good.empty() ? std::string() : "; last confirmed checkpoint " + last_good));
    };
    if (!trip_.empty() && on_trip()) continue;
    if (step == start_step + 1) {
      out.progress.print("step arena: high-water " + format_mib(arena_->high_water()) + " of " +
                         format_mib(arena_->capacity()) + " reserved (+ " + format_mib(adgen::scratch_high_water()) +
                         " adgen scratch)");
    }
    const bool last = step == o_.steps;
    const bool stop_after = o_.stop_after > 0 && step - start_step >= o_.stop_after;
    // Every rank stops at the same step (a signal may reach them at different times).
    bool interrupted = g_stop_requested.load();
    if (dp_) interrupted = !dp_->comm().all(!interrupted);
    // A validation judges the state it measured: a spike against the previous one is a trip
    // before anything is saved; one that passes against a previous one confirms this step's
    // checkpoint.
    bool val_judged = false;
    if ((data_.has_val || hooks_.metrics) && (last || (o_.val_every > 0 && step % o_.val_every == 0))) {
      result.val_loss = validate(step);
      if (data_.has_val) {
        trip_ = judge_validation(result.val_loss);
        if (!trip_.empty()) {
          validation_trip = true;
          if (on_trip()) continue;
        }
        val_judged = std::isfinite(last_val_);
        last_val_ = result.val_loss;
      }
    }
    if (hooks_.sample && o_.sample_every > 0 && (last || step % o_.sample_every == 0)) hooks_.sample(step);
    if (!o_.out_dir.empty() &&
        (last || stop_after || interrupted || (o_.ckpt_every > 0 && step % o_.ckpt_every == 0))) {
      // The update that made this state, then its validation or the next step's batch.
      std::string unconfirmed;
      if (o_.max_update > 0 && last_update_ratio_ > o_.max_update)
        unconfirmed = "the update before it changed the weights by " + number(last_update_ratio_) +
                      " times their norm (max_update " + number(o_.max_update) + ")";
      else if (!val_judged)
        unconfirmed = judge_next_batch(step);
      result.checkpoint = checkpoint(step, unconfirmed);
      if (unconfirmed.empty()) last_good = result.checkpoint;
    }
    if (interrupted) {
      result.interrupted = true;
      out.progress.print("interrupted at step " + std::to_string(step) + "; " + o_.continue_hint);
      break;
    }
    if (stop_after && !last) {
      out.progress.print("stopped after " + std::to_string(step - start_step) + " steps; " + o_.continue_hint);
      break;
    }
  }
  out.progress.finish();
  if (timed_steps > 0) {
    result.step_ms = timed_seconds * 1e3 / static_cast<double>(timed_steps);
    result.exposed_comm_ms = timed_exposed_ms / static_cast<double>(timed_steps);
  }
  if (dp_) print_comm_summary(result, timed_steps);
  return result;
}

}  // namespace llmcc
