// Training any adgen-differentiated model: llmcc::Trainer<Entry>.
//
// A model is a struct of Tensor parameters (and modules of them) with a forward, and a loss
// marked LLMCC_ADGEN_ENTRY whose first argument is the model. adgen generates the backward and a
// trait, `<loss>_Entry`, that names the model type, its gradient mirror, its record and the
// inputs after the model; the Trainer takes that trait:
//
//   Mlp model(cfg);                                  // shapes declared
//   ParameterStore params = bind_parameters(model);  // one buffer, zeroed
//   init(model, seed);
//   GeneratedBatches<mlp_loss_Entry::Inputs> data(seed, make_batch);
//   Trainer<mlp_loss_Entry> trainer(model, params, data, nullptr,
//                                   {.steps = 500, .schedule = {.max_lr = 1e-3f}, .out_dir = "run"});
//   TrainResult r = trainer.run();
//
// One optimizer step s (learning rate schedule.lr(s)):
//   for each of grad_accum micro-batches: the next batch, the generated forward and backward
//       with d_loss = 1 / grad_accum (the gradient is the micro-batches' mean), arena reset after
//   global-norm clipping (or just the norm, with grad_clip 0), AdamW, gradients zeroed
// then, on their cadence: validation (mean forward loss over val_batches batches of the
// validation source, reset first) and the hooks' metrics, samples, a checkpoint.
//
// Memory: weights, gradients and AdamW's moments are allocated before the first step; so is the
// step arena, whose size a planning step measures (one forward and backward of the first batch,
// the data position put back and the gradients zeroed after, and, with a validation source, the
// larger of that and one validation forward) and reserves with a sixteenth more.
// A step allocates nothing from the heap.
//
// Exact resume: checkpoints hold the weights, AdamW's state, the step, the training source's
// state and what the hooks save; resume() restores them, so N steps, a checkpoint and M more give
// the same bytes as N + M steps. SIGINT or SIGTERM finish the current step, checkpoint and stop
// (a second signal ends the process).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/dist/communicator.h"
#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/batch_source.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/data_parallel.h"
#include "llmcc/train/schedule.h"

namespace llmcc {

struct TrainerOptions {
  std::int64_t steps = 1000;    // optimizer steps of the whole run (the schedule's length)
  std::int64_t stop_after = 0;  // > 0: stop (with a checkpoint) after this many steps of this call
  int grad_accum = 1;           // micro-batches per optimizer step
  LrSchedule schedule{};        // max_steps is set to `steps`
  AdamWConfig adamw{};
  double grad_clip = 1.0;  // global-norm clipping; 0: off (the norm is still logged)
  // The divergence guard stops the run, before anything is saved, when a step's loss exceeds
  // loss_spike times the mean of the previous steps' losses (up to 16 of this call; 0: no spike
  // check). A non-finite loss, gradient norm, updated weight or AdamW moment always stops it.
  double loss_spike = 10.0;
  // A validation loss above loss_spike times the previous validation's (a resumed run's comes
  // from its checkpoint), or not finite, trips the guard too, before that step's checkpoint.
  // A checkpoint is confirmed only if the update that made its state changed the weights by at
  // most max_update times their norm (|new - old| <= max_update |old|, measured in AdamW's pass;
  // 0: no check): an update that size replaced the model, however finite the result.
  double max_update = 1.0;
  // > 0: instead of stopping, up to this many times in a call, a trip rolls the run back to its
  // last confirmed checkpoint (weights, AdamW, data position) and drops the tripping step's
  // batches when the replay reaches that step; each rollback is logged. Needs out_dir: a fresh run
  // saves its starting point first, so there is always a checkpoint to return to.
  //
  // Checkpoints are judged before they are written (llmcc/io/checkpoint.h): confirmed when the
  // update before them was within max_update and either a validation at the same step passed
  // against an earlier one or the loss of the batch the next step trains on (one forward, the
  // data position put back) is finite and within loss_spike of the recent steps' mean. An
  // unconfirmed checkpoint is written and recorded as such; pruning keeps the newest confirmed
  // one, and rollbacks, the guard's error and --resume auto use it.
  // A fresh run that validates its starting point and writes checkpoints saves that point too.
  int rollbacks = 0;
  std::int64_t val_every = 100;   // validation every this many steps and at the end; 0: only at the end
  std::int64_t val_batches = 20;  // batches per validation; 0: one pass (a source with an end)
  std::int64_t sample_every = 0;  // hooks.sample every this many steps and at the end; 0: never
  std::int64_t ckpt_every = 0;    // checkpoints every this many steps; always at the end
  int keep_last = 3;              // checkpoints kept in out_dir
  std::string out_dir;            // checkpoints and the log; empty: neither is written
  std::string log_path;           // empty: <out_dir>/log.jsonl
  bool quiet = false;             // no progress lines (warnings still go to stderr)
  bool force_resume = false;      // resume() accepts non-finite weights or moments, or negative second moments
  std::size_t arena_bytes = 0;    // step arena capacity; 0: what a planning step measures, plus 1/16
  // Data-parallel training (docs/distributed.md): with a communicator of more than one rank this
  // loop runs on every rank, each on its own part of every global batch (the sources are the
  // caller's to slice: DataLoaderConfig's rank and ranks), and the gradients are summed in buckets
  // while the backward runs (llmcc/train/data_parallel.h). Rank 0 alone prints, logs and writes
  // checkpoints, which hold the whole state and resume with any number of ranks.
  dist::Communicator* comm = nullptr;
  int zero_stage = 1;                                // 1: AdamW's state sharded over the ranks (ZeRO-1); 0: replicated
  std::size_t bucket_bytes = std::size_t{16} << 20;  // gradient bytes per collective
  bool node_shared_memory = true;            // ZeRO-1 with every rank on one machine: share weights and gradients
  KeyValues config;                          // the run's configuration, stored in checkpoints and the log
  std::map<std::string, std::string> files;  // files every checkpoint carries ("file.<name>")

