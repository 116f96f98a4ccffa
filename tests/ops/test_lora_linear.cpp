// lora_linear: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front end, pullback contract and equality with the composition it replaces (Api), with and
// without dropout on the update's input, and the dropout mask itself (Mask).
// out = x W^T + s ((x . m) A^T) B^T, W (OC, C), A (R, C), B (OC, R), m the mask (ones: none).
#include "llmcc/ops/lora_linear.h"

#include <array>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/lora_linear.h"
#include "kernels/ref/lora_linear.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/scale.h"
#include "llmcc/runtime.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;
using test::cast_vector;
using test::random_vector;

// The tolerance grows with the longest reduction (fp32 rounding accumulates over it).
double atol_for(std::int64_t K) { return 2e-6 * static_cast<double>(K) + 1e-6; }

// Sizes (N, C, OC, R): each awkward size on each dim, the others small and awkward, and ranks
// 1 (a vector), 3, 16 and 64.
std::vector<std::array<int, 4>> kernel_sizes() {
  std::vector<std::array<int, 4>> sizes;
  for (int s : test::awkward_sizes()) {
    sizes.push_back({s, 65, 7, 3});
    sizes.push_back({7, s, 65, 16});
    sizes.push_back({65, 7, s, 1});
  }
  for (int r : {1, 3, 16, 64}) sizes.push_back({197, 96, 65, r});
  sizes.push_back({256, 960, 320, 16});  // a 360M model's k map at T = 256
  return sizes;
}

std::string label(int N, int C, int OC, int R) {
  return "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) + " R=" + std::to_string(R);
}

