#include "models/qwen3/qwen3_weights.h"

#include <cstdio>

#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "models/config_keys.h"
#include "models/hf_files.h"
#include "models/registry.h"
#include "models/qwen3/qwen3_hf.h"
#include "qwen3.grad.h"  // the generated parameter list (bind_parameters)

namespace llmcc::models {

Qwen3Weights make_qwen3(const Qwen3Config& config) {
  // Before the blocks are built: a config from a file may name billions of layers.
  check_memory_fits("qwen3", "the weights of Qwen3 " + config.str(),
                    static_cast<long double>(config.parameter_count()) * sizeof(float));
  Qwen3Weights w{Qwen3(config), ParameterStore()};
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

void qwen3_config_to_kv(const Qwen3Config& c, KeyValues& kv) {
  kv["model.family"] = "qwen3";
  kv["model.vocab_size"] = std::to_string(c.vocab_size);
  kv["model.max_seq_len"] = std::to_string(c.max_seq_len);
  kv["model.n_layer"] = std::to_string(c.n_layer);
  kv["model.n_head"] = std::to_string(c.n_head);
  kv["model.n_kv_head"] = std::to_string(c.n_kv_head);
  kv["model.n_embd"] = std::to_string(c.n_embd);
  kv["model.head_dim"] = std::to_string(c.head_dim);
  kv["model.hidden_dim"] = std::to_string(c.hidden_dim);
  kv["model.rope_theta"] = float_text(c.rope_theta);
  kv["model.norm_eps"] = float_text(c.norm_eps);
  kv["model.tie_embeddings"] = c.tie_embeddings ? "true" : "false";
}

Qwen3Config qwen3_config_from_kv(const KeyValues& kv, const std::string& where) {
  const ConfigKeys keys(kv, "qwen3", where);
  Qwen3Config c;
  c.vocab_size = keys.positive_int("model.vocab_size");
  c.max_seq_len = keys.positive_int("model.max_seq_len");
  c.n_layer = keys.positive_int("model.n_layer");
  c.n_head = keys.positive_int("model.n_head");
  c.n_kv_head = keys.positive_int("model.n_kv_head");
  c.n_embd = keys.positive_int("model.n_embd");
  c.head_dim = keys.positive_int("model.head_dim");
  c.hidden_dim = keys.positive_int("model.hidden_dim");
  c.rope_theta = keys.positive_float("model.rope_theta");
  c.norm_eps = keys.positive_float("model.norm_eps");
  c.tie_embeddings = keys.boolean("model.tie_embeddings");
  c.validate();
  return c;
}

Qwen3Weights load_qwen3(const std::string& path) {
  // A Hugging Face directory or .safetensors file (qwen3_hf.h); what the path holds is told in
  // one place, the registry (models/registry.h).
  if (identify_model_file(path).kind == ModelFile::Kind::HuggingFace) return load_qwen3_hf(path);
  CheckpointReader reader(path);  // says what is wrong with a file that is not a checkpoint
  if (!reader.has("config")) fail("qwen3", path + ": checkpoint has no config section");
  const Qwen3Config config = qwen3_config_from_kv(parse_key_values(reader.blob("config"), path + " [config]"), path);
  std::int64_t stored = 0;
  for (const CheckpointTensorInfo& t : reader.tensors("params")) stored += t.shape.numel();
  check_weights_fit(stored, config.parameter_count(), "qwen3", path + " [params]", "its config section", config.str());
  Qwen3Weights w = make_qwen3(config);
  reader.read_tensors("params", w.params);
  return w;
}

}  // namespace llmcc::models
