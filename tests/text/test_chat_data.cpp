// Chat data (llmcc/text/chat_data.h): a conversation's ids are the chat format's text encoded
// whole, and its mask marks exactly the assistant's words and end-of-turn markers; a conversation
// the format refuses is an error naming where it came from.
#include "llmcc/text/chat_data.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat_tokenizer.h"
#include "llmcc/error.h"
#include "llmcc/text/text_tokenizer.h"
#include "temp_dir.h"

namespace llmcc {
namespace {

TEST(ChatData, MaskMarksTheAssistantsTokensOfTheWholeTextsIds) {
  test::TempDir dir;
  const auto tok = load_text_tokenizer("hf:" + test::write_chat_tokenizer_folder(dir.path / "m"));
  const ChatTemplate tmpl = tok->chat_template();
  const std::vector<ChatMessage> conv = {{"system", "Hello helper."},
                                         {"user", "Tell me hello."},
                                         {"assistant", "Hello, hello!"},
                                         {"user", "Again?"},
                                         {"assistant", "Hell no"}};
  const ChatTokens c = encode_conversation(*tok, tmpl, conv, "chats.jsonl line 3");
  EXPECT_EQ(c.ids, tok->encode(tmpl.render(conv, false)));
  ASSERT_EQ(c.mask.size(), c.ids.size());
  // The trained tokens, decoded run by run: each reply with its <|im_end|>, nothing else.
  std::vector<std::string> runs;
  std::vector<std::int32_t> run;
  for (std::size_t i = 0; i <= c.ids.size(); ++i) {
    if (i < c.ids.size() && c.mask[i] == 1) {
      run.push_back(c.ids[i]);
    } else if (!run.empty()) {
      runs.push_back(tok->decode(run));
      run.clear();
    }
  }
  EXPECT_EQ(runs, (std::vector<std::string>{"Hello, hello!<|im_end|>", "Hell no<|im_end|>"}));
  EXPECT_EQ(c.ids.front(), 260);  // <|im_start|>, not trained
  EXPECT_EQ(c.mask.front(), 0);

  // No assistant message: nothing trained. A system message after the first: refused by line.
  const ChatTokens none = encode_conversation(*tok, tmpl, std::vector<ChatMessage>{{"user", "Hi"}}, "x");
  EXPECT_EQ(std::count(none.mask.begin(), none.mask.end(), 1), 0);
  try {
    (void)encode_conversation(*tok, tmpl, std::vector<ChatMessage>{{"user", "Hi"}, {"system", "late"}},
                              "chats.jsonl line 9");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chats.jsonl line 9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmcc
