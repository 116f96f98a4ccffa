// The bf16 GEMMs (bf16 operands, fp32 sums): cpu::gemm_packed_bf16 (vdpbf16ps) and, on a CPU
// with AMX, cpu::gemm_amx_bf16 (tdpbf16ps), each against a naive double loop, twice: on the
// operands rounded to bf16, where only the fp32 summation may differ (so a wrong pair, a lost
// half of an odd K or a misplaced panel shows at fp32 tolerance), and on the fp32 operands
// within a bf16 tolerance. All four transposes, awkward sizes on M, N and K (odd K, tile and
// cache-block edges, both GEMM orders), padded leading dimensions, alpha, beta, the bias, and
// 1 and 2 threads.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_amx.h"
#include "kernels/cpu/gemm_blocking.h"
#include "kernels/cpu/gemm_packed.h"
#include "naive_gemm.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::naive_gemm;

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = cpu::round_to_bf16(x);
  return v;
}

// (M, N, K): tile edges (MR 6 or 14, NR 16 or 32), odd K (a last half pair), K of 1 and 2, KC
// slices with an uneven last one, both orders (up to 512 rows streaming, above blocked), NC.
std::vector<std::array<int, 3>> bf16_sizes() {
  std::vector<std::array<int, 3>> sizes;
  for (int s : {1, 2, 3, 5, 6, 7, 13, 14, 15, 16, 17, 31, 32, 33, 63, 64, 65, 197}) {
    sizes.push_back({s, 33, 65});
    sizes.push_back({65, s, 33});
    sizes.push_back({33, 65, s});
  }
  sizes.push_back({256, 768, 197});
  sizes.push_back({250, 70, 769});
  sizes.push_back({512, 40, 300});
  sizes.push_back({700, 70, 385});
  sizes.push_back({600, 50, 1001});
  sizes.push_back({9, 4100, 5});
  sizes.push_back({530, 4100, 9});
  sizes.push_back({30, 50, 8193});  // split_k's 2 parts, the second ending in half a pair
  // Several slices of the built-in blocking's bf16 depth (4 KC values of K): blocked, the last
  // slice ending in half a pair; streaming, its slices set by the op(A) slice's size.
  sizes.push_back({600, 50, 3331});
  sizes.push_back({256, 96, 1700});
  return sizes;
}

using Bf16Gemm = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int,
                          const float*);

void check_bf16_gemm(Bf16Gemm gemm, bool ta, bool tb, int M, int N, int K, int pad, float alpha, float beta,
                     bool with_bias, bool nan_in_c = false) {
  const int a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto A = test::random_vector<float>(static_cast<std::size_t>(a_rows) * lda, 1);  // (a_rows, lda)
  const auto B = test::random_vector<float>(static_cast<std::size_t>(b_rows) * ldb, 2);  // (b_rows, ldb)
  const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 4);          // (N)
  const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 3);      // (M, ldc)
  const float* bias_ptr = with_bias ? bias.data() : nullptr;
  // The naive loops run once; the GEMM on 1 and 2 threads.
  auto on_rounded =
      naive_gemm(ta, tb, M, N, K, alpha, rounded_to_bf16(A), lda, rounded_to_bf16(B), ldb, beta, C0, ldc, bias_ptr);
  auto on_fp32 = naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, ldc, bias_ptr);
  if (nan_in_c) {
    // all_close treats NaN as a mismatch: the M x N part is compared, the padding must keep its NaN.
    for (int i = 0; i < M; ++i)
      for (int j = N; j < ldc; ++j)
        on_rounded[static_cast<std::size_t>(i) * ldc + j] = on_fp32[static_cast<std::size_t>(i) * ldc + j] = 0.0;
  }
  test::for_each_thread_count([&](int) {
    auto C = C0;  // (M, ldc)
    if (nan_in_c) {
      for (float& c : C) c = std::numeric_limits<float>::quiet_NaN();
    }
    gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, bias_ptr);
    // The padding of each row stays untouched.
    for (int i = 0; i < M; ++i) {
      for (int j = N; j < ldc; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * ldc + j;
        if (nan_in_c) {
          ASSERT_TRUE(std::isnan(C[at])) << "wrote padding";
          C[at] = 0.0f;
        } else {
          ASSERT_EQ(C[at], static_cast<float>(on_fp32[at])) << "wrote padding";
        }
      }
    }
    // On the rounded operands the products are exact: only fp32 summation differs.
    EXPECT_TRUE(test::all_close("C (bf16 operands)", C, on_rounded, 2e-6 * K + 1e-6, 1e-5));
    // On the fp32 operands each product is off by up to about 2^-8 relative, the errors of K
    // products of values in [-1, 1] adding up like a random walk.
    EXPECT_TRUE(
        test::all_close("C (fp32 operands)", C, on_fp32, 8e-3 * std::sqrt(static_cast<double>(K)) + 1e-5, 1e-2));
  });
}

