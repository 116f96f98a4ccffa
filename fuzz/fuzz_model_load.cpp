// Loading a model file by its first bytes (nn/gpt2_weights.h load_gpt2, nn/llama_weights.h
// load_llama, the command line's load_model): an llmcc checkpoint (its config section makes
// the model, its params section fills it), an llm.c GPT-2 file, or anything else, which must be
// refused with an error. Also what `llmcc generate` reads from a checkpoint: its family and its
// stored tokenizer. The first input byte chooses whether a checkpoint's checksum is fixed up
// (checkpoint_fixup.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint_fixup.h"
#include "fuzz_common.h"
#include "models/registry.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/llama/llama_weights.h"
#include "run_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string path = llmcc::fuzz::scratch_path("model.bin");
  llmcc::fuzz::write_file(path, llmcc::fuzz::checkpoint_file_bytes(data, size));
  expect_error_or_ok([&] { (void)llmcc::models::load_gpt2(path); });
  expect_error_or_ok([&] { (void)llmcc::models::load_llama(path); });
  expect_error_or_ok([&] { (void)llmcc::models::identify_model_file(path); });
  expect_error_or_ok([&] { (void)llmcc::cli::checkpoint_tokenizer(path); });
  return 0;
}
