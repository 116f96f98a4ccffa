// User names that generated code uses too (models/names.h): the generated code compiles (this
// file builds) and its gradients match central finite differences.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adgen_test_util.h"
#include "llmcc/runtime.h"
#include "names.grad.h"

namespace {

using llmcc::Tensor;

nm::Lin make_lin(int OC, int C) { return {Tensor(nullptr, {OC, C}), Tensor(nullptr, {OC})}; }
nm::Blk make_blk(int C) {
  nm::Blk b{make_lin(C, C), make_lin(C, C), make_lin(C, C), {}};
  b.i = {make_lin(C, C), make_lin(C, C)};
  return b;
}

TEST(AdgenNames, CollidingNamesGiveRightGradients) {
  llmcc::set_kernel_mode(llmcc::KernelMode::Reference);
  llmcc::adgen::set_poison_scratch(true);
  constexpr int N = 3, C = 4, V = 5;
  nm::Top top;
  top.f = make_blk(C);
  top.m = {make_blk(C), make_blk(C)};
  top.head = make_lin(V, C);
  std::vector<float> params, xs, dxs;
  adgen_test::bind_random(top, params, 21, 0.4f);
  Tensor x = adgen_test::random_tensor(xs, {N, C}, 22);
  Tensor d_x = adgen_test::random_tensor(dxs, {N, C}, 23);
  float f = 0.8f;
  std::vector<std::int32_t> tgt = {1, 4, 0};
  llmcc::Tokens targets(tgt.data(), 1, N);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(top);
  Tensor dx, ddx;
  float df = 0.0f;
  nm::loss_grad(top, x, d_x, f, targets, g.grad, &dx, &ddx, &df);
  auto loss = [&] {
    llmcc::Arena a(1 << 22);
    llmcc::ArenaScope s(a);
    return static_cast<double>(nm::loss(top, x, d_x, f, targets));
  };
  adgen_test::expect_grad_matches_fd(top, g.grad, loss);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, dx, loss));
  EXPECT_TRUE(adgen_test::fd_matches("d_x", d_x, ddx, loss));
  EXPECT_TRUE(adgen_test::fd_float_matches("f", f, df, loss));
  llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
}

}  // namespace