  // How messages read: the prefix, what the throughput counts ("tok/s", "tokens_per_s"; steps
  // per second when the source's items_per_batch is 0), what to say when the loss is not
  // finite, and how to continue a stopped run.
  std::string name = "llmcc train";
  std::string rate_unit = "tok";
  std::string rate_field = "tokens_per_s";
  std::string nonfinite_hint = "Try a lower learning rate, more warmup steps or gradient clipping";
  std::string continue_hint;  // empty: "call resume() with the last checkpoint"
};

struct TrainResult {
  std::int64_t step = 0;     // optimizer steps completed
  float last_loss = 0.0f;    // training loss of the last step of this call (NaN: none)
  float val_loss = 0.0f;     // last validation loss (NaN: none)
  std::string checkpoint;    // last checkpoint written (empty: none)
  bool interrupted = false;  // stopped by SIGINT/SIGTERM
  // Data-parallel runs: this rank's mean per step (after the first step of the call) of the time
  // spent waiting for collectives, and of the whole step, in milliseconds.
  double exposed_comm_ms = 0.0;
  double step_ms = 0.0;
};

// What the run looks like once everything is allocated, for a header.
struct TrainStart {
  std::int64_t step = 0;     // first step this call takes
  std::string resumed_from;  // checkpoint path, or empty
  std::int64_t parameters = 0;
  std::size_t arena_bytes = 0;    // step arena reserved
  std::size_t arena_planned = 0;  // the planning step's high-water mark (0: not planned)
  std::int64_t val_batches = 0;   // per validation (0: no validation source)
};

struct TrainerHooks {
  // Replaces the default header ("<name>: N parameters, step arena X reserved").
  std::function<void(const TrainStart&)> header;
  // At each validation, after the loss: extra named metrics (accuracy, say), logged and printed.
  std::function<std::vector<std::pair<std::string, double>>(std::int64_t step)> metrics;
  // Every sample_every steps and at the end.
  std::function<void(std::int64_t step)> sample;
  // Adds to and reads back from each checkpoint's state (named Rng states, say).
  std::function<void(TrainState&)> save_state;
  std::function<void(const TrainState&)> restore_state;
  // Around the forwards and backwards of a step's micro-batches: training(true, draw) before
  // each, draw a number of its own for every micro-batch of the run on every rank (the same on a
  // resumed run: dropout masks are drawn from it), and training(false, 0) after the step's last,
  // so that validation and everything between steps run the model as for inference.
  std::function<void(bool on, std::uint64_t draw)> training;
};

// The loop behind every Trainer<Entry>: schedule, accumulation, clipping, AdamW, validation,
// logging, checkpoints, resume, signals. Written once; Trainer<Entry> supplies the model side.
class TrainLoop {
 public:
  // Where one step's time went (step_once): its forwards, its backwards, and the update
  // (clipping, AdamW and the gradient's zeroing), in seconds.
  struct StepTimes {
    double forward = 0, backward = 0, update = 0;
  };
  // Continue the run in `checkpoint` (before run()): weights, AdamW, step, data position, hooks.
  // A checkpoint with a non-finite weight or moment, or a negative second moment, is refused
  // (unless options.force_resume): training on from it could only produce NaN.
  void resume(const std::string& checkpoint);
  TrainResult run();
  // One optimizer step as run() takes it (the schedule's rate at step(), every micro-batch,
  // clipping, the divergence guard, AdamW) and nothing around it: no validation, log, progress
  // line or checkpoint. step() advances. Benchmarks time training with it; `times`, when given,
  // receives where the time went. Returns the step's loss; a step the guard trips updates
  // nothing and throws llmcc::Error saying why.
  float step_once(StepTimes* times = nullptr);
  // The mean forward loss over `batches` batches of the validation source (reset first; 0: one
  // pass); NaN without one.
  double evaluate(std::int64_t batches);
  const TrainerOptions& options() const { return o_; }
  std::int64_t step() const { return step_; }
  // The optimizer of a one-process run (data-parallel runs keep it in data_parallel()).
  AdamW& optimizer();
  DataParallel* data_parallel() { return dp_.get(); }
  Arena& arena();  // the step arena (planned on first use)
  // For hooks: a permanent line of the progress output, a warning, and a log line
  // {"step": step, "<key>": "<text>"} (during run()).
  void print(const std::string& text);
  void warn(const std::string& text);
  void log_text(std::int64_t step, const std::string& key, const std::string& text);
  virtual ~TrainLoop();
  TrainLoop(const TrainLoop&) = delete;
  TrainLoop& operator=(const TrainLoop&) = delete;

