// The packed GEMM under cache blockings nobody picked, and the autotuner that picks one:
//   - any valid blocking (KC, MC, NC, the streaming slice and the streaming order's row limit,
//     down to the smallest) gives the product of a naive double loop, in both orders, all
//     transposes, with bias and beta, fp32 and bf16, on 1 and 2 threads; with a fixed blocking the
//     thread count changes no bit;
//   - the tuning modes: redo measures and writes the cache file, auto reads it back, off is the
//     built-in blocking; a corrupt cache is measured again, and the cache reader refuses, naming
//     the fault, a file of another CPU or build, one without stream_rows (from before it), one with
//     a malformed, unknown or unusable field;
//   - bad blockings and modes are refused with the field named.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_blocking.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/gemm_packed.h"
#include "llmcc/runtime.h"

#include "naive_gemm.h"
#include "temp_dir.h"
#include "test_support.h"

namespace llmcc {
namespace {

using cpu::packed::kMR;
using cpu::packed::kNR;

constexpr int kMinStream = (cpu::kStreamMaxRows + kMR - 1) / kMR * kMR * 16;

// Blockings from the smallest valid one to larger than any CPU's caches would suggest, with
// uneven multiples of the tile, and streaming row limits on either side of kSizes' row counts
// (none, 129 and 130 around M = 130, 511 and 512 around M = 512).
std::vector<GemmBlocking> odd_blockings() {
  std::vector<GemmBlocking> v = {
      {16, kMR, kNR, kMinStream, cpu::kStreamMaxRows},
      {16, kMR, kNR, 16 * kMR, 1},  // the smallest slice: one tile's rows, 16 values of K
      {34, 3 * kMR, 2 * kNR, kMinStream + 16 * kMR, 129},
      {130, 7 * kMR, 5 * kNR, 3 * kMinStream, 130},
      {1024, 97 * kMR, 130 * kNR, 40 * kMinStream, 511},
      {384, 5 * kMR, 9 * kNR, kMinStream, 0},
      builtin_gemm_blocking(),
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 4; ++i) {
    GemmBlocking b;
    b.kc = 16 + 2 * static_cast<int>(rng() % 300);
    b.mc = kMR * (1 + static_cast<int>(rng() % 60));
    b.nc = kNR * (1 + static_cast<int>(rng() % 40));
    b.stream_a = kMinStream + 16 * kMR * static_cast<int>(rng() % 40);
    b.stream_rows = static_cast<int>(rng() % (cpu::kStreamMaxRows + 1));
    v.push_back(b);
  }
  return v;
}

// (M, N, K) through both orders (up to and past each blocking's stream_rows) and across every
// block.
// {20, 60, 12000}: split_k's 2 parts.
const std::vector<std::array<int, 3>> kSizes = {{1, 1, 1},      {7, 33, 65},     {130, 97, 300}, {512, 70, 41},
                                                {513, 45, 129}, {700, 130, 517}, {20, 60, 12000}};

std::string describe(const GemmBlocking& b) { return to_string(b); }

// One product of AnyBlockingMatchesNaiveLoop: operands, C before the call and the naive loop's
// result, evaluated once for every blocking and thread count.
struct BlockingCase {
  int M, N, K;
  bool ta, tb;
  float beta;
  std::vector<float> A, B, bias, C0;  // (M*K), (K*N), (N), (M, N)
  std::vector<double> expect;         // (M, N)
};

TEST(GemmBlockingKernel, AnyBlockingMatchesNaiveLoop) {
  std::vector<BlockingCase> cases;
  for (const auto& [M, N, K] : kSizes) {
    for (int t = 0; t < 4; ++t) {
      BlockingCase c{M, N, K, (t & 1) != 0, (t & 2) != 0, t == 3 ? 0.5f : t == 2 ? 0.0f : 1.0f, {}, {}, {}, {}, {}};
      c.A = test::random_vector<float>(static_cast<std::size_t>(M) * K, 1);
      c.B = test::random_vector<float>(static_cast<std::size_t>(K) * N, 2);
      c.bias = test::random_vector<float>(static_cast<std::size_t>(N), 4);
      c.C0 = test::random_vector<float>(static_cast<std::size_t>(M) * N, 3);
      c.expect = test::naive_gemm(c.ta, c.tb, M, N, K, 1.0, c.A, c.ta ? M : K, c.B, c.tb ? K : N, c.beta, c.C0, N,
                                  c.bias.data());
      cases.push_back(std::move(c));
    }
  }
  test::for_each_thread_count([&](int threads) {
    for (const GemmBlocking& blk : odd_blockings()) {
      for (const BlockingCase& c : cases) {
        SCOPED_TRACE(describe(blk) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                     " K=" + std::to_string(c.K) + " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb));
        auto C = c.C0;  // (M, N)
        cpu::gemm_packed_with(blk, threads, c.ta, c.tb, c.M, c.N, c.K, 1.0f, c.A.data(), c.ta ? c.M : c.K, c.B.data(),
                              c.tb ? c.K : c.N, c.beta, C.data(), c.N, c.bias.data());
        ASSERT_TRUE(test::all_close("C", C, c.expect, 2e-6 * c.K + 1e-6, 1e-5));
      }
    }
  });
}

// The bf16 GEMM under the same blockings: operands rounded to bf16, products summed in fp32.
TEST(GemmBlockingKernel, Bf16AnyBlockingMatchesNaiveLoop) {
  struct Bf16Case {
    std::vector<float> A, B, C0;  // (M, K), (N, K), (M, N)
    std::vector<double> expect;   // (M, N)
  };
  std::vector<Bf16Case> cases;
  for (const auto& [M, N, K] : kSizes) {
    Bf16Case c{test::random_vector<float>(static_cast<std::size_t>(M) * K, 1),
               test::random_vector<float>(static_cast<std::size_t>(N) * K, 2),
               test::random_vector<float>(static_cast<std::size_t>(M) * N, 3),
               {}};
    std::vector<float> Ar = c.A, Br = c.B;
    for (float& x : Ar) x = cpu::round_to_bf16(x);
    for (float& x : Br) x = cpu::round_to_bf16(x);
    c.expect = test::naive_gemm(false, true, M, N, K, 1.0, Ar, K, Br, K, 1.0, c.C0, N);
    cases.push_back(std::move(c));
  }
  const GemmBlockingInfo before = gemm_blocking_info();
  for (const GemmBlocking& blk : odd_blockings()) {
    set_gemm_blocking(blk);
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      const auto& [M, N, K] = kSizes[i];
      SCOPED_TRACE(describe(blk) + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
      const Bf16Case& c = cases[i];
      auto C = c.C0;  // (M, N)
      cpu::gemm_packed_bf16(false, true, M, N, K, 1.0f, c.A.data(), K, c.B.data(), K, 1.0f, C.data(), N, nullptr);
      ASSERT_TRUE(test::all_close("C", C, c.expect, 2e-6 * K + 1e-6, 1e-5));
    }
  }
  set_gemm_blocking(before.blocking, before.source);
}

// With one blocking, which thread computes which tile changes nothing: every element sums the
// same K slices in the same order.
TEST(GemmBlockingKernel, ThreadCountChangesNoBit) {
  for (const GemmBlocking& blk : odd_blockings()) {
    for (const auto& [M, N, K] : kSizes) {
      SCOPED_TRACE(describe(blk) + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
      const auto A = test::random_vector<float>(static_cast<std::size_t>(M) * K, 1);
      const auto B = test::random_vector<float>(static_cast<std::size_t>(K) * N, 2);
      std::vector<float> one(static_cast<std::size_t>(M) * N), two(one.size());
      cpu::gemm_packed_with(blk, 1, false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, one.data(), N,
                            nullptr);
      cpu::gemm_packed_with(blk, 2, false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, two.data(), N,
                            nullptr);
      ASSERT_EQ(one, two);
    }
  }
}

TEST(GemmBlockingApi, BadBlockingsAndModesAreRefusedByName) {
  GemmBlocking b = builtin_gemm_blocking();
  b.kc = 15;
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {"[gemm blocking]", "kc is 15", "even"}));
  b = builtin_gemm_blocking();
  b.mc = kMR + 1;
  const std::string mc_is = "mc is " + std::to_string(kMR + 1), multiple = "multiple of " + std::to_string(kMR);
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {mc_is.c_str(), multiple.c_str()}));
  b = builtin_gemm_blocking();
  b.nc = kNR / 2;
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {"nc is", "micro-kernel's columns"}));
  b = builtin_gemm_blocking();
  b.stream_a = 100;
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {"stream_a is 100", "at least"}));
  b = builtin_gemm_blocking();
  b.stream_rows = cpu::kStreamMaxRows + 1;
  const std::string rows_is = "stream_rows is " + std::to_string(cpu::kStreamMaxRows + 1);
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {rows_is.c_str(), "expected 0 to"}));
  b.stream_rows = -1;
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {"stream_rows is -1"}));
  // A slice that holds one tile's rows serves a row limit of one tile, not of two.
  b.stream_a = 16 * kMR;
  b.stream_rows = kMR;
  EXPECT_NO_THROW(cpu::validate_gemm_blocking(b));
  b.stream_rows = kMR + 1;
  EXPECT_TRUE(test::throws_error([&] { set_gemm_blocking(b); }, {"stream_a is", "at least"}));
  EXPECT_TRUE(test::throws_error([] { parse_gemm_tune("fast"); }, {"'fast'", "auto, off or redo"}));
  EXPECT_TRUE(test::throws_error([] { parse_gemm_blocking("kc=384 mc=240"); }, {"lacks one of"}));
  EXPECT_TRUE(test::throws_error([] { parse_gemm_blocking("kc=384 mc=x nc=4096 stream_a=66048"); }, {"at 'mc=x'"}));
  EXPECT_TRUE(test::throws_error([] { parse_gemm_blocking("kc=384 mc=224 nc=4096 stream_a=66048 stream_rows=-2"); },
                                 {"at 'stream_rows=-2'"}));
  EXPECT_EQ(parse_gemm_blocking(to_string(builtin_gemm_blocking())), builtin_gemm_blocking());
  // A checkpoint's text from before stream_rows: its run streamed up to the built-in limit.
  const GemmBlocking old = parse_gemm_blocking("kc=384 mc=224 nc=4096 stream_a=66048");
  EXPECT_EQ(old.stream_rows, cpu::kStreamMaxRows);
  EXPECT_EQ(parse_gemm_blocking("kc=384 mc=224 nc=4096 stream_a=66048 stream_rows=0").stream_rows, 0);
  // A blocking the program writes with the four older fields keeps the built-in row limit.
  const GemmBlocking four{384, 224, 4096, kMinStream};
  EXPECT_EQ(four.stream_rows, cpu::kStreamMaxRows);
}

