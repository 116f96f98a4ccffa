#include "models/qwen3/qwen3_hf.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"
#include "qwen3.grad.h"  // the generated parameter list

namespace llmcc::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "qwen3_hf";

TensorShape dims(const Tensor& t) {
  TensorShape s;
  for (int i = 0; i < t.shape().ndim(); ++i) s.push_back(t.shape()[i]);
  return s;
}

// Heads of D rows each whose rows pair for RoPE (q_proj, k_proj: n_head or n_kv_head; the q and k
// norm gains: one head of D values); 0 for a tensor whose layout is the same in both.
int rotary_heads(const std::string& name, const Qwen3Config& c) {
  const auto ends_with = [&](const char* tail) {
    const std::string t(tail);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (ends_with("self_attn.q_proj.weight")) return c.n_head;
  if (ends_with("self_attn.k_proj.weight")) return c.n_kv_head;
  if (ends_with("self_attn.q_norm.weight") || ends_with("self_attn.k_norm.weight")) return 1;
  return 0;
}

// transformers' name of an llmcc parameter.
std::string hf_name(const std::string& ours) { return ours == "lm_head.0.weight" ? "lm_head.weight" : ours; }

// Shortest text that reads back as the same float ("1e-06", "1000000.0").
std::string float_json(float x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15f) return std::to_string(static_cast<long long>(x)) + ".0";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  LLMCC_ASSERT(r.ec == std::errc(), "to_chars failed");
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string qwen3_hf_config_json(const Qwen3Config& c, const char* torch_dtype) {
  std::string s = "{\n";
  s += "  \"architectures\": [\"Qwen3ForCausalLM\"],\n";
  s += "  \"model_type\": \"qwen3\",\n";
  s += "  \"vocab_size\": " + std::to_string(c.vocab_size) + ",\n";
  s += "  \"hidden_size\": " + std::to_string(c.n_embd) + ",\n";
  s += "  \"intermediate_size\": " + std::to_string(c.hidden_dim) + ",\n";
  s += "  \"num_hidden_layers\": " + std::to_string(c.n_layer) + ",\n";
  s += "  \"num_attention_heads\": " + std::to_string(c.n_head) + ",\n";
  s += "  \"num_key_value_heads\": " + std::to_string(c.n_kv_head) + ",\n";
  s += "  \"head_dim\": " + std::to_string(c.head_dim) + ",\n";
  s += "  \"max_position_embeddings\": " + std::to_string(c.max_seq_len) + ",\n";
  s += "  \"rms_norm_eps\": " + float_json(c.norm_eps) + ",\n";
  s += "  \"rope_theta\": " + float_json(c.rope_theta) + ",\n";
  s += "  \"rope_scaling\": null,\n";
  s += "  \"hidden_act\": \"silu\",\n";
  s += "  \"attention_bias\": false,\n";
  s += "  \"attention_dropout\": 0.0,\n";
  s += "  \"use_sliding_window\": false,\n";
  s += std::string("  \"tie_word_embeddings\": ") + (c.tie_embeddings ? "true" : "false") + ",\n";
  s += "  \"initializer_range\": 0.02,\n";
  s += "  \"torch_dtype\": \"" + std::string(torch_dtype) + "\"\n";
  s += "}\n";
  return s;
}

Qwen3Config qwen3_config_from_hf(const std::string& path) {
  const HfConfig j = HfConfig::read(path, kWhere);
  if (j.has("model_type") && j.string("model_type") != "qwen3")
    j.fail_key("model_type", "is '" + j.string("model_type") + "', expected 'qwen3'");
  j.check_architecture({"Qwen3ForCausalLM"});
  j.check_known_keys({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                      "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                      "rope_scaling", "rope_parameters", "hidden_act", "attention_bias", "use_sliding_window",
                      "sliding_window", "max_window_layers", "layer_types", "tie_word_embeddings"});
  // sliding_window and max_window_layers only act with use_sliding_window (checked below);
  // transformers 5 lists each layer's kind.
  if (const JsonValue* types = j.json->find("layer_types"); types != nullptr && types->kind != JsonValue::Kind::Null) {
    if (types->kind != JsonValue::Kind::Array) j.fail_key("layer_types", "must be a list");
    for (const JsonValue& t : types->array)
      if (t.kind != JsonValue::Kind::String || t.string != "full_attention")
        j.fail_key("layer_types",
                   "names a layer that is not full_attention; llmcc's Qwen3 attends to the whole "
                   "context in every layer");
  }
  Qwen3Config c;
  c.vocab_size = static_cast<int>(j.integer("vocab_size"));
  c.n_embd = static_cast<int>(j.integer("hidden_size"));
  c.hidden_dim = static_cast<int>(j.integer("intermediate_size"));
  c.n_layer = static_cast<int>(j.integer("num_hidden_layers"));
  c.n_head = static_cast<int>(j.integer("num_attention_heads"));
  c.n_kv_head = j.has("num_key_value_heads") ? static_cast<int>(j.integer("num_key_value_heads")) : c.n_head;
  // transformers' default head_dim is hidden_size / num_attention_heads.
  c.head_dim = j.has("head_dim") ? static_cast<int>(j.integer("head_dim")) : (c.n_head > 0 ? c.n_embd / c.n_head : 0);
  c.max_seq_len = static_cast<int>(j.integer("max_position_embeddings"));
  if (j.has("rms_norm_eps")) c.norm_eps = static_cast<float>(j.number("rms_norm_eps"));
  if (j.has("rope_theta")) c.rope_theta = static_cast<float>(j.number("rope_theta"));
  // transformers 5 writes rope_parameters {"rope_type": "default", "rope_theta": ...}.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!j.has(key)) continue;
    const JsonValue* r = j.json->find(key);
    if (r == nullptr || r->kind != JsonValue::Kind::Object) j.fail_key(key, "must be an object or null");
    if (const JsonValue* t = r->find("rope_type");
        t != nullptr && t->kind == JsonValue::Kind::String && t->string != "default")
      j.fail_key(key, "has rope_type '" + t->string + "'; llmcc's Qwen3 computes the default RoPE only");
    if (const JsonValue* t = r->find("type");
        t != nullptr && t->kind == JsonValue::Kind::String && t->string != "default")
      j.fail_key(key, "has type '" + t->string + "'; llmcc's Qwen3 computes the default RoPE only");
    if (const JsonValue* theta = r->find("rope_theta"); theta != nullptr && theta->kind == JsonValue::Kind::Number)
      c.rope_theta = static_cast<float>(theta->number);
  }
  if (j.has("hidden_act") && j.string("hidden_act") != "silu")
    j.fail_key("hidden_act", "is '" + j.string("hidden_act") + "'; llmcc's Qwen3 uses SwiGLU with silu");
  if (j.has("attention_bias") && j.boolean("attention_bias"))
    j.fail_key("attention_bias", "is true; llmcc's Qwen3 has no biases");
  if (j.has("use_sliding_window") && j.boolean("use_sliding_window"))
    j.fail_key("use_sliding_window", "is true; llmcc's Qwen3 attends to the whole context");
  c.tie_embeddings = j.has("tie_word_embeddings") && j.boolean("tie_word_embeddings");
  try {
    c.validate();
  } catch (const Error& e) {
    fail(kWhere, path + ": describes a Qwen3 llmcc cannot build: " + e.what());
  }
  return c;
}

