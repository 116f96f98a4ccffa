// Test-local rules for adgen's execution tests: tiny, obviously correct, and counting every
// forward and pullback call plus the bytes their outputs allocate, so tests can assert that a
// gradient call runs each forward exactly once and allocates nothing beyond rule outputs.
#pragma once

#include <cmath>
#include <cstddef>
#include <map>
#include <string>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/ops/add.h"
#include "llmcc/tensor.h"

namespace toy {

using llmcc::Tensor;

struct Counters {
  std::map<std::string, int> calls;  // "matmul", "matmul_pullback", ...
  std::size_t out_bytes = 0;         // arena bytes of rule outputs allocated
  void reset() {
    calls.clear();
    out_bytes = 0;
  }
};
inline Counters& counters() {
  static Counters c;
  return c;
}

inline Tensor new_out(const llmcc::Shape& s, const char* op) {
  Tensor t = llmcc::new_tensor(s, op);
  const std::size_t a = llmcc::Arena::kAlignment;
  counters().out_bytes += (t.nbytes() + a - 1) / a * a;  // as the arena rounds
  return t;
}

// out (N, OC) = x (N, C) @ w (C, OC)
inline Tensor matmul(const Tensor& x, const Tensor& w) {
  ++counters().calls["matmul"];
  const auto N = x.dim(0), C = x.dim(1), OC = w.dim(1);
  Tensor out = new_out({N, OC}, "matmul");
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < OC; ++o) {
      float s = 0.0f;
      for (std::int64_t c = 0; c < C; ++c) s += x.f32()[n * C + c] * w.f32()[c * OC + o];
      out.f32()[n * OC + o] = s;
    }
  return out;
}
inline void matmul_pullback(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor& d_out, Tensor* d_x,
                            Tensor* d_w) {
  (void)out;
  ++counters().calls["matmul_pullback"];
  const auto N = x.dim(0), C = x.dim(1), OC = w.dim(1);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < OC; ++o) {
      const float g = d_out.f32()[n * OC + o];
      for (std::int64_t c = 0; c < C; ++c) {
        if (d_x) d_x->f32()[n * C + c] += g * w.f32()[c * OC + o];
        if (d_w) d_w->f32()[c * OC + o] += g * x.f32()[n * C + c];
      }
    }
}

// out = tanh(x), element-wise; the pullback reads out.
inline Tensor tanh_op(const Tensor& x) {
  ++counters().calls["tanh_op"];
  Tensor out = new_out(x.shape(), "tanh_op");
  for (std::int64_t i = 0; i < x.numel(); ++i) out.f32()[i] = std::tanh(x.f32()[i]);
  return out;
}
inline void tanh_op_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  ++counters().calls["tanh_op_pullback"];
  if (d_x == nullptr) return;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    d_x->f32()[i] += d_out.f32()[i] * (1.0f - out.f32()[i] * out.f32()[i]);
}

// out = max(x, 0)
inline Tensor relu(const Tensor& x) {
  ++counters().calls["relu"];
  Tensor out = new_out(x.shape(), "relu");
  for (std::int64_t i = 0; i < x.numel(); ++i) out.f32()[i] = x.f32()[i] > 0.0f ? x.f32()[i] : 0.0f;
  return out;
}
inline void relu_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  (void)out;
  ++counters().calls["relu_pullback"];
  if (d_x == nullptr) return;
  for (std::int64_t i = 0; i < x.numel(); ++i) d_x->f32()[i] += x.f32()[i] > 0.0f ? d_out.f32()[i] : 0.0f;
}

// out = s * x (s a float the gradient also flows to)
inline Tensor scale_by(const Tensor& x, float s) {
  ++counters().calls["scale_by"];
  Tensor out = new_out(x.shape(), "scale_by");
  for (std::int64_t i = 0; i < x.numel(); ++i) out.f32()[i] = s * x.f32()[i];
  return out;
}
inline void scale_by_pullback(const Tensor& x, float s, const Tensor& out, const Tensor& d_out, Tensor* d_x,
                              float* d_s) {
  (void)out;
  ++counters().calls["scale_by_pullback"];
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (d_x) d_x->f32()[i] += s * d_out.f32()[i];
    if (d_s) *d_s += x.f32()[i] * d_out.f32()[i];
  }
}

