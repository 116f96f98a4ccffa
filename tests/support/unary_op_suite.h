// The test suites every element-wise unary op (out = f(x), d_x += d_out * f'(x)) shares: fast
// kernel against the reference run in double (awkward sizes, both thread counts, extreme
// inputs, NaN), the reference backward against finite differences, and the front end (shapes,
// accumulation, null adjoints, both kernel modes, errors). A test file describes its op with a
// UnaryOp and calls one function per TEST, so its suites keep their names and labels:
//
//   const test::UnaryOp kGelu{"gelu", cpu::gelu_forward, ...};
//   TEST(GeluKernel, ForwardAndBackwardMatchReference) { test::unary_kernel_matches_reference(kGelu); }
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "llmcc/tensor.h"
#include "test_support.h"

namespace llmcc::test {

struct UnaryOp {
  const char* name;  // the front end's error prefix, "gelu"
  void (*fast_forward)(float* out, const float* x, std::int64_t n);
  void (*fast_backward)(float* d_x, const float* x, const float* d_out, std::int64_t n);
  void (*ref_forward)(double* out, const double* x, std::int64_t n);
  void (*ref_backward)(double* d_x, const double* x, const double* d_out, std::int64_t n);
  void (*ref_forward_f)(float* out, const float* x, std::int64_t n);
  void (*ref_backward_f)(float* d_x, const float* x, const float* d_out, std::int64_t n);
  Tensor (*op)(const Tensor& x);
  void (*pullback)(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);
  double atol, rtol;            // fast against the double reference
  double kernel_range;          // the Kernel suite draws x in [-range, range]: both saturated tails
  std::vector<float> extremes;  // inputs beyond exp's float range, zeros, denormals
};

// Runs the fast kernel on x (n) and compares out and an accumulated d_x with the reference
// kernel run in double on the same inputs (the float reference itself loses digits where the
// derivative cancels, so it is no yardstick at this tolerance).
inline void unary_fast_matches_double_reference(const UnaryOp& op, const std::vector<float>& x,
                                                const std::vector<float>& d_out) {
  const auto n = static_cast<std::int64_t>(x.size());
  const auto xd = cast_vector<double>(x), d_out_d = cast_vector<double>(d_out);
  std::vector<float> out(x.size());       // (n)
  std::vector<double> out_ref(x.size());  // (n)
  op.fast_forward(out.data(), x.data(), n);
  op.ref_forward(out_ref.data(), xd.data(), n);
  EXPECT_TRUE(all_close("out", out, out_ref, op.atol, op.rtol));

  auto d_x = random_vector<float>(x.size(), 9);  // (n), pre-filled: must accumulate
  auto d_x_ref = cast_vector<double>(d_x);       // (n)
  op.fast_backward(d_x.data(), x.data(), d_out.data(), n);
  op.ref_backward(d_x_ref.data(), xd.data(), d_out_d.data(), n);
  EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, op.atol, op.rtol));
}

inline void unary_kernel_matches_reference(const UnaryOp& op) {
  for_each_thread_count([&](int) {
    for (int n : awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        unary_fast_matches_double_reference(op, random_vector<float>(n2, 1, -op.kernel_range, op.kernel_range),
                                            random_vector<float>(n2, 2));
      }
    }
  });
}

// The extremes match the reference, and a NaN propagates.
inline void unary_extreme_inputs_match_reference(const UnaryOp& op) {
  unary_fast_matches_double_reference(op, op.extremes, std::vector<float>(op.extremes.size(), 1.0f));
  std::vector<float> out(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  op.fast_forward(out.data(), &nan, 1);
  EXPECT_TRUE(std::isnan(out[0])) << "NaN must propagate, got " << out[0];
}

inline void unary_reference_backward_matches_finite_differences(const UnaryOp& op) {
  const int n = 41;
  auto x = random_vector<double>(n, 11, -6.0, 6.0);  // (n)
  const auto w = random_vector<double>(n, 13);       // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    op.ref_forward(out.data(), x.data(), n);
    return weighted_sum(out, w);
  };
  std::vector<double> d_x(n, 0.0);  // (n)
  op.ref_backward(d_x.data(), x.data(), w.data(), n);
  EXPECT_TRUE(fd_check(loss, {{"x", &x, &d_x}}));
}

