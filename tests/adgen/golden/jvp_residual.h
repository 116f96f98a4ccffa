// Golden: forward mode nested in reverse. A one-layer tanh network's jvp (the tangent of its
// output along the points' direction) inside a residual loss, and that jvp's own jvp.
#pragma once
#include <cmath>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"
namespace g_jvp {
using llmcc::Tensor;
inline float act(float x) { return tanhf(x); }
struct Net {
  Tensor w1, b1;  // (H, 2), (H)
  Tensor w2;      // (1, H)
};
inline Tensor u(const Net& net, const Tensor& x) {
  return llmcc::linear_nobias(llmcc::adgen::map_unary<act>(llmcc::linear(x, net.w1, net.b1), "act"), net.w2);
}
LLMCC_ADGEN_JVP("u") llmcc::adgen::Dual u_jvp(const Net& net, const Tensor& x, const Tensor& dx);
LLMCC_ADGEN_JVP_WRT("u_jvp", "x")
llmcc::adgen::Dual2 u_jvp2(const Net& net, const Tensor& x, const Tensor& dx, const Tensor& ex);
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float loss(const Net& net, const Tensor& x, const Tensor& dir,
                                                          const Tensor& zero) {
  const llmcc::adgen::Dual2 r = u_jvp2(net, x, dir, dir);
  return llmcc::mse_loss(r.tangent.tangent - r.value.tangent * r.value.value, zero);
}
}  // namespace g_jvp
