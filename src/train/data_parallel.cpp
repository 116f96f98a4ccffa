#include "llmcc/train/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>

#include "llmcc/error.h"
#include "llmcc/profile.h"
#include "llmcc/train/grad_clip.h"
#include "kernels/cpu/parallel.h"

namespace llmcc {
namespace {

constexpr const char* kWhere = "data_parallel";
// Slices are cut at whole cache lines, so each rank's AdamW runs on aligned, full vectors.
constexpr std::size_t kSliceAlign = 16;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

struct DataParallel::Bucket {
  std::size_t lo = 0, hi = 0;  // flat float range [lo, hi) of the stores
  int tensors = 0;             // tensors in the bucket
  int pending = 0;             // this step: tensors not yet announced final
  // zero_stage 1: rank r's slice is [lo + displs[r], lo + displs[r] + counts[r]); this rank's
  // reduced gradient and moments are at shard_off in the shard buffers.
  std::vector<int> counts, displs;
  std::size_t shard_off = 0;
  dist::Request request;
  bool started = false;
  Clock::time_point started_at;
};

DataParallel::DataParallel(dist::Communicator& comm, ParameterStore& params, ParameterStore& grads,
                           const AdamWConfig& adamw, DataParallelOptions options, RebindTensors rebind)
    : comm_(comm), params_(params), grads_(grads), adamw_(adamw), options_(options), rebind_(std::move(rebind)) {
  if (options_.zero_stage != 0 && options_.zero_stage != 1)
    fail(kWhere, "zero_stage must be 0 (replicated optimizer) or 1 (sharded, ZeRO-1), got " +
                     std::to_string(options_.zero_stage));
  check_same_layout(params, grads, kWhere, "params", "grads");
  const std::size_t count = params.count();
  if (count == 0) fail(kWhere, "the model has no parameters");
  const std::size_t bucket_floats = std::max<std::size_t>(options_.bucket_bytes / sizeof(float), 1);
  // Buckets of whole tensors from the last tensor back: the order the backward finishes them in.
  bucket_of_tensor_.assign(count, 0);
  tensor_done_.assign(count, 0);
  std::size_t i = count;
  while (i > 0) {
    Bucket b;
    b.hi = i < count ? params.offset(i) : params.size();
    std::size_t floats = 0;
    do {
      --i;
      floats = b.hi - params.offset(i);
      bucket_of_tensor_[i] = buckets_.size();
      ++b.tensors;
    } while (i > 0 && floats < bucket_floats);
    b.lo = params.offset(i);
    buckets_.push_back(std::move(b));
  }
  const int N = comm_.size();
  std::size_t shard = 0;
  for (Bucket& b : buckets_) {
    const std::size_t len = b.hi - b.lo;
    if (len > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      fail(kWhere, "a tensor of " + std::to_string(len) + " floats is more than one collective can carry");
    const std::size_t per_rank = ((len + N - 1) / N + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
    b.counts.resize(static_cast<std::size_t>(N));
    b.displs.resize(static_cast<std::size_t>(N));
    for (int r = 0; r < N; ++r) {
      const std::size_t from = std::min(len, per_rank * static_cast<std::size_t>(r));
      b.displs[r] = static_cast<int>(from);
      b.counts[r] = static_cast<int>(std::min(len, from + per_rank) - from);
    }
    b.shard_off = shard;
    shard += static_cast<std::size_t>(b.counts[comm_.rank()]);
  }
  if (options_.zero_stage == 1) {
    shard_m_.assign(shard, 0.0f);
    shard_v_.assign(shard, 0.0f);
    if (options_.node_shared_memory && comm_.one_node() && rebind_)
      share_memory();
    else
      shard_grad_.assign(shard, 0.0f);
  } else {
    replicated_ = std::make_unique<AdamW>(params, adamw_);
  }
}

DataParallel::~DataParallel() {
  // On an error the job is being ended (llmcc's main aborts it): waiting for collectives or
  // freeing shared memory, both of which need the other ranks, could hang instead.
  if (std::uncaught_exceptions() > 0) {
    (void)shared_grads_.release();
    (void)shared_params_.release();
    return;
  }
  for (Bucket& b : buckets_)
    if (b.request.pending()) comm_.wait(b.request);
  if (shares_memory()) unshare_memory();
}

void DataParallel::share_memory() {
  const std::size_t bytes = grads_.size() * sizeof(float);
  shared_grads_ = std::make_unique<dist::NodeSharedMemory>(comm_, bytes);
  shared_params_ = std::make_unique<dist::NodeSharedMemory>(comm_, comm_.rank() == 0 ? bytes : 0);
  for (int r = 0; r < comm_.size(); ++r) peer_grads_.push_back(static_cast<float*>(shared_grads_->base(r)));
  // This rank's gradients (zero: the store is zero between steps) into its part.
  const auto old_grads = reinterpret_cast<std::uintptr_t>(grads_.data());
  grads_.relocate(peer_grads_[static_cast<std::size_t>(comm_.rank())]);
  rebind_(old_grads, grads_.data(), grads_.size());
  // Rank 0's weights for everyone (every rank holds the same values).
  auto* weights = static_cast<float*>(shared_params_->base(0));
  const auto old_params = reinterpret_cast<std::uintptr_t>(params_.data());
  if (comm_.rank() == 0) params_.relocate(weights);
  comm_.barrier();
  if (comm_.rank() != 0) params_.relocate(weights, false);
  rebind_(old_params, params_.data(), params_.size());
}

void DataParallel::unshare_memory() {
  comm_.barrier();  // no rank still reads another's memory
  for (ParameterStore* store : {&grads_, &params_}) {
    const auto old = reinterpret_cast<std::uintptr_t>(store->data());
    store->relocate(nullptr);
    rebind_(old, store->data(), store->size());
  }
  comm_.barrier();
  shared_grads_.reset();
  shared_params_.reset();
}

double DataParallel::reduce_shared_slices() {
  LLMCC_PROFILE("data_parallel.reduce");
  const auto me = static_cast<std::size_t>(comm_.rank());
  const std::size_t n = peer_grads_.size();
  double squares = 0.0;
  for (const Bucket& b : buckets_) {
    const std::size_t from = b.lo + static_cast<std::size_t>(b.displs[me]);
    const auto count = static_cast<std::int64_t>(b.counts[me]);
    if (count == 0) continue;
    float* own = peer_grads_[me] + from;
    // Sums in rank order, ((g0 + g1) + g2) + ..., whichever rank forms them, a block at a time
    // in a buffer that stays in L1; every other rank's copy is zeroed as it is read, ready for
    // its next backward.
    cpu::parallel_for(
        count, count >= (std::int64_t{1} << 16),
        [&](std::int64_t begin, std::int64_t end) {
          constexpr std::int64_t kBlock = 1024;
          alignas(64) float sum[kBlock];
          for (std::int64_t b0 = begin; b0 < end; b0 += kBlock) {
            const std::int64_t len = std::min(kBlock, end - b0);
            const float* first = peer_grads_[0] + from + b0;
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) sum[i] = first[i];
            for (std::size_t r = 1; r < n; ++r) {
              const float* g = peer_grads_[r] + from + b0;
#pragma omp simd
              for (std::int64_t i = 0; i < len; ++i) sum[i] += g[i];
            }
            for (std::size_t r = 0; r < n; ++r) {
              float* g = peer_grads_[r] + from + b0;
              if (r == me) {
                std::memcpy(g, sum, static_cast<std::size_t>(len) * sizeof(float));
              } else {
                std::memset(g, 0, static_cast<std::size_t>(len) * sizeof(float));
              }
            }
          }
        },
        cpu::kLineFloats);
    squares += sum_of_squares(own, static_cast<std::size_t>(count));
  }
  return squares;
}

std::size_t DataParallel::buckets() const { return buckets_.size(); }

std::size_t DataParallel::optimizer_floats() const {
  return replicated_ ? 2 * params_.size() : shard_m_.size() + shard_v_.size();
}

void DataParallel::begin_backward() {
  for (Bucket& b : buckets_) {
    b.pending = b.tensors;
    b.started = false;
  }
  std::fill(tensor_done_.begin(), tensor_done_.end(), 0);
  times_ = CommTimes{};
  timeline_.resize(buckets_.size());
  step_began_ = Clock::now();
  in_backward_ = !shares_memory();  // shared memory is summed after the backward
}

void DataParallel::grad_final(const Tensor& grad) {
  if (!in_backward_) return;  // a backward outside a step (planning, evaluation)
  const float* p = grad.f32();
  const float* base = grads_.data();
  if (p < base || p >= base + grads_.size())
    fail(kWhere,
         "a gradient announced final lies outside the gradient store (a model whose gradients are not the "
         "store's tensors?)");
  const auto at = static_cast<std::size_t>(p - base);
  // The tensor that starts at `at` (tensors start at their offsets, in order).
  std::size_t lo = 0, hi = params_.count();
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    (params_.offset(mid) <= at ? lo : hi) = mid;
  }
  if (params_.offset(lo) != at) fail(kWhere, "a gradient announced final does not start a tensor of the store");
  if (tensor_done_[lo]) fail(kWhere, "the gradient of " + params_.name(lo) + " was announced final twice in one step");
  tensor_done_[lo] = 1;
  const auto t0 = Clock::now();
  Bucket& b = buckets_[bucket_of_tensor_[lo]];
  if (--b.pending == 0) start(b);
  progress();
  times_.progress_ms += ms_since(t0);
}

void DataParallel::start(Bucket& b) {
  LLMCC_PROFILE("data_parallel.start");
  b.started = true;
  b.started_at = Clock::now();
  timeline_[static_cast<std::size_t>(&b - buckets_.data())] = {
      static_cast<double>(b.hi - b.lo) * sizeof(float),
      std::chrono::duration<double, std::milli>(b.started_at - step_began_).count()};
  if (options_.zero_stage == 1)
    b.request = comm_.start_reduce_scatter(grads_.data() + b.lo, shard_grad_.data() + b.shard_off, b.counts.data());
  else
    b.request = comm_.start_allreduce(grads_.data() + b.lo, b.hi - b.lo);
  times_.bytes += static_cast<double>(b.hi - b.lo) * sizeof(float);
  if (!b.request.pending()) times_.in_flight_ms += ms_since(b.started_at);
}

void DataParallel::progress() {
  for (Bucket& b : buckets_) {
    if (b.request.pending() && comm_.test(b.request)) times_.in_flight_ms += ms_since(b.started_at);
  }
}

void DataParallel::wait_all() {
  for (Bucket& b : buckets_) {
    if (!b.request.pending()) continue;
    comm_.wait(b.request);
    times_.in_flight_ms += ms_since(b.started_at);
  }
}

void DataParallel::finish_backward() {
  LLMCC_PROFILE("data_parallel.wait");
  in_backward_ = false;
  const auto t0 = Clock::now();
  backward_end_ms_ = std::chrono::duration<double, std::milli>(t0 - step_began_).count();
  if (shares_memory()) {
    comm_.barrier();  // every rank's gradients are complete
    times_.exposed_ms += ms_since(t0);
    return;
  }
  // Buckets the backward did not announce (a model without notifications, say) start now, in
  // bucket order on every rank.
  for (Bucket& b : buckets_)
    if (!b.started) start(b);
  wait_all();
  if (options_.zero_stage == 1) {
    // The full store's reduced parts now live in the shard; the store is zeroed for the next
    // step's accumulation.
    grads_.zero();
  }
  times_.exposed_ms += ms_since(t0);
}

double DataParallel::grad_norm() {
  LLMCC_PROFILE("grad_norm");
  if (shares_memory()) {
    // The sums are the communication here, done by this rank's thread instead of its compute:
    // all of it is exposed.
    const auto t0 = Clock::now();
    const double norm = std::sqrt(comm_.sum(reduce_shared_slices()));
    times_.in_flight_ms += ms_since(t0);
    times_.exposed_ms += ms_since(t0);
    return norm;
  }
  // ZeRO-1: this rank's shard of the summed gradient; otherwise the whole, on every rank.
  if (options_.zero_stage == 1) return std::sqrt(comm_.sum(sum_of_squares(shard_grad_.data(), shard_grad_.size())));
  return std::sqrt(sum_of_squares(grads_.data(), grads_.size()));
}

bool DataParallel::step(float lr, UpdateSize* size, float grad_scale) {
  ++t_;
  if (options_.zero_stage == 0) {
    // Every rank updates the whole store: its size is the step's.
    replicated_->set_t(t_ - 1);
    const bool finite = replicated_->step_zero_grads(params_, grads_, lr, size, grad_scale);
    return comm_.all(finite);
  }
  bool finite = true;
  UpdateSize mine;
  for (Bucket& b : buckets_) {
    const auto r = static_cast<std::size_t>(comm_.rank());
    const std::size_t from = b.lo + static_cast<std::size_t>(b.displs[r]);
    const std::size_t to = from + static_cast<std::size_t>(b.counts[r]);
    if (from == to) continue;
    // Shared memory: the summed gradient is in this rank's store, zeroed in the same pass.
    float* g = shares_memory() ? grads_.data() + from : shard_grad_.data() + b.shard_off;
    finite &= adamw_step_range(params_, from, to, g, shard_m_.data() + b.shard_off, shard_v_.data() + b.shard_off,
                               adamw_, lr, t_, shares_memory(), size ? &mine : nullptr, grad_scale);
  }
  // Whether every rank's slices are finite and, when asked, the step's size: one collective, a
  // sum of (non-finite ranks, the two sums of squares).
  const auto agree = [&] {
    if (!size) return comm_.all(finite);
    double sums[3] = {finite ? 0.0 : 1.0, mine.update_sq, mine.weight_sq};
    comm_.sum(sums, 3);
    size->update_sq += sums[1];
    size->weight_sq += sums[2];
    return sums[0] == 0.0;
  };
  if (shares_memory()) {
    // No rank returns from this before every rank has updated its slices of the shared weights.
    const auto t0 = Clock::now();
    finite = agree();
    times_.exposed_ms += ms_since(t0);
    return finite;
  }
  // The updated slices to every rank, all buckets in flight at once.
  const auto t0 = Clock::now();
  {
    LLMCC_PROFILE("data_parallel.allgather");
    for (Bucket& b : buckets_) {
      b.started_at = Clock::now();
      b.request = comm_.start_allgather(params_.data() + b.lo, b.counts.data(), b.displs.data());
      times_.bytes += static_cast<double>(b.hi - b.lo) * sizeof(float);
    }
    wait_all();
  }
  times_.exposed_ms += ms_since(t0);
  return agree();
}

void DataParallel::gather_optimizer(AdamW* whole, int root) {
  const bool here = comm_.rank() == root;
  if (here && whole == nullptr) fail(kWhere, "gather_optimizer: the root rank needs a whole AdamW to fill");
  if (here) whole->set_t(t_);
  if (options_.zero_stage == 0) {
    if (here) {
      std::memcpy(whole->m().data(), replicated_->m().data(), params_.size() * sizeof(float));
      std::memcpy(whole->v().data(), replicated_->v().data(), params_.size() * sizeof(float));
    }
    return;
  }
  for (int moment = 0; moment < 2; ++moment) {
    const std::vector<float>& shard = moment == 0 ? shard_m_ : shard_v_;
    float* store = here ? (moment == 0 ? whole->m().data() : whole->v().data()) : nullptr;
    for (Bucket& b : buckets_) {
      comm_.gather(shard.data() + b.shard_off, store ? store + b.lo : nullptr, b.counts.data(), b.displs.data(), root);
    }
  }
}

void DataParallel::scatter_optimizer(const AdamW& whole) {
  check_same_layout(params_, whole.m(), kWhere, "params", "adamw.m");
  t_ = whole.t();
  if (options_.zero_stage == 0) {
    std::memcpy(replicated_->m().data(), whole.m().data(), params_.size() * sizeof(float));
    std::memcpy(replicated_->v().data(), whole.v().data(), params_.size() * sizeof(float));
    replicated_->set_t(t_);
    return;
  }
  const auto r = static_cast<std::size_t>(comm_.rank());
  for (const Bucket& b : buckets_) {
    const std::size_t from = b.lo + static_cast<std::size_t>(b.displs[r]);
    const auto n = static_cast<std::size_t>(b.counts[r]) * sizeof(float);
    std::memcpy(shard_m_.data() + b.shard_off, whole.m().data() + from, n);
    std::memcpy(shard_v_.data() + b.shard_off, whole.v().data() + from, n);
  }
}

}  // namespace llmcc
