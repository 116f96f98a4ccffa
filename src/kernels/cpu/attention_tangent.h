// Fast kernels for attention's tangent: the reference arithmetic (kernels/ref/attention_tangent.h)
// in float, its (batch row, kv head) groups spread over the threads, scratch rows per thread
// kept across calls. Forward mode through attention is not a training step's hot path; this is
// the parallel form of the plain loops, not a flash-style kernel.
#pragma once

#include "kernels/attention_layout.h"

namespace llmcc::cpu {

// out_t (overwritten) as ref::attention_tangent_forward.
void attention_tangent_forward(float* out_t, const float* q, const float* k, const float* v, const float* tq,
                               const float* tk, const float* tv, const AttentionLayout& L);

// As ref::attention_tangent_backward: null adjoints skipped, the others added to.
void attention_tangent_backward(float* d_q, float* d_k, float* d_v, float* d_tq, float* d_tk, float* d_tv,
                                const float* d_out_t, const float* q, const float* k, const float* v, const float* tq,
                                const float* tk, const float* tv, const AttentionLayout& L);

}  // namespace llmcc::cpu
