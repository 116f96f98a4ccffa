// How a run's tokenizer travels with it, so no command needs it repeated:
//
//   llmcc prepare  writes DIR/tokenizer.txt next to the shards (key=value: spec, kind, vocab_size,
//                  bos, eos, document_start) and copies of the tokenizer's files: for
//                  SentencePiece DIR/tokenizer.model (spec = sp:tokenizer.model, relative to
//                  DIR), for a tokenizer.json DIR/tokenizer.json with the tokenizer_config.json
//                  and chat_template.jinja its folder has (spec = hf:tokenizer.json).
//   llmcc train    takes --tokenizer SPEC, else the checkpoint it resumes, else the record next to
//                  its shards; checks it fits the model's vocabulary; stores it in every checkpoint
//                  (config keys tokenizer.*; its files as sections file.<name>:
//                  file.tokenizer.model, or file.tokenizer.json and the others) and decodes its
//                  samples with it.
//   llmcc generate takes --tokenizer SPEC, else the checkpoint's, else a tokenizer.model next to a
//                  Hugging Face model, else GPT-2's default files.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmcc/io/checkpoint.h"
#include "llmcc/text/text_tokenizer.h"

namespace llmcc::cli {

inline constexpr const char* kDataTokenizerRecord = "tokenizer.txt";
inline constexpr const char* kDataTokenizerModel = "tokenizer.model";
inline constexpr const char* kCheckpointTokenizerFile = "tokenizer.model";  // section file.tokenizer.model

struct RunTokenizer {
  std::unique_ptr<TextTokenizer> tok;
  std::string source;  // where it came from, for messages: "data/ts/tokenizer.txt", "--tokenizer"
};

// prepare: writes dir/tokenizer.txt and the tokenizer's files (TextTokenizer::files()), replacing
// an earlier run's. Throws llmcc::Error naming the file on an I/O failure.
void write_data_tokenizer(const std::filesystem::path& dir, const TextTokenizer& tok);
// The record in `dir` (nullopt when there is none). Throws llmcc::Error naming the file when it is
// malformed or does not describe the tokenizer it names (e.g. another vocabulary size).
std::optional<RunTokenizer> read_data_tokenizer(const std::filesystem::path& dir);
// The record next to shard files: every directory of `files` that has one must name the same
// tokenizer, else llmcc::Error naming both records.
std::optional<RunTokenizer> data_tokenizer(const std::vector<std::string>& files);

// Whether two tokenizers are the same (the same files' bytes, or the same GPT-2 spec).
bool same_tokenizer(const TextTokenizer& a, const TextTokenizer& b);

// train: the config keys (tokenizer.spec, tokenizer.kind, tokenizer.vocab_size) and the files a
// checkpoint stores for `tok`.
void store_tokenizer(const TextTokenizer& tok, KeyValues& config, std::map<std::string, std::string>& files);
// The tokenizer a checkpoint stored (an llmcc checkpoint), or the tokenizer.model of a Hugging
// Face model directory (or next to its .safetensors); nullopt when there is none (checkpoints
// from before tokenizers were stored, llm.c files).
std::optional<RunTokenizer> checkpoint_tokenizer(const std::string& path);

// Throws llmcc::Error("[where] ...") unless the tokenizer's vocabulary is the model's: ids the
// model predicts must decode, and every id of the text must be one the model reads.
void check_tokenizer_fits(const RunTokenizer& t, int model_vocab_size, const std::string& model, const char* where);

}  // namespace llmcc::cli
