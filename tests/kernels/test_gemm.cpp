// cpu::gemm (whichever library cmake/Gemm.cmake chose) and llmcc's own cpu::gemm_packed
// (always built, whatever the backend) against a naive double loop: all four transpose
// combinations, awkward sizes on M, N and K (tile edges of the 6x16 and 14x32 micro-kernels,
// sizes that cross the cache blocks), padded leading dimensions (the padding must stay
// untouched), alpha and beta, 1 and 2 threads. This is also the check to run with
// OPENBLAS_CORETYPE unset, since OpenBLAS's own CPU detection picks different kernels
// (docs/perf.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <cstdio>
#include <utility>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/int8_rows.h"

#include "naive_gemm.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::naive_gemm;

using GemmFn = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int);
struct Impl {
  const char* name;
  GemmFn fn;
};
// The backend behind cpu::gemm, and gemm_packed directly (the same code when LLMCC_GEMM=own).
const Impl kImpls[] = {{"cpu::gemm", &cpu::gemm}, {"cpu::gemm_packed", &cpu::gemm_packed}};

// (M, N, K): each awkward size on each dim with small awkward others, and a few large ones
// where libraries switch to their blocked, multi-threaded paths. 5, 6, 13, 14, 15, 16, 17, 31,
// 32, 33 sit on the edges of the packed GEMM's tiles (MR 6 or 14, NR 16 or 32).
std::vector<std::array<int, 3>> gemm_sizes() {
  std::vector<int> awkward = test::awkward_sizes();
  for (int s : {5, 6, 13, 14, 15, 16, 17, 31, 32, 33, 63}) awkward.push_back(s);
  std::vector<std::array<int, 3>> sizes;
  for (int s : awkward) {
    sizes.push_back({s, 7, 65});
    sizes.push_back({65, s, 7});
    sizes.push_back({7, 65, s});
  }
  sizes.push_back({197, 65, 768});
  sizes.push_back({256, 768, 197});
  sizes.push_back({65, 1000, 768});
  // Across the packed GEMM's cache blocks. Up to 512 rows per thread take the streaming order
  // (all rows' op(A) slice packed at once, op(B) one panel at a time): K over its KC slices
  // (256 at most, fewer as M grows) with an uneven last slice, N over many panels, M at the
  // 512-row limit. Over 512 rows take the blocked order: M over MC (240, 224), K over KC (384,
  // 224; 1000 is three slices of 334 or five of 200), N over NC (4096).
  sizes.push_back({250, 70, 300});
  sizes.push_back({230, 45, 513});
  sizes.push_back({9, 4100, 5});
  sizes.push_back({512, 40, 300});
  sizes.push_back({700, 70, 300});
  sizes.push_back({1100, 45, 513});
  sizes.push_back({600, 50, 1000});
  sizes.push_back({530, 4100, 9});
  // A few tiles of C over a long K take split_k (parts of K, each on one thread, summed in
  // order): 2 parts, and 8 with an uneven last one.
  sizes.push_back({20, 33, 8200});
  sizes.push_back({5, 17, 33003});
  // A dimension of at most 4 takes gemm_skinny's loops, on a team once large enough: K (1,000 x
  // 300 x 2), N (10,000 x 2 x 64, 70 x 3 x 2,000) and M (3 x 700 x 900, 2 x 5,000 x 40), each
  // along either operand's contiguous dimension as the transposes vary.
  sizes.push_back({1000, 300, 2});
  sizes.push_back({10000, 2, 64});
  sizes.push_back({70, 3, 2000});
  sizes.push_back({3, 700, 900});
  sizes.push_back({2, 5000, 40});
  return sizes;
}