void save_qwen3_hf(const Qwen3& model_in, const std::string& dir, const SafetensorsModelOptions& options) {
  Qwen3& model = const_cast<Qwen3&>(model_in);  // for_each_parameter hands Tensor&; nothing is written
  const int D = model.cfg.head_dim;
  std::vector<SafetensorsTensor> tensors;
  llmcc::for_each_parameter(model, [&](const std::string& name, Tensor& t) {
    if (t.raw() == nullptr) fail(kWhere, "parameter " + name + " has no storage (make_qwen3 or load_qwen3 first)");
    const float* src = t.f32();
    const int heads = rotary_heads(name, model.cfg);
    if (heads == 0) {
      tensors.push_back(safetensors_tensor(hf_name(name), dims(t), src));
    } else {
      const std::int64_t cols = t.shape().ndim() == 2 ? t.shape()[1] : 1;
      tensors.push_back({hf_name(name), dims(t), [src, heads, D, cols](float* out) {
                           hf_permute_rotary(src, heads, D, cols, /*to_hf=*/true, out);
                         }});
    }
  });
  write_hf_model(dir, tensors, qwen3_hf_config_json(model.cfg, hf_torch_dtype(options.dtype)), options, kWhere);
}

Qwen3Weights load_qwen3_hf(const std::string& path) {
  const HfFiles files = find_hf_files(path, kWhere);
  const Qwen3Config config = qwen3_config_from_hf(files.config);
  const SafetensorsReader r(files.weights);
  check_every_layer_present(r, "model.layers.", ".input_layernorm.weight", config.n_layer, files.config, kWhere);
  {
    Qwen3 shapes(config);  // declared shapes, no storage yet
    llmcc::for_each_parameter(
        shapes, [&](const std::string& name, Tensor& t) { check_tensor_shape(r, hf_name(name), dims(t)); });
  }
  Qwen3Weights w = make_qwen3(config);
  const int D = config.head_dim;
  std::vector<float> tmp;
  llmcc::for_each_parameter(w.model, [&](const std::string& name, Tensor& t) {
    const TensorShape shape = dims(t);
    const int heads = rotary_heads(name, config);
    if (heads == 0) {
      r.read_f32(hf_name(name), shape, t.f32());
      return;
    }
    tmp.resize(static_cast<std::size_t>(t.numel()));
    r.read_f32(hf_name(name), shape, tmp.data());
    hf_permute_rotary(tmp.data(), heads, D, shape.size() == 2 ? shape[1] : 1, /*to_hf=*/false, t.f32());
  });
  // A tied model's file may still carry lm_head.weight (a copy of the embedding).
  if (config.tie_embeddings && r.has("lm_head.weight")) r.skip("lm_head.weight");
  check_no_unexpected_tensors(r, kWhere, "Qwen3");
  return w;
}