// No dropout, and a dropout. The kernel and gradient tests give the map a bias (OC) with the
// dropout: the two cases are a map as Llama's and one as GPT-2's.
const cpu::Dropout kDropouts[] = {{}, {0.3f, 0x1234'5678'9abc'def0ULL}};

std::string label(const cpu::Dropout& d) { return d.active() ? " dropout 0.3, a bias" : " no dropout, no bias"; }

// kernel_sizes(), and with a dropout a size whose masked rows span two of the fast kernel's
// blocks (1M floats per block: 388 rows of 2,700, then 12).
std::vector<std::array<int, 4>> kernel_sizes(const cpu::Dropout& d) {
  std::vector<std::array<int, 4>> sizes = kernel_sizes();
  if (d.active()) sizes.push_back({400, 2700, 3, 2});
  return sizes;
}

TEST(LoraLinearKernel, ForwardMatchesReference) {
  test::for_each_thread_count([](int) {
    for (const cpu::Dropout& drop : kDropouts)
      for (auto [N, C, OC, R] : kernel_sizes(drop)) {
        SCOPED_TRACE(label(N, C, OC, R) + label(drop));
        const auto x = random_vector<float>(N * C, 1), w = random_vector<float>(OC * C, 2);  // (N, C), (OC, C)
        const auto a = random_vector<float>(R * C, 3), b = random_vector<float>(OC * R, 4);  // (R, C), (OC, R)
        const float s = 0.75f;
        std::vector<float> out(N * OC), xa(N * R);           // (N, OC), (N, R)
        std::vector<double> out_ref(N * OC), xa_ref(N * R);  // (N, OC), (N, R)
        const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), ad = cast_vector<double>(a),
                   bd = cast_vector<double>(b);
        cpu::lora_linear_forward(out.data(), xa.data(), x.data(), {w.data(), nullptr}, a.data(), b.data(), s, N, C, OC,
                                 R, drop);
        ref::lora_linear_forward<double>(out_ref.data(), xa_ref.data(), xd.data(), wd.data(), ad.data(), bd.data(), s,
                                         N, C, OC, R, drop);
        EXPECT_TRUE(all_close("xa", xa, xa_ref, atol_for(C), 1e-5));
        EXPECT_TRUE(all_close("out", out, out_ref, atol_for(C + C * R), 1e-5));
      }
  });
}

TEST(LoraLinearKernel, BackwardMatchesReferenceAccumulatesAndSkipsNulls) {
  test::for_each_thread_count([](int) {
    for (const cpu::Dropout& drop : kDropouts)
      for (auto [N, C, OC, R] : kernel_sizes(drop)) {
        // Every adjoint, then the adapters' alone (a frozen W and no d_x: the first block of a
        // model), then d_x alone.
        for (int which : {0b1111, 0b0011, 0b1000}) {
          SCOPED_TRACE(label(N, C, OC, R) + label(drop) + " adjoints " + std::to_string(which));
          const auto x = random_vector<float>(N * C, 1), w = random_vector<float>(OC * C, 2);
          const auto a = random_vector<float>(R * C, 3), b = random_vector<float>(OC * R, 4);
          const auto xa = random_vector<float>(N * R, 5), d_out = random_vector<float>(N * OC, 6);
          const float s = -1.25f;
          // Pre-filled adjoints: the kernels must add to them.
          auto d_x = random_vector<float>(N * C, 7), d_w = random_vector<float>(OC * C, 8);
          auto d_a = random_vector<float>(R * C, 9), d_b = random_vector<float>(OC * R, 10);
          auto d_x_ref = cast_vector<double>(d_x), d_w_ref = cast_vector<double>(d_w),
               d_a_ref = cast_vector<double>(d_a), d_b_ref = cast_vector<double>(d_b);
          auto d_bias = random_vector<float>(OC, 11);  // (OC), with the dropout case
          auto d_bias_ref = cast_vector<double>(d_bias);
          float* d_bias_fast = drop.active() && (which & 4) ? d_bias.data() : nullptr;
          double* d_bias_slow = drop.active() && (which & 4) ? d_bias_ref.data() : nullptr;
          const bool ox = which & 8, ow = which & 4, oa = which & 2, ob = which & 1;
          std::vector<float> g(N * R);
          cpu::lora_linear_backward(ox ? d_x.data() : nullptr, ow ? d_w.data() : nullptr, oa ? d_a.data() : nullptr,
                                    ob ? d_b.data() : nullptr, ox || oa ? g.data() : nullptr, d_out.data(), x.data(),
                                    {w.data(), nullptr}, a.data(), b.data(), xa.data(), s, N, C, OC, R, false, drop,
                                    d_bias_fast);
          const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), ad = cast_vector<double>(a),
                     bd = cast_vector<double>(b), xad = cast_vector<double>(xa), dod = cast_vector<double>(d_out);
          ref::lora_linear_backward<double>(ox ? d_x_ref.data() : nullptr, ow ? d_w_ref.data() : nullptr,
                                            oa ? d_a_ref.data() : nullptr, ob ? d_b_ref.data() : nullptr, dod.data(),
                                            xd.data(), wd.data(), ad.data(), bd.data(), xad.data(), s, N, C, OC, R,
                                            drop, d_bias_slow);
          EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, atol_for(OC + OC * R), 1e-5));
          EXPECT_TRUE(all_close("d_w", d_w, d_w_ref, atol_for(N), 1e-5));
          EXPECT_TRUE(all_close("d_a", d_a, d_a_ref, atol_for(N * OC), 1e-5));
          EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, atol_for(N), 1e-5));
          EXPECT_TRUE(all_close("d_bias", d_bias, d_bias_ref, atol_for(N), 1e-5));
        }
      }
  });
}

// ||v - ref|| / ||ref||.
double relative_error(const std::vector<float>& v, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < v.size(); ++i) diff += (v[i] - ref[i]) * (v[i] - ref[i]), norm += ref[i] * ref[i];
  return std::sqrt(diff / norm);
}

