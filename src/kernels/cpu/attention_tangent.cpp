#include "kernels/cpu/attention_tangent.h"

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/thread_buffer.h"
#include "kernels/ref/attention_tangent.h"

namespace llmcc::cpu {
namespace {

struct ForwardScratch {};
struct BackwardScratch {};

// A group's work is HS * T^2 / 2 products per query head; below this many in all one thread
// does it.
constexpr std::int64_t kParallelWork = 1 << 16;

std::int64_t work(const AttentionLayout& L) { return std::int64_t{L.B} * L.NH * L.T * L.T * L.HS / 2; }

}  // namespace

void attention_tangent_forward(float* out_t, const float* q, const float* k, const float* v, const float* tq,
                               const float* tk, const float* tv, const AttentionLayout& L) {
  parallel_for(std::int64_t{L.B} * L.NKV, work(L) >= kParallelWork, [&](std::int64_t begin, std::int64_t end) {
    float* scratch = thread_buffer<ForwardScratch>(3 * static_cast<std::size_t>(L.T), "attention_tangent", "of scores");
    for (std::int64_t bg = begin; bg < end; ++bg)
      ref::attention_tangent_forward_group(out_t, q, k, v, tq, tk, tv, L, static_cast<int>(bg / L.NKV),
                                           static_cast<int>(bg % L.NKV), scratch);
  });
}

void attention_tangent_backward(float* d_q, float* d_k, float* d_v, float* d_tq, float* d_tk, float* d_tv,
                                const float* d_out_t, const float* q, const float* k, const float* v, const float* tq,
                                const float* tk, const float* tv, const AttentionLayout& L) {
  parallel_for(std::int64_t{L.B} * L.NKV, work(L) >= kParallelWork, [&](std::int64_t begin, std::int64_t end) {
    float* scratch =
        thread_buffer<BackwardScratch>(4 * static_cast<std::size_t>(L.T), "attention_tangent", "of scores");
    for (std::int64_t bg = begin; bg < end; ++bg)
      ref::attention_tangent_backward_group(d_q, d_k, d_v, d_tq, d_tk, d_tv, d_out_t, q, k, v, tq, tk, tv, L,
                                            static_cast<int>(bg / L.NKV), static_cast<int>(bg % L.NKV), scratch);
  });
}

}  // namespace llmcc::cpu
