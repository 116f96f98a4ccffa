// swiglu: the fast kernels against silu then mul, bit for bit (a model that fuses them must not
// change a bit), and against the reference (Kernel); the reference backward against finite
// differences (Grad); the front end and pullback contract (Api).
#include "llmcc/ops/swiglu.h"

#include <string>
#include <vector>

#include "kernels/cpu/mul.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/ref/swiglu.h"
#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::random_vector;

// g over the range where silu bends and saturates, with exp's limits (|x| > 88), zero and a
// denormal mixed in.
std::vector<float> gate_values(int n, std::uint64_t seed) {
  auto g = random_vector<float>(n, seed, -12.0, 12.0);
  const float extremes[] = {-1e30f, -150.0f, -88.5f, -87.5f, -1e-40f, 0.0f, 1e-40f, 87.5f, 88.5f, 150.0f, 1e30f};
  for (int i = 0; i < n && i < 11; ++i) g[static_cast<std::size_t>(i) * 7 % n] = extremes[i];
  return g;
}

// Which adjoints a backward gets: both, only d_g, only d_up, or one buffer for both.
enum class Pattern { Both, OnlyG, OnlyUp, Aliased };
constexpr Pattern kPatterns[] = {Pattern::Both, Pattern::OnlyG, Pattern::OnlyUp, Pattern::Aliased};
std::string name(Pattern p) {
  return p == Pattern::Both     ? "both"
         : p == Pattern::OnlyG  ? "only d_g"
         : p == Pattern::OnlyUp ? "only d_up"
                                : "aliased";
}

// What the model computed before swiglu: t = silu(g), out = t * up forward; backward mul's
// pullback into a zeroed d_t and the adjoint of up, then silu's into the adjoint of g.
void silu_then_mul_backward(float* d_g, float* d_up, const float* g, const float* up, const float* d_out, int n) {
  std::vector<float> t(n), d_t(n, 0.0f);  // (n)
  cpu::silu_forward(t.data(), g, n);
  cpu::mul_backward(d_g ? d_t.data() : nullptr, d_up, t.data(), up, d_out, n);
  if (d_g) cpu::silu_backward(d_g, g, d_t.data(), n);
}

TEST(SwigluKernel, FastKernelsGiveTheBitsOfSiluThenMul) {
  test::for_each_thread_count([&](int) {
    for (int n0 : test::awkward_sizes()) {
      for (int n : {n0, n0 * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n));
        const auto g = gate_values(n, 1), up = random_vector<float>(n, 2), d_out = random_vector<float>(n, 3);
        std::vector<float> out(n), t(n), want(n);  // (n)
        cpu::swiglu_forward(out.data(), g.data(), up.data(), n);
        cpu::silu_forward(t.data(), g.data(), n);
        cpu::mul_forward(want.data(), t.data(), up.data(), n);
        EXPECT_TRUE(test::all_close("out", out, want, 0.0, 0.0));
        for (Pattern p : kPatterns) {
          for (bool overwrite : {false, true}) {
            SCOPED_TRACE(name(p) + (overwrite ? ", overwriting" : ", adding"));
            // Pre-filled adjoints must be added to; overwritten ones hold garbage that must not show.
            auto d_g = overwrite ? std::vector<float>(n, 1e30f) : random_vector<float>(n, 4);
            auto d_up = overwrite ? std::vector<float>(n, -1e30f) : random_vector<float>(n, 5);
            auto want_g = overwrite ? std::vector<float>(n, 0.0f) : d_g;
            auto want_up = overwrite ? std::vector<float>(n, 0.0f) : d_up;
            float* fg = p == Pattern::OnlyUp ? nullptr : d_g.data();
            float* fu = p == Pattern::OnlyG ? nullptr : p == Pattern::Aliased ? d_g.data() : d_up.data();
            float* rg = p == Pattern::OnlyUp ? nullptr : want_g.data();
            float* ru = p == Pattern::OnlyG ? nullptr : p == Pattern::Aliased ? want_g.data() : want_up.data();
            cpu::swiglu_backward(fg, overwrite, fu, overwrite, g.data(), up.data(), d_out.data(), n);
            if (p == Pattern::Aliased) {
              // mul's pullback adds d_out * silu(g) to the shared adjoint, then silu's adds its term.
              std::vector<float> d_t(n, 0.0f);
              cpu::mul_backward(d_t.data(), ru, t.data(), up.data(), d_out.data(), n);
              cpu::silu_backward(rg, g.data(), d_t.data(), n);
            } else {
              silu_then_mul_backward(rg, ru, g.data(), up.data(), d_out.data(), n);
            }
            if (p != Pattern::OnlyUp) {
              EXPECT_TRUE(test::all_close("d_g", d_g, want_g, 0.0, 0.0));
            }
            if (p == Pattern::Both || p == Pattern::OnlyUp) {
              EXPECT_TRUE(test::all_close("d_up", d_up, want_up, 0.0, 0.0));
            }
          }
        }
      }
    }
  });
}

