#include "models/llama/llama_hf.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "llama.grad.h"  // the generated parameter list
#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"

namespace llmcc::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "llama_hf";

enum class Layout {
  Same,
  Rotary,  // q or k: each head's rows reordered between interleaved and half-split pairs
};

struct Mapped {
  std::string hf_name;
  Layout layout;
  int n_heads;  // Rotary only
  Tensor* ours;
};

TensorShape dims(const Tensor& t) {
  TensorShape s;
  for (int i = 0; i < t.shape().ndim(); ++i) s.push_back(t.shape()[i]);
  return s;
}

// Every parameter with its Hugging Face name and layout, in parameter list order.
std::vector<Mapped> mapping(Llama& m) {
  std::vector<Mapped> out;
  out.push_back({"model.embed_tokens.weight", Layout::Same, 0, &m.tok_embeddings});
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LlamaBlock& b = m.layers[i];
    out.push_back({p + "input_layernorm.weight", Layout::Same, 0, &b.attention_norm.w});
    out.push_back({p + "self_attn.q_proj.weight", Layout::Rotary, m.cfg.n_head, &b.attention.wq});
    out.push_back({p + "self_attn.k_proj.weight", Layout::Rotary, m.cfg.n_kv_head, &b.attention.wk});
    out.push_back({p + "self_attn.v_proj.weight", Layout::Same, 0, &b.attention.wv});
    out.push_back({p + "self_attn.o_proj.weight", Layout::Same, 0, &b.attention.wo});
    out.push_back({p + "post_attention_layernorm.weight", Layout::Same, 0, &b.ffn_norm.w});
    out.push_back({p + "mlp.gate_proj.weight", Layout::Same, 0, &b.feed_forward.w1});
    out.push_back({p + "mlp.down_proj.weight", Layout::Same, 0, &b.feed_forward.w2});
    out.push_back({p + "mlp.up_proj.weight", Layout::Same, 0, &b.feed_forward.w3});
  }
  out.push_back({"model.norm.weight", Layout::Same, 0, &m.norm.w});
  if (!m.cfg.tie_embeddings) out.push_back({"lm_head.weight", Layout::Same, 0, &m.output[0].w});
  // The table must name every parameter exactly once (a new one in llama.h needs a row here).
  std::size_t count = 0;
  llmcc::for_each_parameter(m, [&](const std::string&, Tensor&) { ++count; });
  LLMCC_ASSERT(count == out.size(), "llama_hf mapping does not cover every Llama parameter");
  return out;
}

// Shortest text that reads back as the same float ("1e-05", "500000").
std::string float_json(float x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15f) return std::to_string(static_cast<long long>(x)) + ".0";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  LLMCC_ASSERT(r.ec == std::errc(), "to_chars failed");
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // a float in Python, as transformers writes
  return s;
}

}  // namespace

namespace {

// HF's rope_scaling object for llama3 scaling, null without scaling.
std::string rope_scaling_json(const RopeScaling& r) {
  if (r.type == RopeScaling::Type::None) return "null";
  return "{\"rope_type\": \"llama3\", \"factor\": " + float_json(r.factor) +
         ", \"low_freq_factor\": " + float_json(r.low_freq_factor) +
         ", \"high_freq_factor\": " + float_json(r.high_freq_factor) +
         ", \"original_max_position_embeddings\": " + std::to_string(r.original_max_position_embeddings) + "}";
}

// The rope scaling object at config.json's `key` (rope_scaling or rope_parameters): its rope_type
// (or the older "type"), and for llama3 its four numbers; a rope_theta inside it sets *theta.
RopeScaling rope_scaling_from_json(const HfConfig& j, const std::string& key, float* theta) {
  const JsonValue& o = *j.json->find(key);
  if (o.kind != JsonValue::Kind::Object)
    j.fail_key(key, "must be an object or null, got " + std::string(o.kind_name()));
  const HfConfig sub = j.member(key);  // typed access to its members; errors name the file
  const char* type_key = sub.has("rope_type") ? "rope_type" : sub.has("type") ? "type" : nullptr;
  if (type_key == nullptr) j.fail_key(key, "has no rope_type (expected 'default' or 'llama3')");
  RopeScaling r;
  auto in_key = [&](const auto& body) {  // errors of the scaling itself, with the file and key
    try {
      body();
    } catch (const Error& e) {
      j.fail_key(key, std::string("is not usable: ") + e.what());
    }
  };
  in_key([&] { r.type = RopeScaling::type_from_name(sub.string(type_key), "rope"); });
  if (sub.has("rope_theta")) *theta = static_cast<float>(sub.number("rope_theta"));
  if (r.type == RopeScaling::Type::Llama3) {
    r.factor = static_cast<float>(sub.number("factor"));
    r.low_freq_factor = static_cast<float>(sub.number("low_freq_factor"));
    r.high_freq_factor = static_cast<float>(sub.number("high_freq_factor"));
    r.original_max_position_embeddings = static_cast<int>(sub.integer("original_max_position_embeddings"));
    in_key([&] { r.validate("rope"); });
  }
  return r;
}

}  // namespace

