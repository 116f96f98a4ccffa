// One conversation's tokens and loss mask (llmcc/text/chat_data.h).
#include "llmcc/text/chat_data.h"

#include "llmcc/error.h"

namespace llmcc {

ChatTokens encode_conversation(const TextTokenizer& tok, const ChatTemplate& tmpl,
                               std::span<const ChatMessage> messages, const std::string& where) {
  std::vector<ChatPiece> pieces;
  try {
    pieces = tmpl.render_pieces(messages, /*add_generation_prompt=*/false);
  } catch (const Error& e) {
    fail("chat data", where + ": " + e.what());
  }
  ChatTokens out;
  std::string text;
  for (const ChatPiece& p : pieces) {
    const std::vector<std::int32_t> ids = tok.encode(p.text);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.mask.insert(out.mask.end(), ids.size(), p.assistant ? 1 : 0);
    text += p.text;
  }
  if (tok.encode(text) != out.ids)
    fail("chat data", where +
                          ": the tokenizer encodes the conversation's text with tokens that cross the chat "
                          "format's boundaries between the assistant's words and the rest, so no token mask "
                          "separates them (" +
                          tok.describe() + ", " + tmpl.describe() + ")");
  return out;
}

}  // namespace llmcc
