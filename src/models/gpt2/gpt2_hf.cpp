#include "models/gpt2/gpt2_hf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "gpt2.grad.h"  // the generated parameter list
#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"

namespace llmcc::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "gpt2_hf";

// How one of our parameters is stored in the Hugging Face file.
enum class Layout {
  Same,       // identical shape and order
  Transpose,  // ours (out, in) <-> Conv1D (in, out)
  VocabRows,  // ours (Vp, C) <-> HF (V, C): the first V rows
};

struct Mapped {
  std::string hf_name;
  TensorShape hf_shape;
  Layout layout;
  Tensor* ours;
};

TensorShape dims(const Tensor& t) {
  TensorShape s;
  for (int i = 0; i < t.shape().ndim(); ++i) s.push_back(t.shape()[i]);
  return s;
}

// Every parameter with its HF name (after `prefix`) and layout, in parameter list order.
std::vector<Mapped> mapping(Gpt2& m, const std::string& prefix) {
  std::vector<Mapped> out;
  const std::int64_t V = m.cfg.vocab_size, C = m.cfg.n_embd;
  llmcc::for_each_parameter(m, [&](const std::string& name, Tensor& t) {
    Mapped e{prefix + name, dims(t), Layout::Same, &t};
    if (name == "wte") {
      e.hf_name = prefix + "wte.weight";
      e.hf_shape = {V, C};
      e.layout = Layout::VocabRows;
    } else if (name == "wpe") {
      e.hf_name = prefix + "wpe.weight";
    } else if (t.shape().ndim() == 2) {  // every linear weight is a Conv1D in GPT2LMHeadModel
      // Our names are HF's (after "transformer."); a parameter renamed in gpt2.h must fail here,
      // not export under a name transformers does not know.
      const std::string leaf = name.substr(name.find('.', name.find('.') + 1) + 1);  // after "h.N."
      LLMCC_ASSERT(leaf == "attn.c_attn.weight" || leaf == "attn.c_proj.weight" || leaf == "mlp.c_fc.weight" ||
                       leaf == "mlp.c_proj.weight",
                   "gpt2_hf: a GPT-2 weight matrix without a Hugging Face Conv1D name; update the mapping");
      e.hf_shape = {t.shape()[1], t.shape()[0]};
      e.layout = Layout::Transpose;
    }
    out.push_back(std::move(e));
  });
  return out;
}

}  // namespace

std::string gpt2_hf_config_json(const Gpt2Config& c, const char* torch_dtype) {
  const std::string n = std::to_string(c.max_seq_len);
  std::string s = "{\n";
  s += "  \"architectures\": [\"GPT2LMHeadModel\"],\n";
  s += "  \"model_type\": \"gpt2\",\n";
  s += "  \"vocab_size\": " + std::to_string(c.vocab_size) + ",\n";
  s += "  \"n_positions\": " + n + ",\n";
  s += "  \"n_ctx\": " + n + ",\n";
  s += "  \"n_embd\": " + std::to_string(c.n_embd) + ",\n";
  s += "  \"n_layer\": " + std::to_string(c.n_layer) + ",\n";
  s += "  \"n_head\": " + std::to_string(c.n_head) + ",\n";
  s += "  \"n_inner\": null,\n";
  s += "  \"activation_function\": \"gelu_new\",\n";
  s += "  \"layer_norm_epsilon\": 1e-05,\n";
  // llmcc trains without dropout; 0 keeps a model fine-tuned in transformers doing the same.
  s += "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n";
  s += "  \"initializer_range\": 0.02,\n";
  s += "  \"scale_attn_weights\": true,\n";
  s += "  \"scale_attn_by_inverse_layer_idx\": false,\n";
  s += "  \"reorder_and_upcast_attn\": false,\n";
  s += "  \"tie_word_embeddings\": true,\n";
  // GPT-2's <|endoftext|> for its own vocabulary; null otherwise (transformers' default, 50256,
  // would be outside a smaller vocabulary).
  if (c.vocab_size == 50257) {
    s += "  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256,\n";
  } else {
    s += "  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n";
  }
  s += "  \"torch_dtype\": \"" + std::string(torch_dtype) + "\",\n";
  s += "  \"llmcc_padded_vocab_size\": " + std::to_string(c.padded_vocab_size) + "\n";
  s += "}\n";
  return s;
}

