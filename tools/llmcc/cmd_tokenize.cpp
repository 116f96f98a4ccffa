// llmcc tokenize: token ids of a text, and text of token ids, with GPT-2's BPE (the default) or
// a SentencePiece model (--tokenizer sp:MODEL) or a tokenizer.json (--tokenizer hf:FILE).
//
//   llmcc tokenize --text "Hello world"      stdout: "15496 995"      stderr: "2 tokens"
//   llmcc tokenize --file notes.txt          (--file - reads standard input)
//   llmcc tokenize --decode 15496 995        stdout: "Hello world"
//   llmcc tokenize --tokenizer sp:tok.model --text "Hello"
//   llmcc tokenize --tokenizer hf:model --chat conversations.jsonl   (the chat format's ids, a line each)
//
// Ids go to stdout (one line, space separated) and the count to stderr, so the output pipes
// cleanly. Decoded text is written byte for byte; a newline is added only on a terminal.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/text/text_tokenizer.h"

namespace llmcc::cli {

namespace {

constexpr const char* kCmd = "llmcc tokenize";

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(kCmd, "input file " + path + " does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kCmd, "cannot open input file " + path + " for reading");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int32_t parse_id(const std::string& text, int vocab_size) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || end != text.c_str() + text.size())
    fail(kCmd, "--decode expects token ids (integers), got '" + text + "'");
  if (v < 0 || v >= vocab_size)
    fail(kCmd, "token id " + text + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  return static_cast<std::int32_t>(v);
}

// The ids of each line of `path` ('-': standard input), encode(line, "<path> line N") gives
// them, written a line each to stdout; the count of tokens goes to stderr. Returns the lines.
template <class Encode>
std::size_t encode_lines(const std::string& path, Encode&& encode) {
  const std::string all = read_input(path);
  std::string out;
  std::size_t line_no = 0, count = 0;
  for (std::size_t begin = 0; begin < all.size();) {
    const std::size_t end = std::min(all.find('\n', begin), all.size());
    const std::vector<std::int32_t> ids =
        encode(std::string_view(all).substr(begin, end - begin), path + " line " + std::to_string(++line_no));
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    out += '\n';
    count += ids.size();
    begin = end + 1;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "%zu tokens, ", count);
  return line_no;
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  std::string text, file, json_lines, chat, tokenizer_spec = "gpt2";
  std::vector<std::string> decode;
  bool ordinary = false;

  ArgParser p(
      "tokenize",
      "Print the token ids of a text (GPT-2 BPE, SentencePiece or a tokenizer.json), or the text of token ids.");
  p.add("--text", &text, "text to encode");
  p.add("--file", &file, "file to encode ('-' reads standard input)");
  p.add("--decode", &decode, "token ids to turn back into text");
  p.add("--json-lines", &json_lines,
        "a file of JSON strings, one per line ('-' reads standard input): each is encoded on its own, its ids "
        "printed on a line of their own");
  p.add("--chat", &chat,
        "a file of conversations, one JSON object {\"messages\": [{\"role\", \"content\"}, ...]} per line ('-' "
        "reads standard input), each rendered in the tokenizer's chat format (a tokenizer.json folder's chat "
        "template) and encoded, its ids on a line of their own; a conversation that does not end with the "
        "assistant's message gets the opening of the assistant's reply");
  p.add("--ordinary", &ordinary,
        "GPT-2: encode '<|endoftext|>' as ordinary characters, not as the token 50256 (SentencePiece always does)");
  p.add("--tokenizer", &tokenizer_spec,
        "gpt2 (GPT-2 BPE: $LLMCC_GPT2_TOKENIZER_DIR, ../shared/data/gpt2 or ~/.cache/llmcc/gpt2, else downloaded), "
        "gpt2:DIR (encoder.json and "
        "vocab.bpe in DIR), sp:MODEL (a SentencePiece .model) or hf:FILE (a Hugging Face tokenizer.json, or a "
        "directory holding one)");
  p.epilogue(
      "Ids are printed space separated on stdout, their count on stderr.\n\n"
      "Examples:\n"
      "  llmcc tokenize --text \"Hello world\"        # 15496 995\n"
      "  llmcc tokenize --decode 15496 995          # Hello world\n"
      "  llmcc tokenize --tokenizer sp:data/tok512.model --file input.txt\n"
      "  llmcc tokenize --tokenizer hf:SmolLM2-360M-Instruct --chat chats.jsonl");
  if (!p.parse(argc, argv)) return 0;

  const int modes = int(p.given("--text")) + int(p.given("--file")) + int(p.given("--decode")) +
                    int(p.given("--json-lines")) + int(p.given("--chat"));
  if (modes != 1)
    fail(kCmd, "give exactly one of --text, --file, --json-lines, --chat or --decode (see llmcc tokenize --help)");

  const std::unique_ptr<TextTokenizer> tok_ptr = load_text_tokenizer(tokenizer_spec);
  const TextTokenizer& tok = *tok_ptr;

  if (p.given("--decode")) {
    std::vector<std::int32_t> ids;
    ids.reserve(decode.size());
    for (const std::string& d : decode) ids.push_back(parse_id(d, tok.vocab_size()));
    const std::string out = tok.decode(ids);
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (::isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
    return 0;
  }

  if (p.given("--chat")) {
    if (ordinary) fail(kCmd, "--ordinary does not apply to --chat: a chat format's markers are special tokens");
    const ChatTemplate tmpl = tok.chat_template();
    const std::size_t lines = encode_lines(chat, [&](std::string_view line, const std::string& where) {
      const std::vector<ChatMessage> messages = parse_conversation(line, where);
      std::string rendered;
      try {
        rendered = tmpl.render(messages, messages.back().role != "assistant");
      } catch (const Error& e) {
        fail(kCmd, where + ": " + e.what());
      }
      return tok.encode(rendered);
    });
    std::fprintf(stderr, "%zu conversations (%s)\n", lines, tmpl.describe().c_str());
    return 0;
  }
  if (p.given("--json-lines")) {
    const std::size_t lines = encode_lines(json_lines, [&](std::string_view line, const std::string& where) {
      const JsonValue v = parse_json(line, where, kCmd);
      if (v.kind != JsonValue::Kind::String) fail(kCmd, where + ": is " + v.kind_name() + ", expected a JSON string");
      return ordinary ? tok.encode_ordinary(v.string) : tok.encode(v.string);
    });
    std::fprintf(stderr, "%zu lines\n", lines);
    return 0;
  }
  if (p.given("--file")) text = read_input(file);
  const std::vector<std::int32_t> ids = ordinary ? tok.encode_ordinary(text) : tok.encode(text);
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i != 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "%zu tokens\n", ids.size());
  return 0;
}

}  // namespace llmcc::cli
