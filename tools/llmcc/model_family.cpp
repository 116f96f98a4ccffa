#include "model_family.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "llmcc/adgen.h"
#include "llmcc/error.h"
#include "model_traits.h"
#include "nn/hf_files.h"

namespace llmcc::cli {

// ---- ModelConfig --------------------------------------------------------------------------

ModelConfig ModelConfig::of(const nn::Gpt2Config& c) {
  ModelConfig m;
  m.family = Family::Gpt2;
  m.gpt2 = c;
  return m;
}

ModelConfig ModelConfig::of(const nn::LlamaConfig& c) {
  ModelConfig m;
  m.family = Family::Llama;
  m.llama = c;
  return m;
}

const char* ModelConfig::family_name() const { return family == Family::Llama ? "llama" : "gpt2"; }
const char* ModelConfig::display_name() const { return family == Family::Llama ? "Llama" : "GPT-2"; }
int ModelConfig::vocab_size() const { return family == Family::Llama ? llama.vocab_size : gpt2.vocab_size; }
int ModelConfig::max_seq_len() const { return family == Family::Llama ? llama.max_seq_len : gpt2.max_seq_len; }

std::int64_t ModelConfig::parameter_count() const {
  return family == Family::Llama ? llama.parameter_count() : gpt2.parameter_count();
}

double ModelConfig::flops_per_step(int B, int T) const {
  return family == Family::Llama ? llama.flops_per_step(B, T) : gpt2.flops_per_step(B, T);
}

std::string ModelConfig::str() const { return family == Family::Llama ? llama.str() : gpt2.str(); }

void ModelConfig::validate() const {
  if (family == Family::Llama)
    llama.validate();
  else
    gpt2.validate();
}

void ModelConfig::to_kv(KeyValues& kv) const {
  if (family == Family::Llama)
    nn::llama_config_to_kv(llama, kv);
  else
    nn::gpt2_config_to_kv(gpt2, kv);
}

MemoryPlan memory_plan(const ModelConfig& config, int B, int T) {
  MemoryPlan p;
  p.parameters = config.parameter_count();
  p.params_bytes = static_cast<std::size_t>(p.parameters) * sizeof(float);
  p.grads_bytes = p.params_bytes;
  p.optimizer_bytes = 2 * p.params_bytes;
  p.B = B;
  p.T = T;
  return p;
}

std::string describe(const MemoryPlan& p) {
  auto gib = [](std::size_t bytes) {
    char buf[32];
    const double g = static_cast<double>(bytes) / double(1 << 30);
    std::snprintf(buf, sizeof buf, g >= 10 ? "%.1f GiB" : (g >= 0.1 ? "%.2f GiB" : "%.3f GiB"), g);
    return std::string(buf);
  };
  char count[32];
  const double n = static_cast<double>(p.parameters);
  if (n >= 1e9)
    std::snprintf(count, sizeof count, "%.2fG", n / 1e9);
  else
    std::snprintf(count, sizeof count, "%.2fM", n / 1e6);
  return std::string(count) + " parameters: weights " + gib(p.params_bytes) + " + gradients " + gib(p.grads_bytes) +
         " + AdamW " + gib(p.optimizer_bytes) + " + step arena " +
         (p.arena_bytes > 0 ? gib(p.arena_bytes) + " (B " + std::to_string(p.B) + " x T " + std::to_string(p.T) +
                                  ") = " + gib(p.total())
                            : std::string("(B ") + std::to_string(p.B) + " x T " + std::to_string(p.T) +
                                  ", measured when training starts)");
}

ModelConfig model_config_from_kv(const KeyValues& kv, const std::string& where) {
  const auto it = kv.find("model.family");
  const std::string family = it == kv.end() ? "gpt2" : it->second;
  if (family == "gpt2") return ModelConfig::of(nn::gpt2_config_from_kv(kv, where));
  if (family == "llama") return ModelConfig::of(nn::llama_config_from_kv(kv, where));
  fail("model", where + ": model.family = '" + family + "' is not a model family llmcc knows (gpt2, llama)");
}

ModelConfig model_preset(const std::string& name) {
  if (nn::is_llama_preset(name)) return ModelConfig::of(nn::llama_preset(name));
  for (const std::string& n : nn::gpt2_preset_names())
    if (n == name) return ModelConfig::of(nn::gpt2_preset(name));
  std::string names;
  for (const std::string& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("model", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out = nn::gpt2_preset_names();
  for (const std::string& n : nn::llama_preset_names()) out.push_back(n);
  return out;
}

// ---- the families behind Model -------------------------------------------------------------

namespace {

// One family (model_traits.h: Gpt2Family, LlamaFamily) as a Model.
template <class Traits>
class FamilyModel final : public Model {
 public:
  explicit FamilyModel(typename Traits::Weights w) : w_(std::move(w)), config_(ModelConfig::of(w_.model.cfg)) {}

  const ModelConfig& config() const override { return config_; }
  ParameterStore& params() override { return w_.params; }
  ParameterStore& grads() override {
    if (!g_) g_ = std::make_unique<adgen::GradBuffer<typename Traits::Grad>>(adgen::make_grad(w_.model));
    return g_->store;
  }
  void init(std::uint64_t seed) override { Traits::init(w_, seed); }
  float loss_and_grad(const Tokens& x, const Tokens& y, float d_loss) override {
    grads();
    const float loss = Traits::fwd(w_, x, y, saved_);
    Traits::bwd(w_, x, y, saved_, d_loss, &g_->grad);
    return loss;
  }
  float loss(const Tokens& x, const Tokens& y) const override { return Traits::loss(w_, x, y); }
  std::unique_ptr<train::TrainLoop> make_trainer(train::BatchSource<train::TokenPair>& train,
                                                 train::BatchSource<train::TokenPair>* val,
                                                 train::TrainerOptions options, train::TrainerHooks hooks) override {
    return std::make_unique<train::Trainer<typename Traits::Entry>>(w_.model, w_.params, train, val, std::move(options),
                                                                    std::move(hooks));
  }
  std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                   const nn::SamplingConfig& cfg, Rng& rng,
                                   const std::function<void(std::int32_t)>& on_token) const override {
    return Traits::sample(w_, prompt, max_new_tokens, cfg, rng, on_token);
  }

 private:
  typename Traits::Weights w_;
  ModelConfig config_;
  std::unique_ptr<adgen::GradBuffer<typename Traits::Grad>> g_;
  typename Traits::Saved saved_;  // kept across steps: a warm step allocates no records
};

}  // namespace

std::int64_t warn_nonfinite_weights(const ParameterStore& params, const std::string& path, const char* cmd) {
  const ParameterStore::BadValues bad = params.bad_values();
  if (bad.count > 0)
    std::fprintf(stderr,
                 "%s: warning: %s holds %lld non-finite weights, the first in %s; what it computes is "
                 "meaningless (a diverged run? resume from an earlier checkpoint)\n",
                 cmd, path.c_str(), static_cast<long long>(bad.count), bad.first_tensor.c_str());
  return bad.count;
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  config.validate();
  if (config.family == Family::Llama)
    return std::make_unique<FamilyModel<LlamaFamily>>(LlamaFamily::make(config.llama));
  return std::make_unique<FamilyModel<Gpt2Family>>(Gpt2Family::make(config.gpt2));
}

Family checkpoint_family(const std::string& path) {
  // A Hugging Face model (directory or .safetensors with config.json) says its family itself.
  if (nn::is_hf_model(path)) return nn::hf_model_type(path) == "llama" ? Family::Llama : Family::Gpt2;
  char head[8] = {};
  std::size_t got = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
  }
  if (got == sizeof head && std::memcmp(head, "LLMCCKPT", 8) == 0) {
    CheckpointReader reader(path);
    if (reader.has("config")) {
      const KeyValues kv = parse_key_values(reader.blob("config"), path + " [config]");
      if (const auto it = kv.find("model.family"); it != kv.end() && it->second == "llama") return Family::Llama;
    }
  }
  return Family::Gpt2;
}

std::unique_ptr<Model> load_model(const std::string& path) {
  // Anything but a Llama checkpoint (a GPT-2 one, an llm.c file, a file that is not a checkpoint)
  // goes to load_gpt2, which tells them apart and names what is wrong.
  if (checkpoint_family(path) == Family::Llama) return std::make_unique<FamilyModel<LlamaFamily>>(nn::load_llama(path));
  return std::make_unique<FamilyModel<Gpt2Family>>(nn::load_gpt2(path));
}

void check_model_path(const std::string& path, const std::string& flag, const std::string& where) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) || nn::is_hf_model(path)) return;
  const bool dir = std::filesystem::is_directory(path, ec);
  fail(where, flag + ": " + path + (dir ? " is a directory without model.safetensors" : " does not exist") +
                  "; give a checkpoint written by llmcc train, an llm.c gpt2_*.bin, or a Hugging Face model "
                  "(a directory with config.json and model.safetensors)");
}

}  // namespace llmcc::cli
