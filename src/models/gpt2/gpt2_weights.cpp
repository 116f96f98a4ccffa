#include "models/gpt2/gpt2_weights.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpt2.grad.h"  // the generated parameter list (bind_parameters)
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/config_keys.h"
#include "models/hf_files.h"
#include "models/registry.h"

namespace llmcc::models {

Gpt2Weights make_gpt2(const Gpt2Config& config) {
  // Before the blocks are built: a config from a file may name billions of layers.
  check_memory_fits("gpt2", "the weights of GPT-2 " + config.str(),
                    static_cast<long double>(config.parameter_count()) * sizeof(float));
  Gpt2Weights w{Gpt2(config), ParameterStore()};
  w.params = bind_parameters(w.model);
  return w;
}

void gpt2_config_to_kv(const Gpt2Config& c, KeyValues& kv) {
  kv["model.family"] = "gpt2";
  kv["model.vocab_size"] = std::to_string(c.vocab_size);
  kv["model.padded_vocab_size"] = std::to_string(c.padded_vocab_size);
  kv["model.max_seq_len"] = std::to_string(c.max_seq_len);
  kv["model.n_layer"] = std::to_string(c.n_layer);
  kv["model.n_head"] = std::to_string(c.n_head);
  kv["model.n_embd"] = std::to_string(c.n_embd);
}

Gpt2Config gpt2_config_from_kv(const KeyValues& kv, const std::string& where) {
  const ConfigKeys keys(kv, "gpt2", where);
  Gpt2Config c;
  c.vocab_size = keys.positive_int("model.vocab_size");
  c.padded_vocab_size = keys.positive_int("model.padded_vocab_size");
  c.max_seq_len = keys.positive_int("model.max_seq_len");
  c.n_layer = keys.positive_int("model.n_layer");
  c.n_head = keys.positive_int("model.n_head");
  c.n_embd = keys.positive_int("model.n_embd");
  c.validate();
  return c;
}

Gpt2Weights load_gpt2(const std::string& path) {
  // What the path holds is told in one place, the registry (models/registry.h).
  switch (identify_model_file(path).kind) {
    case ModelFile::Kind::HuggingFace:
      return load_gpt2_hf(path);  // models/gpt2/gpt2_hf.h
    case ModelFile::Kind::FamilyFile:
      return load_gpt2_llmc(path);
    case ModelFile::Kind::LlmccCheckpoint:
      break;
    case ModelFile::Kind::Other: {
      // Neither format: name both, and the file's magic when another format's.
      char head[8] = {};
      std::size_t got = 0;
      if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
        got = std::fread(head, 1, sizeof head, f);
        std::fclose(f);
      }
      std::int32_t magic = 0;
      std::memcpy(&magic, head, sizeof magic);
      if (got == sizeof head) {
        const std::string name = llmc_magic_name(magic);
        fail("gpt2", path + ": neither an llmcc checkpoint (magic \"LLMCCKPT\") nor an llm.c GPT-2 model file " +
                         "(int32 magic 20240326); its first int32 is " + std::to_string(magic) +
                         (name.empty() ? "" : ", the magic of " + name));
      }
      break;
    }
  }
  // An llmcc checkpoint, or a file too short or unreadable: the reader says what is wrong.
  CheckpointReader reader(path);
  if (!reader.has("config")) fail("gpt2", path + ": checkpoint has no config section");
  const Gpt2Config config = gpt2_config_from_kv(parse_key_values(reader.blob("config"), path + " [config]"), path);
  std::int64_t stored = 0;
  for (const CheckpointTensorInfo& t : reader.tensors("params")) stored += t.shape.numel();
  check_weights_fit(stored, config.parameter_count(), "gpt2", path + " [params]", "its config section", config.str());
  Gpt2Weights w = make_gpt2(config);
  reader.read_tensors("params", w.params);
  return w;
}

}  // namespace llmcc::models
