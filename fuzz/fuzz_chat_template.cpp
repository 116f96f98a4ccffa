// Chat templates (llmcc/text/chat_template.h) and conversations, the input's three parts
// (fuzz_common.h: kPartSeparator): a Jinja template, the bos text, and a JSON-lines conversation.
// When the template is recognised and the conversation parses and renders, checks what the header
// promises: render_pieces joins to render, and the text starts with bos when the format writes it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "llmcc/text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = llmcc::fuzz::split_parts(data, size, 3);
  llmcc::fuzz::expect_error_or_ok([&] {
    const llmcc::ChatTemplate t = llmcc::ChatTemplate::recognise(parts[0], parts[1], "fuzz template");
    const std::vector<llmcc::ChatMessage> messages = llmcc::parse_conversation(parts[2], "fuzz line");
    for (const bool prompt : {false, true}) {
      const std::string text = t.render(messages, prompt);
      std::string joined;
      for (const llmcc::ChatPiece& p : t.render_pieces(messages, prompt)) joined += p.text;
      if (joined != text) __builtin_trap();
    }
  });
  return 0;
}