std::string trace(bool ta, bool tb, int M, int N, int K) {
  return "trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) + " M=" + std::to_string(M) +
         " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

// Which kernel the bf16 GEMM runs on here; the vdpbf16ps one needs AVX512_BF16.
TEST(GemmBf16Kernel, Bf16DotProductKernelIsCompiled) {
  std::printf("[ note     ] bf16 GEMM kernel: %s\n", cpu::gemm_packed_bf16_kernel_name());
  if (!cpu::kHaveBf16DotProduct)
    GTEST_SKIP() << "this CPU has no AVX512_BF16: the vdpbf16ps kernel is not built or tested here; the bf16 GEMM "
                    "tests below run its fallback (the fp32 kernel on bf16-rounded operands)";
  EXPECT_NE(std::string(cpu::gemm_packed_bf16_kernel_name()).find("vdpbf16ps"), std::string::npos);
}

void all_transposes_match_naive_loop(Bf16Gemm gemm) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [M, N, K] : bf16_sizes()) {
        SCOPED_TRACE(trace(ta, tb, M, N, K));
        check_bf16_gemm(gemm, ta, tb, M, N, K, 0, 1.0f, 1.0f, false);
      }
    }
  }
}

void leading_dimensions_alpha_beta_and_bias(Bf16Gemm gemm) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        for (bool bias : {false, true}) {
          SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) +
                       " beta=" + std::to_string(beta) + " bias=" + std::to_string(bias));
          check_bf16_gemm(gemm, ta, tb, 65, 197, 64, 3, 0.75f, beta, bias);
          check_bf16_gemm(gemm, ta, tb, 3, 7, 1, 5, -2.0f, beta, bias);
          check_bf16_gemm(gemm, ta, tb, 17, 63, 15, 9, 1.5f, beta, bias);
          check_bf16_gemm(gemm, ta, tb, 250, 40, 301, 7, -1.0f, beta, bias);
          check_bf16_gemm(gemm, ta, tb, 600, 70, 387, 1, 1.0f, beta, bias);
        }
      }
    }
  }
}

void beta_zero_ignores_nan_in_c(Bf16Gemm gemm) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb));
      check_bf16_gemm(gemm, ta, tb, 65, 197, 64, 3, 1.0f, 0.0f, false, true);
      check_bf16_gemm(gemm, ta, tb, 7, 17, 301, 2, 0.5f, 0.0f, true, true);
    }
  }
}

TEST(GemmBf16Kernel, EmptyInnerDimensionScalesC) {
  std::vector<float> C = {1.0f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // (2, 3)
  const float one = 1.0f;
  cpu::gemm_packed_bf16(false, false, 2, 3, 0, 1.0f, &one, 1, &one, 3, 0.5f, C.data(), 3, nullptr);
  EXPECT_EQ(C, (std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f, 2.5f, 3.0f}));
}