// With bf16 matrix products (--dtype bf16) every product of the op, the rank-R ones included,
// runs on operands rounded to bf16: each output is the double reference on the fp32 operands to
// within bf16's precision (relative error about 2^-9 per rounding; 1e-2 allowed), where a lost
// or misplaced term of a sum would be off by its share of the sum (several percent at these K).
TEST(LoraLinearKernel, Bf16ProductsMatchReferenceToBf16Precision) {
  struct DtypeGuard {
    ~DtypeGuard() { set_matmul_dtype(MatmulDtype::Fp32); }
  } guard;
  set_matmul_dtype(MatmulDtype::Bf16);
  test::for_each_thread_count([](int) {
    for (const cpu::Dropout& drop : kDropouts)
      for (auto [N, C, OC, R] :
           std::vector<std::array<int, 4>>{{65, 96, 197, 16}, {128, 960, 320, 16}, {33, 70, 40, 3}}) {
        SCOPED_TRACE(label(N, C, OC, R) + label(drop));
        const auto x = random_vector<float>(N * C, 1), w = random_vector<float>(OC * C, 2);  // (N, C), (OC, C)
        const auto a = random_vector<float>(R * C, 3), b = random_vector<float>(OC * R, 4);  // (R, C), (OC, R)
        const auto d_out = random_vector<float>(N * OC, 6);                                  // (N, OC)
        const float s = 0.75f;
        std::vector<float> out(N * OC), xa(N * R), g(N * R);  // (N, OC), (N, R)
        std::vector<float> d_x(N * C), d_w(OC * C), d_a(R * C), d_b(OC * R);
        cpu::lora_linear_forward(out.data(), xa.data(), x.data(), {w.data(), nullptr}, a.data(), b.data(), s, N, C, OC,
                                 R, drop);
        cpu::lora_linear_backward(d_x.data(), d_w.data(), d_a.data(), d_b.data(), g.data(), d_out.data(), x.data(),
                                  {w.data(), nullptr}, a.data(), b.data(), xa.data(), s, N, C, OC, R, true, drop);
        const auto xd = cast_vector<double>(x), wd = cast_vector<double>(w), ad = cast_vector<double>(a),
                   bd = cast_vector<double>(b), dod = cast_vector<double>(d_out);
        std::vector<double> out_ref(N * OC), xa_ref(N * R), d_x_ref(N * C), d_w_ref(OC * C), d_a_ref(R * C),
            d_b_ref(OC * R);
        ref::lora_linear_forward<double>(out_ref.data(), xa_ref.data(), xd.data(), wd.data(), ad.data(), bd.data(), s,
                                         N, C, OC, R, drop);
        ref::lora_linear_backward<double>(d_x_ref.data(), d_w_ref.data(), d_a_ref.data(), d_b_ref.data(), dod.data(),
                                          xd.data(), wd.data(), ad.data(), bd.data(), xa_ref.data(), s, N, C, OC, R,
                                          drop, nullptr);
        const std::pair<const char*, double> errors[] = {
            {"out", relative_error(out, out_ref)}, {"xa", relative_error(xa, xa_ref)},
            {"d_x", relative_error(d_x, d_x_ref)}, {"d_w", relative_error(d_w, d_w_ref)},
            {"d_a", relative_error(d_a, d_a_ref)}, {"d_b", relative_error(d_b, d_b_ref)}};
        for (auto [name, error] : errors) {
          EXPECT_LT(error, 1e-2) << name;
          // Some rounding to bf16 happened: fp32 products would be within about 1e-6.
          EXPECT_GT(error, 1e-5) << name << " looks computed in fp32";
        }
        // The adapters' gradients accumulate: a second backward adds the same values again.
        auto d_a2 = d_a, d_b2 = d_b;
        cpu::lora_linear_backward(d_x.data(), nullptr, d_a2.data(), d_b2.data(), g.data(), d_out.data(), x.data(),
                                  {w.data(), nullptr}, a.data(), b.data(), xa.data(), s, N, C, OC, R, true, drop);
        for (float& v : d_a) v *= 2.0f;
        for (float& v : d_b) v *= 2.0f;
        EXPECT_TRUE(all_close("d_a accumulated", d_a2, d_a, 1e-6, 1e-6));
        EXPECT_TRUE(all_close("d_b accumulated", d_b2, d_b, 1e-6, 1e-6));
      }
  });
}

