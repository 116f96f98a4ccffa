// Token files (llmcc/io/token_file.h) and the data loader over them
// (llmcc/train/data_loader.h). The first input byte picks the loader's configuration (B, T,
// sequential or random, whether every token is checked against a vocabulary); the rest is the
// file. A loader that accepts the file serves a few batches and restores its own state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/train/data_loader.h"
#include "llmcc/io/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  if (size == 0) return 0;
  static const std::string path = llmcc::fuzz::scratch_path("tokens.bin");
  llmcc::fuzz::write_file(path, data + 1, size - 1);
  const std::uint8_t m = data[0];
  expect_error_or_ok([&] {
    const llmcc::TokenFile f(path);
    const std::vector<std::int32_t> all = f.read_all();
    if (static_cast<std::int64_t>(all.size()) != f.size()) __builtin_trap();
    for (std::int64_t i = 0; i < f.size(); i += 97) (void)f.at(i);
  });
  expect_error_or_ok([&] {
    llmcc::DataLoaderConfig c;
    c.B = 1 + (m & 1);
    c.T = 1 + ((m >> 1) & 7);
    c.mode = (m >> 4) & 1 ? llmcc::SampleMode::Random : llmcc::SampleMode::Sequential;
    c.seed = m;
    c.vocab_size = (m >> 5) & 1 ? 300 : 0;
    llmcc::DataLoader loader({path, path}, c);
    const llmcc::DataLoaderState start = loader.state();
    for (int i = 0; i < 3; ++i) loader.next_batch();
    const llmcc::DataLoaderState after = loader.state();
    loader.set_state(start);
    for (int i = 0; i < 3; ++i) loader.next_batch();
    if (!(loader.state() == after)) __builtin_trap();  // the same batches from the same state
    if (llmcc::DataLoaderState::parse(after.to_string()) != after) __builtin_trap();
    (void)loader.batches_per_epoch();
  });
  return 0;
}