// Checks every implementation on 1 and 2 threads against one evaluation of the naive loop.
void check_gemm(bool ta, bool tb, int M, int N, int K, int pad, float alpha, float beta, bool nan_in_c = false) {
  // Stored shapes, each row padded by `pad` elements to test the leading dimensions.
  const int a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto A = test::random_vector<float>(static_cast<std::size_t>(a_rows) * lda, 1);  // (a_rows, lda)
  const auto B = test::random_vector<float>(static_cast<std::size_t>(b_rows) * ldb, 2);  // (b_rows, ldb)
  const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 3);      // (M, ldc)
  auto expect = naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, ldc);       // (M, ldc)
  if (nan_in_c) {
    // all_close treats NaN as a mismatch: the M x N part is compared, the padding must keep its NaN.
    for (int i = 0; i < M; ++i)
      for (int j = N; j < ldc; ++j) expect[static_cast<std::size_t>(i) * ldc + j] = 0.0;
  }
  test::for_each_thread_count([&](int) {
    for (const Impl& impl : kImpls) {
      auto C = C0;  // (M, ldc)
      if (nan_in_c) {
        // beta == 0 must not read C: NaN inside the M x N part would leak into the result. The
        // padding keeps its NaN (it must stay untouched).
        for (float& c : C) c = std::numeric_limits<float>::quiet_NaN();
      }
      impl.fn(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      if (nan_in_c) {
        for (int i = 0; i < M; ++i) {
          for (int j = N; j < ldc; ++j) {
            ASSERT_TRUE(std::isnan(C[static_cast<std::size_t>(i) * ldc + j])) << impl.name << " wrote padding";
            C[static_cast<std::size_t>(i) * ldc + j] = 0.0f;
          }
        }
      }
      // fp32 rounding grows with K; a wrong or missing term is off by ~0.1.
      EXPECT_TRUE(test::all_close("C", C, expect, 2e-6 * K + 1e-6, 1e-5)) << impl.name;
    }
  });
}

TEST(GemmKernel, AllTransposesMatchNaiveLoop) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [M, N, K] : gemm_sizes()) {
        SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) + " M=" + std::to_string(M) +
                     " N=" + std::to_string(N) + " K=" + std::to_string(K));
        check_gemm(ta, tb, M, N, K, 0, 1.0f, 1.0f);
      }
    }
  }
}

TEST(GemmKernel, LeadingDimensionsAlphaAndBeta) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) +
                     " beta=" + std::to_string(beta));
        check_gemm(ta, tb, 65, 197, 64, 3, 0.75f, beta);
        check_gemm(ta, tb, 3, 7, 1, 5, -2.0f, beta);
        check_gemm(ta, tb, 17, 63, 15, 9, 1.5f, beta);
        check_gemm(ta, tb, 250, 40, 300, 7, -1.0f, beta);  // across MC and KC blocks
      }
    }
  }
}

// beta == 0 overwrites C without reading it (BLAS semantics: C may be uninitialised memory).
TEST(GemmKernel, BetaZeroIgnoresNaNInC) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb));
      check_gemm(ta, tb, 65, 197, 64, 3, 1.0f, 0.0f, true);
      check_gemm(ta, tb, 7, 17, 300, 2, 0.5f, 0.0f, true);
    }
  }
}

// No product to add (K == 0, or alpha == 0): C = beta * C, and beta == 0 gives zeros.
TEST(GemmKernel, EmptyInnerDimensionScalesC) {
  for (const Impl& impl : kImpls) {
    SCOPED_TRACE(impl.name);
    std::vector<float> C = {1.0f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // (2, 3)
    const float one = 1.0f;
    impl.fn(false, false, 2, 3, 0, 1.0f, &one, 1, &one, 3, 0.5f, C.data(), 3);
    EXPECT_EQ(C, (std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f, 2.5f, 3.0f}));
    impl.fn(false, false, 2, 3, 0, 1.0f, &one, 1, &one, 3, 0.0f, C.data(), 3);
    EXPECT_EQ(C, (std::vector<float>(6, 0.0f)));
  }
}

