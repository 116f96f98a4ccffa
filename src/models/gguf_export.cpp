#include "models/gguf_export.h"

#include <algorithm>

#include "llmcc/error.h"

namespace llmcc::models {
namespace {

constexpr const char* kWhere = "llmcc export";

struct QuantName {
  GgufQuant quant;
  const char* name;
  std::uint32_t file_type;  // general.file_type: llama.cpp's llama_ftype
};
constexpr QuantName kQuants[] = {
    {GgufQuant::F32, "f32", 0},   {GgufQuant::F16, "f16", 1},   {GgufQuant::BF16, "bf16", 32},
    {GgufQuant::Q8_0, "q8_0", 7}, {GgufQuant::Q4_0, "q4_0", 2}, {GgufQuant::Q4_K_M, "q4_k_m", 15},
};

const QuantName& quant_entry(GgufQuant q) {
  for (const QuantName& e : kQuants)
    if (e.quant == q) return e;
  return kQuants[0];
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The block index of "blk.<i>.<...>", or -1.
int block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

// llama.cpp's use_more_bits: the first and last eighth of the blocks, and every third between.
bool more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A type whose blocks do not fit the row: the fallback llama.cpp's quantizer takes.
GgmlType fitting(GgmlType t, std::int64_t row) {
  if (row % ggml_block_size(t) == 0) return t;
  switch (t) {
    case GgmlType::Q4_K:
      return fitting(GgmlType::Q5_0, row);
    case GgmlType::Q6_K:
      return fitting(GgmlType::Q8_0, row);
    default:
      return GgmlType::F16;  // 32-value blocks that do not fit: rows of odd lengths
  }
}

// GGUF's token types (llama.cpp's llama_token_type).
std::int32_t token_type(Vocabulary::Kind k) {
  switch (k) {
    case Vocabulary::Kind::Normal:
      return 1;
    case Vocabulary::Kind::Unknown:
      return 2;
    case Vocabulary::Kind::Control:
      return 3;
    case Vocabulary::Kind::UserDefined:
      return 4;
    case Vocabulary::Kind::Unused:
      return 5;
    case Vocabulary::Kind::Byte:
      return 6;
  }
  return 1;
}

// The pre-tokenizers llama.cpp knows, by the regex a tokenizer.json splits with (llama.cpp's
// llama-vocab.cpp names each and carries its own spelling of the regex).
struct PreTokenizer {
  const char* pattern;
  const char* name;
};
constexpr PreTokenizer kPreTokenizers[] = {
    {kGpt2SplitPattern, "gpt-2"},
    // Llama 3's: digits in runs of up to three.
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama-bpe"},
    // Qwen2's and Qwen3's: single digits.
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2"},
};

std::string pre_tokenizer_name(const Vocabulary& v, const TextTokenizer& tok) {
  for (const PreTokenizer& p : kPreTokenizers)
    if (v.split_pattern == p.pattern) return p.name;
  fail(kWhere, "the tokenizer (" + tok.describe() + ") splits text with the regex " + v.split_pattern +
                   ", which none of llama.cpp's pre-tokenizers that llmcc knows (GPT-2's, Llama 3's, Qwen2's) uses");
}

void add_tokenizer(GgufMetadata& md, const TextTokenizer& tok, int vocab_rows) {
  Vocabulary v = tok.vocabulary();
  const std::string pre = v.model == "gpt2" ? pre_tokenizer_name(v, tok) : std::string();
  const int n = static_cast<int>(v.tokens.size());
  if (n > vocab_rows)
    fail(kWhere, "the tokenizer (" + tok.describe() + ") has " + std::to_string(n) + " tokens but the model reads " +
                     std::to_string(vocab_rows) +
                     "; export with the tokenizer the model was trained with (--tokenizer)");
  // Rows the tokenizer never produces (a vocabulary padded for speed, ids a tokenizer.json
  // leaves unused) get unused placeholder tokens, as llama.cpp's converter writes them: its loader
  // wants one token per row.
  for (int id = 0; id < n; ++id)
    if (v.tokens[static_cast<std::size_t>(id)].empty())
      v.tokens[static_cast<std::size_t>(id)] = "[PAD" + std::to_string(id) + "]";
  for (int id = n; id < vocab_rows; ++id) {
    v.tokens.push_back("[PAD" + std::to_string(id) + "]");
    if (!v.scores.empty()) v.scores.push_back(-1000.0f);
    v.kinds.push_back(Vocabulary::Kind::Unused);
  }
  md.set("tokenizer.ggml.model", v.model);
  if (!pre.empty()) md.set("tokenizer.ggml.pre", pre);
  md.set("tokenizer.ggml.tokens", std::move(v.tokens));
  if (!v.scores.empty()) md.set("tokenizer.ggml.scores", std::move(v.scores));
  std::vector<std::int32_t> types;
  types.reserve(v.kinds.size());
  for (Vocabulary::Kind k : v.kinds) types.push_back(token_type(k));
  md.set("tokenizer.ggml.token_type", std::move(types));
  if (!v.merges.empty()) md.set("tokenizer.ggml.merges", std::move(v.merges));
  if (v.bos >= 0) md.set("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(v.bos));
  if (v.eos >= 0) md.set("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(v.eos));
  if (v.unk >= 0) md.set("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(v.unk));
  if (v.pad >= 0) md.set("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(v.pad));
  md.set("tokenizer.ggml.add_bos_token", v.add_bos);
  md.set("tokenizer.ggml.add_eos_token", false);
  if (!v.chat_template.empty()) md.set("tokenizer.chat_template", v.chat_template);
}

}  // namespace

GgufModelParts gguf_model_parts(std::string arch, const GgufShape& s) {
  GgufModelParts p;
  p.arch = std::move(arch);
  p.n_layer = s.block_count;
  p.vocab_rows = s.vocab_rows;
  p.set("context_length", static_cast<std::uint32_t>(s.context_length));
  p.set("embedding_length", static_cast<std::uint32_t>(s.embedding_length));
  p.set("block_count", static_cast<std::uint32_t>(s.block_count));
  p.set("feed_forward_length", static_cast<std::uint32_t>(s.feed_forward_length));
  p.set("attention.head_count", static_cast<std::uint32_t>(s.head_count));
  return p;
}

TensorReader read_loaded() {
  return [](const Tensor& t, float* out) { std::copy(t.f32(), t.f32() + t.numel(), out); };
}

GgufTensor gguf_tensor(std::string name, const Tensor& t, const TensorReader& read, std::int64_t rows) {
  std::vector<std::int64_t> ne;
  for (int d = t.shape().ndim() - 1; d >= 0; --d) ne.push_back(t.shape()[d]);
  const Tensor* declared = &t;
  if (rows < 0 || rows == ne.back())
    return {std::move(name), std::move(ne), GgmlType::F32, [declared, read](float* out) { read(*declared, out); }};
  // The first rows only: the whole tensor read aside, its first rows kept.
  ne.back() = rows;
  const std::int64_t kept = rows * t.shape()[t.shape().ndim() - 1];
  return {std::move(name), std::move(ne), GgmlType::F32, [declared, read, kept](float* out) {
            std::vector<float> all(static_cast<std::size_t>(declared->numel()));
            read(*declared, all.data());
            std::copy(all.begin(), all.begin() + kept, out);
          }};
}

bool parse_gguf_quant(std::string_view name, GgufQuant* out) {
  for (const QuantName& e : kQuants)
    if (name == e.name) {
      *out = e.quant;
      return true;
    }
  return false;
}

const char* gguf_quant_name(GgufQuant q) { return quant_entry(q).name; }

std::string gguf_quant_names() {
  std::string s;
  for (const QuantName& e : kQuants) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

GgmlType gguf_tensor_type(GgufQuant quant, const std::string& name, const std::vector<std::int64_t>& ne, int n_layer,
                          bool has_output) {
  // Norms, biases and rope factors, and the learned positions, which llama.cpp never quantizes.
  if (ne.size() < 2 || name == "position_embd.weight") return GgmlType::F32;
  const std::int64_t row = ne[0];
  // The LM head: its own matrix, or the embedding when the head is tied to it.
  const bool head = name == "output.weight" || (!has_output && name == "token_embd.weight");
  GgmlType t = GgmlType::F32;
  switch (quant) {
    case GgufQuant::F32:
      return GgmlType::F32;
    case GgufQuant::F16:
      t = GgmlType::F16;
      break;
    case GgufQuant::BF16:
      t = GgmlType::BF16;
      break;
    case GgufQuant::Q8_0:
      t = GgmlType::Q8_0;
      break;
    case GgufQuant::Q4_0:
      t = head ? GgmlType::Q6_K : GgmlType::Q4_0;
      break;
    case GgufQuant::Q4_K_M: {
      const int layer = block_of(name);
      if (head)
        t = GgmlType::Q6_K;
      else if ((ends_with(name, ".attn_v.weight") || ends_with(name, ".attn_qkv.weight") ||
                ends_with(name, ".ffn_down.weight")) &&
               layer >= 0 && more_bits(layer, n_layer))
        t = GgmlType::Q6_K;
      else
        t = GgmlType::Q4_K;
      break;
    }
  }
  return fitting(t, row);
}

void write_model_gguf(GgufModelParts parts, const GgufExportOptions& options, const std::string& path) {
  if (options.tokenizer == nullptr) fail(kWhere, "a GGUF file needs the model's tokenizer");
  GgufMetadata md;
  md.set("general.architecture", parts.arch);
  md.set("general.name", options.name.empty() ? parts.arch : options.name);
  md.set("general.file_type", quant_entry(options.quant).file_type);
  md.set("general.quantization_version", std::uint32_t{2});
  for (auto& [key, value] : parts.metadata.entries) md.set(key, std::move(value));
  add_tokenizer(md, *options.tokenizer, parts.vocab_rows);
  const bool has_output = std::any_of(parts.tensors.begin(), parts.tensors.end(),
                                      [](const GgufTensor& t) { return t.name == "output.weight"; });
  for (GgufTensor& t : parts.tensors) t.type = gguf_tensor_type(options.quant, t.name, t.ne, parts.n_layer, has_output);
  write_gguf(path, md, parts.tensors);
}

}  // namespace llmcc::models