// The order step's rule on made-up outcomes: which row counts it asks about, in which order,
// and what it keeps.
TEST(GemmBlockingTune, StreamRowsIsTheLargestMeasuredRowCountWhereStreamingHolds) {
  struct Case {
    std::vector<int> holds;  // row counts at which streaming holds
    std::vector<int> asked;  // expected questions, in order
    int rows;                // expected choice
  };
  const std::vector<Case> cases = {
      {{128, 256, 384, 512}, {256, 384, 512}, 512},
      {{256, 384}, {256, 384, 512}, 384},
      {{256, 512}, {256, 384}, 256},
      {{128}, {256, 128}, 128},
      {{}, {256, 128}, 0},
      {{384, 512}, {256, 128}, 0},
  };
  for (const Case& c : cases) {
    std::vector<int> asked;
    const int rows = cpu::choose_stream_rows([&](int r) {
      asked.push_back(r);
      return std::find(c.holds.begin(), c.holds.end(), r) != c.holds.end();
    });
    EXPECT_EQ(rows, c.rows) << ::testing::PrintToString(c.holds);
    EXPECT_EQ(asked, c.asked) << ::testing::PrintToString(c.holds);
  }
}

// Points LLMCC_TUNE_CACHE at a fresh directory for one test, and restores the blocking.
class GemmTuneCache : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = gemm_blocking_info();
    const char* old = std::getenv("LLMCC_TUNE_CACHE");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("LLMCC_TUNE_CACHE", dir_.path.c_str(), 1);
  }
  void TearDown() override {
    if (had_) {
      ::setenv("LLMCC_TUNE_CACHE", old_.c_str(), 1);
    } else {
      ::unsetenv("LLMCC_TUNE_CACHE");
    }
    set_gemm_blocking(before_.blocking, before_.source);
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  test::TempDir dir_;
  GemmBlockingInfo before_;
  bool had_ = false;
  std::string old_;
};

