// Text generation for Qwen3 with a KV cache: Qwen3::decode (qwen3.h) on CachedGenerator
// (cached_generator.h). The cache holds each layer's normed, rotated keys and its values,
// (L, maxT, NKV * D) each.
#pragma once

#include "models/cached_generator.h"
#include "models/qwen3/qwen3.h"

namespace llmcc::models {

// prefill() and step() return a (V) row of logits.
using Qwen3Generator = CachedGenerator<Qwen3>;
KvCacheShape kv_cache_shape(const Qwen3& model);
GeneratorLabels generator_labels(const Qwen3& model);

}  // namespace llmcc::models
