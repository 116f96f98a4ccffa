// Shared test helpers: random data, awkward sizes, thread-count sweeps, tolerant comparison that
// prints the first mismatches and the max error, and a central finite-difference checker.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/tensor.h"

namespace llmcc::test {

// Sizes that catch tail handling, vector-width and blocking bugs.
inline const std::vector<int>& awkward_sizes() {
  static const std::vector<int> sizes = {1, 3, 7, 64, 65, 197, 768};
  return sizes;
}

// Runs fn once with 1 thread and once with 2, restoring the previous count.
inline void for_each_thread_count(const std::function<void(int)>& fn) {
  const int before = num_threads();
  for (int n : {1, 2}) {
    set_num_threads(n);
    SCOPED_TRACE("threads=" + std::to_string(n));
    fn(n);
  }
  set_num_threads(before);
}

// The value std::uniform_real_distribution<double>(lo, hi) draws from one output `bits` of
// std::mt19937_64, bit for bit (tests/kernels/test_random_vector.cpp checks it): libstdc++'s
// generate_canonical divides the 64 bits by 2^64 in long double and rounds to double, which is
// the one rounding of the conversion below; a result of 1 becomes the double just below it. Its
// own code takes a long double logarithm on every draw, which unoptimised (the sanitizer build's
// test sources) was most of the time of the largest kernel tests.
inline double uniform_from_bits(std::uint64_t bits, double lo, double hi) {
  double u = static_cast<double>(bits) * 0x1p-64;
  if (u >= 1.0) u = std::nextafter(1.0, 0.0);
  return u * (hi - lo) + lo;
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(uniform_from_bits(rng(), lo, hi));
  return v;
}

template <class To, class From>
std::vector<To> cast_vector(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// A tensor in `arena` holding a copy of `values`.
inline Tensor tensor_from(Arena& arena, const Shape& shape, const std::vector<float>& values) {
  Tensor t = arena.tensor(shape, "test");
  EXPECT_EQ(static_cast<std::size_t>(shape.numel()), values.size()) << "tensor_from size";
  std::copy(values.begin(), values.end(), t.f32());
  return t;
}

inline std::vector<float> to_vector(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// |got - ref| <= atol + rtol * |ref| for every element; on failure lists the first mismatches
// and the max absolute error.
template <class A, class B>
::testing::AssertionResult all_close(const char* what, const A* got, const B* ref, std::size_t n, double atol,
                                     double rtol) {
  std::size_t bad = 0;
  double max_err = 0.0;
  std::size_t max_at = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = static_cast<double>(ref[i]);
    const double err = std::fabs(g - r);
    const bool ok = err <= atol + rtol * std::fabs(r);  // also false for NaN
    if (!(err <= max_err) || std::isnan(err)) {
      max_err = err;
      max_at = i;
    }
    if (!ok) {
      if (bad < 5) first << "\n  [" << i << "] got " << g << ", expected " << r << " (err " << err << ")";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << n << " elements differ (atol " << atol
                                       << ", rtol " << rtol << "); max abs error " << max_err << " at [" << max_at
                                       << "]; first:" << first.str();
}

template <class A, class B>
::testing::AssertionResult all_close(const char* what, const std::vector<A>& got, const std::vector<B>& ref,
                                     double atol, double rtol) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size();
  }
  return all_close(what, got.data(), ref.data(), got.size(), atol, rtol);
}

// One differentiable input of a finite-difference check: its values (perturbed in place and
// restored) and the analytic gradient of the loss with respect to them.
struct FdInput {
  std::string name;
  std::vector<double>* values;
  const std::vector<double>* analytic;
};

// Central differences in double: for every element x_i of every input,
//   numeric_i = (loss(x_i + h) - loss(x_i - h)) / 2h
// compared with the analytic gradient by the relative error
//   |a - n| / max(|a|, |n|, 1e-3 * max_j |n_j| of that input, 1e-12),
// which must not exceed max_rel. The floor keeps elements whose true gradient is ~0 from
// turning round-off into a huge ratio. max_elements > 0 checks an evenly spread subset.
inline ::testing::AssertionResult fd_check(const std::function<double()>& loss, const std::vector<FdInput>& inputs,
                                           double max_rel = 1e-6, double h = 1e-5, std::size_t max_elements = 0) {
  std::ostringstream report;
  bool ok = true;
  for (const FdInput& in : inputs) {
    std::vector<double>& x = *in.values;
    if (in.analytic->size() != x.size()) {
      return ::testing::AssertionFailure()
             << in.name << ": analytic gradient has " << in.analytic->size() << " elements, input has " << x.size();
    }
    const std::size_t stride = (max_elements == 0 || x.size() <= max_elements) ? 1 : x.size() / max_elements;
    std::vector<std::size_t> idx;
    std::vector<double> numeric;
    for (std::size_t i = 0; i < x.size(); i += stride) {
      const double saved = x[i];
      x[i] = saved + h;
      const double up = loss();
      x[i] = saved - h;
      const double down = loss();
      x[i] = saved;
      idx.push_back(i);
      numeric.push_back((up - down) / (2.0 * h));
    }
    double max_n = 0.0;
    for (double v : numeric) max_n = std::max(max_n, std::fabs(v));
    const double floor = std::max(1e-3 * max_n, 1e-12);
    double worst = 0.0;
    std::size_t worst_at = 0;
    int shown = 0;
    std::ostringstream first;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const double a = (*in.analytic)[idx[k]];
      const double n = numeric[k];
      const double rel = std::fabs(a - n) / std::max({std::fabs(a), std::fabs(n), floor});
      if (!(rel <= worst)) {
        worst = rel;
        worst_at = idx[k];
      }
      if (!(rel <= max_rel) && shown < 5) {
        first << "\n    [" << idx[k] << "] analytic " << a << ", numeric " << n << " (rel " << rel << ")";
        ++shown;
      }
    }
    report << "\n  " << in.name << ": " << idx.size() << " elements, max rel error " << worst << " at [" << worst_at
           << "]" << first.str();
    if (!(worst <= max_rel)) ok = false;
  }
  if (ok) return ::testing::AssertionSuccess() << report.str();
  return ::testing::AssertionFailure() << "finite differences disagree (max_rel " << max_rel << ")" << report.str();
}

// Sum(out * weights): turns a tensor output into a scalar loss whose adjoint is `weights`.
template <class T>
double weighted_sum(const std::vector<T>& out, const std::vector<double>& weights) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * weights[i];
  return s;
}

// Expects `fn` to throw llmcc::Error whose message contains every fragment.
template <class Fn>
::testing::AssertionResult throws_error(Fn&& fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* f : fragments) {
      if (msg.find(f) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << f << "\"";
      }
    }
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-llmcc exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Runs the scope with the given kernel mode (fast or reference) and restores the previous one.
struct KernelModeScope {
  explicit KernelModeScope(KernelMode m) : before(kernel_mode()) { set_kernel_mode(m); }
  ~KernelModeScope() { set_kernel_mode(before); }
  KernelModeScope(const KernelModeScope&) = delete;
  KernelModeScope& operator=(const KernelModeScope&) = delete;
  KernelMode before;
};

}  // namespace llmcc::test