Gpt2Config gpt2_config_from_hf(const std::string& path) {
  const HfConfig j = HfConfig::read(path, kWhere);
  if (j.has("model_type") && j.string("model_type") != "gpt2") {
    j.fail_key("model_type", "is '" + j.string("model_type") + "', expected 'gpt2'");
  }
  j.check_architecture({"GPT2LMHeadModel", "GPT2Model"});
  j.check_known_keys({"vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "n_ctx", "llmcc_padded_vocab_size",
                      "activation_function", "layer_norm_epsilon", "n_inner", "tie_word_embeddings",
                      "scale_attn_weights", "scale_attn_by_inverse_layer_idx"});
  Gpt2Config c;
  c.vocab_size = static_cast<int>(j.integer("vocab_size"));
  c.n_embd = static_cast<int>(j.integer("n_embd"));
  c.n_layer = static_cast<int>(j.integer("n_layer"));
  c.n_head = static_cast<int>(j.integer("n_head"));
  c.max_seq_len = static_cast<int>(j.has("n_positions") ? j.integer("n_positions") : j.integer("n_ctx"));
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  if (j.has("llmcc_padded_vocab_size")) {
    const auto vp = j.integer("llmcc_padded_vocab_size");
    if (vp < c.vocab_size) j.fail_key("llmcc_padded_vocab_size", "is below vocab_size");
    c.padded_vocab_size = static_cast<int>(vp);
  }
  // What llmcc's GPT-2 computes; anything else would load and give wrong logits.
  if (j.has("activation_function")) {
    const std::string act = j.string("activation_function");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast") {
      j.fail_key("activation_function", "is '" + act + "'; llmcc's GPT-2 uses GELU's tanh approximation (gelu_new)");
    }
  }
  if (j.has("layer_norm_epsilon") && std::fabs(j.number("layer_norm_epsilon") - 1e-5) > 1e-12) {
    j.fail_key("layer_norm_epsilon",
               "is " + json_number(j.number("layer_norm_epsilon")) + "; llmcc's GPT-2 uses 1e-05");
  }
  if (j.has("n_inner") && j.integer("n_inner") != 4 * c.n_embd) {
    j.fail_key("n_inner", "is " + std::to_string(j.integer("n_inner")) +
                              "; llmcc's GPT-2 MLP is 4 * n_embd = " + std::to_string(4 * c.n_embd) + " wide");
  }
  if (j.has("tie_word_embeddings") && !j.boolean("tie_word_embeddings")) {
    j.fail_key("tie_word_embeddings", "is false; llmcc's GPT-2 ties the LM head to wte");
  }
  if (j.has("scale_attn_weights") && !j.boolean("scale_attn_weights")) {
    j.fail_key("scale_attn_weights", "is false; llmcc scales attention scores by 1/sqrt(head size)");
  }
  if (j.has("scale_attn_by_inverse_layer_idx") && j.boolean("scale_attn_by_inverse_layer_idx")) {
    j.fail_key("scale_attn_by_inverse_layer_idx", "is true; llmcc does not scale attention by layer");
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail(kWhere, path + ": describes a GPT-2 llmcc cannot build: " + e.what());
  }
  return c;
}

void save_gpt2_hf(const Gpt2& model_in, const std::string& dir, const SafetensorsModelOptions& options) {
  Gpt2& model = const_cast<Gpt2&>(model_in);  // the mapping holds Tensor*; nothing is written
  std::vector<SafetensorsTensor> tensors;
  for (const Mapped& e : mapping(model, "transformer.")) {
    const Tensor& t = *e.ours;
    if (t.raw() == nullptr) fail(kWhere, "parameter " + e.hf_name + " has no storage (make_gpt2 or load_gpt2 first)");
    const float* src = t.f32();
    switch (e.layout) {
      case Layout::Same:
      case Layout::VocabRows:  // the first V rows are contiguous
        tensors.push_back(safetensors_tensor(e.hf_name, e.hf_shape, src));
        break;
      case Layout::Transpose: {
        const std::int64_t rows = t.shape()[0], cols = t.shape()[1];
        tensors.push_back({e.hf_name, e.hf_shape, [src, rows, cols](float* out) { transpose(src, rows, cols, out); }});
        break;
      }
    }
  }
  write_hf_model(dir, tensors, gpt2_hf_config_json(model.cfg, hf_torch_dtype(options.dtype)), options, kWhere);
}

