// Chat data end to end, as a user runs it: `llmcc prepare --chat` on conversations in a ChatML
// tokenizer folder's format writes token shards with loss masks (the assistant's tokens only),
// `llmcc train` reads them (the header counts the trained tokens) and its loss falls; bad lines,
// a tokenizer without a chat format and conflicting flags exit 1 naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chat_tokenizer.h"
#include "cli_run.h"
#include "llmcc/io/loss_mask_file.h"
#include "llmcc/io/token_file.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;

// n conversations: a question about a sum, and its answer.
void write_chats(const std::string& path, int n) {
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    const int a = i % 10, b = (3 * i) % 10;
    out << R"({"messages": [{"role": "user", "content": "What is )" << a << "+" << b
        << R"(?"}, {"role": "assistant", "content": ")" << a + b << R"("}]})" << "\n";
  }
}

TEST(TrainChat, PreparedChatDataTrainsOnTheAssistantsTokens) {
  llmcc::test::TempDir dir;
  const std::string folder = llmcc::test::write_chat_tokenizer_folder(dir.path / "model");
  write_chats(dir.file("chats.jsonl"), 200);
  CliResult r =
      run_llmcc(dir, {"prepare", "--chat", dir.file("chats.jsonl"), "--tokenizer", "hf:" + folder + "/tokenizer.json",
                      "--out", dir.file("data"), "--val-fraction", "0.1"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("200 conversations: train 180"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat format: ChatML"), std::string::npos) << r.out;
  // The shard's masked tokens are exactly the answers and their <|im_end|> (id 261).
  const std::string shard = dir.file("data") + "/train_000000.bin";
  const std::vector<std::int32_t> ids = llmcc::read_token_file(shard);
  const std::vector<std::uint8_t> mask =
      llmcc::read_loss_mask_file(llmcc::loss_mask_path(shard), static_cast<std::int64_t>(ids.size()));
  int im_end = 0, trained = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    trained += mask[i];
    if (ids[i] == 261) {
      ++im_end;
      EXPECT_EQ(mask[i], im_end % 2 == 0 ? 1 : 0) << "the user's <|im_end|> is not trained, the reply's is";
    }
  }
  EXPECT_EQ(im_end, 2 * 180);
  int answer_tokens = 0;  // each answer is one or two digit tokens
  for (int i = 0; i < 180; ++i) answer_tokens += (i % 10 + (3 * i) % 10) >= 10 ? 2 : 1;
  EXPECT_EQ(trained, answer_tokens + 180);

  r = run_llmcc(dir, {"train",
                      "--model",
                      "llama-tiny",
                      "--n-layer",
                      "2",
                      "--n-embd",
                      "64",
                      "--n-head",
                      "4",
                      "--n-kv-head",
                      "2",
                      "--hidden-dim",
                      "128",
                      "--vocab-size",
                      "263",
                      "--max-seq-len",
                      "64",
                      "--train-data",
                      dir.file("data") + "/train_*.bin",
                      "--val-data",
                      dir.file("data") + "/val_*.bin",
                      "--batch-size",
                      "8",
                      "--seq-len",
                      "48",
                      "--steps",
                      "40",
                      "--lr",
                      "1e-2",
                      "--val-every",
                      "20",
                      "--val-steps",
                      "2",
                      "--threads",
                      "2",
                      "--out-dir",
                      dir.file("run")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("of them trained: loss masks"), std::string::npos) << r.out;
  const auto val = llmcc::test::logged(dir.file("run") + "/log.jsonl", "val_loss");
  EXPECT_LT(std::stod(val.at(40)), 0.5 * std::stod(val.at(0))) << "the answers are learnable";
}

TEST(TrainChat, BadChatDataIsRefusedByName) {
  llmcc::test::TempDir dir;
  const std::string folder = llmcc::test::write_chat_tokenizer_folder(dir.path / "model");
  const std::string tok = "hf:" + folder + "/tokenizer.json";
  {
    std::ofstream out(dir.file("bad.jsonl"));
    out << R"({"messages": [{"role": "user", "content": "Hi"}]})" << "\n"
        << R"({"messages": [{"role": "user"}]})" << "\n";
  }
  const auto refused = [&](const std::vector<std::string>& args, const std::string& what) {
    const CliResult bad = run_llmcc(dir, args);
    EXPECT_EQ(bad.code, 1) << what;
    EXPECT_NE(bad.err.find(what), std::string::npos) << bad.err;
    EXPECT_FALSE(fs::exists(dir.file("out"))) << "nothing is written";
  };
  refused({"prepare", "--chat", dir.file("bad.jsonl"), "--tokenizer", tok, "--out", dir.file("out")},
          "bad.jsonl line 2");
  write_chats(dir.file("one.jsonl"), 1);
  refused({"prepare", "--chat", dir.file("one.jsonl"), "--tokenizer", tok, "--out", dir.file("out")},
          "holds 1 conversation(s)");
  write_chats(dir.file("ok.jsonl"), 5);
  refused({"prepare", "--chat", dir.file("ok.jsonl"), "--input", dir.file("ok.jsonl"), "--tokenizer", tok, "--out",
           dir.file("out")},
          "give --input (text files) or --chat");
  refused(
      {"prepare", "--chat", dir.file("ok.jsonl"), "--val-tokens", "10", "--tokenizer", tok, "--out", dir.file("out")},
      "--val-tokens does not apply to --chat");
  refused({"prepare", "--out", dir.file("out")}, "give --input (text files) or --chat");
  // A tokenizer folder without a chat template.
  const std::string plain = llmcc::test::write_chat_tokenizer_folder(dir.path / "plain");
  std::ofstream(fs::path(plain) / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  refused({"prepare", "--chat", dir.file("ok.jsonl"), "--tokenizer", "hf:" + plain + "/tokenizer.json", "--out",
           dir.file("out")},
          "has no chat template");
}

}  // namespace
