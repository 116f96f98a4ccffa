#include "llmcc/train/adamw.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "llmcc/error.h"
#include "llmcc/profile.h"

namespace llmcc {
namespace {

// The step's constants, the same for every element but the decay factor.
struct Coefficients {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float grad_scale;  // each gradient is read as grad_scale * g (1: as it is)
};

// Elements [begin, end) of the flat buffers, with one decay factor (1 - lr * weight_decay, or 1
// for undecayed tensors); when zero_grads, g[i] is left 0 after it is read. The loop is
// branch-free and vectorises, sqrt and divisions included (-fno-math-errno, set for the whole
// build), to full-width vsqrtps/vdivps; it is bound by memory (28 bytes per element, 32 when
// zeroing) and the arithmetic is the same per element on every path, so the result does not
// depend on how the buffer is split between threads.
// With `measure`, the span's sums of squares of the update (new minus old weight) and of the
// old weights are added to *size, in float lanes: they judge the step's size, they do not feed
// the weights, so their summation order need not be fixed.
template <bool zero_grads, bool measure = false>
bool adamw_span(float* __restrict p, const float* __restrict g_in, float* __restrict m, float* __restrict v,
                std::int64_t begin, std::int64_t end, const Coefficients& k, float decay_factor,
                UpdateSize* size = nullptr) {
  const float beta1 = k.beta1, beta2 = k.beta2, one_minus_beta1 = k.one_minus_beta1,
              one_minus_beta2 = k.one_minus_beta2, eps = k.eps, step_size = k.step_size, bc2_sqrt = k.bc2_sqrt,
              grad_scale = k.grad_scale;
  // x - x is 0 for every finite x and NaN for NaN and +-Inf: one subtraction and compare per
  // value, in the same pass, tells whether the step left anything non-finite.
  // Only the zeroing variant writes the gradient.
  float* __restrict g = const_cast<float*>(g_in);
  int nonfinite = 0;
  float update_sq = 0.0f, weight_sq = 0.0f;
#pragma omp simd reduction(| : nonfinite) reduction(+ : update_sq, weight_sq)
  for (std::int64_t i = begin; i < end; ++i) {
    // g * 1 is g, bit for bit (NaN stays NaN): the unscaled step pays one multiply, not a branch.
    const float gi = g[i] * grad_scale;
    const float mi = beta1 * m[i] + one_minus_beta1 * gi;
    const float vi = beta2 * v[i] + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    const float old = p[i];
    const float pi = old * decay_factor - step_size * (mi / denom);
    p[i] = pi;
    nonfinite |=
        static_cast<int>((pi - pi) != 0.0f) | static_cast<int>((vi - vi) != 0.0f) | static_cast<int>((mi - mi) != 0.0f);
    if constexpr (measure) {
      const float d = pi - old;
      update_sq += d * d;
      weight_sq += old * old;
    }
    if constexpr (zero_grads) g[i] = 0.0f;
  }
  if constexpr (measure) {
    size->update_sq += update_sq;
    size->weight_sq += weight_sq;
  }
  return nonfinite == 0;
}

// The step's constants for step t (bias corrections in double).
Coefficients coefficients(const AdamWConfig& config, float lr, std::int64_t t, float grad_scale = 1.0f) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(t));
  const Coefficients k{config.beta1,
                       config.beta2,
                       1.0f - config.beta1,
                       1.0f - config.beta2,
                       config.eps,
                       static_cast<float>(lr / bc1),
                       static_cast<float>(std::sqrt(bc2)),
                       grad_scale};
  return k;
}

float decay_factor(const AdamWConfig& config, float lr) {
  return static_cast<float>(1.0 - static_cast<double>(lr) * config.weight_decay);
}

// Elements [begin, end) of the flat buffers in one pass: one parallel region (when there are
// threads to use), each thread a contiguous range of whole cache lines, walked tensor by tensor
// for the decay factor. g, m and v hold the range only (g[0] is element begin's gradient). Tensor
// i owns [offset(i), offset(i + 1)), its alignment padding included: padding is zero in all four
// stores and stays zero (m = v = 0, p = 0 * decay - step * 0 / eps), and zeroing the gradient of
// the whole store covers it as ParameterStore::zero() does.
// With size non-null, the step's sums of squares are added to it: each thread's partial once, as
// it finishes (in no fixed order; the sums only judge the step).
template <bool zero_grads>
bool adamw_walk(ParameterStore& params, std::size_t begin, std::size_t end, const float* g, float* m, float* v,
                const AdamWConfig& config, float lr, std::int64_t t, UpdateSize* size, float grad_scale) {
  const Coefficients k = coefficients(config, lr, t, grad_scale);
  const float decay = decay_factor(config, lr);
  const std::size_t count = params.count();
  const auto lo_of = [&](std::size_t i) { return params.offset(i); };
  const auto hi_of = [&](std::size_t i) { return i + 1 < count ? params.offset(i + 1) : params.size(); };
  // Memory-bound: a team pays off from a few cache lines per thread; 64 Ki floats is ~2 MB of
  // traffic.
  std::atomic<bool> finite{true};
  const auto n = static_cast<std::int64_t>(end - begin);
  std::atomic<double> update_sq{0.0}, weight_sq{0.0};
  cpu::parallel_for(
      n, n >= (std::int64_t{1} << 16),
      [&](std::int64_t b, std::int64_t e) {
        const std::size_t first = begin + static_cast<std::size_t>(b), last = begin + static_cast<std::size_t>(e);
        UpdateSize mine;
        bool range_finite = true;
        // The tensors overlapping [first, last), in order; g, m and v shifted to line up with the
        // parameters' flat index.
        for (std::size_t i = 0; i < count; ++i) {
          if (hi_of(i) <= first) continue;
          if (lo_of(i) >= last) break;
          const std::size_t lo = std::max(lo_of(i), first), hi = std::min(hi_of(i), last);
          const std::size_t at = lo - begin;
          const float factor = params.shape(i).ndim() >= 2 ? decay : 1.0f;
          const auto len = static_cast<std::int64_t>(hi - lo);
          range_finite &=
              size ? adamw_span<zero_grads, true>(params.data() + lo, g + at, m + at, v + at, 0, len, k, factor, &mine)
                   : adamw_span<zero_grads>(params.data() + lo, g + at, m + at, v + at, 0, len, k, factor);
        }
        if (!range_finite) finite.store(false, std::memory_order_relaxed);
        if (size) {
          update_sq.fetch_add(mine.update_sq, std::memory_order_relaxed);
          weight_sq.fetch_add(mine.weight_sq, std::memory_order_relaxed);
        }
      },
      cpu::kLineFloats);
  if (size) {
    size->update_sq += update_sq.load();
    size->weight_sq += weight_sq.load();
  }
  return finite.load();
}

