#include "models/hf_files.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "llmcc/error.h"
#include "io/file_io.h"
#include "io/json_reader.h"

namespace llmcc::models {

namespace fs = std::filesystem;

bool is_hf_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return fs::exists(fs::path(path) / kHfWeightsFile, ec) || fs::exists(fs::path(path) / kHfIndexFile, ec);
  if (is_safetensors_index(path)) return fs::is_regular_file(path, ec);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char head[9] = {};
  const std::size_t got = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  if (got != sizeof head) return false;
  std::uint64_t n = 0;
  std::memcpy(&n, head, 8);
  const auto size = fs::file_size(path, ec);
  return !ec && n >= 2 && n <= size - 8 && head[8] == '{';
}

HfFiles find_hf_files(const std::string& path, const std::string& where) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(where, path + ": no such file or directory");
  HfFiles out;
  fs::path dir;
  if (fs::is_directory(path, ec)) {
    dir = path;
    out.weights = (dir / kHfWeightsFile).string();
    if (!fs::exists(out.weights, ec)) out.weights = (dir / kHfIndexFile).string();
    if (!fs::exists(out.weights, ec)) {
      fail(where, path + ": no " + kHfWeightsFile + " or " + kHfIndexFile +
                      " in this directory (expected a Hugging Face model directory, e.g. one written by "
                      "`llmcc export --format safetensors` or save_pretrained)");
    }
  } else {
    out.weights = path;
    dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
  }
  out.config = (dir / kHfConfigFile).string();
  if (!fs::exists(out.config, ec)) {
    fail(where, out.weights + ": no " + kHfConfigFile + " beside it (" + out.config +
                    "); the model's shape (heads, epsilon, ...) comes from there");
  }
  return out;
}

HfConfig HfConfig::read(const std::string& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(where, path + ": cannot open for reading");
  std::ostringstream s;
  s << in.rdbuf();
  HfConfig c{path, where, std::make_shared<const JsonValue>(parse_json(s.str(), path, where))};
  c.json = c.file.get();
  if (c.json->kind != JsonValue::Kind::Object) {
    fail(where,
         path + ": is " + std::string(c.json->kind_name()) + ", expected a JSON object (a Hugging Face config.json)");
  }
  return c;
}

HfConfig HfConfig::member(const std::string& key) const {
  const JsonValue* o = json->find(key);
  if (o == nullptr || o->kind != JsonValue::Kind::Object)
    fail_key(key, "must be an object, got " + std::string(o == nullptr ? "nothing" : o->kind_name()));
  return HfConfig{path, where, file, o};
}

bool HfConfig::has(const std::string& key) const {
  const JsonValue* v = json->find(key);
  return v != nullptr && v->kind != JsonValue::Kind::Null;
}

void HfConfig::fail_key(const std::string& key, const std::string& what) const {
  fail(where, path + ": " + key + " " + what);
}

namespace {

// Keys of config.json that do not change what a causal LM computes from its weights, whatever
// their value: provenance, storage dtype, token ids and sampling defaults (for generation),
// initialisation, dropout (llmcc trains without it), caching, outputs, chunking, heads of other
// tasks, and transformers' own flags. (is_encoder_decoder and add_cross_attention are read:
// true is another model.)
constexpr std::string_view kHfIgnoredKeys[] = {"_name_or_path",
                                               "architectures",
                                               "transformers_version",
                                               "torch_dtype",
                                               "dtype",
                                               "model_type",
                                               "bos_token_id",
                                               "eos_token_id",
                                               "pad_token_id",
                                               "sep_token_id",
                                               "decoder_start_token_id",
                                               "initializer_range",
                                               "use_cache",
                                               "output_attentions",
                                               "output_hidden_states",
                                               "return_dict",
                                               "attention_dropout",
                                               "attn_pdrop",
                                               "embd_pdrop",
                                               "resid_pdrop",
                                               "summary_activation",
                                               "summary_first_dropout",
                                               "summary_proj_to_labels",
                                               "summary_type",
                                               "summary_use_proj",
                                               "task_specific_params",
                                               "id2label",
                                               "label2id",
                                               "problem_type",
                                               "pretraining_tp",
                                               "is_llama_config",
                                               "tokenizer_class",
                                               "reorder_and_upcast_attn",
                                               "chunk_size_feed_forward",
                                               "is_encoder_decoder",
                                               "add_cross_attention",
                                               "is_decoder",
                                               "cross_attention_hidden_size",
                                               "tie_encoder_decoder",
                                               "prune_heads",
                                               "torchscript",
                                               "use_bfloat16",
                                               "tf_legacy_loss",
                                               "finetuning_task",
                                               "prefix",
                                               "max_length",
                                               "min_length",
                                               "do_sample",
                                               "early_stopping",
                                               "num_beams",
                                               "num_beam_groups",
                                               "diversity_penalty",
                                               "temperature",
                                               "top_k",
                                               "top_p",
                                               "typical_p",
                                               "repetition_penalty",
                                               "length_penalty",
                                               "no_repeat_ngram_size",
                                               "encoder_no_repeat_ngram_size",
                                               "bad_words_ids",
                                               "num_return_sequences",
                                               "output_scores",
                                               "return_dict_in_generate",
                                               "forced_bos_token_id",
                                               "forced_eos_token_id",
                                               "remove_invalid_values",
                                               "exponential_decay_length_penalty",
                                               "suppress_tokens",
                                               "begin_suppress_tokens"};

}  // namespace

