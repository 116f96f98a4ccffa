// Sizes and row strides shared by the reference and fast attention kernels.
//
// Token (b, t) of an operand x starts at x + (b * T + t) * ld_x, and head h occupies the HS
// floats from h * HS of that row. Separate q, k, v tensors are dense (ld = heads * HS); a packed
// qkv tensor (B, T, (NH + 2 * NKV) * HS), laid out per token as [NH query heads | NKV key heads |
// NKV value heads] like GPT-2's c_attn output, is the same operands at offsets 0, NH * HS and
// (NH + NKV) * HS with ld = (NH + 2 * NKV) * HS for all three: the kernels read and write it in
// place, no copies. Adjoints share their primal's stride (d_q: ld_q, d_k and d_v: ld_kv, d_out:
// ld_out).
#pragma once

#include <cstdint>

namespace llmcc {

struct AttentionLayout {
  int B, T, NH, NKV, HS;
  std::int64_t ld_q;    // q and d_q
  std::int64_t ld_kv;   // k, v, d_k and d_v
  std::int64_t ld_out;  // out and d_out

  // q (B, T, NH*HS), k and v (B, T, NKV*HS), out (B, T, NH*HS), all dense.
  static AttentionLayout dense(int B, int T, int NH, int NKV, int HS) {
    return {B, T, NH, NKV, HS, std::int64_t{NH} * HS, std::int64_t{NKV} * HS, std::int64_t{NH} * HS};
  }
  // q, k, v inside one (B, T, (NH + 2*NKV) * HS) tensor; out (B, T, NH*HS) dense.
  static AttentionLayout packed(int B, int T, int NH, int NKV, int HS) {
    return {B, T, NH, NKV, HS, std::int64_t{NH + 2 * NKV} * HS, std::int64_t{NH + 2 * NKV} * HS, std::int64_t{NH} * HS};
  }
  // Offsets of the k and v heads inside a packed qkv row.
  std::int64_t packed_k_offset() const { return std::int64_t{NH} * HS; }
  std::int64_t packed_v_offset() const { return std::int64_t{NH + NKV} * HS; }
};

}  // namespace llmcc