void check_t(std::int64_t t) {
  if (t < 1) fail("adamw", "step t counts from 1, got " + std::to_string(t));
}

void check_step(const ParameterStore& params, const ParameterStore& grads, const ParameterStore& m,
                const ParameterStore& v, std::int64_t t) {
  check_t(t);
  check_same_layout(params, grads, "adamw", "params", "grads");
  check_same_layout(params, m, "adamw", "params", "m");
  check_same_layout(params, v, "adamw", "params", "v");
}

}  // namespace

void check_same_layout(const ParameterStore& a, const ParameterStore& b, const char* where, const char* a_name,
                       const char* b_name) {
  if (a.count() != b.count() || a.size() != b.size()) {
    fail(where, std::string(b_name) + " has " + std::to_string(b.count()) + " tensors (" + std::to_string(b.size()) +
                    " floats), " + a_name + " has " + std::to_string(a.count()) + " (" + std::to_string(a.size()) +
                    "); make it with " + a_name + ".like()");
  }
  for (std::size_t i = 0; i < a.count(); ++i) {
    if (a.shape(i) != b.shape(i) || a.offset(i) != b.offset(i) || a.name(i) != b.name(i)) {
      fail(where, std::string(b_name) + " tensor " + std::to_string(i) + " is '" + b.name(i) + "' " + b.shape(i).str() +
                      ", " + a_name + " has '" + a.name(i) + "' " + a.shape(i).str() + "; make it with " + a_name +
                      ".like()");
    }
  }
}

bool adamw_step(ParameterStore& params, const ParameterStore& grads, ParameterStore& m, ParameterStore& v,
                const AdamWConfig& config, float lr, std::int64_t t) {
  LLMCC_PROFILE("adamw.step");
  check_step(params, grads, m, v, t);
  // Only the zeroing variant writes the gradient.
  return adamw_walk<false>(params, 0, params.size(), grads.data(), m.data(), v.data(), config, lr, t, nullptr, 1.0f);
}

bool adamw_step_zero_grads(ParameterStore& params, ParameterStore& grads, ParameterStore& m, ParameterStore& v,
                           const AdamWConfig& config, float lr, std::int64_t t, UpdateSize* size, float grad_scale) {
  LLMCC_PROFILE("adamw.step");
  check_step(params, grads, m, v, t);
  return adamw_walk<true>(params, 0, params.size(), grads.data(), m.data(), v.data(), config, lr, t, size, grad_scale);
}

bool adamw_step_tensor(float* p, const float* g, float* m, float* v, std::int64_t n, bool decay,
                       const AdamWConfig& config, float lr, std::int64_t t) {
  check_t(t);
  const Coefficients k = coefficients(config, lr, t);
  const float factor = decay ? decay_factor(config, lr) : 1.0f;
  std::atomic<bool> finite{true};
  cpu::parallel_for(
      n, n >= (std::int64_t{1} << 16),
      [&](std::int64_t b, std::int64_t e) {
        if (!adamw_span<false>(p, g, m, v, b, e, k, factor)) finite.store(false, std::memory_order_relaxed);
      },
      cpu::kLineFloats);
  return finite.load();
}

bool adamw_step_range(ParameterStore& params, std::size_t begin, std::size_t end, float* g, float* m, float* v,
                      const AdamWConfig& config, float lr, std::int64_t t, bool zero_grads, UpdateSize* size,
                      float grad_scale) {
  LLMCC_PROFILE("adamw.step");
  check_t(t);
  if (begin > end || end > params.size())
    fail("adamw", "range [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside the " +
                      std::to_string(params.size()) + " floats of the parameters");
  return zero_grads ? adamw_walk<true>(params, begin, end, g, m, v, config, lr, t, size, grad_scale)
                    : adamw_walk<false>(params, begin, end, g, m, v, config, lr, t, size, grad_scale);
}

double UpdateSize::ratio() const { return weight_sq > 0.0 ? std::sqrt(update_sq / weight_sq) : 0.0; }

AdamW::AdamW(const ParameterStore& params, const AdamWConfig& config)
    : config_(config), m_(params.like()), v_(params.like()) {}

bool AdamW::step(ParameterStore& params, const ParameterStore& grads, float lr) {
  const bool finite = adamw_step(params, grads, m_, v_, config_, lr, t_ + 1);
  ++t_;
  return finite;
}

bool AdamW::step_zero_grads(ParameterStore& params, ParameterStore& grads, float lr, UpdateSize* size,
                            float grad_scale) {
  const bool finite = adamw_step_zero_grads(params, grads, m_, v_, config_, lr, t_ + 1, size, grad_scale);
  ++t_;
  return finite;
}

}  // namespace llmcc
