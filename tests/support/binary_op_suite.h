// The test suites every element-wise binary op (out = f(a, b), adjoints d_a and d_b) shares,
// where b is either a tensor of a's shape (mul) or one scalar (scale): fast kernel against the
// reference (awkward sizes, both thread counts, every pattern of null adjoints), the reference
// backward against finite differences, and the front end (every spelling of the op, accumulation,
// null adjoints, both kernel modes, errors). A test file describes its op with a BinaryOp and
// calls one function per TEST, so its suites keep their names and labels:
//
//   const test::BinaryOp kMul{"mul", {"a", "b"}, ...};
//   TEST(MulKernel, ForwardAndBackwardMatchReference) { test::binary_kernel_matches_reference(kMul); }
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "llmcc/tensor.h"
#include "test_support.h"

namespace llmcc::test {

// The fast-against-reference tolerance of one result: |got - ref| <= atol + rtol * |ref|.
struct Tolerance {
  double atol, rtol;
};

struct BinaryOp {
  const char* name;           // the front end's error prefix, "mul"
  const char* operand[2];     // the names the front end gives a and b: {"a", "b"}, {"x", "s"}
  bool scalar_b;              // b is one value (scale's s), not a tensor of a's shape
  float scalar;               // that value, where scalar_b
  bool one_adjoint_for_both;  // the backward may be given one buffer as d_a and d_b (x * x)
  // Kernels over n elements; b points at n values, or at one where scalar_b. Null adjoints are
  // skipped; both accumulate.
  void (*fast_forward)(float* out, const float* a, const float* b, std::int64_t n);
  void (*fast_backward)(float* d_a, float* d_b, const float* a, const float* b, const float* d_out, std::int64_t n);
  void (*ref_forward)(float* out, const float* a, const float* b, std::int64_t n);
  void (*ref_backward)(float* d_a, float* d_b, const float* a, const float* b, const float* d_out, std::int64_t n);
  void (*ref_forward_d)(double* out, const double* a, const double* b, std::int64_t n);
  void (*ref_backward_d)(double* d_a, double* d_b, const double* a, const double* b, const double* d_out,
                         std::int64_t n);
  // The front end's spellings of the op (the named function first, then the operators), and
  // its pullback; b is a (1) tensor where scalar_b, and so is d_b.
  std::vector<Tensor (*)(const Tensor& a, const Tensor& b)> spellings;
  void (*pullback)(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);
  Tolerance d_a_tol, d_b_tol;  // the forward is exact: one rounded product per element
};

// Operand b of an op over n elements: n values drawn with `seed`, or the op's scalar.
template <class T>
std::vector<T> binary_operand_b(const BinaryOp& op, std::size_t n, std::uint64_t seed) {
  return op.scalar_b ? std::vector<T>{static_cast<T>(op.scalar)} : random_vector<T>(n, seed);
}

inline std::string binary_adjoint_name(const BinaryOp& op, int operand) {
  return std::string("d_") + op.operand[operand];
}

inline void binary_kernel_matches_reference(const BinaryOp& op) {
  const std::string d_a_name = binary_adjoint_name(op, 0), d_b_name = binary_adjoint_name(op, 1);
  for_each_thread_count([&](int) {
    for (int n : awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto a = random_vector<float>(n2, 1);         // (n2)
        const auto b = binary_operand_b<float>(op, n2, 2);  // (n2), or (1) where scalar_b
        const auto d_out = random_vector<float>(n2, 3);     // (n2)
        std::vector<float> out(n2), out_ref(n2);            // (n2)
        op.fast_forward(out.data(), a.data(), b.data(), n2);
        op.ref_forward(out_ref.data(), a.data(), b.data(), n2);
        EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));

        // Every activity pattern: both, only a, only b, and one adjoint for both (x * x).
        for (int pattern = 0; pattern < (op.one_adjoint_for_both ? 4 : 3); ++pattern) {
          SCOPED_TRACE("pattern=" + std::to_string(pattern));
          auto d_a = random_vector<float>(n2, 4), d_b = random_vector<float>(b.size(), 5);  // as a and b
          auto d_a_ref = d_a, d_b_ref = d_b;  // pre-filled: must accumulate
          float* fa = pattern == 2 ? nullptr : d_a.data();
          float* fb = pattern == 1 ? nullptr : pattern == 3 ? d_a.data() : d_b.data();
          float* ra = pattern == 2 ? nullptr : d_a_ref.data();
          float* rb = pattern == 1 ? nullptr : pattern == 3 ? d_a_ref.data() : d_b_ref.data();
          op.fast_backward(fa, fb, a.data(), b.data(), d_out.data(), n2);
          op.ref_backward(ra, rb, a.data(), b.data(), d_out.data(), n2);
          EXPECT_TRUE(all_close(d_a_name.c_str(), d_a, d_a_ref, op.d_a_tol.atol, op.d_a_tol.rtol));
          EXPECT_TRUE(all_close(d_b_name.c_str(), d_b, d_b_ref, op.d_b_tol.atol, op.d_b_tol.rtol));
        }
      }
    }
  });
}

