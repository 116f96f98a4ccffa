// GPT-2 BPE on arbitrary bytes (llmcc/text/tokenizer.h, text/gpt2_pretokenize.h), with a
// fixed valid tokenizer: GPT-2's own files when they can be found ($LLMCC_GPT2_TOKENIZER_DIR or
// ../shared/data/gpt2, as Gpt2Tokenizer::load_default looks), else a small one (tiny_models.h).
// Checks the properties the header promises: the pre-tokenizer's pieces concatenate to the
// text, decode(encode(s)) == s, ids are in range; and decodes the input read as int32 ids, in
// one call and streamed (DecodeStream), which must agree.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/data_files.h"
#include "fuzz_common.h"
#include "llmcc/text/text_tokenizer.h"
#include "llmcc/text/tokenizer.h"
#include "tiny_models.h"
#include "text/gpt2_pretokenize.h"

namespace {

std::unique_ptr<llmcc::TextTokenizer> g_tok;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir;
  try {
    (void)llmcc::Gpt2Tokenizer::load_default();
    g_tok = llmcc::load_text_tokenizer("gpt2");
    std::fprintf(stderr, "fuzz_gpt2_encode: GPT-2's tokenizer files\n");
  } catch (const llmcc::Error&) {
    dir = llmcc::fuzz::scratch_path("gpt2");
    std::filesystem::create_directories(dir);
    const auto [encoder, vocab] = llmcc::fuzz::tiny_gpt2_tokenizer_files();
    llmcc::fuzz::write_file(dir + "/encoder.json", encoder);
    llmcc::fuzz::write_file(dir + "/vocab.bpe", vocab);
    g_tok = llmcc::load_text_tokenizer("gpt2:" + dir);
    std::fprintf(stderr, "fuzz_gpt2_encode: no GPT-2 tokenizer files found, using a small tokenizer\n");
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string joined;
  llmcc::gpt2::pretokenize(text, [&](std::string_view piece) {
    if (piece.empty()) __builtin_trap();
    joined += piece;
  });
  if (joined != text) __builtin_trap();

  const llmcc::TextTokenizer& tok = *g_tok;
  for (const auto& ids : {tok.encode(text), tok.encode_ordinary(text), tok.encode_prompt(text)}) {
    for (std::int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  if (tok.decode(tok.encode(text)) != text) __builtin_trap();
  if (tok.decode(tok.encode_ordinary(text)) != text) __builtin_trap();

  // The bytes as int32 ids: out-of-range ids are refused, in range ones decode.
  std::vector<std::int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  std::string whole;
  try {
    whole = tok.decode(ids);
  } catch (const llmcc::Error&) {
    return 0;
  }
  const std::size_t half = ids.size() / 2;
  llmcc::DecodeStream stream(tok,
                             std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(half)));
  std::string streamed =
      tok.decode(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(half)));
  for (std::size_t i = half; i < ids.size(); ++i) streamed += stream.push(ids[i]);
  streamed += stream.finish();
  if (streamed != whole) __builtin_trap();
  return 0;
}
