// attention's tangent (forward mode): the fast kernel against the reference, the reference
// against central differences of attention (the tangent) and of the tangent (its pullback), in
// double, for dense and packed operands with grouped heads; and the front ends.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention_layout.h"
#include "kernels/cpu/attention_tangent.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/attention_tangent.h"
#include "llmcc/arena.h"
#include "llmcc/ops/attention.h"
#include "llmcc/runtime.h"
#include "test_support.h"

namespace llmcc {
namespace {

template <class Real>
std::vector<Real> draw(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<Real> v(n);
  for (auto& x : v) x = static_cast<Real>(d(rng));
  return v;
}

// Sizes of the six operands of a layout: q, k, v (and their tangents) as stored.
struct Operands {
  std::size_t nq, nkv, nout;
};
Operands sizes_of(const AttentionLayout& L) {
  const auto rows = static_cast<std::size_t>(L.B) * L.T;
  return {rows * L.ld_q, rows * L.ld_kv, rows * L.ld_out};
}

TEST(AttentionTangentKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (const auto& [B, T, NH, NKV, HS] :
         std::vector<std::array<int, 5>>{{1, 1, 1, 1, 1}, {2, 7, 4, 2, 3}, {3, 33, 6, 1, 8}}) {
      for (const bool packed : {false, true}) {
        SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
                     " NKV=" + std::to_string(NKV) + " HS=" + std::to_string(HS) + (packed ? " packed" : " dense"));
        const AttentionLayout L =
            packed ? AttentionLayout::packed(B, T, NH, NKV, HS) : AttentionLayout::dense(B, T, NH, NKV, HS);
        const Operands n = sizes_of(L);
        const std::size_t ko = packed ? L.packed_k_offset() : 0, vo = packed ? L.packed_v_offset() : 0;
        // Packed: one buffer per operand kind holds q, k and v at their offsets.
        const auto q = draw<float>(n.nq, 1), k = packed ? q : draw<float>(n.nkv, 2),
                   v = packed ? q : draw<float>(n.nkv, 3);
        const auto tq = draw<float>(n.nq, 4), tk = packed ? tq : draw<float>(n.nkv, 5),
                   tv = packed ? tq : draw<float>(n.nkv, 6);
        std::vector<float> out(n.nout), out_ref(n.nout);
        cpu::attention_tangent_forward(out.data(), q.data(), k.data() + ko, v.data() + vo, tq.data(), tk.data() + ko,
                                       tv.data() + vo, L);
        ref::attention_tangent_forward(out_ref.data(), q.data(), k.data() + ko, v.data() + vo, tq.data(),
                                       tk.data() + ko, tv.data() + vo, L);
        EXPECT_TRUE(test::all_close("out_t", out, out_ref, 1e-6, 1e-5));
        const auto g = draw<float>(n.nout, 7);
        std::vector<std::vector<float>> d(6), dr(6);
        for (int a = 0; a < 6; ++a) d[a] = dr[a] = draw<float>(a % 3 == 0 || packed ? n.nq : n.nkv, 10 + a);
        auto at = [&](std::vector<std::vector<float>>& x, int a) {
          return x[packed ? (a < 3 ? 0 : 3) : a].data() + (a % 3 == 1 ? ko : a % 3 == 2 ? vo : 0);
        };
        cpu::attention_tangent_backward(at(d, 0), at(d, 1), at(d, 2), at(d, 3), at(d, 4), at(d, 5), g.data(), q.data(),
                                        k.data() + ko, v.data() + vo, tq.data(), tk.data() + ko, tv.data() + vo, L);
        ref::attention_tangent_backward(at(dr, 0), at(dr, 1), at(dr, 2), at(dr, 3), at(dr, 4), at(dr, 5), g.data(),
                                        q.data(), k.data() + ko, v.data() + vo, tq.data(), tk.data() + ko,
                                        tv.data() + vo, L);
        for (int a = 0; a < 6; ++a)
          EXPECT_TRUE(test::all_close(("adjoint " + std::to_string(a)).c_str(), d[a], dr[a], 1e-6, 1e-5));
      }
    }
  });
}

