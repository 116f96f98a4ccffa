// PEFT adapter directories (models/lora_peft.h), the input's two parts (fuzz_common.h:
// kPartSeparator): adapter_config.json and adapter_model.safetensors. A config that reads is
// turned into LoRA adapters of a tiny Llama (rank at most 8, so an input cannot ask for much
// memory) and the tensors are read into them; every failure must be a clean llmcc::Error.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_common.h"
#include "llama.grad.h"
#include "models/llama/llama.h"
#include "models/llama/llama_hf.h"
#include "models/lora_peft.h"
#include "tiny_models.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = llmcc::fuzz::split_parts(data, size, 2);
  static const std::string dir = [] {
    const std::string d = llmcc::fuzz::scratch_path("peft");
    std::filesystem::create_directories(d);
    return d;
  }();
  llmcc::fuzz::write_file(dir + "/adapter_config.json", parts[0].data(), parts[0].size());
  llmcc::fuzz::write_file(dir + "/adapter_model.safetensors", parts[1].data(), parts[1].size());
  static const llmcc::models::Llama base(llmcc::fuzz::tiny_llama_config());  // shapes only
  llmcc::fuzz::expect_error_or_ok([&] {
    const llmcc::models::PeftAdapterConfig cfg =
        llmcc::models::read_peft_adapter_config(dir, llmcc::models::llama_peft_modules());
    if (cfg.cfg.rank > 8) return;
    llmcc::models::LlamaLora lora = llmcc::models::llama_lora(base, cfg.cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(lora);
    llmcc::models::read_peft_adapter(dir, llmcc::models::llama_peft_slots(base, lora));
  });
  return 0;
}
