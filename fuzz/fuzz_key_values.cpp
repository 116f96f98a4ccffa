// Checkpoint key=value text (llmcc/io/checkpoint.h: parse_key_values) and everything that
// reads its values: the data loader's position, the GPT-2 and Llama configurations, the command
// line's model configuration, and a resumed run's training options. In memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/data_loader.h"
#include "model_report.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/llama/llama_weights.h"
#include "train_options.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_error_or_ok([&] { (void)llmcc::DataLoaderState::parse(text); });
  llmcc::KeyValues kv;
  try {
    kv = llmcc::parse_key_values(text, "fuzz");
  } catch (const llmcc::Error&) {
    return 0;
  }
  // What was parsed formats back to text that parses to the same map.
  if (llmcc::parse_key_values(llmcc::format_key_values(kv), "fuzz (formatted)") != kv) __builtin_trap();
  if (const auto it = kv.find("data"); it != kv.end())
    expect_error_or_ok([&] { (void)llmcc::DataLoaderState::parse(it->second); });
  expect_error_or_ok([&] { (void)llmcc::models::gpt2_config_from_kv(kv, "fuzz"); });
  expect_error_or_ok([&] { (void)llmcc::models::llama_config_from_kv(kv, "fuzz"); });
  expect_error_or_ok([&] { (void)llmcc::models::model_config_from_kv(kv, "fuzz"); });
  expect_error_or_ok([&] {
    llmcc::cli::TrainOptions o;
    (void)llmcc::cli::restore_train_options(o, kv, "fuzz");
  });
  return 0;
}
