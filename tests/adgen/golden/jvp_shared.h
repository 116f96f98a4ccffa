// Golden: calls that share a primal stream. u at the points and its derivatives along two
// directions, all at the same points: adgen merges the three calls into one, of a plan that runs
// u's statements once (u_jvp_with_u_jvp) and whose backward runs each of u's pullbacks once.
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/ops.h"
namespace g_shared {
using llmcc::Tensor;
struct Net {
  Tensor w1, b1;  // (H, 2), (H)
  Tensor w2;      // (1, H)
};
inline Tensor u(const Net& net, const Tensor& x) {
  return llmcc::linear_nobias(llmcc::tanh(llmcc::linear(x, net.w1, net.b1)), net.w2);
}
LLMCC_ADGEN_JVP("u") llmcc::adgen::Dual u_jvp(const Net& net, const Tensor& x, const Tensor& dx);
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float loss(const Net& net, const Tensor& x, const Tensor& dir,
                                                          const Tensor& other, const Tensor& zero) {
  const Tensor v = u(net, x);
  const Tensor u_d = u_jvp(net, x, dir).tangent;
  const Tensor u_o = u_jvp(net, x, other).tangent;
  return llmcc::mse_loss(u_d + v * u_o, zero);
}
}  // namespace g_shared
