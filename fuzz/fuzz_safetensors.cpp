// Safetensors files (llmcc/io/safetensors.h): SafetensorsReader validates the header, then
// every tensor is read as fp32 (F32, BF16, F16; other dtypes must be refused), metadata and the
// unread list are walked, and is_hf_model sniffs the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  static const std::string path = llmcc::fuzz::scratch_path("fuzz.safetensors");
  llmcc::fuzz::write_file(path, data, size);
  (void)llmcc::models::is_hf_model(path);
  expect_error_or_ok([&] {
    const llmcc::SafetensorsReader r(path);
    for (const auto& [key, value] : r.metadata()) (void)(key.size() + value.size());
    for (const llmcc::SafetensorsEntry& e : r.tensors()) {
      if (r.find(e.name) != &e) __builtin_trap();  // names are unique
      expect_error_or_ok([&] {
        llmcc::TensorShape shape;
        const std::vector<float> v = r.read_f32(e.name, &shape);
        // The values fill the shape exactly.
        std::size_t numel = 1;
        for (std::int64_t d : shape) numel *= static_cast<std::size_t>(d);
        if (v.size() != numel) __builtin_trap();
      });
      expect_error_or_ok([&] {
        std::vector<float> out(1);
        r.read_f32(e.name, llmcc::TensorShape{1}, out.data());
      });
    }
    (void)r.unread();
  });
  return 0;
}
