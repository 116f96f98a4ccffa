// Regressions from the random-program tester (models/found.h): the generated code compiles under
// -Werror, returns the primal loss, and its gradients match central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adgen_test_util.h"
#include "found.grad.h"
#include "llmcc/runtime.h"

namespace {

using llmcc::Tensor;

TEST(AdgenFound, ReducedProgramsGiveThePrimalLossAndRightGradients) {
  llmcc::set_kernel_mode(llmcc::KernelMode::Reference);
  llmcc::adgen::set_poison_scratch(true);
  constexpr int N = 3, C = 4;
  found::Model m;
  m.in = {Tensor(nullptr, {C, C}), Tensor(nullptr, {C})};
  m.st.wt = {Tensor(nullptr, {C}), Tensor(nullptr, {C})};
  std::vector<float> params, xs;
  adgen_test::bind_random(m, params, 41, 0.5f);
  Tensor x = adgen_test::random_tensor(xs, {N, C}, 42);
  float s = 0.9f;
  std::vector<std::int32_t> tgt = {3, 0, 2};
  llmcc::Tokens targets(tgt.data(), 1, N);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  auto g = llmcc::adgen::make_grad(m);
  Tensor dx;
  float ds = 0.0f;
  const float value = found::loss_grad(m, x, s, targets, g.grad, &dx, &ds);
  auto loss = [&] {
    llmcc::Arena a(1 << 22);
    llmcc::ArenaScope sc(a);
    return static_cast<double>(found::loss(m, x, s, targets));
  };
  EXPECT_FLOAT_EQ(value, static_cast<float>(loss()));
  adgen_test::expect_grad_matches_fd(m, g.grad, loss);
  EXPECT_TRUE(adgen_test::fd_matches("x", x, dx, loss));
  EXPECT_TRUE(adgen_test::fd_float_matches("s", s, ds, loss));
  llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
}

}  // namespace
