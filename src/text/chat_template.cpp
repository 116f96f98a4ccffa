// Chat formats (llmcc/text/chat_template.h): recognising a Jinja chat template by the special
// tokens it writes, reading what varies from its literals, and rendering conversations.
#include "llmcc/text/chat_template.h"

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_reader.h"
#include "llmcc/error.h"

namespace llmcc {

namespace {

constexpr const char* kWhere = "chat_template";

constexpr std::string_view kImStart = "<|im_start|>", kImEnd = "<|im_end|>";
constexpr std::string_view kHeaderStart = "<|start_header_id|>", kHeaderEnd = "<|end_header_id|>",
                           kEotId = "<|eot_id|>";

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// A Jinja string literal's escapes (\n, \t, \\, \', \") resolved; other text kept as it is.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

// Skips a newline written in the template either as the escape \n or as the character itself.
bool skip_newline(std::string_view s, std::size_t& at) {
  if (s.substr(at, 2) == "\\n") {
    at += 2;
    return true;
  }
  if (s.substr(at, 1) == "\n") {
    at += 1;
    return true;
  }
  return false;
}

// The text a template writes between `open` (then a newline) and `close` inside one string
// literal: no quote, brace or concatenation in between. Empty when there is none.
bool literal_between(std::string_view jinja, std::string_view open, std::string_view close, std::string& out) {
  for (std::size_t at = jinja.find(open); at != std::string_view::npos; at = jinja.find(open, at + 1)) {
    std::size_t begin = at + open.size();
    if (!skip_newline(jinja, begin)) continue;
    const std::size_t end = jinja.find(close, begin);
    if (end == std::string_view::npos) return false;
    const std::string_view body = jinja.substr(begin, end - begin);
    if (body.find_first_of("'\"{}+") != std::string_view::npos) continue;
    out = unescape(body);
    return true;
  }
  return false;
}

// Python's str.strip() (Jinja's trim): removes what str.isspace() calls whitespace, as UTF-8.
std::string_view trim(std::string_view s) {
  const auto space_at = [&](std::size_t i) -> std::size_t {  // the length of a space at i, else 0
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == ' ' || (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x1f)) return 1;
    if (b < 0xc2) return 0;
    std::uint32_t cp = 0;
    std::size_t n = b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    if (i + n > s.size()) return 0;
    cp = b & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    const bool space = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
                       cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return space ? n : 0;
  };
  std::size_t begin = 0;
  while (begin < s.size()) {
    const std::size_t n = space_at(begin);
    if (n == 0) break;
    begin += n;
  }
  std::size_t end = s.size();
  while (end > begin) {
    std::size_t start = end - 1;  // the start of the last character
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    const std::size_t n = space_at(start);
    if (n == 0 || start + n != end) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d %b %Y", &local);
  return buf;
}

}  // namespace

std::vector<ChatMessage> parse_conversation(std::string_view json, const std::string& where) {
  const JsonValue v = parse_json(json, where, kWhere);
  const auto bad = [&](const std::string& what) { fail(kWhere, where + ": " + what); };
  if (v.kind != JsonValue::Kind::Object) bad("is " + std::string(v.kind_name()) + ", expected a JSON object");
  const JsonValue* messages = v.find("messages");
  if (messages == nullptr || messages->kind != JsonValue::Kind::Array)
    bad("has no \"messages\" array of {\"role\", \"content\"} objects");
  if (messages->array.empty()) bad("\"messages\" is empty");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < messages->array.size(); ++i) {
    const JsonValue& m = messages->array[i];
    const std::string w = "messages[" + std::to_string(i) + "]";
    const JsonValue* role = m.find("role");
    const JsonValue* content = m.find("content");
    if (m.kind != JsonValue::Kind::Object || role == nullptr || role->kind != JsonValue::Kind::String ||
        content == nullptr || content->kind != JsonValue::Kind::String)
      bad(w + " is not an object with string members \"role\" and \"content\"");
    out.push_back({role->string, content->string});
  }
  return out;
}

