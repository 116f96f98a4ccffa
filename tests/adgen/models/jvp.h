// Forward mode: jvp functions adgen defines (LLMCC_ADGEN_JVP) and losses whose value holds them,
// differentiated again in reverse (nested differentiation, as a physics-informed loss needs).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"

namespace jvpm {

using llmcc::Tensor;
using llmcc::adgen::Dual;

inline float act(float x) { return tanhf(x); }
// A slope with products, a quotient and two maths calls, so its own derivative has all of them.
inline float soft(float x) {
  const float e = expf(-x * x);
  return x * tanhf(x) + 0.5f * e / (1.0f + x * x) + sinf(x) * 0.1f;
}

struct Dense {
  Tensor w, b;  // (OC, C), (OC)
  Tensor forward(const Tensor& x) const { return llmcc::tanh(llmcc::linear(x, w, b)); }
};

struct Net {
  std::vector<Dense> hidden;  // (H, 2), then (H, H) each
  Tensor gain;                // (H): a row vector, broadcast over the points
  Tensor w_out, b_out;        // (1, H), (1)
  float shift = 0.25f;        // configuration
};

// u(x): points (N, 2) -> (N, 1); residual blocks in a loop, a broadcast gain, silu and a scalar
// activation.
inline Tensor u(const Net& net, const Tensor& x) {
  Tensor h = net.hidden[0].forward(x);
  for (std::size_t i = 1; i < net.hidden.size(); ++i) h = h + net.hidden[i].forward(h);
  h = h * (1.0f + 0.1f * llmcc::mse_loss(h, h * net.gain));  // a float from a loss, scaling
  h = llmcc::adgen::map_unary<soft>(llmcc::silu(h * net.gain), "soft");
  return llmcc::linear(h, net.w_out, net.b_out);
}
LLMCC_ADGEN_JVP("u") Dual u_jvp(const Net& net, const Tensor& x, const Tensor& x_tangent);

// Second order: u_jvp's tangent along x only (u''[v, w] in .tangent.tangent), and along both of
// u_jvp's tensors.
LLMCC_ADGEN_JVP_WRT("u_jvp", "x")
llmcc::adgen::Dual2 u_jvp_jvp(const Net& net, const Tensor& x, const Tensor& x_tangent, const Tensor& w);
LLMCC_ADGEN_JVP("u_jvp")
llmcc::adgen::Dual2 u_jvp_full(const Net& net, const Tensor& x, const Tensor& v, const Tensor& dx, const Tensor& dv);

// Tangents along three arguments at once: x (N, 2), y (N, H) and a float s.
inline Tensor mix(const Net& net, const Tensor& x, const Tensor& y, float s) {
  const Tensor a = (s * s) * llmcc::adgen::map_unary<act>(llmcc::linear(x, net.hidden[0].w, net.hidden[0].b), "act");
  Tensor b = 1.0f - y;
  if (net.shift > 0.0f) b = b + net.shift * a;
  const float e = llmcc::mse_loss(a, b);
  return a * b - (-llmcc::gelu(a)) + llmcc::scale(y, s + e) - net.gain;
}
LLMCC_ADGEN_JVP("mix")
Dual mix_jvp(const Net& net, const Tensor& x, const Tensor& y, float s, const Tensor& dx, const Tensor& dy, float ds);

// The jvp of mix_jvp along x only, while mix_jvp moves x, y and s: called with the same tensor as
// both x directions, its second derivative is still along (dx, dy, ds) then (dx, 0, 0), not the
// Taylor plan's (dx, dy, ds) twice.
LLMCC_ADGEN_JVP_WRT("mix_jvp", "x")
llmcc::adgen::Dual2 mix_jvp_jx(const Net& net, const Tensor& x, const Tensor& y, float s, const Tensor& dx,
                               const Tensor& dy, float ds, const Tensor& ex);
LLMCC_ADGEN_ENTRY inline float mix_second_loss(const Net& net, const Tensor& x, const Tensor& y, float s,
                                               const Tensor& dx, const Tensor& dy, const Tensor& target) {
  const llmcc::adgen::Dual2 r = mix_jvp_jx(net, x, y, s, dx, dy, 0.5f * s, dx);
  return llmcc::mse_loss(r.tangent.tangent + r.value.tangent, target);
}

// A residual of u and its directional derivative, as a physics-informed loss has: the gradient
// with respect to the parameters (and to the points and the direction) goes through the tangent.
LLMCC_ADGEN_ENTRY inline float residual_loss(const Net& net, const Tensor& x, const Tensor& dir,
                                             const Tensor& target) {
  const Dual r = u_jvp(net, x, dir);
  const Tensor res = r.tangent + r.value * r.tangent - 0.3f * r.value;
  // u_jvp(net, x, x): the direction is the point itself (a call adgen specialises: one argument
  // feeds both parameters).
  return llmcc::mse_loss(res, target) + 0.1f * llmcc::mse_loss(u_jvp(net, x, r.value * dir).tangent, target) +
         0.2f * llmcc::mse_loss(u_jvp(net, x, x).tangent, target);
}

// A Laplacian-style residual: the second derivative along dir, plus first-order terms.
// The same direction twice takes the Taylor path (one second-order stream); a mixed derivative
// along two directions the general jvp of the jvp.
LLMCC_ADGEN_ENTRY inline float second_order_loss(const Net& net, const Tensor& x, const Tensor& dir,
                                                 const Tensor& other, const Tensor& target) {
  const llmcc::adgen::Dual2 r = u_jvp_jvp(net, x, dir, dir);
  const Tensor res = r.tangent.tangent + r.value.value * r.value.tangent - 0.5f * r.tangent.value;
  const Tensor mixed = u_jvp_jvp(net, x, dir, other).tangent.tangent;
  return llmcc::mse_loss(res, target) + 0.5f * llmcc::mse_loss(mixed * r.value.value, target);
}

// Only the second derivative along dir (the Taylor path): the counting test's entry.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float taylor_loss(const Net& net, const Tensor& x, const Tensor& dir,
                                                                  const Tensor& target) {
  const llmcc::adgen::Dual2 r = u_jvp_jvp(net, x, dir, dir);
  return llmcc::mse_loss(r.tangent.tangent + r.value.tangent * r.value.value, target);
}