// Each element of C sums its K slices in the same order whatever the thread count and GEMM
// order, so 1 and 2 threads give the same bits.
void one_and_two_threads_give_the_same_bits(Bf16Gemm gemm) {
  for (auto [M, N, K] : std::vector<std::array<int, 3>>{{256, 768, 769}, {700, 300, 385}, {64, 2304, 768}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(trace(ta, tb, M, N, K));
        const auto A = test::random_vector<float>(static_cast<std::size_t>(M) * K, 5);  // (M, K) or (K, M)
        const auto B = test::random_vector<float>(static_cast<std::size_t>(K) * N, 6);  // (K, N) or (N, K)
        std::vector<float> C1(static_cast<std::size_t>(M) * N), C2(C1.size());          // (M, N)
        const int lda = ta ? M : K, ldb = tb ? K : N;
        test::for_each_thread_count([&](int threads) {
          gemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, (threads == 1 ? C1 : C2).data(), N, nullptr);
        });
        EXPECT_EQ(C1, C2);
      }
    }
  }
}

// The packed kernel: vdpbf16ps with AVX512_BF16, else the fp32 kernel on rounded operands.
TEST(GemmBf16Kernel, AllTransposesMatchNaiveLoop) { all_transposes_match_naive_loop(&cpu::gemm_packed_bf16); }
TEST(GemmBf16Kernel, LeadingDimensionsAlphaBetaAndBias) {
  leading_dimensions_alpha_beta_and_bias(&cpu::gemm_packed_bf16);
}
TEST(GemmBf16Kernel, BetaZeroIgnoresNaNInC) { beta_zero_ignores_nan_in_c(&cpu::gemm_packed_bf16); }
TEST(GemmBf16Kernel, OneAndTwoThreadsGiveTheSameBits) {
  one_and_two_threads_give_the_same_bits(&cpu::gemm_packed_bf16);
}

// The AMX kernel, on every shape above (it pads each product to its 32 x 32 blocks and 32-value
// K steps), where the CPU has it and Linux grants the tiles.
class GemmAmxKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::printf("[ note     ] bf16 GEMM of llmcc's layers: %s\n", cpu::gemm_bf16_kernel_name());
    if (!cpu::amx_bf16_usable())
      GTEST_SKIP() << "no AMX-BF16 here (or Linux did not grant the tile state): the AMX kernel is not tested on "
                      "this machine; the bf16 GEMM runs the packed kernel tested by GemmBf16Kernel.*";
  }
};
TEST_F(GemmAmxKernel, AllTransposesMatchNaiveLoop) { all_transposes_match_naive_loop(&cpu::gemm_amx_bf16); }
TEST_F(GemmAmxKernel, LeadingDimensionsAlphaBetaAndBias) {
  leading_dimensions_alpha_beta_and_bias(&cpu::gemm_amx_bf16);
}
TEST_F(GemmAmxKernel, BetaZeroIgnoresNaNInC) { beta_zero_ignores_nan_in_c(&cpu::gemm_amx_bf16); }
TEST_F(GemmAmxKernel, OneAndTwoThreadsGiveTheSameBits) { one_and_two_threads_give_the_same_bits(&cpu::gemm_amx_bf16); }
// Several K slices (768 values each), column blocks (512) and a last partial block of each.
TEST_F(GemmAmxKernel, AcrossKSlicesAndColumnBlocks) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_bf16_gemm(&cpu::gemm_amx_bf16, ta, tb, 70, 1100, 1601, 3, 0.5f, -1.0f, true);
}

