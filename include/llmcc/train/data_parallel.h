// DataParallel: one model trained by the ranks of a Communicator, each on its part of every
// global batch (docs/distributed.md).
//
// Each rank runs the same forward and backward on its own rows and accumulates its gradient
// scaled by 1 / ranks, so the ranks' gradients sum to the gradient of the global batch's mean
// loss. The sum is formed in buckets: contiguous ranges of the flat gradient store of about
// bucket_bytes, laid out from the store's end, since the backward produces the last layers'
// gradients first. The generated backward says when each parameter's gradient is final
// (adgen::GradFinalListener, installed around the last micro-batch's backward); a bucket whose
// gradients are all final starts its collective at once, non-blocking, and every later
// notification tests the collectives in flight, so they progress while the backward runs. What
// is still in flight when the backward returns is waited for: that wait is the exposed
// communication.
//
//   zero_stage 0: each bucket is all-reduced; every rank then holds the whole gradient and runs the
//                 whole AdamW step on its own copy of the moments (data-parallel with replicated
//                 optimizer state).
//   zero_stage 1: each bucket is reduce-scattered: rank r receives the sum of its part r (a 1/N
//                 slice of every bucket, cut at 16-float boundaries). Rank r owns AdamW's moments
//                 of those slices only, updates the weights there, and the updated slices are
//                 all-gathered into every rank's weights (ZeRO stage 1). The global gradient norm
//                 is the square root of the sum over ranks of each shard's sum of squares.
//
// One machine (zero_stage 1, node_shared_memory, all ranks on one node): collectives through MPI
// copy every byte through shared-memory buffers, on the ranks' own cores, which costs more than
// the step can hide. Instead the ranks share memory: one copy of the weights for the machine, and
// each rank's gradient store in memory the others can read. After the backward the ranks meet at
// a barrier (the exposed time); each then sums its slices over all ranks' stores in rank order
// (zeroing the others' copies as it reads them), takes the norm's share from the sums, and runs
// AdamW on its slices of the shared weights; the all-reduce of the finite flag ends the step.
// Nothing is copied but the sums: the reduction is one pass over each slice, fused with the
// zeroing.
//
// Weights stay identical on every rank (they start equal: one seed, or one checkpoint).
// Checkpoints hold the whole state: gather_optimizer() assembles AdamW's moments on one rank;
// scatter_optimizer() takes each rank's slices from a whole state, so a run resumes with any
// number of ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/dist/communicator.h"
#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"

namespace llmcc {

struct DataParallelOptions {
  int zero_stage = 1;                                // 0 or 1 (see above)
  std::size_t bucket_bytes = std::size_t{16} << 20;  // gradient bytes per collective
  // With ZeRO-1 and every rank on one machine: weights and gradients in memory the ranks share
  // (see "One machine" above) instead of MPI collectives.
  bool node_shared_memory = true;
};

// Rebinds every tensor bound inside [from, from + floats) to the same offset from `to`: the
// model's parameters and its gradient mirror, when DataParallel moves their stores.
using RebindTensors = std::function<void(std::uintptr_t from, float* to, std::size_t floats)>;

// Per-step communication figures of this rank (milliseconds).
struct CommTimes {
  double exposed_ms = 0.0;    // the step waited for collectives (after the backward, the all-gather)
  double in_flight_ms = 0.0;  // summed over collectives: start until seen complete
  // Spent inside MPI during the backward, starting and progressing collectives: on shared memory
  // the copies and sums run there, on the rank's own thread, so this is compute time lost.
  double progress_ms = 0.0;
  double bytes = 0.0;  // gradient and weight bytes this rank's collectives covered
};

class DataParallel final : public adgen::GradFinalListener {
 public:
  // rebind moves the model's tensors when the stores move into shared memory (and back when this
  // object goes).
  DataParallel(dist::Communicator& comm, ParameterStore& params, ParameterStore& grads, const AdamWConfig& adamw,
               DataParallelOptions options, RebindTensors rebind);
  ~DataParallel();

  dist::Communicator& comm() { return comm_; }
  int zero_stage() const { return options_.zero_stage; }
  std::size_t buckets() const;
  // Weights and gradients in memory the ranks of one machine share (see above).
  bool shares_memory() const { return shared_grads_ != nullptr; }
  // AdamW state floats this rank keeps (both moments): the whole store's twice without ZeRO.
  std::size_t optimizer_floats() const;

  // One step's gradient reduction: begin_backward() before the last micro-batch's backward (with
  // this object installed as the thread's adgen::GradFinalListener), finish_backward() after it.
  void begin_backward();
  void grad_final(const Tensor& grad) override;
  void finish_backward();

  // After finish_backward(): the norm of the global batch's gradient.
  double grad_norm();
  // The AdamW step (t counts from 1) on the gradient times grad_scale (clipping: clip_factor of
  // grad_norm()), and the gradient store zeroed; whether every rank's weights and moments are
  // finite. With size non-null it receives the whole step's size (every rank's slices), at no
  // extra collective.
  bool step(float lr, UpdateSize* size = nullptr, float grad_scale = 1.0f);

  std::int64_t t() const { return t_; }
  void set_t(std::int64_t t) { t_ = t; }
  // zero_stage 0: the replicated optimizer. zero_stage 1: moments of this rank's slices only.
  AdamW* replicated_optimizer() { return replicated_.get(); }
  // Assembles the whole AdamW state on `root` into `whole` (made like the parameters; its t is
  // set); other ranks pass null. Every rank must call it.
  void gather_optimizer(AdamW* whole, int root);
  // Takes this rank's state from a whole one (every rank passes the same).
  void scatter_optimizer(const AdamW& whole);

  const CommTimes& last_step_times() const { return times_; }
  // The last step's timeline (MPI collectives only): for each bucket, its bytes and when its
  // collective started, in ms after begin_backward (which comes before the last micro-batch's
  // forward); and when the backward ended. For a model of how much communication can hide.
  struct BucketStart {
    double bytes = 0.0;
    double started_ms = 0.0;
  };
  const std::vector<BucketStart>& last_step_timeline() const { return timeline_; }
  double last_backward_end_ms() const { return backward_end_ms_; }

 private:
  struct Bucket;
  void share_memory();
  void unshare_memory();
  double reduce_shared_slices();
  void start(Bucket& b);
  void progress();
  void wait_all();

  dist::Communicator& comm_;
  ParameterStore& params_;
  ParameterStore& grads_;
  AdamWConfig adamw_;
  DataParallelOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_tensor_;
  std::vector<char> tensor_done_;  // this step: the tensor's gradient was announced final
  bool in_backward_ = false;
  // zero_stage 1: this rank's slices, one after another: reduced gradient and moments.
  std::vector<float> shard_grad_, shard_m_, shard_v_;
  std::unique_ptr<AdamW> replicated_;  // zero_stage 0
  RebindTensors rebind_;
  std::unique_ptr<dist::NodeSharedMemory> shared_grads_, shared_params_;
  std::vector<float*> peer_grads_;  // every rank's gradient store, in rank order
  std::int64_t t_ = 0;
  CommTimes times_;
  std::chrono::steady_clock::time_point step_began_;
  std::vector<BucketStart> timeline_;
  double backward_end_ms_ = 0.0;
};

}  // namespace llmcc
