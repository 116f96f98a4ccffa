// cpu::attention_forward / attention_backward on GPT-2 124M's attention shapes (B=4, NH=NKV=12,
// HS=64, T=64 and 256), at 1 and 2 threads, on separate q, k, v ("dense") and on one packed
// qkv tensor ("packed", GPT-2's c_attn layout). To compare two versions of the kernels, time
// them call by call in one process with `bench/ab.sh attention REV_A [REV_B]`.
//
// Counter GFLOPS: causal FLOPs per call over wall time. The forward multiplies QK^T and PV over
// the T(T+1)/2 visible (query, key) pairs: 2 * 2 * HS * T(T+1)/2 = 2 * HS * T(T+1) per (b, head),
//   fwd = 2 * B * NH * HS * T * (T + 1),
// the backward recomputes S and forms dP, dV, dK, dQ: five such products,
//   bwd = 2.5 * fwd.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention_layout.h"
#include "kernels/cpu/attention.h"
#include "llmcc/runtime.h"

namespace {

using llmcc::AttentionLayout;

enum class Pass { Fwd, Bwd };

constexpr int kB = 4, kNH = 12, kHS = 64;

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

void run(benchmark::State& state, Pass pass, bool packed) {
  const int T = static_cast<int>(state.range(0));
  llmcc::set_num_threads(static_cast<int>(state.range(1)));
  const AttentionLayout L =
      packed ? AttentionLayout::packed(kB, T, kNH, kNH, kHS) : AttentionLayout::dense(kB, T, kNH, kNH, kHS);
  const std::size_t nq = std::size_t(kB) * T * L.ld_q, nkv = std::size_t(kB) * T * L.ld_kv;
  const std::size_t nout = std::size_t(kB) * T * kNH * kHS;
  // Packed: q, k, v (and d_q, d_k, d_v) are slices of one buffer; dense: three buffers.
  const std::vector<float> qb = random_values(nq, 1), kb = random_values(nkv, 2), vb = random_values(nkv, 3);
  const float* q = qb.data();
  const float* k = packed ? q + L.packed_k_offset() : kb.data();
  const float* v = packed ? q + L.packed_v_offset() : vb.data();
  std::vector<float> out(nout), lse(std::size_t(kB) * kNH * T), d_out = random_values(nout, 4);
  std::vector<float> dqb(nq), dkb(nkv), dvb(nkv);
  float* dq = dqb.data();
  float* dk = packed ? dq + L.packed_k_offset() : dkb.data();
  float* dv = packed ? dq + L.packed_v_offset() : dvb.data();
  llmcc::cpu::attention_forward(out.data(), lse.data(), q, k, v, L);  // the backward reads out and lse
  for (auto _ : state) {
    if (pass == Pass::Fwd) {
      llmcc::cpu::attention_forward(out.data(), lse.data(), q, k, v, L);
    } else {
      llmcc::cpu::attention_backward(dq, dk, dv, d_out.data(), q, k, v, out.data(), lse.data(), L);
    }
    benchmark::ClobberMemory();
  }
  const double fwd_flops = 2.0 * kB * kNH * kHS * double(T) * (T + 1);
  const double flops = pass == Pass::Fwd ? fwd_flops : 2.5 * fwd_flops;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"T", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
  for (int T : {64, 256})
    for (int threads : {1, 2}) b->Args({T, threads});
}

BENCHMARK_CAPTURE(run, fwd_dense, Pass::Fwd, false)->Apply(args);
BENCHMARK_CAPTURE(run, bwd_dense, Pass::Bwd, false)->Apply(args);
BENCHMARK_CAPTURE(run, fwd_packed, Pass::Fwd, true)->Apply(args);
BENCHMARK_CAPTURE(run, bwd_packed, Pass::Bwd, true)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
