#include "models/kv_cache.h"

#include <cstring>

#include "llmcc/error.h"
#include "llmcc/ops/attention.h"
#include "models/kv_attention.h"

namespace llmcc::models {

std::size_t arena_floats_bytes(std::int64_t n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

KvCache::KvCache(const KvCacheShape& shape)
    : shape_(shape),
      state_(2 * arena_floats_bytes(std::int64_t{shape.layers} * shape.max_len * shape.kv_width) +
             arena_floats_bytes(std::int64_t{shape.max_len} * shape.width)),
      scratch_(shape.scratch_bytes) {
  // Uninitialised: a cache row is always written before it is read, and untouched pages cost
  // nothing, so a short generation with a long-context model stays cheap.
  k_ = state_.tensor({shape.layers, shape.max_len, shape.kv_width}, "k cache");  // (L, maxT, KV)
  v_ = state_.tensor({shape.layers, shape.max_len, shape.kv_width}, "v cache");  // (L, maxT, KV)
  residual_ = state_.tensor({shape.max_len, shape.width}, "residual");           // (maxT, C)
}

void KvCache::begin(int pos) {
  LLMCC_ASSERT(pos >= 0 && pos < shape_.max_len, "KvCache::begin past the cache");
  pos_ = pos;
  scratch_.reset();
}

Tensor KvCache::carry(const Tensor& x) {
  LLMCC_ASSERT(x.numel() <= residual_.numel(), "KvCache::carry: more rows than the cache holds");
  // x may be the kept stream itself (a model with no layers): then it stays where it is.
  if (x.f32() != residual_.f32()) std::memcpy(residual_.f32(), x.f32(), x.nbytes());
  scratch_.reset();
  return Tensor(residual_.f32(), x.shape());
}

namespace {

// Copies T rows of `width` floats (each `src_stride` apart) into rows pos.. of a cache layer.
void store_rows(float* cache, std::int64_t kv_width, int pos, const float* src, std::int64_t src_stride,
                std::int64_t T) {
  for (std::int64_t t = 0; t < T; ++t)
    std::memcpy(cache + (pos + t) * kv_width, src + t * src_stride, static_cast<std::size_t>(kv_width) * sizeof(float));
}

// One new row at pos attends to the cached rows 0..pos; q: (NH * HS) floats.
Tensor single_query(const float* q, KvCache& cache, int layer, int NH, int NKV, std::int64_t HS) {
  const int pos = cache.pos();
  const Tensor y = new_tensor({1, 1, NH * HS}, "kv attention");     // (1, 1, NH * HS)
  const Tensor scores = new_tensor({NH, pos + 1}, "kv attention");  // (NH, pos + 1)
  attention_single_query(y.f32(), q, cache.k(layer), cache.v(layer), pos + 1, NH, NKV, static_cast<int>(HS),
                         cache.shape().kv_width, scores.f32());
  return y;
}

}  // namespace

Tensor kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache, int layer, int NH, int NKV) {
  const std::int64_t T = q.shape()[1], KV = cache.shape().kv_width, HS = KV / NKV;
  LLMCC_ASSERT(T == 1 || cache.pos() == 0, "kv_attention: several new rows after a prefill");
  store_rows(cache.k(layer), KV, cache.pos(), k.f32(), KV, T);
  store_rows(cache.v(layer), KV, cache.pos(), v.f32(), KV, T);
  if (cache.pos() == 0 && T > 1) return attention(q, k, v, NH, NKV);  // (1, T, NH * HS)
  return single_query(q.f32(), cache, layer, NH, NKV, HS);
}

Tensor kv_attention_qkv(const Tensor& qkv, KvCache& cache, int layer, int NH) {
  const std::int64_t T = qkv.shape()[1], C = cache.shape().kv_width;
  LLMCC_ASSERT(T == 1 || cache.pos() == 0, "kv_attention_qkv: several new rows after a prefill");
  store_rows(cache.k(layer), C, cache.pos(), qkv.f32() + C, 3 * C, T);
  store_rows(cache.v(layer), C, cache.pos(), qkv.f32() + 2 * C, 3 * C, T);
  if (cache.pos() == 0 && T > 1) return attention_qkv(qkv, NH, NH);  // (1, T, C)
  return single_query(qkv.f32(), cache, layer, NH, NH, C / NH);
}

}  // namespace llmcc::models