TEST_F(GemmTuneCache, RedoMeasuresAutoReadsOffIsBuiltIn) {
  const std::string path = gemm_tune_cache_path();
  ASSERT_EQ(std::filesystem::path(path).parent_path(), dir_.path);

  set_gemm_tune(GemmTune::Redo);
  const GemmBlockingInfo measured = gemm_blocking_info();
  EXPECT_NE(measured.source.find("measured now"), std::string::npos) << measured.source;
  EXPECT_NE(measured.source.find(path), std::string::npos) << measured.source;
  EXPECT_NO_THROW(cpu::validate_gemm_blocking(measured.blocking));
  const std::string text = read(path);
  EXPECT_NE(text.find("cpu " + cpu::cpu_description()), std::string::npos) << text;
  EXPECT_NE(text.find("kc " + std::to_string(measured.blocking.kc)), std::string::npos) << text;
  EXPECT_NE(text.find("\nstream_rows " + std::to_string(measured.blocking.stream_rows) + "\n"), std::string::npos)
      << text;
  std::printf("measured on %s: %s\n%s", measured.cpu.c_str(), to_string(measured.blocking).c_str(), text.c_str());

  set_gemm_tune(GemmTune::Auto);
  const GemmBlockingInfo cached = gemm_blocking_info();
  EXPECT_EQ(cached.source, "read from " + path);
  EXPECT_EQ(cached.blocking, measured.blocking);

  set_gemm_tune(GemmTune::Off);
  const GemmBlockingInfo off = gemm_blocking_info();
  EXPECT_EQ(off.blocking, builtin_gemm_blocking());
  EXPECT_NE(off.source.find("built in"), std::string::npos) << off.source;
}

