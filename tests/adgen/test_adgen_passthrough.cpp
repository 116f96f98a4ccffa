// Pass-through residual blocks (models/passthrough.h): gradients against central finite
// differences in every arrangement, at several sizes and in both kernel modes, with released
// scratch memory poisoned; a second gradient call gives the same bits and leaves the first call's
// input adjoint intact; checkpointed calls give the unchecked run's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "adgen_test_util.h"
#include "llmcc/runtime.h"
#include "passthrough.grad.h"

namespace {

using llmcc::Tensor;

pt::Lin make_lin(int OC, int C) { return {Tensor(nullptr, {OC, C}), Tensor(nullptr, {OC})}; }
pt::Mlp make_mlp(int C) { return {make_lin(2 * C, C), make_lin(C, 2 * C)}; }

pt::Net make_net(int mode, int C, int V) {
  pt::Net n;
  n.mode = mode;
  n.V = V;
  n.in = make_lin(C, C);
  n.a.mlp = make_mlp(C);
  n.b.mlp = make_mlp(C);
  n.h.resize(3);
  for (auto& r : n.h) r.mlp = make_mlp(C);
  n.st.l = make_lin(C, C);
  n.sc.st.l = make_lin(C, C);
  n.sc.st.steps = 0;
  n.m2 = make_mlp(C);
  n.head = make_lin(V, C);
  return n;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.f32(), t.nbytes());
  return v;
}

bool same_bits(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

struct KernelModeGuard {
  explicit KernelModeGuard(llmcc::KernelMode m) { llmcc::set_kernel_mode(m); }
  ~KernelModeGuard() { llmcc::set_kernel_mode(llmcc::KernelMode::Fast); }
};

class AdgenPassThrough : public ::testing::TestWithParam<int> {};

TEST_P(AdgenPassThrough, GradientsAreExactAndSurvive) {
  const int mode = GetParam();
  llmcc::adgen::set_poison_scratch(true);
  struct Size {
    int N, C, V;
  };
  for (const Size sz : {Size{1, 3, 2}, Size{3, 5, 7}, Size{4, 8, 5}}) {
    for (const auto kmode : {llmcc::KernelMode::Reference, llmcc::KernelMode::Fast}) {
      SCOPED_TRACE("mode " + std::to_string(mode) + ", N " + std::to_string(sz.N) + ", C " + std::to_string(sz.C) +
                   (kmode == llmcc::KernelMode::Fast ? ", fast kernels" : ", reference kernels"));
      KernelModeGuard kernels(kmode);
      pt::Net net = make_net(mode, sz.C, sz.V);
      std::vector<float> params, xs;
      adgen_test::bind_random(net, params, 100u + static_cast<unsigned>(mode), 0.5f);
      Tensor x = adgen_test::random_tensor(xs, {sz.N, sz.C}, 7);
      std::vector<std::int32_t> tgt(static_cast<std::size_t>(sz.N));
      for (int i = 0; i < sz.N; ++i) tgt[static_cast<std::size_t>(i)] = (3 * i + 1) % sz.V;
      llmcc::Tokens targets(tgt.data(), 1, sz.N);

      llmcc::Arena arena(1 << 24);
      llmcc::ArenaScope scope(arena);
      auto g1 = llmcc::adgen::make_grad(net);
      Tensor dx1;
      const float l1 = pt::loss_grad(net, x, targets, g1.grad, &dx1);
      ASSERT_TRUE(dx1.defined());
      const std::vector<float> dx1_values = values(dx1);
      const std::vector<float> grad1(g1.store.data(), g1.store.data() + g1.store.size());
      // NaN here is poisoned scratch memory read through a dangling adjoint (and NaN bits compare
      // equal below).
      EXPECT_TRUE(std::all_of(grad1.begin(), grad1.end(), [](float v) { return std::isfinite(v); }));
      EXPECT_TRUE(std::all_of(dx1_values.begin(), dx1_values.end(), [](float v) { return std::isfinite(v); }));

      // A second call in the same arena: the same bits, and the first call's d_x untouched.
      auto g2 = llmcc::adgen::make_grad(net);
      Tensor dx2;
      EXPECT_EQ(pt::loss_grad(net, x, targets, g2.grad, &dx2), l1);
      EXPECT_TRUE(same_bits(grad1, g2.store.data())) << "second call's parameter gradients differ";
      EXPECT_TRUE(same_bits(dx1_values, dx2.f32())) << "second call's d_x differs";
      EXPECT_TRUE(same_bits(dx1_values, dx1.f32())) << "the first call's d_x was overwritten";

      // Checkpointing changes memory, never values.
      net.ckpt = 0;
      auto g3 = llmcc::adgen::make_grad(net);
      Tensor dx3;
      EXPECT_EQ(pt::loss_grad(net, x, targets, g3.grad, &dx3), l1);
      EXPECT_TRUE(same_bits(grad1, g3.store.data())) << "checkpointed gradients differ";
      EXPECT_TRUE(same_bits(dx1_values, dx3.f32())) << "checkpointed d_x differs";
      net.ckpt = -1;

      if (kmode == llmcc::KernelMode::Reference) {
        auto loss = [&] {
          llmcc::Arena a(1 << 22);
          llmcc::ArenaScope s(a);
          return static_cast<double>(pt::loss(net, x, targets));
        };
        adgen_test::expect_grad_matches_fd(net, g1.grad, loss);
        EXPECT_TRUE(adgen_test::fd_matches("x", x, dx1, loss));
      }
    }
  }
}

std::string arrangement_name(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"AfterRuleAndCallee", "FanOut", "Nested", "Loop", "MemberStepper",
                                       "PointerPassedDown"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Arrangements, AdgenPassThrough, ::testing::Values(0, 1, 2, 3, 4, 5), arrangement_name);

}  // namespace
