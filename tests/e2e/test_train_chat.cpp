// Chat data end to end, as a user runs it: `llmcc prepare --chat` on conversations in a ChatML
// tokenizer folder's format writes token shards with loss masks (the assistant's tokens only),
// `llmcc train` reads them (the header counts the trained tokens) and its loss falls; with
// --pad-to each conversation gets a row of its own, which every batch row starts at; bad lines,
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
#include "llmcc/train/data_loader.h"
#include "test_support.h"
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

// The small Llama the chat tests train, on `data`'s shards.
std::vector<std::string> train_flags(const llmcc::test::TempDir& dir, const std::string& data, int seq_len,
                                     const std::string& out) {
  return {"train",
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
          dir.file(data) + "/train_*.bin",
          "--val-data",
          dir.file(data) + "/val_*.bin",
          "--batch-size",
          "8",
          "--seq-len",
          std::to_string(seq_len),
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
          dir.file(out)};
}

// --pad-to: a row of R tokens per conversation, padded (mask 0) or cut, shards of whole rows and
// one more token; every training row, sequential or random, starts at a conversation's first
// token; the same answers are trained as when packed, and the loss falls.
TEST(TrainChat, PaddedChatDataGivesEachConversationItsOwnRow) {
  llmcc::test::TempDir dir;
  const std::string folder = llmcc::test::write_chat_tokenizer_folder(dir.path / "model");
  const std::string tok = "hf:" + folder + "/tokenizer.json";
  write_chats(dir.file("chats.jsonl"), 200);
  {
    std::ofstream out(dir.file("chats.jsonl"), std::ios::app);  // one too long for a row of 48
    out << R"({"messages": [{"role": "user", "content": "What is the sum of all these numbers: 1 2 3 4 5 6 7 8 9?"},)"
        << R"( {"role": "assistant", "content": "45"}]})" << "\n";
  }
  constexpr int R = 48;
  CliResult r =
      run_llmcc(dir, {"prepare", "--chat", dir.file("chats.jsonl"), "--tokenizer", tok, "--out", dir.file("data"),
                      "--val-fraction", "0.1", "--pad-to", std::to_string(R), "--shard-tokens", "1024"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("one per row of 48 tokens padded with id"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 conversation(s) are longer than --pad-to 48 tokens and were cut to it, dropping 3 trained"),
            std::string::npos)
      << r.out;
  std::vector<std::string> shards;
  int rows = 0, trained = 0;
  for (int k = 0; fs::exists(dir.file("data") + "/train_00000" + std::to_string(k) + ".bin"); ++k) {
    const std::string shard = dir.file("data") + "/train_00000" + std::to_string(k) + ".bin";
    shards.push_back(shard);
    const std::vector<std::int32_t> ids = llmcc::read_token_file(shard);
    std::int32_t row = 0;
    const std::vector<std::uint8_t> mask =
        llmcc::read_loss_mask_file(llmcc::loss_mask_path(shard), static_cast<std::int64_t>(ids.size()), &row);
    EXPECT_EQ(row, R);
    ASSERT_EQ(ids.size() % R, 1u) << shard;
    EXPECT_LE(ids.size(), 1024u);
    for (std::size_t i = 0; i + 1 < ids.size(); i += R) EXPECT_EQ(ids[i], ids[0]) << shard << " row " << i / R;
    EXPECT_EQ(mask.back(), 0);
    for (std::uint8_t m : mask) trained += m;
    rows += static_cast<int>(ids.size() / R);
  }
  EXPECT_EQ(shards.size(), 9u);  // 21 rows per shard of at most 1,024 tokens
  EXPECT_EQ(rows, 181);          // the last 20 of 201 conversations (the long one too) are the validation split
  int answer_tokens = 0;
  for (int i = 0; i < 181; ++i) answer_tokens += (i % 10 + (3 * i) % 10) >= 10 ? 2 : 1;
  EXPECT_EQ(trained, answer_tokens + 181);

  const std::int32_t first = llmcc::read_token_file(shards[0])[0];
  for (llmcc::SampleMode mode : {llmcc::SampleMode::Sequential, llmcc::SampleMode::Random}) {
    llmcc::DataLoader loader(shards, {.B = 8, .T = R, .mode = mode, .seed = 3});
    for (int batch = 0; batch < 30; ++batch) {
      loader.next_batch();
      for (int b = 0; b < 8; ++b) ASSERT_EQ(loader.inputs().data()[b * R], first) << "batch " << batch << " row " << b;
    }
  }
  EXPECT_TRUE(llmcc::test::throws_error([&] { llmcc::DataLoader bad(shards, {.B = 2, .T = 32}); },
                                        {"one conversation per row of 48 tokens (prepare --chat --pad-to 48)",
                                         "the sequence length must be 48, got 32"}));

  r = run_llmcc(dir, train_flags(dir, "data", R, "run"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("loss masks; one conversation per row of 48)"), std::string::npos) << r.out;
  const auto val = llmcc::test::logged(dir.file("run") + "/log.jsonl", "val_loss");
  EXPECT_LT(std::stod(val.at(40)), 0.5 * std::stod(val.at(0))) << "the answers are learnable";
  r = run_llmcc(dir, train_flags(dir, "data", 32, "run32"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the sequence length must be 48, got 32"), std::string::npos) << r.err;
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
  refused({"prepare", "--input", dir.file("ok.jsonl"), "--pad-to", "16", "--out", dir.file("out")},
          "--pad-to pads conversations: give it with --chat");
  refused({"prepare", "--chat", dir.file("ok.jsonl"), "--pad-to", "1", "--tokenizer", tok, "--out", dir.file("out")},
          "--pad-to must be at least 2 tokens");
  // A tokenizer folder without a chat template.
  const std::string plain = llmcc::test::write_chat_tokenizer_folder(dir.path / "plain");
  std::ofstream(fs::path(plain) / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  refused({"prepare", "--chat", dir.file("ok.jsonl"), "--tokenizer", "hf:" + plain + "/tokenizer.json", "--out",
           dir.file("out")},
          "has no chat template");
}

}  // namespace
