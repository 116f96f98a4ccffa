// config.json as downloaded: every family's reader accepts the keys transformers and the Hub write
// that do not change the model, and refuses by name a key it does not know, another architecture,
// a quantized checkpoint and the flags that would make it another model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "models/gpt2/gpt2_hf.h"
#include "models/llama/llama_hf.h"
#include "models/qwen3/qwen3_hf.h"
#include "cli_run.h"
#include "llmcc/error.h"
#include "temp_dir.h"
#include "test_support.h"
#include "text_edit.h"

namespace {

using llmcc::test::replace_once;
using llmcc::test::slurp;
using llmcc::test::TempDir;

struct Family {
  std::string name, architecture;
  std::function<void(const std::string& dir)> save;
  std::function<void(const std::string& dir)> load;
};

std::vector<Family> families() {
  llmcc::models::Gpt2Config g;
  g.vocab_size = 40;
  g.padded_vocab_size = 128;
  g.max_seq_len = 8;
  g.n_layer = 1;
  g.n_head = 2;
  g.n_embd = 8;
  llmcc::models::LlamaConfig l;
  l.vocab_size = 40;
  l.max_seq_len = 8;
  l.n_layer = 1;
  l.n_head = 2;
  l.n_kv_head = 1;
  l.n_embd = 8;
  l.hidden_dim = 16;
  llmcc::models::Qwen3Config q;
  q.vocab_size = 40;
  q.max_seq_len = 8;
  q.n_layer = 1;
  q.n_head = 2;
  q.n_kv_head = 1;
  q.n_embd = 8;
  q.head_dim = 6;
  q.hidden_dim = 16;
  return {
      {"gpt2", "GPT2LMHeadModel",
       [g](const std::string& d) { llmcc::models::save_gpt2_hf(llmcc::models::make_gpt2(g).model, d); },
       [](const std::string& d) { (void)llmcc::models::load_gpt2_hf(d); }},
      {"llama", "LlamaForCausalLM",
       [l](const std::string& d) { llmcc::models::save_llama_hf(llmcc::models::make_llama(l).model, d); },
       [](const std::string& d) { (void)llmcc::models::load_llama_hf(d); }},
      {"qwen3", "Qwen3ForCausalLM",
       [q](const std::string& d) { llmcc::models::save_qwen3_hf(llmcc::models::make_qwen3(q).model, d); },
       [](const std::string& d) { (void)llmcc::models::load_qwen3_hf(d); }},
  };
}

// The folder's config.json with `members` (JSON text, "\"k\": v, ...") added first.
void add_members(const std::string& dir, const std::string& members) {
  const std::string path = dir + "/config.json";
  const std::string text = replace_once(slurp(path), "{\n", "{\n  " + members + ",\n");
  std::ofstream(path, std::ios::trunc) << text;
}

// The loader's error for the folder, or "" when it loads.
std::string load_error(const Family& f, const std::string& dir) {
  try {
    f.load(dir);
  } catch (const llmcc::Error& e) {
    return e.what();
  }
  return "";
}

// Every fragment is in the error.
void expect_error(const std::string& error, const std::vector<std::string>& fragments) {
  EXPECT_FALSE(error.empty()) << "loaded without an error";
  for (const std::string& f : fragments)
    EXPECT_NE(error.find(f), std::string::npos) << "`" << f << "` not in: " << error;
}

TEST(HfConfigKeys, KeysThatDoNotChangeTheModelAreAccepted) {
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    TempDir dir;
    f.save(dir.path.string());
    // What transformers 5 writes for every config, and what Hub files carry.
    add_members(dir.path.string(),
                R"("_name_or_path": "x", "transformers_version": "5.23.0", "dtype": "bfloat16", "use_cache": true, )"
                R"("pad_token_id": null, "id2label": {"0": "LABEL_0"}, )"
                R"("label2id": {"LABEL_0": 0}, "chunk_size_feed_forward": 0, "is_encoder_decoder": false, )"
                R"("add_cross_attention": false, "output_attentions": false, "temperature": 1.0, "top_p": 1.0)");
    EXPECT_EQ(load_error(f, dir.path.string()), "");
  }
}

TEST(HfConfigKeys, UnknownKeysArchitecturesAndOtherModelsAreRefusedByName) {
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {R"("attn_logit_softcapping": 50.0)",
         {"config.json: attn_logit_softcapping is a key llmcc does not know for this model", "keys read: "}},
        {R"("quantization_config": {"quant_method": "gptq"})",
         {"quantization_config is present: quantized checkpoints are not read"}},
        {R"("is_encoder_decoder": true)", {"is_encoder_decoder is true; llmcc reads decoder-only"}},
        {R"("add_cross_attention": true)", {"add_cross_attention is true"}},
    };
    for (const auto& [members, expect] : cases) {
      TempDir dir;
      f.save(dir.path.string());
      add_members(dir.path.string(), members);
      SCOPED_TRACE(members);
      expect_error(load_error(f, dir.path.string()), expect);
    }
    TempDir dir;
    f.save(dir.path.string());
    const std::string path = dir.file("config.json");
    const std::string text = replace_once(slurp(path), "\"" + f.architecture + "\"",
                                          "\"" + f.architecture.substr(0, 4) + "ForSequenceClassification\"");
    std::ofstream(path, std::ios::trunc) << text;
    expect_error(load_error(f, dir.path.string()),
                 {"architectures is [", "ForSequenceClassification]; llmcc reads " + f.architecture});
  }
}

TEST(HfConfigKeys, FamilyFlagsThatMakeAnotherModelAreRefused) {
  const std::vector<Family> all = families();
  TempDir llama;
  all[1].save(llama.path.string());
  add_members(llama.path.string(), R"("rope_interleaved": true)");
  expect_error(load_error(all[1], llama.path.string()), {"rope_interleaved is true"});
  TempDir smollm;  // SmolLM2's configs say false
  all[1].save(smollm.path.string());
  add_members(smollm.path.string(), R"("rope_interleaved": false, "is_llama_config": true)");
  EXPECT_EQ(load_error(all[1], smollm.path.string()), "");

  TempDir qwen;
  all[2].save(qwen.path.string());
  add_members(qwen.path.string(), R"("layer_types": ["full_attention", "sliding_attention"])");
  expect_error(load_error(all[2], qwen.path.string()), {"layer_types names a layer that is not full_attention"});
  TempDir qwen_ok;  // Qwen3-0.6B's: sliding_window present but off
  all[2].save(qwen_ok.path.string());
  add_members(qwen_ok.path.string(), R"("layer_types": ["full_attention"], )"
                                     R"("sliding_window": null, "max_window_layers": 28)");
  EXPECT_EQ(load_error(all[2], qwen_ok.path.string()), "");
}

}  // namespace