void HfConfig::check_known_keys(std::initializer_list<std::string_view> known) const {
  if (has("quantization_config"))
    fail_key("quantization_config", "is present: quantized checkpoints are not read (llmcc reads F32, BF16 and F16)");
  for (const char* key : {"is_encoder_decoder", "add_cross_attention"})
    if (has(key) && boolean(key)) fail_key(key, "is true; llmcc reads decoder-only causal language models");
  for (const auto& [key, value] : json->object) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (std::find(std::begin(kHfIgnoredKeys), std::end(kHfIgnoredKeys), key) != std::end(kHfIgnoredKeys)) continue;
    std::string keys;
    for (const std::string_view k : known) keys += (keys.empty() ? "" : ", ") + std::string(k);
    fail_key(key,
             "is a key llmcc does not know for this model; it might change what the model computes, so the "
             "folder is refused (keys read: " +
                 keys + ")");
  }
}

void HfConfig::check_architecture(std::initializer_list<std::string_view> accepted) const {
  const JsonValue* a = json->find("architectures");
  if (a == nullptr || a->kind == JsonValue::Kind::Null) return;
  if (a->kind != JsonValue::Kind::Array) fail_key("architectures", "must be a list of class names");
  std::string names, expected;
  for (const JsonValue& v : a->array) {
    if (v.kind != JsonValue::Kind::String) fail_key("architectures", "must be a list of class names");
    if (std::find(accepted.begin(), accepted.end(), v.string) != accepted.end()) return;
    names += (names.empty() ? "" : ", ") + v.string;
  }
  for (const std::string_view e : accepted) expected += (expected.empty() ? "" : " or ") + std::string(e);
  fail_key("architectures", "is [" + names + "]; llmcc reads " + expected + " weights here");
}

std::int64_t HfConfig::integer(const std::string& key) const {
  const JsonValue* v = json->find(key);
  if (v == nullptr || v->kind == JsonValue::Kind::Null) fail_key(key, "is missing (a positive integer is required)");
  if (!v->is_integer || v->integer <= 0 || v->integer > (std::int64_t{1} << 30)) {
    fail_key(key, "must be a positive integer, got " + std::string(v->kind_name()) +
                      (v->kind == JsonValue::Kind::Number ? " " + json_number(v->number) : ""));
  }
  return v->integer;
}

double HfConfig::number(const std::string& key) const {
  const JsonValue* v = json->find(key);
  if (v == nullptr || v->kind != JsonValue::Kind::Number) {
    fail_key(key, v == nullptr ? "is missing (a number is required)"
                               : "must be a number, got " + std::string(v->kind_name()));
  }
  return v->number;
}

std::string HfConfig::string(const std::string& key) const {
  const JsonValue* v = json->find(key);
  if (v == nullptr || v->kind != JsonValue::Kind::String) {
    fail_key(key, v == nullptr ? "is missing (a string is required)"
                               : "must be a string, got " + std::string(v->kind_name()));
  }
  return v->string;
}

bool HfConfig::boolean(const std::string& key) const {
  const JsonValue* v = json->find(key);
  if (v == nullptr || v->kind != JsonValue::Kind::Bool) {
    fail_key(key, v == nullptr ? "is missing (true or false is required)"
                               : "must be true or false, got " + std::string(v->kind_name()));
  }
  return v->boolean;
}

std::string hf_model_type(const std::string& path) {
  try {
    std::error_code ec;
    const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    const fs::path config = (dir.empty() ? fs::path(".") : dir) / kHfConfigFile;
    if (!fs::exists(config, ec)) return "";
    const HfConfig c = HfConfig::read(config.string(), "hf");
    const JsonValue* t = c.json->find("model_type");
    return t != nullptr && t->kind == JsonValue::Kind::String ? t->string : "";
  } catch (const Error&) {
    return "";
  }
}

