// GPT-2 tokenizer files (llmcc/text/tokenizer.h: Gpt2Tokenizer::load): the input's parts are
// encoder.json, vocab.bpe and a text (fuzz_common.h: kPartSeparator). A tokenizer that loads
// must encode the text and decode it back to the same bytes, with and without special tokens.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string encoder = llmcc::fuzz::scratch_path("encoder.json");
  static const std::string vocab = llmcc::fuzz::scratch_path("vocab.bpe");
  const auto parts = llmcc::fuzz::split_parts(data, size, 3);
  llmcc::fuzz::write_file(encoder, parts[0]);
  llmcc::fuzz::write_file(vocab, parts[1]);
  const std::string_view text = parts[2];
  try {
    const llmcc::Gpt2Tokenizer tok = llmcc::Gpt2Tokenizer::load(encoder, vocab);
    const std::vector<std::int32_t> ids = tok.encode(text);
    if (tok.decode(ids) != text) __builtin_trap();
    if (tok.decode(tok.encode_ordinary(text)) != text) __builtin_trap();
    for (std::int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  } catch (const llmcc::Error&) {
  }
  return 0;
}
