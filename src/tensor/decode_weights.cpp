// Low-precision copies of a model's matrices (llmcc/decode_weights.h).
#include "llmcc/decode_weights.h"

#include <cmath>
#include <string>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/int8_rows.h"
#include "llmcc/error.h"

namespace llmcc {

namespace {
const DecodeWeights* g_active = nullptr;
}  // namespace

const char* decode_dtype_name(DecodeDtype dtype) { return dtype == DecodeDtype::Bf16 ? "bf16" : "int8"; }

std::optional<DecodeDtype> parse_decode_dtype(std::string_view name) {
  if (name == "bf16") return DecodeDtype::Bf16;
  if (name == "int8") return DecodeDtype::Int8;
  return std::nullopt;
}

DecodeWeights::DecodeWeights(const ParameterStore& params, DecodeDtype dtype) : dtype_(dtype) {
  std::size_t total = 0, blocks = 0;
  for (std::size_t i = 0; i < params.count(); ++i) {
    const Shape& s = params.shape(i);
    if (s.ndim() != 2) continue;
    total += static_cast<std::size_t>(s.numel());
    blocks += static_cast<std::size_t>(s[0] * cpu::int8_blocks(s[1]));
  }
  if (dtype == DecodeDtype::Bf16) {
    bf16_.resize(total);
  } else {
    q_.resize(total);
    scales_.resize(blocks);
  }
  std::size_t at = 0, block_at = 0;
  for (std::size_t i = 0; i < params.count(); ++i) {
    if (params.shape(i).ndim() != 2) continue;
    const Tensor t = params.tensor(i);
    const std::int64_t rows = t.shape()[0], cols = t.shape()[1];
    Matrix m;
    if (dtype == DecodeDtype::Bf16) {
      cpu::floats_to_bf16(t.f32(), bf16_.data() + at, t.numel());
      m.bf16 = bf16_.data() + at;
    } else {
      for (std::int64_t k = 0; k < t.numel(); ++k)
        if (!std::isfinite(t.f32()[k]))
          fail("int8 weight copies", "parameter " + params.name(i) + " holds " + std::to_string(t.f32()[k]) +
                                         " at element " + std::to_string(k) + "; int8 copies need finite weights");
      cpu::quantize_rows_int8(t.f32(), rows, cols, q_.data() + at, scales_.data() + block_at);
      m.q = q_.data() + at;
      m.scales = scales_.data() + block_at;
      block_at += static_cast<std::size_t>(rows * cpu::int8_blocks(cols));
    }
    at_.emplace(t.f32(), Copy{m, rows, cols});
    at += static_cast<std::size_t>(t.numel());
  }
}

const DecodeWeights::Matrix* DecodeWeights::copy_of(const float* w, std::int64_t rows, std::int64_t cols) const {
  const auto it = at_.find(w);
  if (it == at_.end() || it->second.cols != cols || it->second.rows < rows) return nullptr;
  return &it->second.m;
}

std::size_t DecodeWeights::bytes() const {
  return bf16_.size() * sizeof(std::uint16_t) + q_.size() * sizeof(std::int8_t) + scales_.size() * sizeof(float);
}

DecodeWeightsScope::DecodeWeightsScope(const DecodeWeights& weights) : previous_(g_active) { g_active = &weights; }
DecodeWeightsScope::~DecodeWeightsScope() { g_active = previous_; }

const DecodeWeights* active_decode_weights() { return g_active; }

}  // namespace llmcc
