// The cache blocking llmcc's packed GEMM runs with (the public side is in llmcc/runtime.h):
// built in per instruction set, or measured on this CPU by a short autotuning pass and cached
// per CPU and build, as FFTW keeps wisdom and BLIS a configuration per architecture.
//
// The measurement times the packed GEMM on one thread, on products of a GPT-2 124M training
// step's kind: a forward product of 256 rows (the streaming order, whose op(A) slice is
// stream_a), a weight-gradient product of 1,024 rows (the blocked order: kc, mc) and the forward
// product at 128 to 512 rows in both orders (stream_rows: up to how many rows streaming pays),
// with op(B) and C flushed from the caches before each call, as a step finds them. Candidates
// come from the caches Linux reports (an op(B) panel of KC x NR in L1, an MC x KC block of
// op(A) in half of L2, the streaming slice in up to three quarters of L2) and always include
// the built-in blocking, which is kept unless another is at least kTuneMargin faster: a noisy
// measurement cannot make the GEMM slower than the built-in one by much.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "llmcc/runtime.h"

namespace llmcc::cpu {

// The blocking gemm_packed uses now; the first call chooses it (set_gemm_tune's mode). Safe to
// call from several threads; not while set_gemm_blocking runs.
GemmBlocking current_gemm_blocking();

// Throws llmcc::Error ("[gemm blocking] mc is 100, expected ...") unless every packed GEMM can
// run with `b`.
void validate_gemm_blocking(const GemmBlocking& b);

// The blocking a tuning cache file holds for `cpu` (cpu_description()) and this build, or nullopt
// with `why` set: empty when there is no file, else what is wrong with it (malformed, an unknown
// key, another CPU or build, a field missing or one no packed GEMM can use).
std::optional<GemmBlocking> read_gemm_tune_cache(const std::string& path, const std::string& cpu, std::string& why);

// The caches of the CPU this runs on, in bytes (0: not reported).
struct CpuCaches {
  long l1d = 0, l2 = 0, l3 = 0;
};
CpuCaches cpu_caches();

// "AMD EPYC 7B13 (family 25 model 1 stepping 1); L1d 32 KiB, L2 512 KiB, L3 32 MiB".
std::string cpu_description();

// The measurement: the chosen blocking and one line per candidate (its figures).
struct GemmTuneResult {
  GemmBlocking blocking;
  std::string table;
  double seconds = 0;
};
GemmTuneResult tune_gemm_blocking(const CpuCaches& caches);

// The tuning's choice of stream_rows from streaming_holds(rows), whether the streaming order
// holds against the blocked one on the forward product of that many rows (asked for 256, then
// 384 and 512 while it holds, else 128): the largest of those at which it holds, 0 if none.
// The row counts in between follow the smaller measured one.
int choose_stream_rows(const std::function<bool(int rows)>& streaming_holds);

}  // namespace llmcc::cpu