std::string llama_hf_config_json(const LlamaConfig& c, const char* torch_dtype) {
  auto i = [](int v) { return std::to_string(v); };
  std::string s = "{\n";
  s += "  \"architectures\": [\"LlamaForCausalLM\"],\n";
  s += "  \"model_type\": \"llama\",\n";
  s += "  \"vocab_size\": " + i(c.vocab_size) + ",\n";
  s += "  \"hidden_size\": " + i(c.n_embd) + ",\n";
  s += "  \"intermediate_size\": " + i(c.hidden_dim) + ",\n";
  s += "  \"num_hidden_layers\": " + i(c.n_layer) + ",\n";
  s += "  \"num_attention_heads\": " + i(c.n_head) + ",\n";
  s += "  \"num_key_value_heads\": " + i(c.n_kv_head) + ",\n";
  s += "  \"head_dim\": " + i(c.head_dim()) + ",\n";
  s += "  \"max_position_embeddings\": " + i(c.max_seq_len) + ",\n";
  s += "  \"rms_norm_eps\": " + float_json(c.norm_eps) + ",\n";
  s += "  \"rope_theta\": " + float_json(c.rope_theta) + ",\n";
  s += "  \"rope_scaling\": " + rope_scaling_json(c.rope_scaling) + ",\n";
  s += "  \"hidden_act\": \"silu\",\n";
  s += "  \"attention_bias\": false,\n";
  s += "  \"mlp_bias\": false,\n";
  s += "  \"attention_dropout\": 0.0,\n";
  s += std::string("  \"tie_word_embeddings\": ") + (c.tie_embeddings ? "true" : "false") + ",\n";
  s += "  \"initializer_range\": 0.02,\n";
  s += "  \"pretraining_tp\": 1,\n";
  // SentencePiece models from `llmcc train-tokenizer` (and Llama 2's) use these ids.
  s += "  \"bos_token_id\": 1,\n";
  s += "  \"eos_token_id\": 2,\n";
  s += "  \"torch_dtype\": \"" + std::string(torch_dtype) + "\"\n";
  s += "}\n";
  return s;
}

