// llm.c's GPT-2 model files (nn/gpt2_llmc.h): the header alone, then the whole import (sizes
// from the header checked against the file before the model is made).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "models/gpt2/gpt2_llmc.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string path = llmcc::fuzz::scratch_path("llmc.bin");
  llmcc::fuzz::write_file(path, data, size);
  (void)llmcc::models::is_llmc_model_file(path);
  expect_error_or_ok([&] { (void)llmcc::models::read_llmc_header(path); });
  expect_error_or_ok([&] { (void)llmcc::models::load_gpt2_llmc(path); });
  return 0;
}