// Sum(out * g) as a function of every input, through the double reference forward, with and
// without dropout (a fixed seed makes the mask a constant of the function).
TEST(LoraLinearGrad, ReferenceBackwardMatchesFiniteDifferences) {
  for (const cpu::Dropout& drop : kDropouts) {
    SCOPED_TRACE(label(drop));
    const int N = 6, C = 5, OC = 4, R = 3;
    auto x = random_vector<double>(N * C, 11), w = random_vector<double>(OC * C, 12);
    auto a = random_vector<double>(R * C, 13), b = random_vector<double>(OC * R, 14);
    const auto g = random_vector<double>(N * OC, 15);  // adjoint of out (N, OC)
    const double s = 0.6;
    auto loss = [&] {
      std::vector<double> out(N * OC), xa(N * R);
      ref::lora_linear_forward(out.data(), xa.data(), x.data(), w.data(), a.data(), b.data(), s, N, C, OC, R, drop);
      return test::weighted_sum(out, g);
    };
    std::vector<double> out(N * OC), xa(N * R);
    ref::lora_linear_forward(out.data(), xa.data(), x.data(), w.data(), a.data(), b.data(), s, N, C, OC, R, drop);
    std::vector<double> d_x(N * C, 0.0), d_w(OC * C, 0.0), d_a(R * C, 0.0), d_b(OC * R, 0.0);
    ref::lora_linear_backward(d_x.data(), d_w.data(), d_a.data(), d_b.data(), g.data(), x.data(), w.data(), a.data(),
                              b.data(), xa.data(), s, N, C, OC, R, drop);
    EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}, {"w", &w, &d_w}, {"a", &a, &d_a}, {"b", &b, &d_b}}));
  }
}

