// Qwen3 as a registry family (models/model.h): presets, config keys, checkpoint keys, llmcc and
// Hugging Face files, its trainer, KV-cache decoder and exporter.
#pragma once

#include "models/model.h"

namespace llmcc::models {

const Family& qwen3_family();

}  // namespace llmcc::models
