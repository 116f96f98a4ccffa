// AdamW (Loshchilov and Hutter) on flat parameter stores, with PyTorch's torch.optim.AdamW
// update (amsgrad off). For step t = 1, 2, ... and each element, in float:
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p * (1 - lr * weight_decay)          only for tensors with ndim >= 2 (matrices,
//                                            embeddings); biases and layernorm gains are not decayed
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// with the bias corrections 1 - beta^t computed in double. params, grads, m and v are stores of
// one layout (ParameterStore::like()); m and v start at zero. One pass over the flat buffers in
// one OpenMP region, a vectorised inner loop; the result does not depend on the thread count.
//
//   AdamW opt(params, {.weight_decay = 0.1f});
//   for (...) { grads.zero(); loss_grad(...); opt.step(params, grads, schedule.lr(step)); }
//
// A training loop whose gradient store starts zero (ParameterStore's constructor zeroes it) can
// instead let the step zero the gradient in the same pass, saving the separate pass of
// grads.zero():
//
//   for (...) { loss_grad(...); opt.step_zero_grads(params, grads, schedule.lr(step)); }
#pragma once

#include <cstddef>
#include <cstdint>

#include "llmcc/parameters.h"

namespace llmcc {

// PyTorch's defaults.
struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

// One AdamW step t (t >= 1: the number of steps taken including this one) with learning rate
// lr. Returns whether the updated parameters and both moments are all finite (checked in the
// same pass). Throws llmcc::Error if the four stores' layouts differ or t < 1.
bool adamw_step(ParameterStore& params, const ParameterStore& grads, ParameterStore& m, ParameterStore& v,
                const AdamWConfig& config, float lr, std::int64_t t);

// The size of one step, measured in its pass: sums of squares of the update (new minus old
// weights) and of the weights before it. ratio() is |update| / |weights| (0 when the weights were
// all zero): the divergence guard's measure of an update that replaced the weights.
struct UpdateSize {
  double update_sq = 0.0;
  double weight_sq = 0.0;
  double ratio() const;
};

// adamw_step, then grads are zero (in the same pass over memory). The parameters, m and v are
// bit-for-bit those of adamw_step. With size non-null, the step's sums are added to it.
// grad_scale multiplies each gradient as it is read (in float, as scale_grads would before the
// step, to the same bits): clipping (grad_clip.h's clip_factor) costs no pass of its own.
bool adamw_step_zero_grads(ParameterStore& params, ParameterStore& grads, ParameterStore& m, ParameterStore& v,
                           const AdamWConfig& config, float lr, std::int64_t t, UpdateSize* size = nullptr,
                           float grad_scale = 1.0f);

// One AdamW step t on a part of the flat buffers: elements [begin, end) of params' layout, whose
// gradients and moments are g, m and v (end - begin floats each, g[0] for element begin). A
// data-parallel rank updates its shard of the parameters this way (ZeRO-1). Each element's
// arithmetic is adamw_step's, so the shards of N ranks give adamw_step's bits.
// With zero_grads, g is left zero (in the same pass); with size non-null, the range's sums are
// added to it; grad_scale is adamw_step_zero_grads'.
bool adamw_step_range(ParameterStore& params, std::size_t begin, std::size_t end, float* g, float* m, float* v,
                      const AdamWConfig& config, float lr, std::int64_t t, bool zero_grads = false,
                      UpdateSize* size = nullptr, float grad_scale = 1.0f);

// One AdamW step t on one tensor of n elements, for optimizers that keep each tensor apart (the
// PyTorch extension's): p, g, m and v hold n floats each, p is decayed when `decay` (adamw_step
// decays the tensors with ndim >= 2). Each element's arithmetic is adamw_step's; parallel over
// the elements once there are enough. Returns whether p, m and v are all finite.
bool adamw_step_tensor(float* p, const float* g, float* m, float* v, std::int64_t n, bool decay,
                       const AdamWConfig& config, float lr, std::int64_t t);

// AdamW with its moments and step count; m() and v() are what a checkpoint saves.
class AdamW {
 public:
  AdamW(const ParameterStore& params, const AdamWConfig& config = {});

  // Takes step t() + 1 and counts it; returns whether parameters and moments are all finite.
  bool step(ParameterStore& params, const ParameterStore& grads, float lr);
  // The same step, leaving grads zero for the next step's backward to accumulate into; with size
  // non-null, the step's size is added to it; the gradient read as grad_scale times its value
  // (adamw_step_zero_grads).
  bool step_zero_grads(ParameterStore& params, ParameterStore& grads, float lr, UpdateSize* size = nullptr,
                       float grad_scale = 1.0f);

  std::int64_t t() const { return t_; }   // steps taken
  void set_t(std::int64_t t) { t_ = t; }  // for resuming
  const AdamWConfig& config() const { return config_; }
  ParameterStore& m() { return m_; }
  ParameterStore& v() { return v_; }
  const ParameterStore& m() const { return m_; }
  const ParameterStore& v() const { return v_; }

 private:
  AdamWConfig config_;
  ParameterStore m_, v_;
  std::int64_t t_ = 0;
};

// Throws llmcc::Error("[where] ...") naming the first tensor whose name, shape or offset differs.
void check_same_layout(const ParameterStore& a, const ParameterStore& b, const char* where, const char* a_name,
                       const char* b_name);

}  // namespace llmcc
