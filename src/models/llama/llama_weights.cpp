#include "models/llama/llama_weights.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "llama.grad.h"  // the generated parameter list (bind_parameters)
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "models/hf_files.h"
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
}

LlamaConfig llama_config_from_kv(const KeyValues& kv, const std::string& where) {
  auto text = [&](const std::string& key) -> const std::string& {
    const auto it = kv.find(key);
    if (it == kv.end()) fail("llama", where + ": configuration has no " + key);
    return it->second;
  };
  auto get = [&](const std::string& key) -> int {
    const std::string& s = text(key);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || errno != 0 || *end != '\0' || v <= 0 || v > (1L << 30))
      fail("llama", where + ": " + key + " = '" + s + "' is not a positive integer");
    return static_cast<int>(v);
  };
  auto get_float = [&](const std::string& key) -> float {
    const std::string& s = text(key);
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(s.c_str(), &end);
    if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v <= 0.0f)
      fail("llama", where + ": " + key + " = '" + s + "' is not a positive number");
    return v;
  };
  const auto fam = kv.find("model.family");
  const std::string family = fam == kv.end() ? "gpt2" : fam->second;  // files without it are GPT-2's
  if (family != "llama") fail("llama", where + ": holds a '" + family + "' model, not llama");
  LlamaConfig c;
  c.vocab_size = get("model.vocab_size");
  c.max_seq_len = get("model.max_seq_len");
  c.n_layer = get("model.n_layer");
  c.n_head = get("model.n_head");
  c.n_kv_head = get("model.n_kv_head");
  c.n_embd = get("model.n_embd");
  c.hidden_dim = get("model.hidden_dim");
  c.rope_theta = get_float("model.rope_theta");
  c.norm_eps = get_float("model.norm_eps");
  if (const auto it = kv.find("model.rope_scaling"); it != kv.end()) {
    c.rope_scaling.type = RopeScaling::type_from_name(it->second, "llama");
    if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
      c.rope_scaling.factor = get_float("model.rope_factor");
      c.rope_scaling.low_freq_factor = get_float("model.rope_low_freq_factor");
      c.rope_scaling.high_freq_factor = get_float("model.rope_high_freq_factor");
      c.rope_scaling.original_max_position_embeddings = get("model.rope_original_max_position_embeddings");
    }
  }
  c.validate();
  return c;
}

LlamaWeights load_llama(const std::string& path) {
  // A Hugging Face directory or .safetensors file (models/llama/llama_hf.h).
  if (is_hf_model(path)) return load_llama_hf(path);
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