Qwen3HfStream open_qwen3_hf(const std::string& path) {
  const HfFiles files = find_hf_files(path, kWhere);
  const Qwen3Config config = qwen3_config_from_hf(files.config);
  auto r = std::make_shared<const SafetensorsReader>(files.weights);
  check_every_layer_present(*r, "model.layers.", ".input_layernorm.weight", config.n_layer, files.config, kWhere);
  auto shapes = std::make_shared<Qwen3>(config);  // declared shapes, no storage
  std::unordered_map<const Tensor*, HfTensor> tensors;
  llmcc::for_each_parameter(*shapes, [&](const std::string& name, Tensor& t) {
    check_tensor_shape(*r, hf_name(name), dims(t));
    r->skip(hf_name(name));  // accounted for: the check below is for tensors nothing will read
    tensors.emplace(&t, HfTensor{hf_name(name), rotary_heads(name, config)});
  });
  if (config.tie_embeddings && r->has("lm_head.weight")) r->skip("lm_head.weight");
  check_no_unexpected_tensors(*r, kWhere, "Qwen3");
  return {shapes, hf_tensor_reader(r, std::move(tensors), config.head_dim, shapes)};
}

const PeftModuleNames& qwen3_peft_modules() {
  static const PeftModuleNames names = {{"q", "q_proj"},       {"k", "k_proj"},   {"v", "v_proj"},      {"o", "o_proj"},
                                        {"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}};
  return names;
}

std::vector<PeftSlot> qwen3_peft_slots(const Qwen3& base, const Qwen3Lora& lora) {
  const Qwen3Config& c = base.cfg;
  std::vector<PeftSlot> slots;
  for (std::size_t l = 0; l < lora.layers.size(); ++l) {
    const Qwen3BlockLora& b = lora.layers[l];
    const std::string layer = "model.layers." + std::to_string(l) + ".";
    const auto add = [&](const std::vector<Qwen3LoraAdapter>& slot, const char* module, int rotary_heads) {
      for (const Qwen3LoraAdapter& a : slot) slots.push_back({layer + module, a.a, a.b, rotary_heads, c.head_dim});
    };
    add(b.q_proj, "self_attn.q_proj", c.n_head);
    add(b.k_proj, "self_attn.k_proj", c.n_kv_head);
    add(b.v_proj, "self_attn.v_proj", 0);
    add(b.o_proj, "self_attn.o_proj", 0);
    add(b.gate_proj, "mlp.gate_proj", 0);
    add(b.up_proj, "mlp.up_proj", 0);
    add(b.down_proj, "mlp.down_proj", 0);
  }
  return slots;
}

}  // namespace llmcc::models
