// What the commands say about a model beyond the registry's facts (models/registry.h): the
// memory training it takes, and a warning for weights that are not finite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "llmcc/parameters.h"
#include "models/registry.h"

namespace llmcc::cli {

using models::add_lora;
using models::check_model_path;
using models::load_model;
using models::lora_from_kv;
using models::lora_to_kv;
using models::LoraConfig;
using models::LoraInfo;
using models::make_model;
using models::Model;
using models::model_config_from_kv;
using models::ModelConfig;

// What training a model takes in memory: fp32 weights, their gradients, AdamW's two moments and
// the step arena for one (B, T) micro-batch, which the trainer measures with a planning step
// (arena_bytes 0: not measured yet). With LoRA adapters the weights are the frozen base
// (frozen_bytes: no gradients, no AdamW state) and the adapters (params_bytes), which alone are
// trained.
struct MemoryPlan {
  std::int64_t parameters = 0;
  std::size_t frozen_bytes = 0, params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, arena_bytes = 0;
  std::string frozen_note;  // how the frozen base is stored, e.g. "matrices in bf16"
  int B = 0, T = 0;
  std::size_t total() const { return frozen_bytes + params_bytes + grads_bytes + optimizer_bytes + arena_bytes; }
};
// trainable: the parameters that get gradients and AdamW state (LoRA adapters, on top of the
// config's frozen weights, stored in fp32); -1: all of the config's.
MemoryPlan memory_plan(const ModelConfig& config, int B, int T, std::int64_t trainable = -1);
// "1.50G parameters: weights 5.58 GiB + gradients 5.58 GiB + AdamW 11.2 GiB + step arena 3.1 GiB
// (B 1 x T 2048) = 25.5 GiB"; without a measured arena, "... + step arena (B 1 x T 2048, measured
// when training starts)". With adapters: "... frozen base 2.31 GiB (matrices in bf16) + adapters
// 43.0 MiB + gradients ...".
std::string describe(const MemoryPlan& plan);

// A warning on stderr ("<cmd>: warning: <path> holds N non-finite weights, the first in
// <tensor>; ...") when `params` holds a NaN or an infinity; nothing otherwise. Returns N.
std::int64_t warn_nonfinite_weights(const ParameterStore& params, const std::string& path, const char* cmd);

}  // namespace llmcc::cli