// gemm_bias (the own GEMM adds the bias in the micro-kernel's store of each tile's last K
// slice; other libraries in a pass after the call) and gemm_packed_bias directly: the product,
// beta * C and the bias per column, for every transpose, both GEMM orders (streaming up to 512
// rows, blocked above), uneven last KC slices, tile edges, padded rows whose padding stays
// untouched, and K == 0.
TEST(GemmKernel, BiasIsAddedToEveryRow) {
  using BiasFn = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int,
                          const float*);
  const std::pair<const char*, BiasFn> impls[] = {{"cpu::gemm_bias", &cpu::gemm_bias},
                                                  {"cpu::gemm_packed_bias", &cpu::gemm_packed_bias}};
  // {28, 16, 64}, {512, 16, 300}: tiles one AVX-512 vector wide, stored straight into C; {20, 33,
  // 8200}: split K; the last three: skinny products.
  const std::array<int, 3> sizes[] = {{7, 65, 33},     {17, 33, 5},     {256, 197, 300}, {512, 40, 768}, {700, 70, 300},
                                      {1100, 45, 513}, {65, 1000, 768}, {5, 17, 0},      {28, 16, 64},   {512, 16, 300},
                                      {42, 8, 33},     {20, 33, 8200},  {1000, 300, 2},  {70, 3, 2000},  {3, 700, 900}};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [M, N, K] : sizes) {
        for (float beta : {0.0f, 1.0f, -0.5f}) {
          SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) + " M=" + std::to_string(M) +
                       " N=" + std::to_string(N) + " K=" + std::to_string(K) + " beta=" + std::to_string(beta));
          const int pad = 3;
          const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
          const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
          const auto A = test::random_vector<float>(static_cast<std::size_t>(a_rows) * lda + 1, 1);  // (a_rows, lda)
          const auto B = test::random_vector<float>(static_cast<std::size_t>(b_rows) * ldb + 1, 2);  // (b_rows, ldb)
          const auto bias = test::random_vector<float>(N, 3);                                        // (N)
          const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 4);          // (M, ldc)
          // The padding columns of expect hold C's old values: they must stay untouched.
          const auto expect = naive_gemm(ta, tb, M, N, K, 0.75, A, lda, B, ldb, beta, C0, ldc, bias.data());
          test::for_each_thread_count([&](int) {
            for (const auto& [name, fn] : impls) {
              auto C = C0;  // (M, ldc)
              fn(ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, bias.data());
              EXPECT_TRUE(test::all_close("C", C, expect, 2e-6 * K + 1e-6, 1e-5)) << name;
            }
          });
        }
      }
    }
  }
}

// One shape of BothOrdersAcrossStagesAreExactAndRepeatable (below).
void check_stages_repeatable(int M, int N, int K) {
  const int pad = 3, kRowStep = 5;
  const int before = num_threads();
  for (bool tb : {false, true}) {
    SCOPED_TRACE("trans_b=" + std::to_string(tb));
    const int lda = K + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const auto A = test::random_vector<float>(static_cast<std::size_t>(M) * lda, 1);           // (M, lda)
    const auto B = test::random_vector<float>(static_cast<std::size_t>(tb ? N : K) * ldb, 2);  // (N or K, ldb)
    const auto bias = test::random_vector<float>(N, 3);                                        // (N)
    const auto C0 = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 4);          // (M, ldc)
    const auto run = [&] {
      auto C = C0;  // (M, ldc)
      cpu::gemm_packed_bias(false, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, -0.5f, C.data(), ldc, bias.data());
      return C;
    };
    set_num_threads(1);
    const std::vector<float> alone = run();  // (M, ldc)
    // Every kRowStep-th row of the naive loop: its rows of A and C taken kRowStep rows apart.
    const int rows = (M + kRowStep - 1) / kRowStep;
    const auto want = test::naive_gemm(false, tb, rows, N, K, 1.0, A, lda * kRowStep, B, ldb, -0.5, C0, ldc * kRowStep,
                                       bias.data());  // (M, ldc), those rows computed, the rest C0
    for (int i = 0; i < M; i += kRowStep) {
      const std::size_t at = static_cast<std::size_t>(i) * ldc;
      // The whole row, padding too: the padding stays untouched.
      ASSERT_TRUE(test::all_close("row", alone.data() + at, want.data() + at, ldc, 2e-6 * K, 1e-5)) << "row " << i;
    }
    for (int threads : {2, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(threads));
      set_num_threads(threads);
      for (int repeat = 0; repeat < 10; ++repeat) {
        ASSERT_TRUE(run() == alone) << "repeat " << repeat << " differs from one thread's result";
      }
    }
  }
  set_num_threads(before);
}