// The mask: its rate is p, it depends on the seed, the row and the column, and the same
// arguments draw the same mask.
TEST(LoraLinearMask, DropsAtRatePerSeedRowAndColumn) {
  const int N = 512, C = 1000;
  for (float p : {0.05f, 0.1f, 0.5f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    const auto m = ref::dropout_factors<float>(N, C, {p, 42});
    int dropped = 0;
    for (float f : m) {
      ASSERT_TRUE(f == 0.0f || f == 1.0f / (1.0f - p)) << f;
      dropped += f == 0.0f;
    }
    // A binomial count of N * C draws: 5 standard deviations either side.
    const double n = static_cast<double>(N) * C, sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(dropped, n * p, 5 * sd);
    EXPECT_EQ(m, ref::dropout_factors<float>(N, C, {p, 42}));
    const auto other = ref::dropout_factors<float>(N, C, {p, 43});
    int differ = 0;
    for (std::size_t i = 0; i < m.size(); ++i) differ += (m[i] == 0.0f) != (other[i] == 0.0f);
    EXPECT_NEAR(differ, n * 2 * p * (1 - p), 5 * std::sqrt(n * 2 * p * (1 - p)));
    // No two rows share a mask, and no row is its neighbour's shifted by a column.
    std::set<std::vector<float>> rows;
    for (int i = 0; i < N; ++i) rows.insert(std::vector<float>(m.begin() + i * C, m.begin() + (i + 1) * C));
    EXPECT_EQ(rows.size(), static_cast<std::size_t>(N));
    int shifted_equal = 0;
    for (int i = 0; i + 1 < N; ++i)
      for (int j = 0; j + 1 < C; ++j) shifted_equal += (m[i * C + j + 1] == 0.0f) == (m[(i + 1) * C + j] == 0.0f);
    const double pairs = static_cast<double>(N - 1) * (C - 1), agree = p * p + (1 - p) * (1 - p);
    EXPECT_NEAR(shifted_equal, pairs * agree, 5 * std::sqrt(pairs * agree * (1 - agree)));
  }
  EXPECT_EQ(ref::dropout_factors<float>(3, 4, {}), std::vector<float>(12, 1.0f));
}

// The op computes what the composition linear_nobias(x, w) + s * linear_nobias(linear_nobias(x,
// a), b) computes, forward and backward, in both kernel modes, and accumulates into its adjoints.
TEST(LoraLinearApi, EqualsTheCompositionInBothModesAndAccumulates) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int B = 2, T = 33, C = 40, OC = 24, R = 5;
  const float s = 1.5f;
  Tensor x = test::tensor_from(arena, {B, T, C}, random_vector<float>(B * T * C, 1));        // (B, T, C)
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));             // (OC, C)
  Tensor a = test::tensor_from(arena, {R, C}, random_vector<float>(R * C, 3));               // (R, C)
  Tensor b = test::tensor_from(arena, {OC, R}, random_vector<float>(OC * R, 4));             // (OC, R)
  Tensor d_out = test::tensor_from(arena, {B, T, OC}, random_vector<float>(B * T * OC, 5));  // (B, T, OC)
  // The composition's adjoints, through the linear and scale pullbacks.
  Tensor base = linear_nobias(x, w), xa = linear_nobias(x, a), sxa = scale(xa, s), up = linear_nobias(sxa, b);
  Tensor cx = arena.zeros({B, T, C}, "cx"), cw = arena.zeros({OC, C}, "cw"), ca = arena.zeros({R, C}, "ca"),
         cb = arena.zeros({OC, R}, "cb"), c_sxa = arena.zeros({B, T, R}, "c_sxa"), c_xa = arena.zeros({B, T, R}, "");
  linear_nobias_pullback(x, w, base, d_out, &cx, &cw);
  linear_nobias_pullback(sxa, b, up, d_out, &c_sxa, &cb);
  scale_pullback(xa, s, sxa, c_sxa, &c_xa, nullptr);
  linear_nobias_pullback(x, a, xa, c_xa, &cx, &ca);
  std::vector<float> composed(B * T * OC);
  for (int i = 0; i < B * T * OC; ++i) composed[i] = base.f32()[i] + up.f32()[i];
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    SCOPED_TRACE(mode == KernelMode::Reference ? "reference" : "fast");
    set_kernel_mode(mode);
    LoraLinearSaved saved;
    Tensor out = lora_linear_fwd(x, w, a, b, s, saved);  // (B, T, OC)
    ASSERT_EQ(out.shape(), (Shape{B, T, OC}));
    ASSERT_EQ(saved.xa.shape(), (Shape{B * T, R}));
    EXPECT_TRUE(all_close("out", test::to_vector(out), composed, 1e-4, 1e-5));
    EXPECT_TRUE(all_close("lora_linear", test::to_vector(lora_linear(x, w, a, b, s)), composed, 1e-4, 1e-5));
    // Into adjoints pre-filled with ones: the composition's plus one.
    Tensor dx = test::tensor_from(arena, {B, T, C}, std::vector<float>(B * T * C, 1.0f));
    Tensor dw = test::tensor_from(arena, {OC, C}, std::vector<float>(OC * C, 1.0f));
    Tensor da = test::tensor_from(arena, {R, C}, std::vector<float>(R * C, 1.0f));
    Tensor db = test::tensor_from(arena, {OC, R}, std::vector<float>(OC * R, 1.0f));
    lora_linear_pullback(x, w, a, b, s, out, saved, d_out, &dx, &dw, &da, &db);
    auto plus_one = [](const Tensor& t) {
      std::vector<float> v = test::to_vector(t);
      for (float& e : v) e += 1.0f;
      return v;
    };
    EXPECT_TRUE(all_close("d_x", test::to_vector(dx), plus_one(cx), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_w", test::to_vector(dw), plus_one(cw), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_a", test::to_vector(da), plus_one(ca), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_b", test::to_vector(db), plus_one(cb), 1e-4, 1e-5));
    // Only the adapters (a frozen W, an input that needs no adjoint).
    Tensor da2 = arena.zeros({R, C}, "da2"), db2 = arena.zeros({OC, R}, "db2");
    lora_linear_pullback(x, w, a, b, s, out, saved, d_out, nullptr, nullptr, &da2, &db2);
    EXPECT_TRUE(all_close("d_a alone", test::to_vector(da2), test::to_vector(ca), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_b alone", test::to_vector(db2), test::to_vector(cb), 1e-4, 1e-5));
    // A first contribution with its zeros pending is written, not added to garbage.
    Tensor dx3 = test::tensor_from(arena, {B, T, C}, std::vector<float>(B * T * C, 7.0f));
    dx3.mark_zero_pending();
    lora_linear_pullback(x, w, a, b, s, out, saved, d_out, &dx3, nullptr, nullptr, nullptr);
    EXPECT_TRUE(all_close("d_x pending", test::to_vector(dx3), test::to_vector(cx), 1e-4, 1e-5));
  }
  set_kernel_mode(KernelMode::Fast);
}

// With dropout the op computes linear_nobias(x, w) + s * linear_nobias(linear_nobias(x . m, a), b)
// for the mask m its seed draws, forward and backward, in both kernel modes; p 0 is no dropout,
// bit for bit.
TEST(LoraLinearApi, DropoutEqualsTheMaskedComposition) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int B = 2, T = 17, C = 24, OC = 12, R = 3;
  const float s = 2.0f;
  const LoraDropout drop{0.25f, 7};
  Tensor x = test::tensor_from(arena, {B, T, C}, random_vector<float>(B * T * C, 1));        // (B, T, C)
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));             // (OC, C)
  Tensor a = test::tensor_from(arena, {R, C}, random_vector<float>(R * C, 3));               // (R, C)
  Tensor b = test::tensor_from(arena, {OC, R}, random_vector<float>(OC * R, 4));             // (OC, R)
  Tensor d_out = test::tensor_from(arena, {B, T, OC}, random_vector<float>(B * T * OC, 5));  // (B, T, OC)
  const std::vector<float> m = ref::dropout_factors<float>(B * T, C, {drop.p, drop.seed});
  std::vector<float> xm_values = test::to_vector(x);
  for (std::size_t i = 0; i < xm_values.size(); ++i) xm_values[i] *= m[i];
  Tensor xm = test::tensor_from(arena, {B, T, C}, xm_values);  // (B, T, C)
  Tensor base = linear_nobias(x, w), xa = linear_nobias(xm, a), sxa = scale(xa, s), up = linear_nobias(sxa, b);
  Tensor cx = arena.zeros({B, T, C}, "cx"), cxm = arena.zeros({B, T, C}, "cxm"), ca = arena.zeros({R, C}, "ca"),
         cb = arena.zeros({OC, R}, "cb"), c_sxa = arena.zeros({B, T, R}, "c_sxa"), c_xa = arena.zeros({B, T, R}, "");
  linear_nobias_pullback(x, w, base, d_out, &cx, nullptr);
  linear_nobias_pullback(sxa, b, up, d_out, &c_sxa, &cb);
  scale_pullback(xa, s, sxa, c_sxa, &c_xa, nullptr);
  linear_nobias_pullback(xm, a, xa, c_xa, &cxm, &ca);
  std::vector<float> composed(B * T * OC), composed_dx = test::to_vector(cx);
  for (int i = 0; i < B * T * OC; ++i) composed[i] = base.f32()[i] + up.f32()[i];
  for (int i = 0; i < B * T * C; ++i) composed_dx[i] += cxm.f32()[i] * m[i];
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    SCOPED_TRACE(mode == KernelMode::Reference ? "reference" : "fast");
    set_kernel_mode(mode);
    LoraLinearSaved saved;
    Tensor out = lora_linear_fwd(x, w, a, b, s, drop, saved);  // (B, T, OC)
    EXPECT_TRUE(all_close("out", test::to_vector(out), composed, 1e-4, 1e-5));
    EXPECT_TRUE(all_close("xa", test::to_vector(saved.xa), test::to_vector(xa), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("lora_linear", test::to_vector(lora_linear(x, w, a, b, s, drop)), composed, 1e-4, 1e-5));
    Tensor dx = arena.zeros({B, T, C}, "dx"), da = arena.zeros({R, C}, "da"), db = arena.zeros({OC, R}, "db");
    lora_linear_pullback(x, w, a, b, s, drop, out, saved, d_out, &dx, nullptr, &da, &db);
    EXPECT_TRUE(all_close("d_x", test::to_vector(dx), composed_dx, 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_a", test::to_vector(da), test::to_vector(ca), 1e-4, 1e-5));
    EXPECT_TRUE(all_close("d_b", test::to_vector(db), test::to_vector(cb), 1e-4, 1e-5));
    // p 0: the op without dropout, bit for bit.
    LoraLinearSaved plain_saved, zero_saved;
    Tensor plain = lora_linear_fwd(x, w, a, b, s, plain_saved);
    Tensor zero = lora_linear_fwd(x, w, a, b, s, LoraDropout{0.0f, 99}, zero_saved);
    EXPECT_EQ(test::to_vector(plain), test::to_vector(zero));
    Tensor dx0 = arena.zeros({B, T, C}, "dx0"), dx1 = arena.zeros({B, T, C}, "dx1");
    Tensor da0 = arena.zeros({R, C}, "da0"), da1 = arena.zeros({R, C}, "da1");
    lora_linear_pullback(x, w, a, b, s, plain, plain_saved, d_out, &dx0, nullptr, &da0, nullptr);
    lora_linear_pullback(x, w, a, b, s, LoraDropout{0.0f, 99}, zero, zero_saved, d_out, &dx1, nullptr, &da1, nullptr);
    EXPECT_EQ(test::to_vector(dx0), test::to_vector(dx1));
    EXPECT_EQ(test::to_vector(da0), test::to_vector(da1));
  }
  set_kernel_mode(KernelMode::Fast);
}

// With a bias the op computes linear(x, w, bias) + s * linear_nobias(linear_nobias(x . m, a), b):
// the bias's adjoint is linear's, and a bias of the wrong shape is refused.
TEST(LoraLinearApi, ABiasIsAddedAndGetsLinearsGradient) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int N = 19, C = 10, OC = 7, R = 2;
  const float s = 0.5f;
  const LoraDropout drop{0.2f, 3};
  Tensor x = test::tensor_from(arena, {N, C}, random_vector<float>(N * C, 1));        // (N, C)
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));      // (OC, C)
  Tensor bias = test::tensor_from(arena, {OC}, random_vector<float>(OC, 6));          // (OC)
  Tensor a = test::tensor_from(arena, {R, C}, random_vector<float>(R * C, 3));        // (R, C)
  Tensor b = test::tensor_from(arena, {OC, R}, random_vector<float>(OC * R, 4));      // (OC, R)
  Tensor d_out = test::tensor_from(arena, {N, OC}, random_vector<float>(N * OC, 5));  // (N, OC)
  Tensor plain = lora_linear(x, w, a, b, s, drop), biased_out = linear(x, w, bias);   // (N, OC) each
  Tensor dbias_want = arena.zeros({OC}, "dbias_want");
  linear_pullback(x, w, bias, biased_out, d_out, nullptr, nullptr, &dbias_want);
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    SCOPED_TRACE(mode == KernelMode::Reference ? "reference" : "fast");
    set_kernel_mode(mode);
    LoraLinearSaved saved;
    Tensor out = lora_linear_fwd(x, w, bias, a, b, s, drop, saved);  // (N, OC)
    std::vector<float> want = test::to_vector(plain);
    for (int i = 0; i < N * OC; ++i) want[i] += bias.f32()[i % OC];
    EXPECT_TRUE(all_close("out", test::to_vector(out), want, 1e-4, 1e-5));
    EXPECT_TRUE(all_close("lora_linear", test::to_vector(lora_linear(x, w, bias, a, b, s, drop)), want, 1e-4, 1e-5));
    Tensor dbias = arena.zeros({OC}, "dbias"), da = arena.zeros({R, C}, "da"), da_plain = arena.zeros({R, C}, "dap");
    lora_linear_pullback(x, w, bias, a, b, s, drop, out, saved, d_out, nullptr, nullptr, &dbias, &da, nullptr);
    EXPECT_TRUE(all_close("d_bias", test::to_vector(dbias), test::to_vector(dbias_want), 1e-4, 1e-5));
    LoraLinearSaved plain_saved;
    Tensor again = lora_linear_fwd(x, w, a, b, s, drop, plain_saved);
    lora_linear_pullback(x, w, a, b, s, drop, again, plain_saved, d_out, nullptr, nullptr, &da_plain, nullptr);
    EXPECT_EQ(test::to_vector(da), test::to_vector(da_plain));
  }
  set_kernel_mode(KernelMode::Fast);
  Tensor bias6 = arena.zeros({6}, "bias6");
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, bias6, a, b, s, drop); },
                                 {"[lora_linear]", "bias has shape (6)", "expected (7) f32 (dim 0 of w)"}));
}

