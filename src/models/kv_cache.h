// What a model's decode method needs beside its weights: each layer's cached keys and values, the
// residual stream between layers, and the memory of one decode call.
//
// A family's decode (Gpt2::decode, Llama::decode) runs T new tokens at positions pos() .. pos()+T-1
// through the same layers as its forward. Each attention calls kv_attention, which writes the new
// rows' keys and values into its layer of the cache and attends to every cached position; between
// layers the model passes the residual stream through carry(), which keeps it and frees the
// finished layer's temporaries, so a prefill of max_seq_len tokens needs one layer's temporaries
// at a time. CachedGenerator (cached_generator.h) drives it: prefill from position 0, then one
// token per call. After construction nothing allocates from the heap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "llmcc/arena.h"
#include "llmcc/tensor.h"

namespace llmcc::models {

// Sizes a cache: layers, positions, floats per cached key (and value) row, the residual stream's
// width, and bytes of the largest decode call's temporaries between two carry() calls.
struct KvCacheShape {
  int layers = 0;
  int max_len = 0;
  std::int64_t kv_width = 0;
  std::int64_t width = 0;
  std::size_t scratch_bytes = 0;
};

// Bytes one arena allocation of n floats takes (arenas round every request up to 64 bytes): the
// unit families size their scratch_bytes in.
std::size_t arena_floats_bytes(std::int64_t n);

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Starts a decode call whose first new token sits at `pos` (0: a prefill, forgetting the
  // cached rows) and frees the previous call's temporaries. The call's ops allocate from
  // scratch(): the caller holds an ArenaScope on it.
  void begin(int pos);
  int pos() const { return pos_; }
  Arena& scratch() { return scratch_; }

  // Keeps x ((1, T, width), a layer's output) as the residual stream and frees every temporary
  // made since the last carry(); returns the kept copy, valid until the next carry().
  Tensor carry(const Tensor& x);

  float* k(int layer) { return k_.f32() + layer * layer_floats(); }  // (max_len, kv_width)
  float* v(int layer) { return v_.f32() + layer * layer_floats(); }  // (max_len, kv_width)
  const KvCacheShape& shape() const { return shape_; }
  std::size_t bytes() const { return state_.capacity() + scratch_.capacity(); }

 private:
  std::int64_t layer_floats() const { return std::int64_t{shape_.max_len} * shape_.kv_width; }

  KvCacheShape shape_;
  Arena state_;      // the caches and the residual stream, for the cache's lifetime
  Arena scratch_;    // one decode call's temporaries, reset by begin() and carry()
  Tensor k_, v_;     // (layers, max_len, kv_width) each
  Tensor residual_;  // (max_len, width)
  int pos_ = 0;
};

// The attention of T new rows at positions cache.pos().. of `layer`: q (1, T, NH * HS), k and v
// (1, T, NKV * HS), NKV dividing NH. Writes k and v into the layer's rows pos .. pos+T-1, then
// returns (1, T, NH * HS): a prefill (pos 0) is llmcc::attention over the T rows (causal, as the
// forward); one row attends to every cached row 0..pos.
Tensor kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache, int layer, int NH, int NKV);
// The same on GPT-2-style packed rows [q | k | v] (1, T, 3C), NH heads: a prefill is
// llmcc::attention_qkv.
Tensor kv_attention_qkv(const Tensor& qkv, KvCache& cache, int layer, int NH);

}  // namespace llmcc::models
