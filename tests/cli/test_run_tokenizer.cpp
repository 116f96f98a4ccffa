// How a run's tokenizer travels (tools/llmcc/run_tokenizer.h): the record llmcc prepare writes
// next to the shards, the copy a checkpoint carries, the vocabulary check; and the pieces of the
// tokenizer interface generate relies on: prompts that start with bos, and DecodeStream, which
// streams each new token's text as the whole sequence spells it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/text_tokenizer.h"
#include "llmcc/text/tokenizer.h"
#include "run_tokenizer.h"
#include "temp_dir.h"
#include "test_support.h"
#include "test_data.h"

namespace {

namespace fs = std::filesystem;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A 400-token BPE model trained on a slice of Tiny Shakespeare (empty string: not found).
std::string train_small(const TempDir& dir, const std::string& prefix, int vocab = 400) {
  const auto path = llmcc::find_data_file("tinyshakespeare/input.txt");
  if (!path) return {};
  write_file(dir.file(prefix + ".txt"), llmcc::test::slurp(path->string()).substr(0, 100'000));
  llmcc::SpTrainOptions o;
  o.inputs = {dir.file(prefix + ".txt")};
  o.vocab_size = vocab;
  o.model_prefix = dir.file(prefix);
  return llmcc::train_sp_tokenizer(o);
}

#define TRAIN_OR_SKIP(var, dir, prefix)            \
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt"); \
  const std::string var = train_small(dir, prefix)

TEST(RunTokenizer, SentencePiecePromptsStartWithBos) {
  TempDir dir;
  TRAIN_OR_SKIP(model, dir, "tok");
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  const std::vector<std::int32_t> ids = tok->encode_prompt("ROMEO:");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 1, ids.end()), tok->encode("ROMEO:"));
  EXPECT_EQ(tok->encode_prompt(""), std::vector<std::int32_t>{1});
  EXPECT_EQ(tok->decode(ids), "ROMEO:");  // bos is not text
  EXPECT_EQ(tok->spec(), "sp:" + fs::absolute(model).lexically_normal().string());
}

TEST(RunTokenizer, Gpt2PromptsAreTheTextAndEmptyIsEndOfText) {
  LLMCC_REQUIRE_DATA("gpt2/encoder.json");
  const std::unique_ptr<llmcc::TextTokenizer> tok = llmcc::load_text_tokenizer("gpt2");
  EXPECT_EQ(tok->encode_prompt("Hello world"), tok->encode("Hello world"));
  EXPECT_EQ(tok->encode_prompt(""), std::vector<std::int32_t>{50256});
  EXPECT_EQ(tok->spec(), "gpt2");
  EXPECT_TRUE(tok->model_bytes().empty());
}

// Pushing ids one at a time gives exactly the text decode() gives for the whole sequence past
// the context, including a first piece's leading space and characters spelled in byte tokens.
TEST(RunTokenizer, DecodeStreamSpellsTokensAsTheWholeSequence) {
  TempDir dir;
  TRAIN_OR_SKIP(model, dir, "tok");
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  const std::string prompt = "ROMEO:";
  // "€" and "漢" are not in a vocabulary trained on Shakespeare: byte-fallback tokens.
  const std::string continuation = " What, ho! \xe2\x82\xac 5 \xe6\xbc\xa2 fair\nJULIET:\nAy me.";
  const std::vector<std::int32_t> context = tok->encode_prompt(prompt);
  std::vector<std::int32_t> all = tok->encode_prompt(prompt + continuation);
  ASSERT_EQ(std::vector<std::int32_t>(all.begin(), all.begin() + context.size()), context);
  const std::vector<std::int32_t> fresh(all.begin() + context.size(), all.end());
  int byte_tokens = 0;
  for (const std::int32_t id : fresh) byte_tokens += id >= 3 && id < 3 + 256;
  EXPECT_GE(byte_tokens, 6) << "expected the euro sign and the CJK character in byte tokens";

  llmcc::DecodeStream stream(*tok, context);
  std::string streamed;
  for (const std::int32_t id : fresh) {
    streamed += stream.push(id);
    // The text shown so far ends on a character boundary: no half character was shown.
    if (streamed.size() < continuation.size()) {
      EXPECT_NE(static_cast<unsigned char>(continuation[streamed.size()]) & 0xC0, 0x80) << "after " << streamed;
    }
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, continuation);
  // Token by token, a lone piece loses its leading space: the stream does not.
  EXPECT_NE(tok->decode(std::vector<std::int32_t>{fresh.front()}), tok->decode(std::vector<std::int32_t>{}) + " What");
}

// llmcc prepare encodes each document on its own and puts bos before it: decoding a model's
// output across a bos gives the documents' texts back, without SentencePiece's dummy-prefix space
// at the start of the second; streamed the same.
TEST(RunTokenizer, DocumentsAfterBosDecodeAsTheirText) {
  TempDir dir;
  TRAIN_OR_SKIP(model, dir, "tok");
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  const std::string a = "ROMEO:\nIs the day so young?\n\n", b = "BENVOLIO:\nBut new struck nine.\n";
  std::vector<std::int32_t> ids = tok->encode_prompt(a);
  const std::vector<std::int32_t> second = tok->encode_prompt(b);  // bos first
  ids.insert(ids.end(), second.begin(), second.end());
  ids.push_back(tok->eos());
  EXPECT_EQ(tok->decode(ids), a + b);
  llmcc::DecodeStream stream(*tok, {tok->bos()});
  std::string streamed;
  for (std::size_t i = 1; i < ids.size(); ++i) streamed += stream.push(ids[i]);
  EXPECT_EQ(streamed + stream.finish(), a + b);
  EXPECT_TRUE(throws_error([&] { tok->decode(std::vector<std::int32_t>{1, -1}); }, {"token id -1"}));
}

TEST(RunTokenizer, DataRecordRoundTripsAndTravelsWithTheDirectory) {
  TempDir dir;
  TRAIN_OR_SKIP(model, dir, "tok");
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  const fs::path data = dir.path / "data";
  fs::create_directories(data);
  llmcc::cli::write_data_tokenizer(data, *tok);
  const std::string record = llmcc::test::slurp((data / "tokenizer.txt").string());
  EXPECT_NE(record.find("spec=sp:tokenizer.model\n"), std::string::npos) << record;
  EXPECT_NE(record.find("vocab_size=400\n"), std::string::npos) << record;
  EXPECT_NE(record.find("document_start=1\n"), std::string::npos) << record;

  // Moved elsewhere and the original model deleted: the directory's copy is used.
  fs::rename(data, dir.path / "moved");
  fs::remove(model);
  const auto back = llmcc::cli::read_data_tokenizer(dir.path / "moved");
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(llmcc::cli::same_tokenizer(*back->tok, *tok));
  EXPECT_EQ(back->source, (dir.path / "moved" / "tokenizer.txt").string());
  const auto found = llmcc::cli::data_tokenizer({(dir.path / "moved" / "train_000000.bin").string()});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->tok->vocab_size(), 400);
  EXPECT_FALSE(llmcc::cli::read_data_tokenizer(dir.path).has_value());  // no record there
}

