// Chat formats (llmcc/text/chat_template.h) on templates written here in the styles real models
// ship: ChatML with and without a default system message, a ChatML template with <think>
// reasoning, Llama 3 with a dated system block and without. Equality with transformers'
// apply_chat_template (Jinja) on such templates is tests/hf/test_hf_tokenizers.py.
#include "llmcc/text/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llmcc/error.h"

namespace {

using llmcc::ChatMessage;
using llmcc::ChatTemplate;

// Jinja text as tokenizer_config.json holds it once JSON-decoded: "\n" inside Jinja's string
// literals is the two characters backslash and n.
const char* kChatMlDefaultSystem =
    R"({%- for m in messages -%}{%- if loop.first and m['role'] != 'system' -%})"
    R"({{ '<|im_start|>system\nYou answer in one line.<|im_end|>\n' }}{%- endif -%})"
    R"({{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}{%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%})";

const char* kChatMl =
    R"({%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %})"
    R"({%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})";

const char* kChatMlThinking =
    R"({%- for m in messages %}{%- set reasoning_content = '' %}{%- if '</think>' in m.content %}{%- endif %})"
    R"({{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %})"
    R"({%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})";

const char* kLlama3Dated =
    R"({{- bos_token }}{%- if not date_string is defined %}{%- set date_string = "02 Jan 2025" %}{%- endif %})"
    R"({%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %})"
    R"({%- set messages = messages[1:] %}{%- else %}{%- set system_message = "" %}{%- endif %})"
    R"({{- "<|start_header_id|>system<|end_header_id|>\n\n" }}{{- "Cutting Knowledge Date: March 2024\n" }})"
    R"({{- "Today Date: " + date_string + "\n\n" }}{{- system_message }}{{- "<|eot_id|>" }})"
    R"({%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim)"
    R"( + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %})"
    R"({{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %})";

const char* kLlama3 =
    R"({% for m in messages %}{% if loop.first %}{{ bos_token }}{% endif %})"
    R"({{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' }})"
    R"({% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})";

const std::vector<ChatMessage> kUser = {{"user", "Hi there"}};
const std::vector<ChatMessage> kSystemUser = {{"system", "Be brief."}, {"user", "Hi"}};
const std::vector<ChatMessage> kTurns = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const llmcc::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, ChatMlInsertsTheTemplatesDefaultSystemMessageOnlyWhenThereIsNone) {
  const ChatTemplate t = ChatTemplate::recognise(kChatMlDefaultSystem, "", "t.json");
  EXPECT_EQ(t.format(), ChatTemplate::Format::ChatMl);
  EXPECT_EQ(t.end_of_turn(), "<|im_end|>");
  EXPECT_EQ(t.describe(), "ChatML with a default system message");
  EXPECT_EQ(t.render(kUser, true),
            "<|im_start|>system\nYou answer in one line.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.render(kSystemUser, false), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");

  const ChatTemplate plain = ChatTemplate::recognise(kChatMl, "", "t.json");
  EXPECT_EQ(plain.describe(), "ChatML");
  EXPECT_EQ(plain.render(kTurns, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  // ChatML keeps a message's whitespace.
  EXPECT_EQ(plain.render(std::vector<ChatMessage>{{"user", " a \n"}}, false), "<|im_start|>user\n a \n<|im_end|>\n");
}

TEST(ChatTemplate, Llama3TrimsMessagesAndOpensWithBosAndTheDatedSystemBlock) {
  const ChatTemplate t = ChatTemplate::recognise(kLlama3Dated, "<|begin_of_text|>", "t.json");
  EXPECT_EQ(t.format(), ChatTemplate::Format::Llama3);
  EXPECT_EQ(t.end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(t.describe(), "Llama 3 with a dated system block");
  const std::string head =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Cutting Knowledge Date: March 2024\nToday Date: 02 Jan 2025\n\n";
  EXPECT_EQ(t.render(kUser, true), head +
                                       "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                                       "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Python's str.strip(): ASCII and Unicode spaces (U+3000, U+00A0) at both ends.
  const std::vector<ChatMessage> spaced = {{"system", "  Be brief.\n"}, {"user", "\xe3\x80\x80 Hi\xc2\xa0\t"}};
  EXPECT_EQ(t.render(spaced, false),
            head + "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");

  const ChatTemplate plain = ChatTemplate::recognise(kLlama3, "<|begin_of_text|>", "t.json");
  EXPECT_EQ(plain.describe(), "Llama 3");
  EXPECT_EQ(
      plain.render(kSystemUser, true),
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, PiecesMarkTheAssistantsWordsAndJoinToTheText) {
  for (const char* jinja : {kChatMlDefaultSystem, kLlama3Dated}) {
    const ChatTemplate t = ChatTemplate::recognise(jinja, "<|begin_of_text|>", "t.json");
    const std::vector<ChatMessage> conv = {
        {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}, {"assistant", "4"}};
    std::string joined, trained;
    for (const llmcc::ChatPiece& p : t.render_pieces(conv, false)) {
      joined += p.text;
      if (p.assistant) trained += p.text + "|";
    }
    EXPECT_EQ(joined, t.render(conv, false));
    EXPECT_EQ(trained, "Hello!" + t.end_of_turn() + "|4" + t.end_of_turn() + "|");
  }
}

TEST(ChatTemplate, WhatIsNotRecognisedOrNotAChatIsRefusedByName) {
  EXPECT_NE(error_of([] {
              (void)ChatTemplate::recognise("{{ messages }}", "", "cfg.json");
            }).find("cfg.json: the chat template is not one llmcc recognises"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)ChatTemplate::recognise("", "", "cfg.json"); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] {
              (void)ChatTemplate::recognise(kLlama3, "", "cfg.json");
            }).find("the template writes bos_token but the tokenizer names no bos_token"),
            std::string::npos);

  const ChatTemplate t = ChatTemplate::recognise(kChatMl, "", "t.json");
  const auto render_error = [&](std::vector<ChatMessage> m) { return error_of([&] { (void)t.render(m, true); }); };
  EXPECT_NE(render_error({{"tool", "42"}}).find("message 1 has role 'tool'"), std::string::npos);
  EXPECT_NE(render_error({{"user", "a"}, {"system", "b"}}).find("message 2 is a system message"), std::string::npos);
  EXPECT_NE(render_error({{"user", "a<|im_end|>"}}).find("message 1 contains the special token <|im_end|>"),
            std::string::npos);
  EXPECT_NE(render_error({}).find("no messages"), std::string::npos);

  // A template that writes replies after the last user message with <think> reasoning renders
  // prompts and earlier replies, and refuses such a reply.
  const ChatTemplate thinking = ChatTemplate::recognise(kChatMlThinking, "", "t.json");
  EXPECT_EQ(thinking.render(kTurns, true), t.render(kTurns, true));
  const std::vector<ChatMessage> reply = {{"user", "Hi"}, {"assistant", "Hello!"}};
  EXPECT_NE(
      error_of([&] { (void)thinking.render(reply, false); }).find("message 2 is a reply after the last user message"),
      std::string::npos);
}

TEST(ChatTemplate, ConversationsParseFromJsonLines) {
  const std::vector<ChatMessage> m = llmcc::parse_conversation(
      R"({"messages": [{"role": "user", "content": "a\nb"}, {"role": "assistant", "content": "c", "x": 1}], "id": 7})",
      "d.jsonl line 1");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].content, "a\nb");
  EXPECT_EQ(m[1].role, "assistant");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[1]", "d.jsonl line 3: is an array, expected a JSON object"},
      {R"({"msgs": []})", "has no \"messages\" array"},
      {R"({"messages": []})", "\"messages\" is empty"},
      {R"({"messages": [{"role": "user"}]})", "messages[0] is not an object with string members"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0] is not an object"},
      {R"({"messages": )", "d.jsonl line 3"},
  };
  for (const auto& [json, fragment] : bad) {
    const std::string e = error_of([&] { (void)llmcc::parse_conversation(json, "d.jsonl line 3"); });
    EXPECT_NE(e.find(fragment), std::string::npos) << "expected `" << fragment << "` in: " << e;
  }
}

}  // namespace
