// cpu::gemv_rows_int8 compiled for one instruction set (cmake/Tests.cmake builds one program per
// path: portable, AVX2, AVX-VNNI, AVX-512 VNNI), against a double-precision sum of the products of
// the values both operands' int8 blocks hold. A build compiles only the path its -march allows, so
// this is where the others are tested; a path this CPU cannot run is skipped and says so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/int8_rows.h"

namespace {

using llmcc::cpu::int8_blocks;
using llmcc::cpu::kInt8Block;

bool cpu_runs_this_path() {
#if defined(LLMCC_INT8_CPU_FEATURE)
  __builtin_cpu_init();
  return __builtin_cpu_supports(LLMCC_INT8_CPU_FEATURE);
#else
  return true;
#endif
}

std::vector<float> normal_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& e : v) e = normal(rng);
  return v;
}

TEST(Int8Path, OneRowProductsEqualTheBlocksValuesProducts) {
  if (!cpu_runs_this_path()) GTEST_SKIP() << "this CPU cannot run the " << LLMCC_INT8_PATH << " path";
  ASSERT_EQ(std::string(llmcc::cpu::int8_dot_path()), LLMCC_INT8_PATH);
  for (const auto& [N, K] : {std::pair{9, 5}, std::pair{131, 96}, std::pair{70, 1000}, std::pair{6, 33}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
    const std::int64_t nb = int8_blocks(K);
    const std::vector<float> x = normal_values(static_cast<std::size_t>(K), 1);      // (1, K)
    const std::vector<float> w = normal_values(static_cast<std::size_t>(N) * K, 2);  // (N, K)
    const std::vector<float> bias = normal_values(static_cast<std::size_t>(N), 3);   // (N)
    std::vector<std::int8_t> q(w.size()), xq(x.size());                              // (N, K), (1, K)
    std::vector<float> d(static_cast<std::size_t>(N * nb)), xd(static_cast<std::size_t>(nb));
    llmcc::cpu::quantize_rows_int8(w.data(), N, K, q.data(), d.data());
    llmcc::cpu::quantize_rows_int8(x.data(), 1, K, xq.data(), xd.data());
    std::vector<float> y(static_cast<std::size_t>(N));  // (1, N)
    llmcc::cpu::gemv_rows_int8(N, K, x.data(), q.data(), d.data(), y.data(), bias.data());
    for (int j = 0; j < N; ++j) {
      double want = bias[j], magnitude = std::abs(bias[j]);
      for (int c = 0; c < K; ++c) {
        const double term = double(xq[c]) * xd[c / kInt8Block] * double(q[j * K + c]) * d[j * nb + c / kInt8Block];
        want += term;
        magnitude += std::abs(term);
      }
      EXPECT_NEAR(y[j], want, 1e-6 * magnitude + 1e-6) << "row " << j;
    }
  }
}

}  // namespace