TEST(RunTokenizer, BadRecordsAndMixedDataAreErrors) {
  TempDir dir;
  TRAIN_OR_SKIP(model_a, dir, "a");
  const std::string model_b = train_small(dir, "b", 420);
  const auto a = llmcc::load_text_tokenizer("sp:" + model_a);
  const auto b = llmcc::load_text_tokenizer("sp:" + model_b);
  fs::create_directories(dir.path / "da");
  fs::create_directories(dir.path / "db");
  llmcc::cli::write_data_tokenizer(dir.path / "da", *a);
  llmcc::cli::write_data_tokenizer(dir.path / "db", *b);
  EXPECT_TRUE(throws_error(
      [&] { llmcc::cli::data_tokenizer({dir.file("da/train_000000.bin"), dir.file("db/val_000000.bin")}); },
      {"[tokenizer]", "different tokenizers", "da/tokenizer.txt", "db/tokenizer.txt", "(400 tokens)", "(420 tokens)"}));

  // The model next to the record was replaced by another one.
  fs::copy_file(model_b, dir.path / "da" / "tokenizer.model", fs::copy_options::overwrite_existing);
  EXPECT_TRUE(throws_error([&] { llmcc::cli::read_data_tokenizer(dir.path / "da"); },
                           {"[tokenizer]", "da/tokenizer.txt", "records a 400-token tokenizer", "420 tokens"}));
  write_file(dir.file("db/tokenizer.txt"), "kind=sentencepiece\n");
  EXPECT_TRUE(throws_error([&] { llmcc::cli::read_data_tokenizer(dir.path / "db"); },
                           {"[tokenizer]", "db/tokenizer.txt", "no 'spec'"}));
  write_file(dir.file("db/tokenizer.txt"), "spec=sp:gone.model\n");
  EXPECT_TRUE(throws_error([&] { llmcc::cli::read_data_tokenizer(dir.path / "db"); },
                           {"[tokenizer]", "db/tokenizer.txt", "'sp:gone.model'", "does not load", "no such file"}));
}

