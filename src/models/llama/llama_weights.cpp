#include "models/llama/llama_weights.h"

#include <cstdio>

#include "llama.grad.h"  // the generated parameter list (bind_parameters)
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "models/config_keys.h"
#include "models/hf_files.h"
#include "models/registry.h"
#include "models/llama/llama_hf.h"

namespace llmcc::models {

LlamaWeights make_llama(const LlamaConfig& config) {
  // Before the blocks are built: a config from a file may name billions of layers.
  check_memory_fits("llama", "the weights of Llama " + config.str(),
                    static_cast<long double>(config.parameter_count()) * sizeof(float));
  LlamaWeights w{Llama(config), ParameterStore()};
  w.params = bind_parameters(w.model);
  return w;
}

namespace {
std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));  // 9 digits: reads back exactly
  return buf;
}
}  // namespace

void llama_config_to_kv(const LlamaConfig& c, KeyValues& kv) {
  kv["model.family"] = "llama";
  kv["model.vocab_size"] = std::to_string(c.vocab_size);
  kv["model.max_seq_len"] = std::to_string(c.max_seq_len);
  kv["model.n_layer"] = std::to_string(c.n_layer);
  kv["model.n_head"] = std::to_string(c.n_head);
  kv["model.n_kv_head"] = std::to_string(c.n_kv_head);
  kv["model.n_embd"] = std::to_string(c.n_embd);
  kv["model.hidden_dim"] = std::to_string(c.hidden_dim);
  kv["model.rope_theta"] = float_text(c.rope_theta);
  kv["model.norm_eps"] = float_text(c.norm_eps);
  // Written only when set, so checkpoints of unscaled models stay as they were.
  if (c.rope_scaling.type != RopeScaling::Type::None) {
    kv["model.rope_scaling"] = c.rope_scaling.type_name();
    kv["model.rope_factor"] = float_text(c.rope_scaling.factor);
    kv["model.rope_low_freq_factor"] = float_text(c.rope_scaling.low_freq_factor);
    kv["model.rope_high_freq_factor"] = float_text(c.rope_scaling.high_freq_factor);
    kv["model.rope_original_max_position_embeddings"] = std::to_string(c.rope_scaling.original_max_position_embeddings);
  }
  if (c.tie_embeddings) kv["model.tie_embeddings"] = "true";  // as above: untied checkpoints unchanged
}

LlamaConfig llama_config_from_kv(const KeyValues& kv, const std::string& where) {
  const ConfigKeys keys(kv, "llama", where);
  LlamaConfig c;
  c.vocab_size = keys.positive_int("model.vocab_size");
  c.max_seq_len = keys.positive_int("model.max_seq_len");
  c.n_layer = keys.positive_int("model.n_layer");
  c.n_head = keys.positive_int("model.n_head");
  c.n_kv_head = keys.positive_int("model.n_kv_head");
  c.n_embd = keys.positive_int("model.n_embd");
  c.hidden_dim = keys.positive_int("model.hidden_dim");
  c.rope_theta = keys.positive_float("model.rope_theta");
  c.norm_eps = keys.positive_float("model.norm_eps");
  if (keys.has("model.rope_scaling")) {
    c.rope_scaling.type = RopeScaling::type_from_name(keys.text("model.rope_scaling"), "llama");
    if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
      c.rope_scaling.factor = keys.positive_float("model.rope_factor");
      c.rope_scaling.low_freq_factor = keys.positive_float("model.rope_low_freq_factor");
      c.rope_scaling.high_freq_factor = keys.positive_float("model.rope_high_freq_factor");
      c.rope_scaling.original_max_position_embeddings =
          keys.positive_int("model.rope_original_max_position_embeddings");
    }
  }
  c.tie_embeddings = keys.has("model.tie_embeddings") && keys.boolean("model.tie_embeddings");
  c.validate();
  return c;
}

LlamaWeights load_llama(const std::string& path) {
  // A Hugging Face directory or .safetensors file (models/llama/llama_hf.h); what the path holds is
  // told in one place, the registry (models/registry.h).
  if (identify_model_file(path).kind == ModelFile::Kind::HuggingFace) return load_llama_hf(path);
  CheckpointReader reader(path);  // says what is wrong with a file that is not a checkpoint
  if (!reader.has("config")) fail("llama", path + ": checkpoint has no config section");
  const LlamaConfig config = llama_config_from_kv(parse_key_values(reader.blob("config"), path + " [config]"), path);
  std::int64_t stored = 0;
  for (const CheckpointTensorInfo& t : reader.tensors("params")) stored += t.shape.numel();
  check_weights_fit(stored, config.parameter_count(), "llama", path + " [params]", "its config section", config.str());
  LlamaWeights w = make_llama(config);
  reader.read_tensors("params", w.params);
  return w;
}

}  // namespace llmcc::models