// A corrupt file is measured again and replaced; every other fault of a file is found by the same
// reader, which the checks below call directly (a measurement takes seconds).
TEST_F(GemmTuneCache, CorruptOrForeignCacheIsMeasuredAgain) {
  const std::string path = gemm_tune_cache_path();
  std::ofstream(path) << "\x01\x02garbage";
  set_gemm_tune(GemmTune::Auto);
  const GemmBlockingInfo info = gemm_blocking_info();
  EXPECT_NE(info.source.find("measured now"), std::string::npos) << info.source;
  set_gemm_tune(GemmTune::Auto);
  EXPECT_EQ(gemm_blocking_info().source, "read from " + path) << read(path);

  const std::string cpu = cpu::cpu_description(), good = read(path);
  std::string why;
  ASSERT_TRUE(cpu::read_gemm_tune_cache(path, cpu, why)) << why << "\n" << good;
  // The good file with the line of `key` replaced by `line` (dropped when empty; appended when
  // there is no such line).
  const auto with_line = [&](const std::string& key, const std::string& line) {
    std::istringstream in(good);
    std::string out, l;
    bool found = false;
    while (std::getline(in, l)) {
      if (l.rfind(key + " ", 0) == 0) {
        found = true;
        if (!line.empty()) out += line + "\n";
      } else {
        out += l + "\n";
      }
    }
    if (!found) out += line + "\n";
    return out;
  };
  const std::string mc_bad = "mc " + std::to_string(kMR + 1), rows_bad = "stream_rows 513";
  const std::pair<std::string, std::string> faults[] = {
      {with_line("kc", "kc 38x"), "kc is '38x', expected a positive integer"},
      {with_line("stream_rows", "stream_rows -1"), "stream_rows is '-1', expected a non-negative integer"},
      {with_line("cpu", "cpu some other CPU"), "another CPU or build"},
      {with_line("build", "build another build"), "another CPU or build"},
      {with_line("stream_rows", ""), "lacks one of kc, mc, nc, stream_a, stream_rows"},  // from before the field
      {with_line("speed", "speed 3"), "unknown key 'speed'"},
      {with_line("mc", mc_bad), "mc is " + std::to_string(kMR + 1)},
      {with_line("stream_rows", rows_bad), "stream_rows is 513"},
      {"\x01\x02garbage", "unknown key"},
  };
  for (const auto& [text, expect] : faults) {
    SCOPED_TRACE(text);
    std::ofstream(path) << text;
    why.clear();
    EXPECT_FALSE(cpu::read_gemm_tune_cache(path, cpu, why));
    EXPECT_NE(why.find(expect), std::string::npos) << why;
  }
  std::filesystem::remove(path);
  EXPECT_FALSE(cpu::read_gemm_tune_cache(path, cpu, why));
  EXPECT_EQ(why, "");  // no file: nothing to warn about
}

}  // namespace
}  // namespace llmcc