// A checkpoint carries the SentencePiece model's bytes (section file.tokenizer.model) and the
// tokenizer.* config keys; checkpoint_tokenizer gets the same tokenizer back from them alone.
TEST(RunTokenizer, CheckpointCarriesTheTokenizer) {
  TempDir dir;
  TRAIN_OR_SKIP(model, dir, "tok");
  const auto tok = llmcc::load_text_tokenizer("sp:" + model);
  const llmcc::ParameterStore params({{"w", llmcc::Shape{2, 3}}});
  llmcc::TrainState state;
  state.step = 7;
  state.config["model.family"] = "llama";
  llmcc::cli::store_tokenizer(*tok, state.config, state.files);
  EXPECT_EQ(state.config.at("tokenizer.vocab_size"), "400");
  EXPECT_EQ(state.config.at("tokenizer.kind"), "sentencepiece");
  ASSERT_EQ(state.files.count("tokenizer.model"), 1u);
  const std::string ckpt = dir.file("ckpt_000007.bin");
  llmcc::save_checkpoint(ckpt, params, nullptr, state);
  fs::remove(model);

  llmcc::ParameterStore loaded_params = params.like();
  const llmcc::TrainState loaded = llmcc::load_checkpoint(ckpt, loaded_params, nullptr);
  EXPECT_EQ(loaded, state);
  const auto back = llmcc::cli::checkpoint_tokenizer(ckpt);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(llmcc::cli::same_tokenizer(*back->tok, *tok));
  EXPECT_EQ(back->tok->encode("To be, or not"), tok->encode("To be, or not"));

  // The vocabulary must be the model's, with both sizes and the source named.
  EXPECT_NO_THROW(llmcc::cli::check_tokenizer_fits(*back, 400, "the model", "llmcc generate"));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::cli::check_tokenizer_fits(*back, 512, "the model", "llmcc generate"); },
      {"[llmcc generate]", "has 400 tokens but the model has a vocabulary of 512", "would not decode", ckpt.c_str()}));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::check_tokenizer_fits(*back, 256, "the model", "llmcc train"); },
                           {"[llmcc train]", "outside the model's"}));

  // A checkpoint without a stored tokenizer, and a file that is not an llmcc checkpoint: none.
  llmcc::TrainState bare;
  llmcc::save_checkpoint(dir.file("bare.bin"), params, nullptr, bare);
  EXPECT_FALSE(llmcc::cli::checkpoint_tokenizer(dir.file("bare.bin")).has_value());
  write_file(dir.file("llmc.bin"), std::string(1024, '\0'));
  EXPECT_FALSE(llmcc::cli::checkpoint_tokenizer(dir.file("llmc.bin")).has_value());
}

