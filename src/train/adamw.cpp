#include "llmcc/train/adamw.h"

#include <algorithm>
#include <cmath>

#include "llmcc/error.h"
#include "llmcc/profile.h"

namespace llmcc {
namespace {

// Elements [0, n) of one tensor. The loop is branch-free and vectorises (sqrt and divide
// included) when math functions may skip errno (-fno-math-errno); without it GCC 12 keeps
// sqrt scalar, which costs little here because the loop is bound by memory (28 bytes per element).
void adamw_span(
    float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
    std::int64_t n, float beta1, float beta2, float eps, float decay_factor, float step_size,
    float bc2_sqrt) {
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + one_minus_beta1 * gi;
    const float vi = beta2 * v[i] + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = p[i] * decay_factor - step_size * (mi / denom);
  }
}

// One tensor, OpenMP over chunks of kChunk elements. decay_factor is 1 - lr * weight_decay, or 1
// for undecayed tensors.
constexpr std::int64_t kChunk = 1 << 14;

void adamw_tensor(float* p, const float* g, float* m, float* v, std::int64_t n, float beta1,
                  float beta2, float eps, float decay_factor, float step_size, float bc2_sqrt) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk;
    const std::int64_t len = std::min(kChunk, n - begin);
    adamw_span(p + begin, g + begin, m + begin, v + begin, len, beta1, beta2, eps, decay_factor,
               step_size, bc2_sqrt);
  }
}

}  // namespace

void check_same_layout(const ParameterStore& a, const ParameterStore& b, const char* where,
                       const char* a_name, const char* b_name) {
  if (a.count() != b.count() || a.size() != b.size()) {
    fail(where, std::string(b_name) + " has " + std::to_string(b.count()) + " tensors (" +
                    std::to_string(b.size()) + " floats), " + a_name + " has " +
                    std::to_string(a.count()) + " (" + std::to_string(a.size()) +
                    "); make it with " + a_name + ".like()");
  }
  for (std::size_t i = 0; i < a.count(); ++i) {
    if (a.shape(i) != b.shape(i) || a.offset(i) != b.offset(i) || a.name(i) != b.name(i)) {
      fail(where, std::string(b_name) + " tensor " + std::to_string(i) + " is '" + b.name(i) +
                      "' " + b.shape(i).str() + ", " + a_name + " has '" + a.name(i) + "' " +
                      a.shape(i).str() + "; make it with " + a_name + ".like()");
    }
  }
}

void adamw_step(ParameterStore& params, const ParameterStore& grads, ParameterStore& m,
                ParameterStore& v, const AdamWConfig& config, float lr, std::int64_t t) {
  LLMCC_PROFILE("adamw.step");
  if (t < 1) fail("adamw", "step t counts from 1, got " + std::to_string(t));
  check_same_layout(params, grads, "adamw", "params", "grads");
  check_same_layout(params, m, "adamw", "params", "m");
  check_same_layout(params, v, "adamw", "params", "v");
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * config.weight_decay);
  for (std::size_t i = 0; i < params.count(); ++i) {
    const std::size_t off = params.offset(i);
    const std::int64_t n = params.shape(i).numel();
    adamw_tensor(params.data() + off, grads.data() + off, m.data() + off, v.data() + off, n,
                 config.beta1, config.beta2, config.eps, params.shape(i).ndim() >= 2 ? decay : 1.0f,
                 step_size, bc2_sqrt);
  }
}

AdamW::AdamW(const ParameterStore& params, const AdamWConfig& config)
    : config_(config), m_(params.like()), v_(params.like()) {}

void AdamW::step(ParameterStore& params, const ParameterStore& grads, float lr) {
  adamw_step(params, grads, m_, v_, config_, lr, t_ + 1);
  ++t_;
}

}  // namespace llmcc