ChatTemplate ChatTemplate::recognise(std::string_view jinja, std::string_view bos_token, const std::string& where) {
  const auto bad = [&](const std::string& what) { fail(kWhere, where + ": " + what); };
  if (jinja.empty()) bad("the chat template is empty");
  ChatTemplate t;
  if (contains(jinja, kImStart) && contains(jinja, kImEnd)) {
    t.format_ = Format::ChatMl;
    t.end_of_turn_ = std::string(kImEnd);
    const std::string open = std::string(kImStart) + "system";
    t.has_default_system_ = literal_between(jinja, open, kImEnd, t.default_system_);
    // Qwen3's: a reply after the last user message is written with its reasoning in <think>
    // tags (empty ones when there is none), which llmcc does not render.
    t.thinking_ = contains(jinja, "</think>") && contains(jinja, "reasoning_content");
    return t;
  }
  if (contains(jinja, kHeaderStart) && contains(jinja, kHeaderEnd) && contains(jinja, kEotId)) {
    t.format_ = Format::Llama3;
    t.end_of_turn_ = std::string(kEotId);
    if (contains(jinja, "bos_token")) {
      if (bos_token.empty()) bad("the template writes bos_token but the tokenizer names no bos_token");
      t.bos_ = std::string(bos_token);
    }
    constexpr std::string_view kKnowledge = "Cutting Knowledge Date: ";
    if (const std::size_t at = jinja.find(kKnowledge); at != std::string_view::npos) {
      t.dated_system_ = true;
      const std::size_t begin = at + kKnowledge.size();
      const std::size_t end = std::min(jinja.find("\\n", begin), jinja.find('\n', begin));
      if (end == std::string_view::npos) bad("the template's 'Cutting Knowledge Date:' line does not end");
      t.knowledge_date_ = std::string(jinja.substr(begin, end - begin));
      if (!contains(jinja, "strftime_now")) {
        constexpr std::string_view kSet = "date_string = \"";
        const std::size_t s = jinja.find(kSet);
        const std::size_t e = s == std::string_view::npos ? s : jinja.find('"', s + kSet.size());
        if (e == std::string_view::npos)
          bad("the template writes 'Today Date:' but neither strftime_now nor a date_string = \"...\" for it");
        t.fixed_date_ = std::string(jinja.substr(s + kSet.size(), e - s - kSet.size()));
      }
    }
    return t;
  }
  fail(kWhere,
       where +
           ": the chat template is not one llmcc recognises: ChatML (writes <|im_start|> and <|im_end|>) or Llama 3 "
           "(writes <|start_header_id|>, <|end_header_id|> and <|eot_id|>)");
}

std::vector<ChatPiece> ChatTemplate::render_pieces(std::span<const ChatMessage> messages,
                                                   bool add_generation_prompt) const {
  if (messages.empty()) fail(kWhere, "the conversation has no messages");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string where = "message " + std::to_string(i + 1) + " ";
    if (role != "system" && role != "user" && role != "assistant")
      fail(kWhere, where + "has role '" + role + "'; llmcc's chat formats take system, user and assistant");
    if (role == "system" && i != 0) fail(kWhere, where + "is a system message; only the first may be one");
    for (const std::string& special : special_tokens())
      if (contains(messages[i].content, special))
        fail(kWhere, where + "contains the special token " + special + "; a message's text may not");
  }
  if (thinking_) {
    std::size_t last_user = 0;
    for (std::size_t i = 0; i < messages.size(); ++i)
      if (messages[i].role == "user") last_user = i;
    for (std::size_t i = last_user + 1; i < messages.size(); ++i)
      if (messages[i].role == "assistant")
        fail(kWhere, "message " + std::to_string(i + 1) +
                         " is a reply after the last user message, which this template writes with <think> "
                         "reasoning; llmcc renders such templates for prompts and earlier replies only");
  }
  std::vector<ChatPiece> out;
  const auto add = [&](std::string text, bool assistant) {
    if (!out.empty() && out.back().assistant == assistant)
      out.back().text += text;
    else
      out.push_back({std::move(text), assistant});
  };
  std::size_t first = 0;
  if (format_ == Format::ChatMl) {
    if (has_default_system_ && messages[0].role != "system")
      add(std::string(kImStart) + "system\n" + default_system_ + std::string(kImEnd) + "\n", false);
    for (const ChatMessage& m : messages) {
      add(std::string(kImStart) + m.role + "\n", false);
      const bool reply = m.role == "assistant";
      add(m.content + std::string(kImEnd), reply);
      add("\n", false);
    }
    if (add_generation_prompt) add(std::string(kImStart) + "assistant\n", false);
    return out;
  }
  add(bos_, false);
  if (dated_system_) {
    const std::string system = messages[0].role == "system" ? std::string(trim(messages[0].content)) : "";
    if (messages[0].role == "system") first = 1;
    add(std::string(kHeaderStart) + "system" + std::string(kHeaderEnd) +
            "\n\nCutting Knowledge Date: " + knowledge_date_ +
            "\nToday Date: " + (fixed_date_.empty() ? today() : fixed_date_) + "\n\n" + system + std::string(kEotId),
        false);
  }
  for (std::size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    add(std::string(kHeaderStart) + m.role + std::string(kHeaderEnd) + "\n\n", false);
    add(std::string(trim(m.content)) + std::string(kEotId), m.role == "assistant");
  }
  if (add_generation_prompt) add(std::string(kHeaderStart) + "assistant" + std::string(kHeaderEnd) + "\n\n", false);
  return out;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string text;
  for (const ChatPiece& p : render_pieces(messages, add_generation_prompt)) text += p.text;
  return text;
}

std::string ChatTemplate::describe() const {
  if (format_ == Format::ChatMl) {
    std::string d = has_default_system_ ? "ChatML with a default system message" : "ChatML";
    if (thinking_) d += " (replies with <think> reasoning)";
    return d;
  }
  std::string d = "Llama 3";
  if (dated_system_) d += " with a dated system block";
  return d;
}

std::vector<std::string> ChatTemplate::special_tokens() const {
  if (format_ == Format::ChatMl) return {std::string(kImStart), std::string(kImEnd)};
  std::vector<std::string> s = {std::string(kHeaderStart), std::string(kHeaderEnd), std::string(kEotId)};
  if (!bos_.empty()) s.push_back(bos_);
  return s;
}

}  // namespace llmcc