 protected:
  struct Data {
    std::function<DataLoaderState()> state;
    std::function<void(const DataLoaderState&)> set_state;
    std::function<void()> skip;         // draws the next training batch and drops it
    std::function<float()> train_loss;  // draws the next training batch: its forward loss
    double items_per_batch = 0.0;
    bool has_val = false;
    std::function<void()> reset_val;
    std::int64_t val_per_epoch = 0;
  };
  TrainLoop(TrainerOptions options, TrainerHooks hooks);
  // Called by Trainer<Entry> before its members go (the gradient store DataParallel may have
  // moved into shared memory is one of them).
  void release_data_parallel() { dp_.reset(); }
  // Called by Trainer<Entry> once its members exist.
  // rebind moves the model's parameter and gradient tensors when a data-parallel run moves their
  // stores (RebindTensors, data_parallel.h).
  // forward_backward(d_loss, times): the next batch's forward and backward (the loss's gradient
  // d_loss), adding their seconds to *times when it is not null; returns the loss.
  using ForwardBackward = std::function<float(float d_loss, StepTimes* times)>;
  void attach(ParameterStore& params, ParameterStore& grads, ForwardBackward forward_backward,
              std::function<float()> forward_validation, Data data, RebindTensors rebind);

 private:
  void plan_arena();
  float train_step(std::int64_t step, double* grad_norm, StepTimes* times = nullptr);
  // Loads weights, AdamW, step, data position and hook state from `checkpoint`; refuses
  // non-finite values unless force_resume.
  void restore(const std::string& checkpoint);
  // After a trip at step index `tripped`: back to `checkpoint`, and that step's batches dropped
  // whenever it is reached again.
  void roll_back(const std::string& checkpoint, std::int64_t tripped);
  std::map<std::int64_t, int> skip_at_;  // step index -> rollbacks that tripped there
  int rollbacks_done_ = 0;
  // Why the last step tripped the divergence guard (empty: it did not), and whether it had
  // already updated the weights.
  std::string trip_;
  bool trip_after_update_ = false;
  double last_update_ratio_ = 0.0;                            // the last update's |new - old| / |old| (0: not measured)
  float last_val_ = std::numeric_limits<float>::quiet_NaN();  // this call's last validation loss
  // Judges the state about to be checkpointed at `step` by the loss of the batch the next step
  // trains on (its drop of skipped batches included); empty when it passes, else why not.
  std::string judge_next_batch(std::int64_t step);
  // Whether the validation loss at a step passed (empty) or tripped (why), against last_val_.
  std::string judge_validation(float loss) const;
  // Against the mean of up to kLossWindow previous steps (none yet: no spike): empty, or why
  // `loss` is a spike, as the rest of a sentence whose subject is the loss (" is more than ...").
  std::string loss_spike(double loss) const;
  static constexpr int kLossWindow = 16;
  float recent_losses_[kLossWindow] = {};
  int recent_count_ = 0;  // losses in the window (up to kLossWindow)
  int recent_next_ = 0;   // where the next one goes
  float validate(std::int64_t step);
  // Writes the checkpoint of `step`, recorded confirmed when `unconfirmed` (why not) is empty.
  std::string checkpoint(std::int64_t step, const std::string& unconfirmed);
  void print_default_header(const TrainStart& start);
  // Data-parallel: fails on every rank unless all ranks hold rank 0's configuration, data position
  // and weights.
  void check_ranks_agree();
  // Data-parallel: every rank's mean step and exposed communication time, printed by rank 0.
  void print_comm_summary(const TrainResult& result, std::int64_t timed_steps);
  std::vector<double> comm_summary_;

