// A tokenizer folder with a chat format, made in a test: tokenizer.json (byte-level BPE: ids
// 0..255 the bytes, 256 "He", 257 "ll", 258 "Hell", 259 "an"; special tokens 260 <|im_start|>,
// 261 <|im_end|>, 262 <|endoftext|>) and tokenizer_config.json with a ChatML chat template, as
// SmolLM2's and Qwen's folders hold them.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/json_reader.h"

namespace llmcc::test {

// ChatML as tokenizer_config.json's "chat_template" holds it once JSON-decoded.
inline const char* kChatMlJinja =
    R"({%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %})"
    R"({%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})";

// Writes the folder `dir` (created) and returns it.
inline std::string write_chat_tokenizer_folder(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::string vocab;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    char c[16];
    std::snprintf(c, sizeof c, "\\u%04x", printable ? b : next++);
    vocab += "\"" + std::string(c) + "\": " + std::to_string(b) + ", ";
  }
  std::ofstream(dir / "tokenizer.json")
      << R"({"added_tokens": [{"id": 260, "content": "<|im_start|>", "special": true},)"
         R"( {"id": 261, "content": "<|im_end|>", "special": true},)"
         R"( {"id": 262, "content": "<|endoftext|>", "special": true}], "normalizer": null, )"
         R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, )"
         R"("decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {)"
      << vocab << R"("He": 256, "ll": 257, "Hell": 258, "an": 259}, "merges": ["H e", "l l", "He ll", "a n"]}})";
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"eos_token": "<|im_end|>", "chat_template": )" << json_quote(kChatMlJinja) << "}";
  return dir.string();
}

}  // namespace llmcc::test
