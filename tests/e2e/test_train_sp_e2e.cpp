// End to end with SentencePiece, as a user runs it: `llmcc train-tokenizer` on a slice of Tiny
// Shakespeare, `llmcc prepare` with it, `llmcc train` a tiny Llama for 100 steps without naming
// the tokenizer again, then `llmcc generate` from the checkpoint alone. The validation loss must
// fall well below where an untrained model starts (ln 1024 = 6.93), the trainer's sample and the
// generated text must be text decoded with the SentencePiece model (not ids), a Hugging Face
// export must carry the tokenizer, and a tokenizer that does not fit the model must be refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/json_reader.h"
#include "cli_run.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/tokenizer.h"
#include "temp_dir.h"
#include "test_data.h"

namespace {

namespace fs = std::filesystem;
using llmcc::test::CliResult;
using llmcc::test::run_llmcc;
using llmcc::test::slurp;

constexpr int kVocab = 1024;

// Every "val_loss" of a JSON-lines log, in order.
std::vector<double> val_losses(const std::string& log_path) {
  std::vector<double> out;
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    const llmcc::JsonValue record = llmcc::parse_json(line, log_path, "val_losses");
    if (const llmcc::JsonValue* v = record.find("val_loss"); v != nullptr) out.push_back(v->number);
  }
  return out;
}

// The "sample" string of the log's last sample line, unescaped enough to look at (\n, \", \\).
std::string last_sample(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string sample;
  for (std::string line; std::getline(in, line);) {
    const std::string key = "\"sample\": \"";
    const auto at = line.find(key);
    if (at == std::string::npos) continue;
    sample.clear();
    for (std::size_t i = at + key.size(); i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        sample += line[i] == 'n' ? '\n' : line[i];
      } else {
        sample += line[i];
      }
    }
  }
  return sample;
}

// Text, not a list of ids: mostly letters, and not only digits and spaces.
void expect_english_like(const std::string& text, const std::string& what) {
  std::size_t letters = 0, digits = 0;
  for (const char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
    if (std::isdigit(static_cast<unsigned char>(c))) ++digits;
  }
  EXPECT_GE(text.size(), 20u) << what << ": " << text;
  EXPECT_GT(letters, text.size() / 2) << what << " is not text: " << text;
  EXPECT_LT(digits, text.size() / 10) << what << " looks like token ids: " << text;
}

