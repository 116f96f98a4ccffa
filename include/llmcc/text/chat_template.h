// Chat formats: a conversation turned into the text an instruction-tuned model was trained on.
//
// Hugging Face folders give the format as a Jinja template (tokenizer_config.json's
// "chat_template", or chat_template.jinja beside it). llmcc does not run Jinja: it recognises the
// two formats nearly every small open model uses and renders them in C++, reading from the
// template what varies between models of one format:
//
//   ChatML    <|im_start|>role\ncontent<|im_end|>\n per message; the reply opens with
//             <|im_start|>assistant\n and ends at <|im_end|> (Qwen2/2.5/3, SmolLM2). A system
//             message the template inserts when the conversation has none (SmolLM2's and
//             Qwen2.5's) is read from the template's text. Templates that write a reply after the
//             last user message with <think> reasoning (Qwen3's) render prompts and earlier
//             replies; such a reply is refused.
//   Llama 3   <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> per message, contents
//             trimmed of surrounding whitespace, bos first when the template writes bos_token;
//             the reply ends at <|eot_id|>. Templates that always open with a system block
//             "Cutting Knowledge Date: ...\nToday Date: <date>\n\n" (Llama 3.1, 3.2, 3.3) get it,
//             with today's date as transformers gives it (strftime_now("%d %b %Y")), or the
//             template's own date when it names no strftime_now.
//
// Anything else (tool calls, other roles, other formats) is refused with a message naming it.
//
//   const auto tmpl = llmcc::ChatTemplate::recognise(jinja_text, "<|begin_of_text|>", "model/tokenizer_config.json");
//   std::string prompt = tmpl.render({{"system", "Be brief."}, {"user", "Hi"}}, /*add_generation_prompt=*/true);
//   // encode prompt with special tokens read from the text; stop at tmpl.end_of_turn()
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmcc {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A stretch of rendered text, and whether it is the assistant's own words (a reply's content and
// its end-of-turn marker): what a fine-tuning loss trains on.
struct ChatPiece {
  std::string text;
  bool assistant = false;
};

// One conversation as public chat data sets write it, a JSON object per line:
//   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}
// Other members of the object and of each message are ignored. Throws llmcc::Error naming
// `where` (for example "data.jsonl line 7") and what is malformed.
std::vector<ChatMessage> parse_conversation(std::string_view json, const std::string& where);

class ChatTemplate {
 public:
  enum class Format { ChatMl, Llama3 };

  // Recognises a chat template's Jinja text; bos_token is the text the template's bos_token
  // stands for (tokenizer_config.json's). `where` names its source in errors. Throws
  // llmcc::Error("[chat_template] <where>: ...") for an empty or unrecognised template.
  static ChatTemplate recognise(std::string_view jinja, std::string_view bos_token, const std::string& where);

  // The conversation's text. Messages are checked: roles system, user or assistant, a system
  // message only first. add_generation_prompt appends the opening of the assistant's reply.
  // Throws llmcc::Error("[chat_template] message N: ...") naming what is wrong.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  // The same text in pieces, the assistant's words marked (their concatenation is render()).
  std::vector<ChatPiece> render_pieces(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  Format format() const { return format_; }
  // The special token that ends a turn, at which generation of a reply stops.
  const std::string& end_of_turn() const { return end_of_turn_; }
  // "ChatML", "ChatML with a default system message", "Llama 3 with a dated system block"...
  std::string describe() const;
  // Every special token the rendered text contains, for checking them against a vocabulary.
  std::vector<std::string> special_tokens() const;

 private:
  Format format_ = Format::ChatMl;
  std::string end_of_turn_;
  std::string default_system_;  // ChatML: inserted when the first message is not a system one
  bool has_default_system_ = false;
  bool thinking_ = false;       // ChatML: replies after the last user message carry <think> blocks
  std::string bos_;             // Llama 3: written first ("" when the template writes no bos_token)
  bool dated_system_ = false;   // Llama 3.1+: the system block always, with the dates
  std::string knowledge_date_;  // "December 2023"
  std::string fixed_date_;      // the template's date when it does not ask for today's
};

}  // namespace llmcc
