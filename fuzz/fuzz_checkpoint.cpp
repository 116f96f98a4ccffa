// llmcc checkpoints (llmcc/io/checkpoint.h): CheckpointReader on the file (header, checksum,
// section table, tensor tables), every section's tensor list or blob, then load_checkpoint into
// a small fixed model, with and without an optimizer. The first input byte chooses whether the
// checksum is fixed up (checkpoint_fixup.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint_fixup.h"
#include "fuzz_common.h"
#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"
#include "tiny_store.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string path = llmcc::fuzz::scratch_path("fuzz.ckpt");
  llmcc::fuzz::write_file(path, llmcc::fuzz::checkpoint_file_bytes(data, size));

  expect_error_or_ok([&] {
    const llmcc::CheckpointReader r(path);
    for (const std::string& s : r.sections()) {
      if (!r.has(s)) __builtin_trap();
      expect_error_or_ok([&] { (void)r.tensors(s); });
      expect_error_or_ok([&] { (void)llmcc::parse_key_values(r.blob(s), "fuzz"); });
    }
  });
  static llmcc::ParameterStore params = llmcc::fuzz::tiny_store();
  static llmcc::AdamW opt(params);
  expect_error_or_ok([&] { (void)llmcc::load_checkpoint(path, params, &opt); });
  expect_error_or_ok([&] { (void)llmcc::load_checkpoint(path, params, nullptr); });
  return 0;
}