inline void unary_forward_and_pullback_accumulate_and_skip_nulls(const UnaryOp& op) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  const auto xv = random_vector<float>(30, 1, -4.0, 4.0);
  Tensor x = tensor_from(arena, s, xv);  // (2, 3, 5)
  Tensor out = op.op(x);                 // (2, 3, 5)
  ASSERT_EQ(out.shape(), s);
  std::vector<float> expect(30);
  op.ref_forward_f(expect.data(), xv.data(), 30);
  EXPECT_TRUE(all_close("out", to_vector(out), expect, op.atol, op.rtol));

  Tensor d_out = tensor_from(arena, s, random_vector<float>(30, 3));  // (2, 3, 5)
  Tensor d_x = tensor_from(arena, s, std::vector<float>(30, 1.0f));   // (2, 3, 5)
  op.pullback(x, out, d_out, &d_x);                                   // accumulates onto the 1s
  std::vector<float> d_expect(30, 1.0f);
  op.ref_backward_f(d_expect.data(), xv.data(), d_out.f32(), 30);
  EXPECT_TRUE(all_close("d_x", to_vector(d_x), d_expect, op.atol, op.rtol));
  op.pullback(x, out, d_out, nullptr);  // inactive input: nothing to do, nothing thrown
}

inline void unary_reference_and_fast_modes_agree(const UnaryOp& op) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{4, 64, 65};
  const int n = 4 * 64 * 65;
  // Moderate inputs: this compares with the float reference, which (unlike the fast kernel)
  // cancels in the derivative's tails; accuracy there is the Kernel suite's job, against double.
  const auto xv = random_vector<float>(n, 5, -4.0, 4.0);
  Tensor x = tensor_from(arena, s, xv);                                       // (4, 64, 65)
  Tensor d_out = tensor_from(arena, s, random_vector<float>(n, 6));           // (4, 64, 65)
  Tensor out_fast, out_ref;                                                   // (4, 64, 65)
  Tensor d_fast = arena.zeros(s, "d_fast"), d_ref = arena.zeros(s, "d_ref");  // (4, 64, 65)
  {
    KernelModeScope m(KernelMode::Fast);
    out_fast = op.op(x);
    op.pullback(x, out_fast, d_out, &d_fast);
  }
  {
    KernelModeScope m(KernelMode::Reference);
    out_ref = op.op(x);
    op.pullback(x, out_ref, d_out, &d_ref);
  }
  EXPECT_TRUE(all_close("out", to_vector(out_fast), to_vector(out_ref), op.atol, op.rtol));
  EXPECT_TRUE(all_close("d_x", to_vector(d_fast), to_vector(d_ref), op.atol, op.rtol));
  // Polynomial exp against libm: bitwise equality everywhere would mean one kernel ran twice.
  EXPECT_NE(to_vector(out_fast), to_vector(out_ref)) << "kernel_mode had no effect";
}

inline void unary_rejects_bad_arguments(const UnaryOp& op) {
  const std::string prefix = std::string("[") + op.name + "]";
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3}, "x"), wrong = arena.zeros({3, 2}, "wrong");
  EXPECT_TRUE(throws_error([&] { (void)op.op(x); }, {prefix.c_str(), "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(throws_error([&] { (void)op.op(Tensor()); }, {prefix.c_str(), "x has no storage"}));
  EXPECT_TRUE(throws_error([&] { op.pullback(x, x, wrong, nullptr); },
                           {prefix.c_str(), "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(
      throws_error([&] { op.pullback(x, x, x, &wrong); }, {prefix.c_str(), "d_x has shape (3, 2)", "expected (2, 3)"}));
}

}  // namespace llmcc::test
