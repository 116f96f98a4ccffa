// bf16 copies of a model's matrices (llmcc/bf16_weights.h).
#include "llmcc/bf16_weights.h"

#include "kernels/cpu/bf16.h"

namespace llmcc {

namespace {
const Bf16Weights* g_active = nullptr;
}  // namespace

Bf16Weights::Bf16Weights(const ParameterStore& params) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < params.count(); ++i)
    if (params.shape(i).ndim() == 2) total += static_cast<std::size_t>(params.shape(i).numel());
  bits_.resize(total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < params.count(); ++i) {
    if (params.shape(i).ndim() != 2) continue;
    const Tensor t = params.tensor(i);
    cpu::floats_to_bf16(t.f32(), bits_.data() + at, t.numel());
    at_.emplace(t.f32(), Copy{at, t.shape()[0], t.shape()[1]});
    at += static_cast<std::size_t>(t.numel());
  }
}

const std::uint16_t* Bf16Weights::copy_of(const float* w, std::int64_t rows, std::int64_t cols) const {
  const auto it = at_.find(w);
  if (it == at_.end() || it->second.cols != cols || it->second.rows < rows) return nullptr;
  return bits_.data() + it->second.at;
}

Bf16WeightsScope::Bf16WeightsScope(const Bf16Weights& weights) : previous_(g_active) { g_active = &weights; }
Bf16WeightsScope::~Bf16WeightsScope() { g_active = previous_; }

const Bf16Weights* active_bf16_weights() { return g_active; }

}  // namespace llmcc
