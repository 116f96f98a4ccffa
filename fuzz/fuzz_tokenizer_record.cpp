// The tokenizer record `llmcc prepare` writes next to token shards (tokenizer.txt, read by
// read_data_tokenizer in tools/llmcc/run_tokenizer.h) and the tokenizer spec strings it names
// (load_text_tokenizer: gpt2, gpt2:DIR, sp:MODEL, DIR). The record sits in a directory that
// also holds a valid tokenizer.model (a small SentencePiece model trained at start-up) and a
// small GPT-2 tokenizer in gpt2/; "gpt2" alone loads that one ($LLMCC_GPT2_TOKENIZER_DIR).
// Records whose spec holds a '/' are skipped, and a spec tried on its own has its path put
// inside the directory: the target must not read files elsewhere (that is not a parser bug).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "io/data_files.h"
#include "fuzz_common.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/text_tokenizer.h"
#include "run_tokenizer.h"
#include "tiny_models.h"

namespace {

std::string g_dir;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = llmcc::fuzz::scratch_path("data");
  std::filesystem::create_directories(g_dir + "/gpt2");
  const auto [encoder, vocab] = llmcc::fuzz::tiny_gpt2_tokenizer_files();
  llmcc::fuzz::write_file(g_dir + "/gpt2/encoder.json", encoder);
  llmcc::fuzz::write_file(g_dir + "/gpt2/vocab.bpe", vocab);
  ::setenv("LLMCC_GPT2_TOKENIZER_DIR", (g_dir + "/gpt2").c_str(), 1);
  // A SentencePiece model as `llmcc train-tokenizer` makes one.
  const std::string text_path = llmcc::fuzz::scratch_path("sp_input.txt");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  llmcc::fuzz::write_file(text_path, text);
  llmcc::SpTrainOptions o;
  o.inputs = {text_path};
  o.vocab_size = 300;
  o.model_prefix = llmcc::fuzz::scratch_path("sp");
  const std::string model = llmcc::train_sp_tokenizer(o);
  std::filesystem::copy_file(model, g_dir + "/tokenizer.model", std::filesystem::copy_options::overwrite_existing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using llmcc::fuzz::expect_error_or_ok;
  const std::string record(reinterpret_cast<const char*>(data), size);
  // Skip records whose spec would name a file outside the data directory (see the header).
  for (std::size_t at = 0; (at = record.find("spec=", at)) != std::string::npos; at += 5) {
    const std::size_t end = record.find('\n', at);
    if (record.substr(at, end == std::string::npos ? std::string::npos : end - at).find('/') != std::string::npos)
      return 0;
  }
  llmcc::fuzz::write_file(g_dir + "/tokenizer.txt", record);
  expect_error_or_ok([&] {
    if (auto t = llmcc::cli::read_data_tokenizer(g_dir)) {
      (void)t->tok->describe();
      (void)t->tok->spec();
      expect_error_or_ok([&] { llmcc::cli::check_tokenizer_fits(*t, 300, "fuzz", "fuzz"); });
    }
  });
  expect_error_or_ok([&] { (void)llmcc::cli::data_tokenizer({g_dir + "/a.bin", g_dir + "/b.bin"}); });
  // The record's text as a spec, its paths taken inside the data directory.
  if (record.find('/') == std::string::npos && record.find('\0') == std::string::npos) {
    std::string spec = record;
    if (spec.rfind("sp:", 0) == 0)
      spec = "sp:" + g_dir + "/" + spec.substr(3);
    else if (spec.rfind("gpt2:", 0) == 0)
      spec = "gpt2:" + g_dir + "/" + spec.substr(5);
    else if (spec != "gpt2" && !spec.empty())
      spec = g_dir + "/" + spec;  // a directory
    expect_error_or_ok([&] { (void)llmcc::load_text_tokenizer(spec); });
  }
  return 0;
}
