// One row of a GEMM against stored rows: y (1, N) = alpha * x (1, K) . W^T + beta * y (+ bias),
// W stored (N, K) with row stride ldw. It is a linear layer's product for one token, what every
// step of KV-cache decoding computes: the weights are read once, in their stored order, where the
// packed GEMM would first copy them into panels (reading and writing them once more) to reuse
// them across rows that a single row does not have.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// Each output is a dot product over all of K computed by one thread (the sum's order does not
// depend on the thread count). beta == 0 ignores y's old values (NaN included); bias may be null.
void gemv_rows(int N, int K, float alpha, const float* x, const float* W, int ldw, float beta, float* y,
               const float* bias);

// The same with W held as bf16 (kernels/cpu/bf16.h: the upper 16 bits of each float), widened to
// fp32 as it is read: the product of x with W's bf16 values, summed in fp32, reading half the
// bytes. y (1, N) = x (1, K) . W^T (+ bias), beta 0.
void gemv_rows_bf16(int N, int K, const float* x, const std::uint16_t* W, int ldw, float* y, const float* bias);

// The same with W held as int8 rows with a scale per block (kernels/cpu/int8_rows.h): W (N, K)
// dense, scales (N, int8_blocks(K)). x is rounded the same way (int8 blocks of 32 with a scale
// each), each block's product summed exactly in integers and scaled by both blocks' scales, the
// blocks summed in fp32: y[j] = sum_b dx_b dw_jb (qx_b . qw_jb) (+ bias[j]). A NaN or infinity in
// x makes every y NaN. int8_dot_path() names the instructions the block products use.
void gemv_rows_int8(int N, int K, const float* x, const std::int8_t* W, const float* scales, float* y,
                    const float* bias);
const char* int8_dot_path();

}  // namespace llmcc::cpu
