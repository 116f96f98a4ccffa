// Learning-rate schedule: linear warmup, then cosine decay to min_lr, then constant min_lr
// (nanoGPT's get_lr). For the 0-based index `step` of the optimizer step about to be taken:
//   step <  warmup_steps:              max_lr * (step + 1) / (warmup_steps + 1)
//   warmup_steps <= step <= max_steps: min_lr + 0.5 * (1 + cos(pi * r)) * (max_lr - min_lr),
//                                      r = (step - warmup_steps) / (max_steps - warmup_steps)
//                                      (r = 1 when max_steps == warmup_steps)
//   step >  max_steps:                 min_lr
// computed in double and returned as float. So warmup never uses lr 0, the first step after
// warmup uses max_lr, and step max_steps uses min_lr. The schedule is a pure function of the
// step, so a checkpoint's step is its whole position.
#pragma once

#include <cstdint>

namespace llmcc {

struct LrSchedule {
  double max_lr = 6e-4;
  double min_lr = 6e-5;
  std::int64_t warmup_steps = 0;
  std::int64_t max_steps = 0;

  // Throws llmcc::Error unless 0 <= warmup_steps <= max_steps and both rates are >= 0.
  void validate() const;
  float lr(std::int64_t step) const;
};

}  // namespace llmcc