// Neither order of gemm_packed has barriers: threads take packing pieces and work items from
// counters and wait only on what the data needs (gemm_packed.cpp, team_blocked and
// team_streaming). The blocked order (over 512 rows) runs here on two column blocks of op(B)
// times three K slices (six stages, two packing buffers in turn), the streaming order on four
// or five K slices of 300 rows (400 columns: enough op(B) panels to stream on 3 threads with
// AVX-512's 32-wide ones too). A missing wait shows up as a wrong or a varying result: one
// thread's result is checked against the naive loop on every fifth row (every row block has
// some), and with 2 and 3 threads every repeat must give the same bits as one thread (each
// element's sums run in a fixed order on any thread). The third shape, 100 columns, streams on
// one thread and is blocked on two or three: the orders must slice K alike (slice_kc).
TEST(GemmKernel, BothOrdersAcrossStagesAreExactAndRepeatable) {
  for (auto [M, N, K] :
       {std::array<int, 3>{530, 4110, 800}, std::array<int, 3>{300, 400, 1000}, std::array<int, 3>{300, 100, 1000}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
    check_stages_repeatable(M, N, K);
  }
}

// One row against stored rows (x . W^T, a decode step's linear layer) takes cpu::gemv_rows:
// against the naive loop with bias, alpha and beta (beta 0 ignoring NaN in C), on shapes of
// several thread chunks, and bit for bit the same on 1, 2 and 3 threads.
TEST(GemmKernel, OneRowAgainstStoredRowsIsExactAcrossThreadCounts) {
  const int before = num_threads();
  for (const auto& [N, K] : {std::pair{1003, 771}, std::pair{5, 3}, std::pair{4100, 64}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
    const int ldb = K + 3;
    const auto x = test::random_vector<float>(static_cast<std::size_t>(K), 1);        // (1, K)
    const auto W = test::random_vector<float>(static_cast<std::size_t>(N) * ldb, 2);  // (N, ldb)
    const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 3);     // (N)
    const auto C0 = test::random_vector<float>(static_cast<std::size_t>(N), 4);       // (1, N)
    for (const float beta : {0.0f, -0.5f}) {
      const auto expect = test::naive_gemm(false, true, 1, N, K, 0.75, x, K, W, ldb, beta, C0, N, bias.data());
      std::vector<float> alone;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> C = C0;  // (1, N)
        if (beta == 0.0f) std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());
        cpu::gemm_packed_bias(false, true, 1, N, K, 0.75f, x.data(), K, W.data(), ldb, beta, C.data(), N, bias.data());
        EXPECT_TRUE(test::all_close("y", C, expect, 2e-6 * K + 1e-6, 1e-5)) << threads << " threads";
        if (threads == 1) alone = C;
        EXPECT_TRUE(C == alone) << threads << " threads differ from one";
      }
    }
  }
  set_num_threads(before);
}

// The same product with W held as bf16 (cpu::gemv_rows_bf16, what decoding with bf16 weight
// copies runs): against the naive loop over W's bf16 values widened, on shapes of one row, of
// fewer rows than a group of four, of several thread chunks, with a row stride wider than K; bit
// for bit the same on 1, 2 and 3 threads.
TEST(GemmKernel, OneRowAgainstBf16RowsIsExactAcrossThreadCounts) {
  const int before = num_threads();
  for (const auto& [N, K] : {std::pair{1003, 771}, std::pair{1, 5}, std::pair{3, 17}, std::pair{4100, 64}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
    const int ldw = K + 5;
    const auto x = test::random_vector<float>(static_cast<std::size_t>(K), 11);     // (1, K)
    auto W = test::random_vector<float>(static_cast<std::size_t>(N) * ldw, 12);     // (N, ldw)
    const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 13);  // (N)
    std::vector<std::uint16_t> Wb(W.size());                                        // (N, ldw)
    cpu::floats_to_bf16(W.data(), Wb.data(), static_cast<std::int64_t>(W.size()));
    for (std::size_t i = 0; i < W.size(); ++i) W[i] = cpu::bf16_to_float(Wb[i]);  // the values it multiplies
    for (const bool with_bias : {false, true}) {
      const std::vector<float> zero(static_cast<std::size_t>(N), 0.0f);
      const auto expect =
          test::naive_gemm(false, true, 1, N, K, 1.0, x, K, W, ldw, 0.0f, zero, N, with_bias ? bias.data() : nullptr);
      std::vector<float> alone;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> y(static_cast<std::size_t>(N), std::numeric_limits<float>::quiet_NaN());  // (1, N)
        cpu::gemv_rows_bf16(N, K, x.data(), Wb.data(), ldw, y.data(), with_bias ? bias.data() : nullptr);
        EXPECT_TRUE(test::all_close("y", y, expect, 2e-6 * K + 1e-6, 1e-5)) << threads << " threads";
        if (threads == 1) alone = y;
        EXPECT_TRUE(y == alone) << threads << " threads differ from one";
      }
    }
  }
  set_num_threads(before);
}