// gemm_packed_b_bf16 with op(B) as bf16 bits against the same GEMM on those values widened to
// floats: the packed panels are the same values, so C must be the same bits. The stored B starts
// one bf16 past a 4-byte boundary in half the calls and has odd leading dimensions in some, so
// the (N, K) pair packing's aligned and unaligned paths both run.
void check_b_in_bf16(bool bf16_products, bool ta, bool tb, int M, int N, int K, int pad, int shift, float alpha,
                     float beta, bool with_bias) {
  const int a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto A = test::random_vector<float>(static_cast<std::size_t>(a_rows) * lda, 11);  // (a_rows, lda)
  const auto Bf = test::random_vector<float>(static_cast<std::size_t>(b_rows) * ldb, 12);
  const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 14);      // (N)
  const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 13);  // (M, ldc)
  std::vector<std::uint16_t> storage(Bf.size() + 1);  // B (b_rows, ldb) at storage + shift
  std::vector<float> widened(Bf.size());              // the same values as floats
  for (std::size_t i = 0; i < Bf.size(); ++i) {
    storage[i + shift] = cpu::bf16_bits(Bf[i]);
    widened[i] = cpu::bf16_to_float(storage[i + shift]);
  }
  const float* bias_ptr = with_bias ? bias.data() : nullptr;
  test::for_each_thread_count([&](int) {
    auto expected = C0, C = C0;  // (M, ldc)
    if (bf16_products) {
      cpu::gemm_packed_bf16(ta, tb, M, N, K, alpha, A.data(), lda, widened.data(), ldb, beta, expected.data(), ldc,
                            bias_ptr);
    } else {
      cpu::gemm_packed_with(cpu::current_gemm_blocking(), 0, ta, tb, M, N, K, alpha, A.data(), lda, widened.data(), ldb,
                            beta, expected.data(), ldc, bias_ptr);
    }
    cpu::gemm_packed_b_bf16(bf16_products, ta, tb, M, N, K, alpha, A.data(), lda, storage.data() + shift, ldb, beta,
                            C.data(), ldc, bias_ptr);
    ASSERT_EQ(C, expected);
  });
}

TEST(GemmBf16Kernel, BInBf16GivesTheBitsOfItsWidenedValues) {
  for (bool bf16_products : {true, false}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        int call = 0;
        for (auto [M, N, K] : bf16_sizes()) {
          const int shift = call % 2, pad = call % 3;
          ++call;
          SCOPED_TRACE(trace(ta, tb, M, N, K) + " bf16_products=" + std::to_string(bf16_products) +
                       " shift=" + std::to_string(shift) + " pad=" + std::to_string(pad));
          check_b_in_bf16(bf16_products, ta, tb, M, N, K, pad, shift, call % 4 == 0 ? -0.5f : 1.0f,
                          call % 5 == 0 ? 0.0f : 1.0f, call % 2 == 0);
        }
      }
    }
  }
}