// d_out may be given as one of the adjoints (the pullback then reads each element before it
// writes it): the same values as with a separate d_out.
TEST(SwigluKernel, DOutMayBeOneOfTheAdjoints) {
  const int n = 70001;  // large enough for the parallel path
  const auto g = gate_values(n, 31), up = random_vector<float>(n, 32), d_out = random_vector<float>(n, 33);
  const auto other = random_vector<float>(n, 34);
  for (bool as_g : {false, true}) {
    for (bool overwrite : {false, true}) {
      SCOPED_TRACE(std::string(as_g ? "d_out as d_g" : "d_out as d_up") + (overwrite ? ", overwriting" : ", adding"));
      auto want_g = as_g ? d_out : other, want_up = as_g ? other : d_out;  // (n)
      const auto d_out_copy = d_out;
      cpu::swiglu_backward(want_g.data(), overwrite, want_up.data(), overwrite, g.data(), up.data(), d_out_copy.data(),
                           n);
      auto shared = d_out, rest = other;  // (n): d_out and the adjoint it is, and the other adjoint
      float* dg = as_g ? shared.data() : rest.data();
      float* du = as_g ? rest.data() : shared.data();
      cpu::swiglu_backward(dg, overwrite, du, overwrite, g.data(), up.data(), shared.data(), n);
      EXPECT_TRUE(test::all_close("d_g", as_g ? shared : rest, want_g, 0.0, 0.0));
      EXPECT_TRUE(test::all_close("d_up", as_g ? rest : shared, want_up, 0.0, 0.0));
    }
  }
}

TEST(SwigluKernel, ForwardAndBackwardMatchReference) {
  for (int n : {1, 7, 65, 1000, 40001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto g = gate_values(n, 6), up = random_vector<float>(n, 7), d_out = random_vector<float>(n, 8);
    std::vector<double> gd(g.begin(), g.end()), upd(up.begin(), up.end()), d_outd(d_out.begin(), d_out.end());
    std::vector<float> out(n);                                      // (n)
    std::vector<double> want(n), want_g(n, 0.5), want_up(n, -0.5);  // (n)
    cpu::swiglu_forward(out.data(), g.data(), up.data(), n);
    ref::swiglu_forward(want.data(), gd.data(), upd.data(), n);
    // The fast exp is a polynomial: within 1e-6 + 1e-5 relative of the double reference.
    EXPECT_TRUE(test::all_close("out", out, want, 1e-6, 1e-5));
    std::vector<float> d_g(n, 0.5f), d_up(n, -0.5f);  // (n), pre-filled
    cpu::swiglu_backward(d_g.data(), false, d_up.data(), false, g.data(), up.data(), d_out.data(), n);
    ref::swiglu_backward(want_g.data(), want_up.data(), gd.data(), upd.data(), d_outd.data(), n);
    EXPECT_TRUE(test::all_close("d_g", d_g, want_g, 1e-6, 1e-5));
    EXPECT_TRUE(test::all_close("d_up", d_up, want_up, 1e-6, 1e-5));
  }
}

TEST(SwigluGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto g = random_vector<double>(n, 11, -4.0, 4.0), up = random_vector<double>(n, 12);
  const auto w = random_vector<double>(n, 13);  // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::swiglu_forward(out.data(), g.data(), up.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_g(n, 0.0), d_up(n, 0.0);  // (n)
  ref::swiglu_backward(d_g.data(), d_up.data(), g.data(), up.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"g", &g, &d_g}, {"up", &up, &d_up}}));
}

