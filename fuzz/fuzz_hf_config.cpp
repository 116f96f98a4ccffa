// Hugging Face config.json (nn/hf_files.h, models/gpt2/gpt2_hf.h, models/llama/llama_hf.h): the file read as a
// GPT-2 and as a Llama configuration (typed fields, ranges, the features llmcc refuses), and
// hf_model_type, which must never throw.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/hf_files.h"
#include "models/llama/llama_hf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string dir = [] {
    const std::string d = llmcc::fuzz::scratch_path("hf_config");
    std::filesystem::create_directories(d);
    return d;
  }();
  static const std::string path = dir + "/config.json";
  llmcc::fuzz::write_file(path, data, size);
  expect_error_or_ok([&] { (void)llmcc::models::gpt2_config_from_hf(path); });
  expect_error_or_ok([&] { (void)llmcc::models::llama_config_from_hf(path); });
  expect_error_or_ok([&] {
    const llmcc::models::HfConfig c = llmcc::models::HfConfig::read(path, "fuzz");
    for (const char* key :
         {"n_embd", "hidden_size", "vocab_size", "model_type", "tie_word_embeddings", "rms_norm_eps"}) {
      if (!c.has(key)) continue;
      expect_error_or_ok([&] { (void)c.integer(key); });
      expect_error_or_ok([&] { (void)c.number(key); });
      expect_error_or_ok([&] { (void)c.string(key); });
      expect_error_or_ok([&] { (void)c.boolean(key); });
    }
  });
  (void)llmcc::models::hf_model_type(dir);  // never throws
  return 0;
}