// A rule with saved buffers: row-wise normalisation (x - mean) * rstd, saving mean and rstd.
struct NormSaved {
  Tensor mean;  // (N)
  Tensor rstd;  // (N)
};
inline Tensor norm_fwd(const Tensor& x, NormSaved& saved) {
  ++counters().calls["norm"];
  const auto N = x.dim(0), C = x.dim(1);
  Tensor out = new_out(x.shape(), "norm");
  saved.mean = new_out({N}, "norm");
  saved.rstd = new_out({N}, "norm");
  for (std::int64_t n = 0; n < N; ++n) {
    const float* r = x.f32() + n * C;
    float m = 0.0f, v = 0.0f;
    for (std::int64_t c = 0; c < C; ++c) m += r[c];
    m /= static_cast<float>(C);
    for (std::int64_t c = 0; c < C; ++c) v += (r[c] - m) * (r[c] - m);
    const float rs = 1.0f / std::sqrt(v / static_cast<float>(C) + 1e-5f);
    saved.mean.f32()[n] = m;
    saved.rstd.f32()[n] = rs;
    for (std::int64_t c = 0; c < C; ++c) out.f32()[n * C + c] = (r[c] - m) * rs;
  }
  return out;
}
inline Tensor norm(const Tensor& x) {
  NormSaved s;
  return norm_fwd(x, s);
}
inline void norm_pullback(const Tensor& x, const Tensor& out, const NormSaved& saved, const Tensor& d_out,
                          Tensor* d_x) {
  ++counters().calls["norm_pullback"];
  if (d_x == nullptr) return;
  const auto N = x.dim(0), C = x.dim(1);
  for (std::int64_t n = 0; n < N; ++n) {
    const float rs = saved.rstd.f32()[n];
    float mg = 0.0f, mgy = 0.0f;
    for (std::int64_t c = 0; c < C; ++c) {
      mg += d_out.f32()[n * C + c];
      mgy += d_out.f32()[n * C + c] * out.f32()[n * C + c];
    }
    mg /= static_cast<float>(C);
    mgy /= static_cast<float>(C);
    for (std::int64_t c = 0; c < C; ++c)
      d_x->f32()[n * C + c] += rs * (d_out.f32()[n * C + c] - mg - out.f32()[n * C + c] * mgy);
  }
}

// The loss: 0.5 * sum(x^2) (accumulated in double: finite differences need a precise loss).
inline float sumsq(const Tensor& x) {
  ++counters().calls["sumsq"];
  double s = 0.0;
  for (std::int64_t i = 0; i < x.numel(); ++i) s += 0.5 * static_cast<double>(x.f32()[i]) * x.f32()[i];
  return static_cast<float>(s);
}
inline void sumsq_pullback(const Tensor& x, float out, float d_out, Tensor* d_x) {
  (void)out;
  ++counters().calls["sumsq_pullback"];
  if (d_x == nullptr) return;
  for (std::int64_t i = 0; i < x.numel(); ++i) d_x->f32()[i] += d_out * x.f32()[i];
}

// Weighted sum of a table's rows picked by token ids: out (T, C) = table[ids[t]] (an embedding).
inline Tensor lookup(const llmcc::Tokens& ids, const Tensor& table) {
  ++counters().calls["lookup"];
  const auto C = table.dim(1);
  Tensor out = new_out({ids.numel(), C}, "lookup");
  for (std::int64_t t = 0; t < ids.numel(); ++t)
    for (std::int64_t c = 0; c < C; ++c) out.f32()[t * C + c] = table.f32()[ids.data()[t] * C + c];
  return out;
}
inline void lookup_pullback(const llmcc::Tokens& ids, const Tensor& table, const Tensor& out, const Tensor& d_out,
                            Tensor* d_table) {
  (void)out;
  ++counters().calls["lookup_pullback"];
  if (d_table == nullptr) return;
  const auto C = table.dim(1);
  for (std::int64_t t = 0; t < ids.numel(); ++t)
    for (std::int64_t c = 0; c < C; ++c) d_table->f32()[ids.data()[t] * C + c] += d_out.f32()[t * C + c];
}

// Not a rule (no pullback) and never differentiated: a tensor made from token ids only.
// out (N, C): row n is the one-hot vector of ids[n] % C.
inline Tensor one_hot(const llmcc::Tokens& ids, int C) {
  Tensor out = new_out({ids.numel(), C}, "one_hot");
  for (std::int64_t n = 0; n < ids.numel(); ++n)
    for (int c = 0; c < C; ++c) out.f32()[n * C + c] = (ids.data()[n] % C == c) ? 1.0f : 0.0f;
  return out;
}

}  // namespace toy