// The tangent is the directional derivative of attention; its pullback the gradient of the
// tangent (weighted by a random adjoint) for each of the six operands. Dense, grouped heads.
TEST(AttentionTangentGrad, ReferenceMatchesFiniteDifferences) {
  const int B = 2, T = 4, NH = 4, NKV = 2, HS = 3;
  const AttentionLayout L = AttentionLayout::dense(B, T, NH, NKV, HS);
  const Operands n = sizes_of(L);
  std::vector<std::vector<double>> x = {draw<double>(n.nq, 1), draw<double>(n.nkv, 2), draw<double>(n.nkv, 3),
                                        draw<double>(n.nq, 4), draw<double>(n.nkv, 5), draw<double>(n.nkv, 6)};
  const auto w = draw<double>(n.nout, 7);  // adjoint of the output
  auto attend = [&] {
    std::vector<double> out(n.nout);
    ref::attention_forward(out.data(), static_cast<double*>(nullptr), x[0].data(), x[1].data(), x[2].data(), L);
    return out;
  };
  auto tangent = [&] {
    std::vector<double> out(n.nout);
    ref::attention_tangent_forward(out.data(), x[0].data(), x[1].data(), x[2].data(), x[3].data(), x[4].data(),
                                   x[5].data(), L);
    return out;
  };
  const double h = 1e-5;
  {
    const auto saved = x;
    for (int a = 0; a < 3; ++a)
      for (std::size_t i = 0; i < x[a].size(); ++i) x[a][i] = saved[a][i] + h * saved[a + 3][i];
    const auto up = attend();
    for (int a = 0; a < 3; ++a)
      for (std::size_t i = 0; i < x[a].size(); ++i) x[a][i] = saved[a][i] - h * saved[a + 3][i];
    const auto down = attend();
    x = saved;
    const auto t = tangent();
    for (std::size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], (up[i] - down[i]) / (2 * h), 1e-8) << i;
  }
  std::vector<std::vector<double>> d(6);
  for (int a = 0; a < 6; ++a) d[a].assign(x[a].size(), 0.0);
  ref::attention_tangent_backward(d[0].data(), d[1].data(), d[2].data(), d[3].data(), d[4].data(), d[5].data(),
                                  w.data(), x[0].data(), x[1].data(), x[2].data(), x[3].data(), x[4].data(),
                                  x[5].data(), L);
  for (int a = 0; a < 6; ++a) {
    EXPECT_TRUE(test::fd_check([&] { return test::weighted_sum(tangent(), w); },
                               {{"operand " + std::to_string(a), &x[a], &d[a]}}));
  }
}

TEST(AttentionTangentApi, FrontEndsAgreeAcrossFormsAndCheckShapes) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int B = 2, T = 3, NH = 2, NKV = 1, HS = 2, W = (NH + 2 * NKV) * HS;
  Tensor qkv = test::tensor_from(arena, {B, T, W}, draw<float>(B * T * W, 1));
  Tensor tqkv = test::tensor_from(arena, {B, T, W}, draw<float>(B * T * W, 2));
  // The same operands dense: copies of the packed slices.
  auto slice = [&](const Tensor& p, int from, int width) {
    std::vector<float> v;
    for (int r = 0; r < B * T; ++r)
      for (int c = 0; c < width; ++c) v.push_back(p.f32()[r * W + from + c]);
    return test::tensor_from(arena, {B, T, width}, v);
  };
  const Tensor q = slice(qkv, 0, NH * HS), k = slice(qkv, NH * HS, HS), v = slice(qkv, (NH + 1) * HS, HS);
  const Tensor tq = slice(tqkv, 0, NH * HS), tk = slice(tqkv, NH * HS, HS), tv = slice(tqkv, (NH + 1) * HS, HS);
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    const Tensor a = attention_tangent(q, k, v, tq, tk, tv, NH, NKV);
    const Tensor b = attention_qkv_tangent(qkv, tqkv, NH, NKV);
    ASSERT_EQ(a.shape(), b.shape());
    for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_FLOAT_EQ(a.f32()[i], b.f32()[i]) << i;
    const Tensor g = test::tensor_from(arena, {B, T, NH * HS}, draw<float>(B * T * NH * HS, 3));
    Tensor d_qkv = arena.zeros({B, T, W}, "d_qkv"), d_tqkv = arena.zeros({B, T, W}, "d_tqkv");
    Tensor d_k = arena.zeros({B, T, HS}, "d_k"), d_tv = arena.zeros({B, T, HS}, "d_tv");
    attention_qkv_tangent_pullback(qkv, tqkv, NH, NKV, b, g, &d_qkv, &d_tqkv);
    attention_tangent_pullback(q, k, v, tq, tk, tv, NH, NKV, a, g, nullptr, &d_k, nullptr, nullptr, nullptr, &d_tv);
    for (int r = 0; r < B * T; ++r)
      for (int c = 0; c < HS; ++c) {
        EXPECT_NEAR(d_k.f32()[r * HS + c], d_qkv.f32()[r * W + NH * HS + c], 1e-6) << r;
        EXPECT_NEAR(d_tv.f32()[r * HS + c], d_tqkv.f32()[r * W + (NH + 1) * HS + c], 1e-6) << r;
      }
  }
  Tensor wrong = arena.zeros({B, T, 3}, "w");
  EXPECT_TRUE(test::throws_error([&] { (void)attention_tangent(q, k, v, tq, wrong, tv, NH, NKV); },
                                 {"[attention]", "tk", "(2, 3, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention_qkv_tangent(qkv, wrong, NH, NKV); }, {"tqkv", "(2, 3, 3)"}));
  const Tensor g = arena.zeros({B, T, NH * HS}, "g");
  EXPECT_TRUE(test::throws_error(
      [&] {
        attention_tangent_pullback(q, k, v, tq, tk, tv, NH, NKV, g, g, nullptr, &wrong, nullptr, nullptr, nullptr,
                                   nullptr);
      },
      {"d_k has shape (2, 3, 3)"}));
}

}  // namespace
}  // namespace llmcc