// A second product in the same pass (SecondProduct): C = alpha op(A) op(B) + alpha2 A2 op(B2) +
// beta C (+ bias), in the first product's last slice or in a slice of its own, against the naive
// loops, for fp32 and bf16 panels and op(B) in fp32 and in
// bf16; on bf16 panels the naive loops take the operands rounded to bf16, so only the fp32
// summation differs. Both orders (streaming, blocked), K2 from 1 to a 64-deep update, one too deep
// for a slice (then a product of its own), a split-K product and an empty first product (both also
// one after the other), and 1 and 2 threads, which must give the same bits.
TEST(GemmBf16Kernel, SecondProductIsOneMoreSliceOfK) {
  const std::vector<std::array<int, 3>> sizes = {{65, 197, 64},  {256, 384, 197}, {600, 70, 385}, {600, 50, 3331},
                                                 {530, 4100, 9}, {30, 50, 8193},  {17, 40, 0}};
  int call = 0;
  for (bool bf16_products : {false, true}) {
    for (bool b_in_bf16 : {false, true}) {
      for (auto [M, N, K] : sizes) {
        for (int K2 : {1, 3, 16, 64, 800}) {
          if (K2 == 800 && M * N > 50000) continue;                // too deep for a slice: on the small shapes only
          if ((K2 == 1 || K2 == 64) && M * N > 1000000) continue;  // the largest C: K2 3 and 16
          const bool ta = call % 2, tb = call / 2 % 2, tb2 = call / 4 % 2, with_bias = call % 3 == 0;
          // alpha2 == alpha lets the second product join the first's last slice; else it takes
          // a slice of its own.
          const float beta = call % 5 == 0 ? 0.0f : 1.0f, alpha = 0.5f, alpha2 = call / 3 % 2 ? alpha : -0.75f;
          ++call;
          SCOPED_TRACE(trace(ta, tb, M, N, K) + " K2=" + std::to_string(K2) + " trans_b2=" + std::to_string(tb2) +
                       " alpha2=" + std::to_string(alpha2) + " bf16_products=" + std::to_string(bf16_products) +
                       " b_in_bf16=" + std::to_string(b_in_bf16));
          const int lda = ta ? M : K, ldb = tb ? K : N, ldb2 = tb2 ? K2 : N, ldc = N + 1;
          auto A = test::random_vector<float>(static_cast<std::size_t>(M) * K + 1, 21);       // op(A) (M, K)
          auto B = test::random_vector<float>(static_cast<std::size_t>(K) * N + 1, 22);       // op(B) (K, N)
          auto A2 = test::random_vector<float>(static_cast<std::size_t>(M) * K2, 23);         // (M, K2)
          auto B2 = test::random_vector<float>(static_cast<std::size_t>(K2) * N, 24);         // op(B2) (K2, N)
          const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 25);  // (M, ldc)
          const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 26);
          // Values the products see exactly: bf16 ones where op(B) is stored in bf16 or the
          // panels are bf16.
          if (b_in_bf16 || bf16_products) B = rounded_to_bf16(B);
          if (bf16_products) A = rounded_to_bf16(A), A2 = rounded_to_bf16(A2), B2 = rounded_to_bf16(B2);
          std::vector<std::uint16_t> B16(B.size());
          for (std::size_t i = 0; i < B.size(); ++i) B16[i] = cpu::bf16_bits(B[i]);
          const float* bias_ptr = with_bias ? bias.data() : nullptr;
          auto expected = test::naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, ldc, bias_ptr);
          const auto update =
              test::naive_gemm(false, tb2, M, N, K2, alpha2, A2, K2, B2, ldb2, 0.0, std::vector<float>(C0.size()), ldc);
          for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += update[i];
          const cpu::SecondProduct second{K2, alpha2, A2.data(), K2, tb2, B2.data(), ldb2};
          std::vector<float> one_thread;
          test::for_each_thread_count([&](int threads) {
            auto C = C0;  // (M, ldc)
            if (b_in_bf16) {
              cpu::gemm_packed_b_bf16(bf16_products, ta, tb, M, N, K, alpha, A.data(), lda, B16.data(), ldb, beta,
                                      C.data(), ldc, bias_ptr, second);
            } else {
              cpu::gemm_packed_with_second(bf16_products, ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
                                           C.data(), ldc, bias_ptr, second);
            }
            EXPECT_TRUE(test::all_close("C", C, expected, 2e-6 * (K + K2) + 1e-6, 1e-5));
            if (threads == 1) {
              one_thread = C;
            } else {
              EXPECT_EQ(C, one_thread) << "2 threads gave other bits than 1";
            }
          });
        }
      }
    }
  }
}

// gemm_bf16 (what linear layers call) on a product too small for the tiles and on one they fill.
TEST(GemmBf16Kernel, DispatchGivesTheSameProductEitherWay) {
  for (auto [M, N, K] : std::vector<std::array<int, 3>>{{5, 40, 70}, {64, 64, 96}}) {
    SCOPED_TRACE(trace(false, true, M, N, K));
    check_bf16_gemm(&cpu::gemm_bf16, false, true, M, N, K, 0, 1.0f, 0.0f, true);
  }
}

}  // namespace
}  // namespace llmcc