// u, its first derivatives along two directions and its second along one and across both, all at
// the points x: adgen merges the four calls into one that runs u's statements once (the counting
// test checks it).
LLMCC_ADGEN_ENTRY inline float shared_loss(const Net& net, const Tensor& x, const Tensor& dir, const Tensor& other,
                                           const Tensor& target) {
  const Tensor v = u(net, x);
  const llmcc::adgen::Dual2 r = u_jvp_jvp(net, x, dir, dir);
  const Tensor u_o = u_jvp(net, x, other).tangent;
  const Tensor mixed = u_jvp_jvp(net, x, dir, other).tangent.tangent;
  return llmcc::mse_loss(r.tangent.tangent + v * u_o - r.value.tangent, target) +
         0.5f * llmcc::mse_loss(mixed * r.value.value, target);
}
// The same loss with each call at its own copy of the points: nothing merges (the reference).
LLMCC_ADGEN_ENTRY inline float unshared_loss(const Net& net, const Tensor& x0, const Tensor& x1, const Tensor& x2,
                                             const Tensor& x3, const Tensor& dir, const Tensor& other,
                                             const Tensor& target) {
  const Tensor v = u(net, x0);
  const llmcc::adgen::Dual2 r = u_jvp_jvp(net, x1, dir, dir);
  const Tensor u_o = u_jvp(net, x2, other).tangent;
  const Tensor mixed = u_jvp_jvp(net, x3, dir, other).tangent.tangent;
  return llmcc::mse_loss(r.tangent.tangent + v * u_o - r.value.tangent, target) +
         0.5f * llmcc::mse_loss(mixed * r.value.value, target);
}

// The same with mix's three tangents, read through a Dual local.
LLMCC_ADGEN_ENTRY inline float mix_loss(const Net& net, const Tensor& x, const Tensor& y, float s,
                                        const Tensor& dx, const Tensor& dy, const Tensor& target) {
  const Dual r = mix_jvp(net, x, y, s, dx, dy, 0.5f * s);
  return llmcc::mse_loss(r.tangent * r.value, target);
}

// The norms: rmsnorm and layernorm with the module's weights, and with a weight w that is an
// argument, so that tangents move a norm's input, weight and bias.
struct Norms {
  Tensor g, lw, lb;  // (C) each
};
inline Tensor normed(const Norms& n, const Tensor& x, const Tensor& w) {
  const Tensor a = llmcc::rmsnorm(x, n.g, 1e-3f);
  const Tensor b = llmcc::layernorm(llmcc::tanh(a) + 0.5f * x, n.lw, n.lb) * a;
  return b + llmcc::rmsnorm(b, w, 1e-2f) + llmcc::layernorm(x, w, w);
}
LLMCC_ADGEN_JVP("normed")
Dual normed_jvp(const Norms& n, const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& dw);
LLMCC_ADGEN_JVP_WRT("normed", "x") Dual normed_jvp_x(const Norms& n, const Tensor& x, const Tensor& w, const Tensor& dx);
LLMCC_ADGEN_JVP_WRT("normed_jvp_x", "x")
llmcc::adgen::Dual2 normed_jvp_xx(const Norms& n, const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& v);
LLMCC_ADGEN_JVP_WRT("normed_jvp", "x, w")
llmcc::adgen::Dual2 normed_jvp_full(const Norms& n, const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& dw,
                                    const Tensor& ddx, const Tensor& ddw);

