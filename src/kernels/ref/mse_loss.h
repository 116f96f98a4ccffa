// Reference kernels for mse_loss: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// (1 / n) sum_i (pred[i] - target[i])^2, summed in order in at least double precision.  (n)
template <class Real>
Real mse_loss_forward(const Real* pred, const Real* target, std::int64_t n) {
  std::common_type_t<Real, double> sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::common_type_t<Real, double> e = static_cast<decltype(sum)>(pred[i]) - target[i];
    sum += e * e;
  }
  return static_cast<Real>(sum / static_cast<double>(n));
}

// g = d_out * 2 / n;  d_pred[i] += g (pred[i] - target[i]);  d_target[i] -= the same.  (n)
// Null adjoints are skipped.
template <class Real>
void mse_loss_backward(Real* d_pred, Real* d_target, const Real* pred, const Real* target, Real d_out, std::int64_t n) {
  const Real g = d_out * Real(2) / static_cast<Real>(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const Real e = g * (pred[i] - target[i]);
    if (d_pred) d_pred[i] += e;
    if (d_target) d_target[i] -= e;
  }
}

// (2 / n) sum_i (pred[i] - target[i]) (tp[i] - tt[i]), summed in order in at least double.  (n)
template <class Real>
Real mse_loss_tangent_forward(const Real* pred, const Real* target, const Real* tp, const Real* tt, std::int64_t n) {
  std::common_type_t<Real, double> sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    sum += (static_cast<decltype(sum)>(pred[i]) - target[i]) * (static_cast<decltype(sum)>(tp[i]) - tt[i]);
  return static_cast<Real>(2 * sum / static_cast<double>(n));
}

// g = d_out * 2 / n: d_pred += g (tp - tt), d_target -= the same, d_tp += g (pred - target),
// d_tt -= the same.  (n) Null adjoints are skipped.
template <class Real>
void mse_loss_tangent_backward(Real* d_pred, Real* d_target, Real* d_tp, Real* d_tt, const Real* pred,
                               const Real* target, const Real* tp, const Real* tt, Real d_out, std::int64_t n) {
  const Real g = d_out * Real(2) / static_cast<Real>(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const Real a = g * (tp[i] - tt[i]), b = g * (pred[i] - target[i]);
    if (d_pred) d_pred[i] += a;
    if (d_target) d_target[i] -= a;
    if (d_tp) d_tp[i] += b;
    if (d_tt) d_tt[i] -= b;
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