  TrainerOptions o_;
  TrainerHooks hooks_;
  ParameterStore* params_ = nullptr;
  ParameterStore* grads_ = nullptr;
  ForwardBackward forward_backward_;
  std::function<float()> forward_validation_;
  Data data_;
  std::unique_ptr<AdamW> opt_;        // one process
  std::unique_ptr<DataParallel> dp_;  // data-parallel: gradients, optimizer (replicated or sharded)
  bool rank0_ = true;                 // prints, logs and writes checkpoints
  std::unique_ptr<Arena> arena_;
  std::size_t arena_planned_ = 0;
  std::int64_t step_ = 0;
  std::string resumed_from_;
  bool grads_zero_ = true;  // the gradient store holds zeros: as made, then after every AdamW step
  struct Output;
  std::unique_ptr<Output> out_;
};

// A Trainer for the adgen entry `Entry` (`<loss>_Entry`, generated): owns the gradient store and
// the entry's record; the model and its parameter store stay the caller's.
template <class Entry>
class Trainer final : public TrainLoop {
 public:
  using Model = typename Entry::Model;
  using Inputs = typename Entry::Inputs;

  Trainer(const Model& model, ParameterStore& params, BatchSource<Inputs>& train, BatchSource<Inputs>* val,
          TrainerOptions options, TrainerHooks hooks = {})
      : TrainLoop(std::move(options), std::move(hooks)),
        model_(model),
        train_(train),
        val_(val),
        grad_(adgen::make_grad(model)) {
    Data d;
    d.state = [this] { return train_.state(); };
    d.set_state = [this](const DataLoaderState& s) { train_.set_state(s); };
    d.skip = [this] { (void)train_.next(); };
    d.train_loss = [this] { return Entry::loss(model_, train_.next()); };
    d.items_per_batch = train_.items_per_batch();
    d.has_val = val_ != nullptr;
    if (val_) {
      d.reset_val = [this] { val_->reset(); };
      d.val_per_epoch = val_->batches_per_epoch();
    }
    attach(
        params, grad_.store,
        [this](float d_loss, StepTimes* times) {
          const Inputs& in = train_.next();
          if (times == nullptr) {
            const float loss = Entry::fwd(model_, in, saved_);
            Entry::bwd(model_, in, saved_, d_loss, &grad_.grad);
            return loss;
          }
          const auto t0 = std::chrono::steady_clock::now();
          const float loss = Entry::fwd(model_, in, saved_);
          const auto t1 = std::chrono::steady_clock::now();
          Entry::bwd(model_, in, saved_, d_loss, &grad_.grad);
          times->forward += std::chrono::duration<double>(t1 - t0).count();
          times->backward += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
          return loss;
        },
        [this] { return Entry::loss(model_, val_->next()); }, std::move(d),
        [this](std::uintptr_t from, float* to, std::size_t floats) {
          const auto move = [&](Tensor& t) {
            const auto at = reinterpret_cast<std::uintptr_t>(t.raw());
            if (at >= from && at < from + floats * sizeof(float)) t.bind(to + (at - from) / sizeof(float));
          };
          // The model is the caller's; its tensors' storage moves with the store they are bound to.
          llmcc::for_each_parameter(const_cast<Model&>(model_), [&](const std::string&, Tensor& t) { move(t); });
          grad_.grad.for_each_pair(model_, "", [&](const std::string&, const Tensor&, Tensor& g) { move(g); });
        });
  }

  // The data-parallel state goes first: it moves the gradient store (a member of this class) and
  // the model's tensors back from shared memory, so it must not outlive them.
  ~Trainer() override { release_data_parallel(); }

  ParameterStore& grads() { return grad_.store; }

 private:
  const Model& model_;
  BatchSource<Inputs>& train_;
  BatchSource<Inputs>* val_;
  adgen::GradBuffer<typename Entry::Grad> grad_;
  typename Entry::Saved saved_;  // kept across steps: a warm step allocates no records
};

// The step arena a step needs: runs `step` once with a probing arena as the current arena (its
// reservation is address space only) and returns the high-water mark. Throws llmcc::Error naming
// `what` when the step needs more than the memory available.
std::size_t measure_step_arena(const std::function<void()>& step, const std::string& what);
// The capacity to reserve for a measured high-water mark: a sixteenth more, rounded up to 1 MiB.
std::size_t arena_capacity_for(std::size_t high_water);

// The evaluation every caller shares (TrainLoop::evaluate, `llmcc eval`): the sum of
// `next_loss()` over `batches` calls, each a forward of the next batch in `arena` (reset before
// each call and after the last). The caller divides (and sums over ranks first).
double sum_of_losses(std::int64_t batches, Arena& arena, const std::function<float()>& next_loss);

}  // namespace llmcc