const char* hf_torch_dtype(SafetensorsDType d) {
  switch (d) {
    case SafetensorsDType::F32:
      return "float32";
    case SafetensorsDType::BF16:
      return "bfloat16";
    case SafetensorsDType::F16:
      return "float16";
  }
  return "float32";
}

void write_hf_model(const std::string& dir, const std::vector<SafetensorsTensor>& tensors,
                    const std::string& config_json, const SafetensorsModelOptions& options, const std::string& where) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    fail(where, "cannot create output directory " + dir + (ec ? ": " + ec.message() : ""));
  write_safetensors_model(dir, tensors, {{"format", "pt"}}, options);
  write_text_file((fs::path(dir) / kHfConfigFile).string(), config_json, where);
}

void write_text_file(const std::string& path, const std::string& text, const std::string& where) {
  detail::AtomicFile out(path, where);
  out.write(text.data(), text.size());
  out.commit();
}

void transpose(const float* src, std::int64_t rows, std::int64_t cols, float* dst) {
  constexpr std::int64_t kTile = 32;  // keeps both sides' cache lines in use
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (std::int64_t r = r0; r < r1; ++r) {
        for (std::int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

void check_no_unexpected_tensors(const SafetensorsReader& r, const std::string& where, const std::string& model) {
  const std::vector<std::string> extra = r.unread();
  if (extra.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < extra.size() && i < 5; ++i) list += (i ? ", '" : "'") + extra[i] + "'";
  if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size()) + " in all)";
  fail(where, r.path() + ": unexpected tensor" + (extra.size() > 1 ? "s " : " ") + list + ", not part of a " + model +
                  " model of this config; is config.json the one written with these weights?");
}

void check_tensor_shape(const SafetensorsReader& r, const std::string& name, const TensorShape& shape) {
  const SafetensorsEntry* e = r.find(name);
  if (e != nullptr && e->shape == shape) return;
  r.read_f32(name, shape, nullptr);  // missing or another shape: throws before writing anything
  LLMCC_ASSERT(false, "check_tensor_shape: read_f32 accepted a missing tensor or another shape");
}

void check_weights_fit(std::int64_t stored, std::int64_t needed, const std::string& where, const std::string& file,
                       const std::string& config, const std::string& model) {
  if (stored >= needed) return;
  fail(where, file + ": holds " + std::to_string(stored) + " weights, too few for the model " + config +
                  " describes (" + model + ", " + std::to_string(needed) + " from the file); is " + config +
                  " the one written with these weights?");
}

void check_every_layer_present(const SafetensorsReader& r, const std::string& prefix, const std::string& suffix,
                               int n_layer, const std::string& config_path, const std::string& where) {
  for (int l = 0; l < n_layer; ++l) {
    const std::string name = prefix + std::to_string(l) + suffix;
    if (r.has(name)) continue;
    fail(where, r.path() + ": no tensor '" + name + "': " + config_path + " says n_layer = " + std::to_string(n_layer) +
                    ", the file holds " + std::to_string(l) + " layer" + (l == 1 ? "" : "s") +
                    "; is config.json the one written with these weights?");
  }
}

void hf_permute_rotary(const float* src, int n_heads, int head_dim, std::int64_t cols, bool to_hf, float* dst) {
  const int half = head_dim / 2;
  const auto row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
  for (int h = 0; h < n_heads; ++h) {
    const std::int64_t base = static_cast<std::int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      for (int j = 0; j < 2; ++j) {
        const std::int64_t ours = base + 2 * i + j, hf = base + j * half + i;
        std::memcpy(dst + (to_hf ? hf : ours) * cols, src + (to_hf ? ours : hf) * cols, row_bytes);
      }
    }
  }
}

std::function<void(const Tensor&, float*)> hf_tensor_reader(std::shared_ptr<const SafetensorsReader> r,
                                                            std::unordered_map<const Tensor*, HfTensor> tensors,
                                                            int head_dim, std::shared_ptr<const void> declared) {
  auto by_tensor = std::make_shared<const std::unordered_map<const Tensor*, HfTensor>>(std::move(tensors));
  return [r = std::move(r), by_tensor, head_dim, declared = std::move(declared)](const Tensor& t, float* out) {
    const HfTensor& e = by_tensor->at(&t);
    TensorShape shape;
    for (int d = 0; d < t.shape().ndim(); ++d) shape.push_back(t.shape()[d]);
    if (e.rotary_heads == 0) {
      r->read_f32(e.name, shape, out);
      return;
    }
    std::vector<float> hf(static_cast<std::size_t>(t.numel()));
    r->read_f32(e.name, shape, hf.data());
    hf_permute_rotary(hf.data(), e.rotary_heads, head_dim, shape.size() == 2 ? shape[1] : 1, /*to_hf=*/false, out);
  };
}

}  // namespace llmcc::models