TEST(LoraLinearApi, RejectsADropoutThatIsNotAProbability) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = arena.zeros({2, 3, 5}, "x"), w = arena.zeros({4, 5}, "w"), a = arena.zeros({2, 5}, "a"),
         b = arena.zeros({4, 2}, "b");
  for (float p : {-0.1f, 1.0f, 1.5f, std::nanf("")}) {
    EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a, b, 1.0f, LoraDropout{p, 1}); },
                                   {"[lora_linear]", "dropout.p is", "expected a probability in [0, 1)"}));
  }
  LoraLinearSaved saved;
  Tensor out = lora_linear_fwd(x, w, a, b, 1.0f, saved);
  Tensor d_out = arena.zeros({2, 3, 4}, "d_out");
  EXPECT_TRUE(test::throws_error(
      [&] {
        lora_linear_pullback(x, w, a, b, 1.0f, LoraDropout{1.0f, 1}, out, saved, d_out, nullptr, nullptr, nullptr,
                             nullptr);
      },
      {"[lora_linear]", "dropout.p is 1", "expected a probability in [0, 1)"}));
}

TEST(LoraLinearApi, RejectsBadShapes) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 5}, "x"), w = arena.zeros({4, 5}, "w"), a = arena.zeros({2, 5}, "a"),
         b = arena.zeros({4, 2}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a, b, 1.0f); }, {"[lora_linear]", "no arena"}));
  ArenaScope scope(arena);
  Tensor a6 = arena.zeros({2, 6}, "a6"), b3 = arena.zeros({4, 3}, "b3"), b5 = arena.zeros({5, 2}, "b5");
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a6, b, 1.0f); },
                                 {"[lora_linear]", "a has shape (2, 6)", "expected 5 (last dim of x)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a, b3, 1.0f); },
                                 {"[lora_linear]", "b has shape (4, 3)", "expected 2 (dim 0 of a (the rank))"}));
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a, b5, 1.0f); },
                                 {"[lora_linear]", "b has shape (5, 2)", "expected 4 (dim 0 of w)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)lora_linear(x, w, a, b, std::nanf("")); },
                                 {"[lora_linear]", "s is nan", "finite"}));
  LoraLinearSaved saved;
  Tensor out = lora_linear_fwd(x, w, a, b, 1.0f, saved);  // (2, 3, 4)
  Tensor d_out = arena.zeros({2, 3, 4}, "d_out"), d_out_bad = arena.zeros({6, 4}, "d_out_bad");
  EXPECT_TRUE(test::throws_error(
      [&] { lora_linear_pullback(x, w, a, b, 1.0f, out, saved, d_out_bad, nullptr, nullptr, nullptr, nullptr); },
      {"[lora_linear]", "d_out has shape (6, 4)", "expected (2, 3, 4)"}));
  EXPECT_TRUE(test::throws_error(
      [&] { lora_linear_pullback(x, w, a, b, 1.0f, out, saved, d_out, nullptr, nullptr, &b, nullptr); },
      {"[lora_linear]", "d_a has shape (4, 2)", "expected (2, 5)"}));
  LoraLinearSaved wrong;
  wrong.xa = arena.zeros({6, 3}, "xa");
  EXPECT_TRUE(test::throws_error(
      [&] { lora_linear_pullback(x, w, a, b, 1.0f, out, wrong, d_out, nullptr, nullptr, nullptr, nullptr); },
      {"[lora_linear]", "saved.xa has shape (6, 3)", "expected (6, 2)"}));
}

}  // namespace
}  // namespace llmcc
