// Rows of a matrix held as int8 with one scale per block of kInt8Block consecutive weights:
// block b of row r covers columns [32 b, 32 b + 32) (the last block of a row may be shorter) and
// stores d = max |w| / 127 and q = round(w * (1 / d)) (nearest, ties to even) in [-127, 127], so
// w ~ q * d with an error of at most d / 2 (plus the rounding of 1 / d). An all-zero block has
// d = 0 and q = 0; a block holding a NaN or an infinity has d = NaN and q = 0, so what it
// multiplies becomes NaN. This is llama.cpp's Q8_0 quantization with the scale kept in fp32.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// Weights per scale. 32 keeps each block's scale close to its weights' magnitude (one outlier
// coarsens 31 neighbours) at 4 / 32 = 0.125 bytes of scale per weight.
constexpr int kInt8Block = 32;

// Blocks in a row of `cols` weights.
constexpr std::int64_t int8_blocks(std::int64_t cols) { return (cols + kInt8Block - 1) / kInt8Block; }

// q (rows, cols) and scales (rows, int8_blocks(cols)) from w (rows, cols), all row-major and
// dense.
void quantize_rows_int8(const float* w, std::int64_t rows, std::int64_t cols, std::int8_t* q, float* scales);

}  // namespace llmcc::cpu