// The same product with W held as int8 blocks (cpu::gemv_rows_int8, what decoding with int8
// weight copies runs), which rounds x to int8 blocks too: against the naive loop over the values
// both blocks hold (q * d), on K of whole blocks, of a short last block, of fewer than one block
// and of many blocks; bit for bit the same on 1, 2 and 3 threads. A NaN or infinity in x makes
// every output NaN.
TEST(GemmKernel, OneRowAgainstInt8RowsIsExactAcrossThreadCounts) {
  std::printf("int8 block products on this build: %s\n", cpu::int8_dot_path());
  const int before = num_threads();
  // Int8 values (rows, cols) of w, as int8 blocks hold them.
  const auto as_int8 = [](std::vector<float> w, std::int64_t rows, std::int64_t cols) {
    const std::int64_t nb = cpu::int8_blocks(cols);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> d(static_cast<std::size_t>(rows * nb));
    cpu::quantize_rows_int8(w.data(), rows, cols, q.data(), d.data());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        w[r * cols + c] = static_cast<float>(q[r * cols + c]) * d[r * nb + c / cpu::kInt8Block];
    return std::tuple{w, q, d};
  };
  for (const auto& [N, K] :
       {std::pair{1003, 771}, std::pair{1, 5}, std::pair{3, 17}, std::pair{4100, 64}, std::pair{37, 1056}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
    auto x = test::random_vector<float>(static_cast<std::size_t>(K), 21);           // (1, K)
    const auto bias = test::random_vector<float>(static_cast<std::size_t>(N), 23);  // (N)
    const auto [W, q, d] = as_int8(test::random_vector<float>(static_cast<std::size_t>(N) * K, 22), N, K);
    const auto x_values = std::get<0>(as_int8(x, 1, K));  // (1, K)
    ASSERT_NE(x_values, x);
    for (const bool with_bias : {false, true}) {
      const std::vector<float> zero(static_cast<std::size_t>(N), 0.0f);
      const auto expect = test::naive_gemm(false, true, 1, N, K, 1.0, x_values, K, W, K, 0.0f, zero, N,
                                           with_bias ? bias.data() : nullptr);
      std::vector<float> alone;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> y(static_cast<std::size_t>(N), std::numeric_limits<float>::quiet_NaN());  // (1, N)
        cpu::gemv_rows_int8(N, K, x.data(), q.data(), d.data(), y.data(), with_bias ? bias.data() : nullptr);
        EXPECT_TRUE(test::all_close("y", y, expect, 2e-6 * K + 1e-6, 1e-5)) << threads << " threads";
        if (threads == 1) alone = y;
        EXPECT_TRUE(y == alone) << threads << " threads differ from one";
      }
    }
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      x[static_cast<std::size_t>(K / 2)] = bad;
      std::vector<float> y(static_cast<std::size_t>(N), 0.0f);
      cpu::gemv_rows_int8(N, K, x.data(), q.data(), d.data(), y.data(), nullptr);
      for (const float v : y) ASSERT_TRUE(std::isnan(v)) << "x holding " << bad;
    }
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace llmcc