LlamaConfig llama_config_from_hf(const std::string& path) {
  const HfConfig j = HfConfig::read(path, kWhere);
  if (j.has("model_type") && j.string("model_type") != "llama") {
    j.fail_key("model_type", "is '" + j.string("model_type") + "', expected 'llama'");
  }
  j.check_architecture({"LlamaForCausalLM"});
  j.check_known_keys({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                      "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "hidden_act",
                      "rope_scaling", "rope_parameters", "attention_bias", "mlp_bias", "head_dim",
                      "tie_word_embeddings", "rope_interleaved"});
  // SmolLM2's configs say rope_interleaved: false, transformers' rotate-half RoPE; true would be
  // the other pairing of channels.
  if (j.has("rope_interleaved") && j.boolean("rope_interleaved"))
    j.fail_key("rope_interleaved", "is true; llmcc reads Hugging Face's rotate-half RoPE layout");
  LlamaConfig c;
  c.vocab_size = static_cast<int>(j.integer("vocab_size"));
  c.n_embd = static_cast<int>(j.integer("hidden_size"));
  c.hidden_dim = static_cast<int>(j.integer("intermediate_size"));
  c.n_layer = static_cast<int>(j.integer("num_hidden_layers"));
  c.n_head = static_cast<int>(j.integer("num_attention_heads"));
  c.n_kv_head = j.has("num_key_value_heads") ? static_cast<int>(j.integer("num_key_value_heads")) : c.n_head;
  c.max_seq_len = static_cast<int>(j.integer("max_position_embeddings"));
  if (j.has("rms_norm_eps")) c.norm_eps = static_cast<float>(j.number("rms_norm_eps"));
  if (j.has("rope_theta")) c.rope_theta = static_cast<float>(j.number("rope_theta"));
  // What llmcc's Llama computes; anything else would load and give wrong logits.
  if (j.has("hidden_act") && j.string("hidden_act") != "silu") {
    j.fail_key("hidden_act", "is '" + j.string("hidden_act") + "'; llmcc's Llama uses SwiGLU with silu");
  }
  // Hub files (and transformers 4) write rope_scaling; transformers 5 writes rope_parameters, which
  // also carries rope_theta.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (j.has(key)) c.rope_scaling = rope_scaling_from_json(j, key, &c.rope_theta);
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (j.has(key) && j.boolean(key)) j.fail_key(key, "is true; llmcc's Llama has no biases");
  }
  if (j.has("head_dim") && c.n_head > 0 && j.integer("head_dim") * c.n_head != c.n_embd) {
    j.fail_key("head_dim", "is " + std::to_string(j.integer("head_dim")) +
                               "; llmcc's Llama needs hidden_size / "
                               "num_attention_heads = " +
                               std::to_string(c.n_embd / c.n_head));
  }
  c.tie_embeddings = j.has("tie_word_embeddings") && j.boolean("tie_word_embeddings");
  try {
    c.validate();
  } catch (const Error& e) {
    fail(kWhere, path + ": describes a Llama llmcc cannot build: " + e.what());
  }
  return c;
}

void save_llama_hf(const Llama& model_in, const std::string& dir, const SafetensorsModelOptions& options) {
  Llama& model = const_cast<Llama&>(model_in);  // the mapping holds Tensor*; nothing is written
  const int HS = model.cfg.head_dim();
  std::vector<SafetensorsTensor> tensors;
  for (const Mapped& e : mapping(model)) {
    const Tensor& t = *e.ours;
    if (t.raw() == nullptr) fail(kWhere, "parameter " + e.hf_name + " has no storage (make_llama or load_llama first)");
    const float* src = t.f32();
    if (e.layout == Layout::Same) {
      tensors.push_back(safetensors_tensor(e.hf_name, dims(t), src));
    } else {
      const int heads = e.n_heads;
      const std::int64_t cols = t.shape()[1];
      tensors.push_back({e.hf_name, dims(t), [src, heads, HS, cols](float* out) {
                           hf_permute_rotary(src, heads, HS, cols, /*to_hf=*/true, out);
                         }});
    }
  }
  write_hf_model(dir, tensors, llama_hf_config_json(model.cfg, hf_torch_dtype(options.dtype)), options, kWhere);
}

