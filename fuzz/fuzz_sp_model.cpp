// SentencePiece models as llmcc loads them (llmcc/text/sp_tokenizer.h, text_tokenizer.h): the
// input's parts are a .model file's bytes and a text (fuzz_common.h: kPartSeparator). llmcc
// hands the bytes to libsentencepiece (not instrumented here; what is fuzzed is llmcc's use of
// it: its checks, and what it does with a model the library accepts) and, when they load,
// encodes the text, decodes the ids, the text's bytes read as ids, and streams them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/text_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  const auto parts = llmcc::fuzz::split_parts(data, size, 2);
  const std::string model(parts[0]);
  const std::string_view text = parts[1];
  std::unique_ptr<llmcc::TextTokenizer> tok;
  try {
    tok = llmcc::load_sp_tokenizer_bytes(model, "fuzz.model");
  } catch (const llmcc::Error&) {
    return 0;
  }
  const int n = tok->vocab_size();
  if (n <= 0) __builtin_trap();
  expect_error_or_ok([&] {
    for (const auto& ids : {tok->encode(text), tok->encode_prompt(text)}) {
      for (std::int32_t id : ids)
        if (id < 0 || id >= n) __builtin_trap();
      (void)tok->decode(ids);
    }
  });
  // The text's bytes as ids (some out of range: refused with an error).
  std::vector<std::int32_t> ids;
  for (unsigned char c : text) ids.push_back(c == 0xFF ? -1 : static_cast<std::int32_t>(c) % (n + 1));
  expect_error_or_ok([&] { (void)tok->decode(ids); });
  expect_error_or_ok([&] {
    llmcc::DecodeStream stream(*tok, {});
    for (std::int32_t id : ids) (void)stream.push(id);
    (void)stream.finish();
  });
  expect_error_or_ok([&] {
    const llmcc::SpTokenizer sp = llmcc::SpTokenizer::load_from_bytes(model, "fuzz.model");
    for (int i = 0; i < n && i < 8; ++i) (void)sp.piece(i);
    (void)sp.bos();
    (void)sp.eos();
    (void)sp.unk();
    if (sp.serialized().empty()) __builtin_trap();
  });
  return 0;
}