inline void binary_reference_backward_matches_finite_differences(const BinaryOp& op) {
  const int n = 37;
  auto a = random_vector<double>(n, 11);         // (n)
  auto b = binary_operand_b<double>(op, n, 12);  // (n), or (1) where scalar_b
  const auto w = random_vector<double>(n, 13);   // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    op.ref_forward_d(out.data(), a.data(), b.data(), n);
    return weighted_sum(out, w);
  };
  std::vector<double> d_a(a.size(), 0.0), d_b(b.size(), 0.0);  // as a and b
  op.ref_backward_d(d_a.data(), d_b.data(), a.data(), b.data(), w.data(), n);
  EXPECT_TRUE(fd_check(loss, {{op.operand[0], &a, &d_a}, {op.operand[1], &b, &d_b}}));
}

// Every spelling computes a[i] * b[i] (b[0] where scalar_b) exactly; the pullback accumulates
// into whichever adjoints are given: d_a += d_out * b, d_b += d_out * a (summed over the elements,
// in double, where scalar_b).
inline void binary_forward_and_pullback_accumulate_and_skip_nulls(const BinaryOp& op) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  const Shape s_b = op.scalar_b ? Shape{1} : s;
  Tensor a = tensor_from(arena, s, random_vector<float>(30, 1));           // (2, 3, 5)
  Tensor b = tensor_from(arena, s_b, binary_operand_b<float>(op, 30, 2));  // (2, 3, 5), or (1)
  const auto b_at = [&](int i) { return b.f32()[op.scalar_b ? 0 : i]; };
  Tensor out;  // (2, 3, 5)
  for (std::size_t k = 0; k < op.spellings.size(); ++k) {
    SCOPED_TRACE("spelling " + std::to_string(k));
    out = op.spellings[k](a, b);
    ASSERT_EQ(out.shape(), s);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(out.f32()[i], a.f32()[i] * b_at(i)) << i;
  }

  Tensor d_out = tensor_from(arena, s, random_vector<float>(30, 3));            // (2, 3, 5)
  Tensor d_a = tensor_from(arena, s, std::vector<float>(30, 1.0f));             // (2, 3, 5)
  Tensor d_b = tensor_from(arena, s_b, std::vector<float>(s_b.numel(), 2.0f));  // (2, 3, 5), or (1)
  op.pullback(a, b, out, d_out, &d_a, nullptr);                                 // accumulates into d_a, skips d_b
  op.pullback(a, b, out, d_out, nullptr, &d_b);                                 // and the other way round
  double dot = 0.0;                                                             // sum of d_out * a
  for (int i = 0; i < 30; ++i) {
    EXPECT_FLOAT_EQ(d_a.f32()[i], 1.0f + d_out.f32()[i] * b_at(i)) << i;
    if (!op.scalar_b) {
      EXPECT_FLOAT_EQ(d_b.f32()[i], 2.0f + d_out.f32()[i] * a.f32()[i]) << i;
    }
    dot += static_cast<double>(d_out.f32()[i]) * a.f32()[i];
  }
  if (op.scalar_b) {
    EXPECT_FLOAT_EQ(d_b.f32()[0], 2.0f + static_cast<float>(dot));
  }
  op.pullback(a, b, out, d_out, nullptr, nullptr);  // all inactive: nothing to do
}