TEST(SwigluGrad, OneInputInBothSlotsMatchesFiniteDifferences) {
  // swiglu(x, x) = silu(x) * x: one adjoint receives both terms.
  const int n = 37;
  auto x = random_vector<double>(n, 14, -4.0, 4.0);
  const auto w = random_vector<double>(n, 15);  // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::swiglu_forward(out.data(), x.data(), x.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(n, 0.0);  // (n)
  ref::swiglu_backward(d_x.data(), d_x.data(), x.data(), x.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

TEST(SwigluApi, PullbackAccumulatesSkipsNullsAndModesAgree) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const Shape s{3, 5, 71};
  const int n = 3 * 5 * 71;
  Tensor g = test::tensor_from(arena, s, gate_values(n, 21));               // (3, 5, 71)
  Tensor up = test::tensor_from(arena, s, random_vector<float>(n, 22));     // (3, 5, 71)
  Tensor d_out = test::tensor_from(arena, s, random_vector<float>(n, 23));  // (3, 5, 71)
  std::vector<float> want_out(n), want_g(n, 1.0f), want_up(n, 2.0f);
  cpu::swiglu_forward(want_out.data(), g.f32(), up.f32(), n);
  cpu::swiglu_backward(want_g.data(), false, nullptr, false, g.f32(), up.f32(), d_out.f32(), n);
  cpu::swiglu_backward(nullptr, false, want_up.data(), false, g.f32(), up.f32(), d_out.f32(), n);
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    SCOPED_TRACE(mode == KernelMode::Fast ? "fast" : "reference");
    test::KernelModeScope m(mode);
    Tensor out = swiglu(g, up);
    ASSERT_EQ(out.shape(), s);
    Tensor d_g = test::tensor_from(arena, s, std::vector<float>(n, 1.0f));
    Tensor d_up = test::tensor_from(arena, s, std::vector<float>(n, 2.0f));
    swiglu_pullback(g, up, out, d_out, &d_g, nullptr);         // accumulates into d_g, skips d_up
    swiglu_pullback(g, up, out, d_out, nullptr, &d_up);        // and the other way round
    swiglu_pullback(g, up, out, d_out, nullptr, nullptr);      // all inactive: nothing to do
    const double tol = mode == KernelMode::Fast ? 0.0 : 1e-5;  // reference: exact exp, in float
    EXPECT_TRUE(test::all_close("out", test::to_vector(out), want_out, tol, tol));
    EXPECT_TRUE(test::all_close("d_g", test::to_vector(d_g), want_g, tol, tol));
    EXPECT_TRUE(test::all_close("d_up", test::to_vector(d_up), want_up, tol, tol));
  }
}

TEST(SwigluApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), wrong = arena.zeros({3, 2}, "wrong");  // (2, 3), (3, 2)
  EXPECT_TRUE(test::throws_error([&] { (void)swiglu(a, a); }, {"[swiglu]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)swiglu(Tensor(), a); }, {"[swiglu]", "g has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)swiglu(a, Tensor()); }, {"[swiglu]", "up has no storage"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)swiglu(a, wrong); }, {"[swiglu]", "up has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { swiglu_pullback(a, wrong, a, a, nullptr, nullptr); },
                                 {"[swiglu]", "up has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { swiglu_pullback(a, a, a, wrong, nullptr, nullptr); },
                                 {"[swiglu]", "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { swiglu_pullback(a, a, a, a, &wrong, nullptr); },
                                 {"[swiglu]", "d_g has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { swiglu_pullback(a, a, a, a, nullptr, &wrong); },
                                 {"[swiglu]", "d_up has shape (3, 2)", "expected (2, 3)"}));
}

}  // namespace
}  // namespace llmcc