TEST(TrainSpE2e, TinyLlamaWithSentencePieceLearnsAndGenerates) {
  LLMCC_REQUIRE_DATA("tinyshakespeare/input.txt");
  llmcc::test::TempDir dir;
  llmcc::test::write_shakespeare_200k(dir.file("shakespeare_200k.txt"));

  // 1. A 1,024-token BPE tokenizer trained on the slice.
  CliResult r = run_llmcc(dir, {"train-tokenizer", "--input", dir.file("shakespeare_200k.txt"), "--vocab-size",
                                std::to_string(kVocab), "--out", dir.file("tok")});
  ASSERT_EQ(r.code, 0) << r.out << r.err;

  // 2. Prepared with it: the data directory records the tokenizer and carries a copy.
  const std::string data = dir.file("data");
  r = run_llmcc(dir, {"prepare", "--input", dir.file("shakespeare_200k.txt"), "--tokenizer",
                      "sp:" + dir.file("tok.model"), "--out", data});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string record = slurp(data + "/tokenizer.txt");
  EXPECT_NE(record.find("kind=sentencepiece"), std::string::npos) << record;
  EXPECT_NE(record.find("spec=sp:tokenizer.model"), std::string::npos) << record;
  EXPECT_NE(record.find("vocab_size=" + std::to_string(kVocab)), std::string::npos) << record;
  EXPECT_EQ(slurp(data + "/tokenizer.model").size(), fs::file_size(dir.file("tok.model")));
  // The original model may go away: the run uses the data directory's copy.
  fs::remove(dir.file("tok.model"));

  // 3. A too small --vocab-size is refused before training, naming the tokenizer's record.
  const std::vector<std::string> model = {"--model",       "llama-tiny", "--n-layer",   "2", "--n-embd",     "64",
                                          "--n-head",      "4",          "--n-kv-head", "2", "--hidden-dim", "176",
                                          "--max-seq-len", "64"};
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), model.begin(), model.end());
  for (const std::string& a : std::vector<std::string>{"--train-data",
                                                       data + "/train_*.bin",
                                                       "--val-data",
                                                       data + "/val_*.bin",
                                                       "--steps",
                                                       "100",
                                                       "--batch-size",
                                                       "8",
                                                       "--seq-len",
                                                       "64",
                                                       "--lr",
                                                       "3e-3",
                                                       "--min-lr",
                                                       "3e-4",
                                                       "--warmup-steps",
                                                       "10",
                                                       "--val-every",
                                                       "25",
                                                       "--val-steps",
                                                       "8",
                                                       "--sample-every",
                                                       "100",
                                                       "--sample-tokens",
                                                       "48",
                                                       "--seed",
                                                       "1"})
    args.push_back(a);
  std::vector<std::string> bad = args;
  for (const std::string& a : std::vector<std::string>{"--out-dir", dir.file("bad"), "--vocab-size", "512"})
    bad.push_back(a);
  r = run_llmcc(dir, bad);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("tokenizer.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has 1024 tokens but the model"), std::string::npos) << r.err;

  // 4. 100 steps of a tiny Llama; the tokenizer is found next to the shards.
  const std::string run = dir.file("run");
  for (const std::string& a : std::vector<std::string>{"--out-dir", run, "--vocab-size", std::to_string(kVocab)})
    args.push_back(a);
  r = run_llmcc(dir, args);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tokenizer: SentencePiece"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("token ids"), std::string::npos) << r.out;
  const std::vector<double> val = val_losses(run + "/log.jsonl");
  std::string curve;
  for (const double v : val) curve += " " + std::to_string(v);
  std::printf("SentencePiece Llama val loss every 25 steps:%s\n", curve.c_str());
  ASSERT_EQ(val.size(), 5u) << curve;
  // An untrained model is near ln 1024 = 6.93. Measured on 2 Zen 3 cores under load (about 40 s
  // for the whole test): 6.94, 5.74, 5.36, 5.07, 4.96 at steps 0, 25, ..., 100.
  EXPECT_NEAR(val.front(), std::log(double(kVocab)), 0.3) << curve;
  EXPECT_LT(val.back(), 5.4) << curve;
  EXPECT_LT(val.back(), val.front() - 1.5) << curve;
  const std::string sample = last_sample(run + "/log.jsonl");
  std::printf("sample at step 100:\n%s\n---\n", sample.c_str());
  expect_english_like(sample, "the trainer's sample");

  // 5. generate from the checkpoint alone: it carries the SentencePiece model.
  const std::string ckpt = run + "/ckpt_000100.bin";
  {
    const llmcc::CheckpointReader reader(ckpt);
    ASSERT_TRUE(reader.has("file.tokenizer.model"));
    const auto tok = llmcc::SpTokenizer::load_from_bytes(reader.blob("file.tokenizer.model"), ckpt);
    EXPECT_EQ(tok.vocab_size(), kVocab);
    EXPECT_EQ(tok.decode(tok.encode("ROMEO:\nWhat say you?")), "ROMEO:\nWhat say you?");
  }
  fs::remove_all(data);  // nothing but the checkpoint is needed now
  r = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", "ROMEO:", "--max-tokens", "40", "--seed", "3", "--top-k",
                      "40", "--no-stop-at-eot"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::printf("generate:\n%s---\n", r.out.c_str());
  ASSERT_EQ(r.out.rfind("ROMEO:", 0), 0u) << r.out;
  expect_english_like(r.out.substr(6), "generate's text");
  // No new tokens: the prompt (after its bos) comes back exactly.
  r = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", "ROMEO:", "--max-tokens", "0"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ROMEO:\n");

  // 6. A Hugging Face export carries it as tokenizer.model, and generate finds it there.
  r = run_llmcc(dir, {"export", "--ckpt", ckpt, "--format", "safetensors", "--out", dir.file("hf")});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir.file("hf/tokenizer.model"))) << r.out;
  const std::vector<std::string> greedy = {"--prompt", "ROMEO:", "--max-tokens", "20", "--temperature", "0"};
  std::vector<std::string> from_ckpt = {"generate", "--ckpt", ckpt},
                           from_hf = {"generate", "--ckpt", dir.file("hf/model.safetensors")};
  from_ckpt.insert(from_ckpt.end(), greedy.begin(), greedy.end());
  from_hf.insert(from_hf.end(), greedy.begin(), greedy.end());
  const CliResult a = run_llmcc(dir, from_ckpt), b = run_llmcc(dir, from_hf);
  ASSERT_EQ(a.code, 0) << a.out << a.err;
  ASSERT_EQ(b.code, 0) << b.out << b.err;
  EXPECT_EQ(b.out, a.out);
  EXPECT_EQ(b.err.find("stores no tokenizer"), std::string::npos) << b.err;

  // 7. A tokenizer that does not fit the model is refused by name.
  if (!llmcc::test::have_data("gpt2/encoder.json")) {
    llmcc::test::note_missing_data("gpt2/encoder.json", "step 7 of this test");
  } else {
    r = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--tokenizer", "gpt2", "--prompt", "ROMEO:"});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("GPT-2 BPE (50257 tokens)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("vocabulary of 1024"), std::string::npos) << r.err;
  }
}

}  // namespace
