#include "llmcc/train/schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "llmcc/error.h"

namespace llmcc {

void LrSchedule::validate() const {
  if (warmup_steps < 0 || max_steps < warmup_steps) {
    fail("schedule", "need 0 <= warmup_steps <= max_steps, got warmup_steps=" + std::to_string(warmup_steps) +
                         " max_steps=" + std::to_string(max_steps));
  }
  if (!(max_lr >= 0.0) || !(min_lr >= 0.0)) {
    fail("schedule",
         "learning rates must be >= 0, got max_lr=" + std::to_string(max_lr) + " min_lr=" + std::to_string(min_lr));
  }
}

float LrSchedule::lr(std::int64_t step) const {
  validate();
  if (step < warmup_steps) {
    return static_cast<float>(max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1));
  }
  if (step > max_steps) return static_cast<float>(min_lr);
  const double r = max_steps == warmup_steps
                       ? 1.0
                       : static_cast<double>(step - warmup_steps) / static_cast<double>(max_steps - warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));
  return static_cast<float>(min_lr + coeff * (max_lr - min_lr));
}

}  // namespace llmcc
