// Chat data for fine-tuning: one conversation's tokens and loss mask in a model's chat format.
//
// The conversation is rendered by the tokenizer's chat template in pieces (chat_template.h's
// render_pieces: the assistant's words, a reply's content and its end-of-turn marker, marked)
// and each piece is encoded on its own, so every token belongs to one piece; the mask is 1 on the
// tokens of the assistant's pieces, what a fine-tuning loss trains on, and 0 on the rest (system
// and user messages, the format's headers). The pieces' ids are checked against the encoding of
// the whole text: a tokenizer that merged across a piece boundary would give other ids than the
// model sees at inference, and is refused.
//
//   const ChatTemplate tmpl = tok.chat_template();
//   ChatTokens c = encode_conversation(tok, tmpl, parse_conversation(line, where), where);
//   // c.ids: what the model reads; c.mask[i]: whether token i is a trained target
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "llmcc/text/chat_template.h"
#include "llmcc/text/text_tokenizer.h"

namespace llmcc {

struct ChatTokens {
  std::vector<std::int32_t> ids;
  std::vector<std::uint8_t> mask;  // one per id: 1 for the assistant's tokens
};

// Throws llmcc::Error naming `where` when the template refuses the conversation or the pieces'
// ids differ from the whole text's.
ChatTokens encode_conversation(const TextTokenizer& tok, const ChatTemplate& tmpl,
                               std::span<const ChatMessage> messages, const std::string& where);

}  // namespace llmcc
