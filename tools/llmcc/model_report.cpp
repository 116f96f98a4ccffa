#include "model_report.h"

#include <cstdio>

namespace llmcc::cli {

MemoryPlan memory_plan(const ModelConfig& config, int B, int T, std::int64_t trainable) {
  MemoryPlan p;
  p.parameters = config.parameter_count() + (trainable >= 0 ? trainable : 0);
  const std::size_t all = static_cast<std::size_t>(config.parameter_count()) * sizeof(float);
  const std::size_t trained = trainable >= 0 ? static_cast<std::size_t>(trainable) * sizeof(float) : all;
  p.frozen_bytes = trainable >= 0 ? all : 0;
  p.params_bytes = trained;
  p.grads_bytes = trained;
  p.optimizer_bytes = 2 * trained;
  p.B = B;
  p.T = T;
  return p;
}

std::string describe(const MemoryPlan& p) {
  auto gib = [](std::size_t bytes) {
    char buf[32];
    const double g = static_cast<double>(bytes) / double(1 << 30);
    std::snprintf(buf, sizeof buf, g >= 10 ? "%.1f GiB" : (g >= 0.1 ? "%.2f GiB" : "%.3f GiB"), g);
    return std::string(buf);
  };
  char count[32];
  const double n = static_cast<double>(p.parameters);
  if (n >= 1e9)
    std::snprintf(count, sizeof count, "%.2fG", n / 1e9);
  else
    std::snprintf(count, sizeof count, "%.2fM", n / 1e6);
  const std::string weights = p.frozen_bytes > 0 ? "frozen base " + gib(p.frozen_bytes) +
                                                       (p.frozen_note.empty() ? "" : " (" + p.frozen_note + ")") +
                                                       " + adapters " + gib(p.params_bytes)
                                                 : "weights " + gib(p.params_bytes);
  return std::string(count) + " parameters: " + weights + " + gradients " + gib(p.grads_bytes) + " + AdamW " +
         gib(p.optimizer_bytes) + " + step arena " +
         (p.arena_bytes > 0 ? gib(p.arena_bytes) + " (B " + std::to_string(p.B) + " x T " + std::to_string(p.T) +
                                  ") = " + gib(p.total())
                            : std::string("(B ") + std::to_string(p.B) + " x T " + std::to_string(p.T) +
                                  ", measured when training starts)");
}

std::int64_t warn_nonfinite_weights(const ParameterStore& params, const std::string& path, const char* cmd) {
  const ParameterStore::BadValues bad = params.bad_values();
  if (bad.count > 0)
    std::fprintf(stderr,
                 "%s: warning: %s holds %lld non-finite weights, the first in %s; what it computes is "
                 "meaningless (a diverged run? resume from an earlier checkpoint)\n",
                 cmd, path.c_str(), static_cast<long long>(bad.count), bad.first_tensor.c_str());
  return bad.count;
}

}  // namespace llmcc::cli