Gpt2Weights load_gpt2_hf(const std::string& path) {
  const HfFiles files = find_hf_files(path, kWhere);
  const Gpt2Config config = gpt2_config_from_hf(files.config);
  const SafetensorsReader r(files.weights);
  std::string prefix;
  if (r.has("transformer.wte.weight")) {
    prefix = "transformer.";
  } else if (!r.has("wte.weight")) {
    fail(kWhere, files.weights +
                     ": has neither transformer.wte.weight (GPT2LMHeadModel) nor wte.weight (GPT2Model); "
                     "not a GPT-2 checkpoint");
  }
  check_every_layer_present(r, prefix + "h.", ".ln_1.weight", config.n_layer, files.config, kWhere);
  {
    Gpt2 shapes(config);  // declared shapes, no storage yet
    for (const Mapped& e : mapping(shapes, prefix)) check_tensor_shape(r, e.hf_name, e.hf_shape);
  }
  Gpt2Weights w = make_gpt2(config);
  const std::int64_t V = config.vocab_size, C = config.n_embd;
  std::vector<float> tmp;
  for (const Mapped& e : mapping(w.model, prefix)) {
    Tensor& t = *e.ours;
    float* dst = t.f32();
    switch (e.layout) {
      case Layout::Same:
      case Layout::VocabRows:  // the first V rows; pad rows stay zero (make_gpt2 zeroes the store)
        r.read_f32(e.hf_name, e.hf_shape, dst);
        break;
      case Layout::Transpose:
        tmp.resize(static_cast<std::size_t>(t.numel()));
        r.read_f32(e.hf_name, e.hf_shape, tmp.data());
        transpose(tmp.data(), e.hf_shape[0], e.hf_shape[1], dst);
        break;
    }
  }
  // The head is tied: a stored lm_head.weight must be wte, or these are not llmcc GPT-2 weights.
  if (const SafetensorsEntry* head = r.find("lm_head.weight")) {
    tmp.resize(static_cast<std::size_t>(V * C));
    r.read_f32(head->name, {V, C}, tmp.data());
    if (std::memcmp(tmp.data(), w.model.wte.f32(), tmp.size() * sizeof(float)) != 0) {
      fail(kWhere, files.weights + ": lm_head.weight differs from " + prefix +
                       "wte.weight; llmcc's GPT-2 ties them (an untied head cannot be loaded)");
    }
  }
  for (int l = 0; l < config.n_layer; ++l) {  // attention-mask buffers of older transformers
    for (const char* buffer : {"attn.bias", "attn.masked_bias"}) {
      const std::string name = prefix + "h." + std::to_string(l) + "." + buffer;
      if (r.has(name)) r.skip(name);
    }
  }
  check_no_unexpected_tensors(r, kWhere, "GPT-2");
  return w;
}

const PeftModuleNames& gpt2_peft_modules() {
  static const PeftModuleNames names = {{"c_attn", "c_attn"}, {"c_proj", "c_proj"}, {"c_fc", "c_fc"}};
  return names;
}

std::vector<PeftSlot> gpt2_peft_slots(const Gpt2&, const Gpt2Lora& lora) {
  std::vector<PeftSlot> slots;
  for (std::size_t l = 0; l < lora.h.size(); ++l) {
    const Gpt2BlockLora& b = lora.h[l];
    const std::string layer = "transformer.h." + std::to_string(l) + ".";
    const auto add = [&](const std::vector<Gpt2LoraAdapter>& slot, const char* module) {
      for (const Gpt2LoraAdapter& a : slot) slots.push_back({layer + module, a.a, a.b, 0, 0});
    };
    add(b.attn.c_attn, "attn.c_attn");
    add(b.attn.c_proj, "attn.c_proj");
    add(b.mlp.c_fc, "mlp.c_fc");
    add(b.mlp.c_proj, "mlp.c_proj");
  }
  return slots;
}

}  // namespace llmcc::models