// A byte-level tokenizer.json (ids 0..255 the bytes, 256 "ab", 257 "<|s|>" special) with a
// tokenizer_config.json naming bos and a ChatML-free chat template file beside it, in dir/name.
std::string write_hf_folder(const TempDir& dir, const std::string& name) {
  const fs::path folder = dir.path / name;
  fs::create_directories(folder);
  std::string vocab;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    char c[16];
    std::snprintf(c, sizeof c, "\\u%04x", printable ? b : next++);
    vocab += "\"" + std::string(c) + "\": " + std::to_string(b) + ", ";
  }
  write_file((folder / "tokenizer.json").string(),
             R"({"added_tokens": [{"id": 257, "content": "<|s|>", "special": true}], "normalizer": null, )"
             R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, )"
             R"("decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {)" +
                 vocab + R"("ab": 256}, "merges": ["a b"]}})");
  write_file((folder / "tokenizer_config.json").string(), R"({"bos_token": "<|s|>"})");
  write_file((folder / "chat_template.jinja").string(), "{{ '<|im_start|>' }}<|im_end|>");
  return (folder / "tokenizer.json").string();
}

// A tokenizer.json travels as SentencePiece models do: data directories and checkpoints hold its
// files (with the config and the chat template beside it), so neither needs the original folder.
TEST(RunTokenizer, ATokenizerJsonTravelsWithDataAndCheckpoints) {
  TempDir dir;
  const std::string json = write_hf_folder(dir, "model");
  const auto tok = llmcc::load_text_tokenizer("hf:" + json);
  ASSERT_EQ(tok->files().size(), 3u);
  EXPECT_EQ(tok->bos(), 257);
  const fs::path data = dir.path / "data";
  fs::create_directories(data);
  llmcc::cli::write_data_tokenizer(data, *tok);
  const std::string record = llmcc::test::slurp((data / "tokenizer.txt").string());
  EXPECT_NE(record.find("spec=hf:tokenizer.json\n"), std::string::npos) << record;
  EXPECT_NE(record.find("kind=tokenizer.json\n"), std::string::npos) << record;
  EXPECT_NE(record.find("source=hf:" + json + "\n"), std::string::npos) << record;

  const llmcc::ParameterStore params({{"w", llmcc::Shape{2, 3}}});
  llmcc::TrainState state;
  state.config["model.family"] = "llama";
  llmcc::cli::store_tokenizer(*tok, state.config, state.files);
  EXPECT_EQ(state.files.size(), 3u);
  const std::string ckpt = dir.file("ckpt.bin");
  llmcc::save_checkpoint(ckpt, params, nullptr, state);

  // The original folder gone and the data moved: both still give the same tokenizer.
  fs::remove_all(dir.path / "model");
  fs::rename(data, dir.path / "moved");
  for (const auto& back :
       {llmcc::cli::read_data_tokenizer(dir.path / "moved"), llmcc::cli::checkpoint_tokenizer(ckpt)}) {
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(llmcc::cli::same_tokenizer(*back->tok, *tok));
    EXPECT_EQ(back->tok->bos(), 257);
    EXPECT_EQ(back->tok->encode("ab<|s|>"), tok->encode("ab<|s|>"));
    EXPECT_EQ(back->tok->files(), tok->files());
  }
  // A checkpoint's files that are not a tokenizer.json's are refused by name.
  EXPECT_TRUE(throws_error([] { (void)llmcc::load_hf_tokenizer_files({{"vocab.txt", "x"}}, "c.bin"); },
                           {"[hf_tokenizer]", "c.bin", "'vocab.txt' is not one of a tokenizer.json's files"}));
  EXPECT_TRUE(throws_error([] { (void)llmcc::load_hf_tokenizer_files({{"tokenizer_config.json", "{}"}}, "c.bin"); },
                           {"c.bin: has no tokenizer.json"}));
}

}  // namespace
