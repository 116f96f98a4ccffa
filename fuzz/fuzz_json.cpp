// JSON (io/json_reader.h): parse_json and parse_json_int_object on any bytes, in memory.
// Both are what safetensors headers, config.json and encoder.json go through.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_common.h"
#include "io/json_reader.h"

namespace {

// Visits the whole tree through the public accessors (depth is bounded by the parser's limit).
std::size_t walk(const llmcc::JsonValue& v) {
  std::size_t n = 1;
  (void)v.kind_name();
  for (const llmcc::JsonValue& e : v.array) n += walk(e);
  for (const auto& [key, e] : v.object) {
    if (v.find(key) == nullptr) __builtin_trap();  // every key of an object is found
    n += walk(e);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  llmcc::fuzz::expect_error_or_ok([&] { walk(llmcc::parse_json(text, "fuzz.json", "fuzz")); });
  llmcc::fuzz::expect_error_or_ok([&] { (void)llmcc::parse_json_int_object(text, "fuzz.json", "fuzz"); });
  return 0;
}
