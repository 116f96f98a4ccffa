// tokenizer.json files (llmcc/text/hf_tokenizer.h) and text, the input's two parts
// (fuzz_common.h: kPartSeparator): the file is read, and when it loads, the text is encoded with
// and without special tokens. Checks what the header promises: every id in range, and
// decode(encode(s)) == s for any bytes when the tokenizer is lossless (byte-level).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/text/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = llmcc::fuzz::split_parts(data, size, 2);
  llmcc::fuzz::expect_error_or_ok([&] {
    const llmcc::HfTokenizer tok = llmcc::HfTokenizer::from_json(std::string(parts[0]), "fuzz tokenizer.json");
    const std::string text(parts[1]);
    for (const bool special : {false, true}) {
      const std::vector<std::int32_t> ids = tok.encode(text, special);
      for (const std::int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      const std::string back = tok.decode(ids);
      if (tok.lossless() && back != text) __builtin_trap();
    }
  });
  return 0;
}