// A residual through the norms: the second derivative along dir (the Taylor path) and a first
// derivative along dir and w together.
LLMCC_ADGEN_ENTRY inline float norm_loss(const Norms& n, const Tensor& x, const Tensor& w, const Tensor& dir,
                                         const Tensor& target) {
  const llmcc::adgen::Dual2 r = normed_jvp_xx(n, x, w, dir, dir);
  const Dual q = normed_jvp(n, x, w, dir, w);
  return llmcc::mse_loss(r.tangent.tangent + r.value.tangent * r.value.value, target) +
         0.5f * llmcc::mse_loss(q.tangent, target);
}

// rope and the embeddings, linear in what carries the tangent (x, the tables).
inline Tensor embedded(const Tensor& x, const Tensor& wte, const Tensor& wpe, const llmcc::Tokens& idx) {
  const Tensor e = llmcc::token_position_embedding(idx, wte, wpe) * llmcc::token_embedding(idx, wte);  // (B, T, C)
  return llmcc::rope(llmcc::tanh(e * x), 2, 50.0f, 1) * x;
}
LLMCC_ADGEN_JVP("embedded")
Dual embedded_jvp(const Tensor& x, const Tensor& wte, const Tensor& wpe, const llmcc::Tokens& idx, const Tensor& dx,
                  const Tensor& dwte, const Tensor& dwpe);
LLMCC_ADGEN_JVP_WRT("embedded", "x, wte")
Dual embedded_jvp_xw(const Tensor& x, const Tensor& wte, const Tensor& wpe, const llmcc::Tokens& idx, const Tensor& dx,
                     const Tensor& dwte);
LLMCC_ADGEN_JVP_WRT("embedded_jvp_xw", "x, wte")
llmcc::adgen::Dual2 embedded_jvp2(const Tensor& x, const Tensor& wte, const Tensor& wpe, const llmcc::Tokens& idx,
                                  const Tensor& dx, const Tensor& dwte, const Tensor& ex, const Tensor& ewte);

// cross_entropy inside the tangent's path (a float scaling the output): its tangent along the
// logits; targets with an ignored one, and padded columns (V < Vp).
inline Tensor classified(const Tensor& z, const llmcc::Tokens& targets) {
  const float ce = llmcc::cross_entropy(llmcc::tanh(z) * z, targets, 5, -1);
  return z * (1.0f + ce * ce);
}
LLMCC_ADGEN_JVP("classified") Dual classified_jvp(const Tensor& z, const llmcc::Tokens& targets, const Tensor& dz);
LLMCC_ADGEN_ENTRY inline float classified_loss(const Tensor& z, const llmcc::Tokens& targets, const Tensor& dir,
                                               const Tensor& target) {
  const Dual r = classified_jvp(z, targets, dir);
  return llmcc::mse_loss(r.tangent * r.value, target);
}

// attention on the tangent's path, dense with grouped heads (4 query heads, 2 kv heads of size
// HS) and packed: x (B, T, 4 HS), y (B, T, 2 HS), z (B, T, 8 HS).
inline Tensor attended(const Tensor& x, const Tensor& y, const Tensor& z) {
  const Tensor a = llmcc::attention(llmcc::tanh(x), y, y * y, 4, 2);
  return a * x + llmcc::attention_qkv(z, 4, 2);
}
LLMCC_ADGEN_JVP("attended")
Dual attended_jvp(const Tensor& x, const Tensor& y, const Tensor& z, const Tensor& dx, const Tensor& dy,
                  const Tensor& dz);
LLMCC_ADGEN_ENTRY inline float attended_loss(const Tensor& x, const Tensor& y, const Tensor& z, const Tensor& dx,
                                             const Tensor& target) {
  const Dual r = attended_jvp(x, y, z, dx, y, z);
  return llmcc::mse_loss(r.tangent * r.value, target);
}

}  // namespace jvpm
