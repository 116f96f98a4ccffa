// GPT-2 as a registry family (models/model.h): presets, config keys, checkpoint keys, llmcc /
// llm.c / Hugging Face files, its trainer, KV-cache decoder and exporters.
#pragma once

#include "models/model.h"

namespace llmcc::models {

const Family& gpt2_family();

}  // namespace llmcc::models
