// LoRA adapters (models/lora.h).
#include "models/lora.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "llmcc/error.h"
#include "llmcc/train/rng.h"
#include "tensor/large_alloc.h"

namespace llmcc::models {

bool LoraConfig::targets_map(const std::string& name) const {
  return std::find(targets.begin(), targets.end(), name) != targets.end();
}

std::vector<std::string> lora_targets_from(const std::string& list, const std::string& where) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    std::string item = list.substr(at, comma - at);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) fail(where, "the target list '" + list + "' has an empty item");
    out.push_back(std::move(item));
    at = comma + 1;
  }
  return out;
}

void lora_check(const LoraConfig& cfg, const std::vector<std::string>& known) {
  std::string names;
  for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
  if (cfg.rank < 1) fail("LoRA", "the rank is " + std::to_string(cfg.rank) + ", expected at least 1");
  if (!std::isfinite(cfg.alpha) || cfg.alpha <= 0.0f)
    fail("LoRA", "alpha is " + std::to_string(cfg.alpha) + ", expected a positive number");
  if (!(cfg.dropout >= 0.0f && cfg.dropout < 1.0f))
    fail("LoRA", "dropout is " + std::to_string(cfg.dropout) + ", expected a probability in [0, 1)");
  if (cfg.targets.empty()) fail("LoRA", "no target maps; this family's are " + names);
  for (std::size_t i = 0; i < cfg.targets.size(); ++i) {
    const std::string& t = cfg.targets[i];
    if (std::find(known.begin(), known.end(), t) == known.end())
      fail("LoRA", "unknown target map '" + t + "'; this family's are " + names);
    if (std::find(cfg.targets.begin(), cfg.targets.begin() + static_cast<std::ptrdiff_t>(i), t) !=
        cfg.targets.begin() + static_cast<std::ptrdiff_t>(i))
      fail("LoRA", "target map '" + t + "' is named twice");
  }
}

LoraDropout lora_dropout(float p, std::uint64_t draw, std::uint64_t adapter) {
  // splitmix64's finaliser over a combination of the draw and the adapter: neighbouring draws
  // and adapters get unrelated seeds.
  std::uint64_t z = draw * 0x9e3779b97f4a7c15ULL + adapter * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return {p, z ^ (z >> 31)};
}

void Bf16Matrices::store(const std::vector<Tensor*>& matrices) {
  if (!empty()) fail("LoRA", "the base's matrices are stored in bf16 already");
  std::size_t total = 0;
  for (const Tensor* t : matrices) total += static_cast<std::size_t>(t->numel());
  data_.reset(static_cast<std::uint16_t*>(allocate_large(std::max<std::size_t>(total, 1) * sizeof(std::uint16_t))));
  if (!data_) fail("LoRA", "could not allocate " + std::to_string(total * 2) + " bytes for the base's bf16 matrices");
  std::size_t at = 0;
  for (Tensor* t : matrices) {
    const std::int64_t n = t->numel();
    const float* from = t->f32();
    std::uint16_t* to = data_.get() + at;
    cpu::parallel_for(n, n > (1 << 16), [&](std::int64_t begin, std::int64_t end) {
      cpu::floats_to_bf16(from + begin, to + begin, end - begin);
    });
    *t = Tensor(to, t->shape(), DType::BF16);
    offsets_.push_back(at);
    sizes_.push_back(static_cast<std::size_t>(n));
    at += static_cast<std::size_t>(n);
  }
}

void Bf16Matrices::widen_into(std::size_t k, const Tensor& to) const {
  cpu::bf16_to_floats(data_.get() + offsets_.at(k), to.f32(), static_cast<std::int64_t>(sizes_.at(k)));
}

void lora_init(const Tensor& a, const Tensor& b, Rng& rng) {
  // kaiming_uniform(a = sqrt(5)) bounds A's values by sqrt(6 / ((1 + 5) * in)) = 1 / sqrt(in).
  const std::int64_t in = a.shape()[1];
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  float* pa = a.f32();
  for (std::int64_t i = 0; i < a.numel(); ++i) pa[i] = (2.0f * rng.uniform() - 1.0f) * bound;
  std::fill(b.f32(), b.f32() + b.numel(), 0.0f);
}

void lora_merge(const Tensor& w, const Tensor& a, const Tensor& b, float scale) {
  const std::int64_t out = b.shape()[0], r = a.shape()[0], in = a.shape()[1];
  if (w.shape() != Shape({out, in}) || b.shape()[1] != r)
    fail("lora_merge",
         "an adapter of " + b.shape().str() + " x " + a.shape().str() + " does not fit a matrix of " + w.shape().str());
  // w (out, in) += scale * B (out, r) . A (r, in)
  cpu::gemm(false, false, static_cast<int>(out), static_cast<int>(in), static_cast<int>(r), scale, b.f32(),
            static_cast<int>(r), a.f32(), static_cast<int>(in), 1.0f, w.f32(), static_cast<int>(in));
}

}  // namespace llmcc::models