LlamaWeights load_llama_hf(const std::string& path) {
  const HfFiles files = find_hf_files(path, kWhere);
  const LlamaConfig config = llama_config_from_hf(files.config);
  const SafetensorsReader r(files.weights);
  check_every_layer_present(r, "model.layers.", ".input_layernorm.weight", config.n_layer, files.config, kWhere);
  {
    Llama shapes(config);  // declared shapes, no storage yet
    for (const Mapped& e : mapping(shapes)) check_tensor_shape(r, e.hf_name, dims(*e.ours));
  }
  LlamaWeights w = make_llama(config);
  const int HS = config.head_dim();
  std::vector<float> tmp;
  for (const Mapped& e : mapping(w.model)) {
    Tensor& t = *e.ours;
    const TensorShape shape = dims(t);
    if (e.layout == Layout::Same) {
      r.read_f32(e.hf_name, shape, t.f32());
    } else {
      tmp.resize(static_cast<std::size_t>(t.numel()));
      r.read_f32(e.hf_name, shape, tmp.data());
      hf_permute_rotary(tmp.data(), e.n_heads, HS, shape[1], /*to_hf=*/false, t.f32());
    }
  }
  // A tied model's file may still carry lm_head.weight (a copy of the embedding).
  if (config.tie_embeddings && r.has("lm_head.weight")) r.skip("lm_head.weight");
  // transformers' rotary cache buffers in older files.
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string name = "model.layers." + std::to_string(l) + ".self_attn.rotary_emb.inv_freq";
    if (r.has(name)) r.skip(name);
  }
  check_no_unexpected_tensors(r, kWhere, "Llama");
  return w;
}

LlamaHfStream open_llama_hf(const std::string& path) {
  const HfFiles files = find_hf_files(path, kWhere);
  const LlamaConfig config = llama_config_from_hf(files.config);
  auto r = std::make_shared<const SafetensorsReader>(files.weights);
  check_every_layer_present(*r, "model.layers.", ".input_layernorm.weight", config.n_layer, files.config, kWhere);
  auto shapes = std::make_shared<Llama>(config);  // declared shapes, no storage
  std::unordered_map<const Tensor*, HfTensor> tensors;
  for (const Mapped& e : mapping(*shapes)) {
    check_tensor_shape(*r, e.hf_name, dims(*e.ours));
    r->skip(e.hf_name);  // accounted for: the check below is for tensors nothing will read
    tensors.emplace(e.ours, HfTensor{e.hf_name, e.layout == Layout::Rotary ? e.n_heads : 0});
  }
  if (config.tie_embeddings && r->has("lm_head.weight")) r->skip("lm_head.weight");
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string name = "model.layers." + std::to_string(l) + ".self_attn.rotary_emb.inv_freq";
    if (r->has(name)) r->skip(name);
  }
  check_no_unexpected_tensors(*r, kWhere, "Llama");
  return {shapes, hf_tensor_reader(r, std::move(tensors), config.head_dim(), shapes)};
}

const PeftModuleNames& llama_peft_modules() {
  static const PeftModuleNames names = {{"q", "q_proj"},       {"k", "k_proj"},   {"v", "v_proj"},      {"o", "o_proj"},
                                        {"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}};
  return names;
}

std::vector<PeftSlot> llama_peft_slots(const Llama& base, const LlamaLora& lora) {
  const LlamaConfig& c = base.cfg;
  const int HS = static_cast<int>(c.head_dim());
  std::vector<PeftSlot> slots;
  for (std::size_t l = 0; l < lora.layers.size(); ++l) {
    const LlamaBlockLora& b = lora.layers[l];
    const std::string layer = "model.layers." + std::to_string(l) + ".";
    const auto add = [&](const std::vector<LlamaLoraAdapter>& slot, const char* module, int rotary_heads) {
      for (const LlamaLoraAdapter& a : slot) slots.push_back({layer + module, a.a, a.b, rotary_heads, HS});
    };
    add(b.wq, "self_attn.q_proj", c.n_head);
    add(b.wk, "self_attn.k_proj", c.n_kv_head);
    add(b.wv, "self_attn.v_proj", 0);
    add(b.wo, "self_attn.o_proj", 0);
    add(b.w1, "mlp.gate_proj", 0);
    add(b.w3, "mlp.up_proj", 0);
    add(b.w2, "mlp.down_proj", 0);
  }
  return slots;
}

}  // namespace llmcc::models
