#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Below this many elements a thread team costs more than it saves (an exp per element).
constexpr std::int64_t kParallelMin = 16384;

// silu(x) as silu_forward computes it.
inline float silu_value(float x) { return x * fast_sigmoid(x); }

// silu'(x) as silu_backward computes it: s + x s (1 - s), with s (1 - s) taken as e s s (see
// silu.cpp), e = exp(-x).
inline float silu_slope(float x) {
  const float e = fast_exp(-x);
  const float s = sigmoid_from_exp(x, e);
  return s + x * ((e * s) * s);
}

// body(i) for every element, in parallel when n is large enough.
template <class Body>
void each(std::int64_t n, Body&& body) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) body(i);
      },
      kLineFloats);
}

// Each adjoint's expression is the one mul_backward and silu_backward evaluate (d += a * b), so the
// compiler contracts it to the same FMA: d_up += d_out * silu(g); d_t = d_out * up (mul's
// product into zeros, which an FMA rounds once as a product); d_g += d_t * silu'(g). Writing
// a * b instead of adding it to zeros gives the same value. No __restrict on the adjoints: the
// caller may pass d_out itself as one.
template <bool OverwriteG, bool OverwriteUp>
void backward(float* d_g, float* d_up, const float* g, const float* up, const float* d_out, std::int64_t n) {
  if (d_g && d_g == d_up) {
    each(n, [&](std::int64_t i) {
      const float dout = d_out[i], dt = dout * up[i];
      if constexpr (OverwriteUp) {
        d_g[i] = dout * silu_value(g[i]);
      } else {
        d_g[i] += dout * silu_value(g[i]);
      }
      d_g[i] += dt * silu_slope(g[i]);
    });
    return;
  }
  // Each term reads d_out[i] once, before either adjoint is written: d_out may be one of them.
  const auto term_up = [&](std::int64_t i, float dout) {
    if constexpr (OverwriteUp) {
      d_up[i] = dout * silu_value(g[i]);
    } else {
      d_up[i] += dout * silu_value(g[i]);
    }
  };
  const auto term_g = [&](std::int64_t i, float dout) {
    const float dt = dout * up[i];
    if constexpr (OverwriteG) {
      d_g[i] = dt * silu_slope(g[i]);
    } else {
      d_g[i] += dt * silu_slope(g[i]);
    }
  };
  if (d_g && d_up) {
    each(n, [&](std::int64_t i) {
      const float dout = d_out[i];
      term_up(i, dout);
      term_g(i, dout);
    });
  } else if (d_g) {
    each(n, [&](std::int64_t i) { term_g(i, d_out[i]); });
  } else if (d_up) {
    each(n, [&](std::int64_t i) { term_up(i, d_out[i]); });
  }
}

}  // namespace

void swiglu_forward(float* __restrict out, const float* __restrict g, const float* __restrict up, std::int64_t n) {
  each(n, [&](std::int64_t i) { out[i] = silu_value(g[i]) * up[i]; });
}

void swiglu_backward(float* d_g, bool overwrite_g, float* d_up, bool overwrite_up, const float* g, const float* up,
                     const float* d_out, std::int64_t n) {
  if (overwrite_g) {
    if (overwrite_up) return backward<true, true>(d_g, d_up, g, up, d_out, n);
    return backward<true, false>(d_g, d_up, g, up, d_out, n);
  }
  if (overwrite_up) return backward<false, true>(d_g, d_up, g, up, d_out, n);
  backward<false, false>(d_g, d_up, g, up, d_out, n);
}

}  // namespace llmcc::cpu