inline void binary_reference_and_fast_modes_agree(const BinaryOp& op) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{4, 64, 65};
  const Shape s_b = op.scalar_b ? Shape{1} : s;
  const int n = 4 * 64 * 65;
  Tensor a = tensor_from(arena, s, random_vector<float>(n, 5));              // (4, 64, 65)
  Tensor b = tensor_from(arena, s_b, binary_operand_b<float>(op, n, 6));     // (4, 64, 65), or (1)
  Tensor d_out = tensor_from(arena, s, random_vector<float>(n, 7));          // (4, 64, 65)
  Tensor out_fast, out_ref;                                                  // (4, 64, 65)
  Tensor d_a_fast = arena.zeros(s, "d"), d_a_ref = arena.zeros(s, "d");      // (4, 64, 65)
  Tensor d_b_fast = arena.zeros(s_b, "d"), d_b_ref = arena.zeros(s_b, "d");  // (4, 64, 65), or (1)
  {
    KernelModeScope m(KernelMode::Fast);
    out_fast = op.spellings[0](a, b);
    op.pullback(a, b, out_fast, d_out, &d_a_fast, &d_b_fast);
  }
  {
    KernelModeScope m(KernelMode::Reference);
    out_ref = op.spellings[0](a, b);
    op.pullback(a, b, out_ref, d_out, &d_a_ref, &d_b_ref);
  }
  EXPECT_TRUE(all_close("out", to_vector(out_fast), to_vector(out_ref), 0.0, 0.0));
  EXPECT_TRUE(all_close(binary_adjoint_name(op, 0).c_str(), to_vector(d_a_fast), to_vector(d_a_ref), op.d_a_tol.atol,
                        op.d_a_tol.rtol));
  EXPECT_TRUE(all_close(binary_adjoint_name(op, 1).c_str(), to_vector(d_b_fast), to_vector(d_b_ref), op.d_b_tol.atol,
                        op.d_b_tol.rtol));
}

// No arena, an operand without storage, a b of the wrong shape, and adjoints of the wrong shape
// are errors that name the op and the argument.
inline void binary_rejects_bad_arguments(const BinaryOp& op) {
  const std::string prefix = std::string("[") + op.name + "]";
  const std::string no_storage = std::string(op.operand[0]) + " has no storage";
  const std::string b_wrong = std::string(op.operand[1]) + " has shape (3, 2)";
  const std::string d_a_wrong = binary_adjoint_name(op, 0) + " has shape (3, 2)";
  const std::string d_b_wrong = binary_adjoint_name(op, 1) + " has shape (3, 2)";
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), wrong = arena.zeros({3, 2}, "wrong");  // (2, 3), (3, 2)
  Tensor b = op.scalar_b ? arena.zeros({1}, "b") : a;                         // (2, 3), or (1)
  for (const auto& spelling : op.spellings) {
    EXPECT_TRUE(throws_error([&] { (void)spelling(a, b); }, {prefix.c_str(), "no arena", "ArenaScope"}));
  }
  ArenaScope scope(arena);
  for (const auto& spelling : op.spellings) {
    EXPECT_TRUE(throws_error([&] { (void)spelling(Tensor(), b); }, {prefix.c_str(), no_storage.c_str()}));
    if (!op.scalar_b) {
      EXPECT_TRUE(
          throws_error([&] { (void)spelling(a, wrong); }, {prefix.c_str(), b_wrong.c_str(), "expected (2, 3)"}));
    }
  }
  EXPECT_TRUE(throws_error([&] { op.pullback(a, b, a, wrong, nullptr, nullptr); },
                           {prefix.c_str(), "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(throws_error([&] { op.pullback(a, b, a, a, &wrong, nullptr); },
                           {prefix.c_str(), d_a_wrong.c_str(), "expected (2, 3)"}));
  if (!op.scalar_b) {
    EXPECT_TRUE(throws_error([&] { op.pullback(a, b, a, a, nullptr, &wrong); },
                             {prefix.c_str(), d_b_wrong.c_str(), "expected (2, 3)"}));
  }
}

}  // namespace llmcc::test
