// In-process A/B of two builds of cpu::attention_forward / attention_backward on GPT-2 124M's
// attention (B=4, 12 heads of 64, q, k, v packed in one qkv tensor as c_attn writes it), built by
// `bench/ab.sh attention REV_A [REV_B]`. As in bench/gemm_ab.cpp: each pass is called four times
// in a row, alternating A and B (the order flipped each round), so load drift hits both alike,
// and the medians are compared. The backward writes fresh adjoints (overwrite flags set), as in a
// training step.
//
//   attention_ab THREADS T [ROUNDS=20]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ab_common.h"

#include "kernels/attention_layout.h"

#define LLMCC_AB_DECLARE(ns)                                                                                      \
  namespace ns {                                                                                                  \
  struct AttentionLayout; /* llmcc::AttentionLayout, renamed in that build */                                     \
  [[noreturn]] void assert_failed(const char* condition, const char* file, int line, const char* hint) {          \
    std::fprintf(stderr, "%s:%d: %s (%s)\n", file, line, condition, hint);                                        \
    std::abort();                                                                                                 \
  }                                                                                                               \
  namespace cpu {                                                                                                 \
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,                  \
                         const AttentionLayout& L);                                                               \
  void attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q, const float* k, \
                          const float* v, const float* out, const float* lse, const AttentionLayout& L,           \
                          bool overwrite_q, bool overwrite_k, bool overwrite_v);                                  \
  }                                                                                                               \
  }
LLMCC_AB_DECLARE(llmcc_ab_a)
LLMCC_AB_DECLARE(llmcc_ab_b)

using llmcc_bench::median;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: attention_ab THREADS T [ROUNDS=20]\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]), T = std::atoi(argv[2]);
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 20;
  if (threads < 1 || T < 1 || rounds < 1) {
    std::fprintf(stderr, "attention_ab: THREADS, T and ROUNDS must be positive\n");
    return 2;
  }
  omp_set_num_threads(threads);
  constexpr int B = 4, NH = 12, HS = 64;
  // The A and B builds were compiled with llmcc renamed: their AttentionLayout is this plain
  // struct under another name.
  const llmcc::AttentionLayout L = llmcc::AttentionLayout::packed(B, T, NH, NH, HS);
  const std::size_t rows = std::size_t(B) * T;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> qkv(rows * L.ld_q), d_out(rows * L.ld_out);
  for (float& x : qkv) x = dist(rng);
  for (float& x : d_out) x = dist(rng);
  std::vector<float> out[2], lse[2], d_qkv[2];
  for (int side = 0; side < 2; ++side) {
    out[side].assign(rows * L.ld_out, 0.0f);
    lse[side].assign(std::size_t(B) * NH * T, 0.0f);
    d_qkv[side].assign(rows * L.ld_q, 0.0f);
  }
  const float* q = qkv.data();
  const float* k = q + L.packed_k_offset();
  const float* v = q + L.packed_v_offset();

  const auto forward = [&](int side) {
    if (side == 0) {
      llmcc_ab_a::cpu::attention_forward(out[0].data(), lse[0].data(), q, k, v,
                                         reinterpret_cast<const llmcc_ab_a::AttentionLayout&>(L));
    } else {
      llmcc_ab_b::cpu::attention_forward(out[1].data(), lse[1].data(), q, k, v,
                                         reinterpret_cast<const llmcc_ab_b::AttentionLayout&>(L));
    }
  };
  const auto backward = [&](int side) {
    float* dq = d_qkv[side].data();
    float* dk = dq + L.packed_k_offset();
    float* dv = dq + L.packed_v_offset();
    if (side == 0) {
      llmcc_ab_a::cpu::attention_backward(dq, dk, dv, d_out.data(), q, k, v, out[0].data(), lse[0].data(),
                                          reinterpret_cast<const llmcc_ab_a::AttentionLayout&>(L), true, true, true);
    } else {
      llmcc_ab_b::cpu::attention_backward(dq, dk, dv, d_out.data(), q, k, v, out[1].data(), lse[1].data(),
                                          reinterpret_cast<const llmcc_ab_b::AttentionLayout&>(L), true, true, true);
    }
  };
  std::vector<double> seconds[2][2];  // [pass][side]
  for (int r = 0; r < rounds; ++r) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int call = 0; call < 4; ++call) {
        const int side = (call + r) & 1;
        const auto t0 = std::chrono::steady_clock::now();
        if (pass == 0) {
          forward(side);
        } else {
          backward(side);
        }
        seconds[pass][side].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  // Both builds must agree (a changed kernel that computes something else is no speed-up).
  double max_diff = 0.0;
  for (std::size_t i = 0; i < out[0].size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(out[0][i] - out[1][i])));
  for (std::size_t i = 0; i < d_qkv[0].size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(d_qkv[0][i] - d_qkv[1][i])));

  std::printf("attention_ab: B=%d NH=%d HS=%d T=%d, %d threads, %d rounds; max |A - B| = %.3g\n", B, NH, HS, T, threads,
              rounds, max_diff);
  std::printf("%-9s %10s %10s %8s\n", "pass", "A ms", "B ms", "B/A");
  const char* names[2] = {"forward", "backward"};
  double total[2] = {0.0, 0.0};
  for (int pass = 0; pass < 2; ++pass) {
    const double t[2] = {median(seconds[pass][0]), median(seconds[pass][1])};
    std::printf("%-9s %10.3f %10.3f %7.3fx\n", names[pass], t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    total[0] += t[0];
    total[1] += t[1];
  }
  std::printf("both (medians): A %.3f ms, B %.3f ms, B is %.3fx A's speed\n", total[0] * 1e3, total[1] * 1e3,
              total[0] / total[1]);
  return max_diff < 1e-3 ? 0 : 1;
}
