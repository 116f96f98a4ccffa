// Hugging Face model directories (models/gpt2/gpt2_hf.h, models/llama/llama_hf.h): config.json and
// model.safetensors, the input's two parts (fuzz_common.h: kPartSeparator), or with three or more
// parts a sharded checkpoint: config.json, model.safetensors.index.json and the shards
// model-00001-of-00002.safetensors and model-00002-of-00002.safetensors. Loaded as a GPT-2 and as
// a Llama: the configuration, the index against its shards, then every tensor by name, shape and
// layout.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_common.h"
#include "models/registry.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/llama/llama_hf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string dir = [] {
    const std::string d = llmcc::fuzz::scratch_path("hf_model");
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto parts = llmcc::fuzz::split_parts(data, size, 2);
  llmcc::fuzz::write_file(dir + "/config.json", parts[0]);
  const char* shards[] = {"/model-00001-of-00002.safetensors", "/model-00002-of-00002.safetensors"};
  if (parts.size() == 2) {
    llmcc::fuzz::write_file(dir + "/model.safetensors", parts[1]);
  } else {
    std::filesystem::remove(dir + "/model.safetensors");
    llmcc::fuzz::write_file(dir + "/model.safetensors.index.json", parts[1]);
    llmcc::fuzz::write_file(dir + shards[0], parts[2]);
    llmcc::fuzz::write_file(dir + shards[1], parts.size() > 3 ? parts[3] : std::string_view{});
  }
  expect_error_or_ok([&] { (void)llmcc::models::load_gpt2_hf(dir); });
  expect_error_or_ok([&] { (void)llmcc::models::load_llama_hf(dir); });
  expect_error_or_ok([&] { (void)llmcc::models::identify_model_file(dir); });
  return 0;
}
