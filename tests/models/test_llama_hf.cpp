// Llama <-> Hugging Face LlamaForCausalLM (model.safetensors + config.json): names, the rotary
// row permutation of q_proj/k_proj (checked against transformers' half-split rotary on the
// permuted weights), export -> import bit-identical, tied checkpoints, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/ops/rope.h"
#include "llmcc/io/safetensors.h"
#include "models/llama/llama.h"
#include "models/hf_files.h"
#include "models/llama/llama_hf.h"
#include "model_weights.h"
#include "models/llama/llama_weights.h"
#include "temp_dir.h"
#include "test_support.h"
#include "text_edit.h"

namespace {

namespace fs = std::filesystem;
using llmcc::SafetensorsReader;
using llmcc::TensorShape;
using llmcc::models::LlamaConfig;
using llmcc::models::LlamaWeights;
using llmcc::test::replace_once;
using llmcc::test::same_params;
using llmcc::test::slurp;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;  // head size 4
  c.hidden_dim = 24;
  c.rope_theta = 500000.0f;
  c.norm_eps = 1e-6f;
  return c;
}

// Every parameter element distinct (model_weights.h).
LlamaWeights distinct_model(const LlamaConfig& c) {
  LlamaWeights w = llmcc::models::make_llama(c);
  llmcc::test::fill_distinct(w.model);
  return w;
}

TEST(LlamaHf, RotaryPermutationMatchesTransformersHalfSplitRope) {
  // One head of size HS over C inputs. llmcc: q = rope_interleaved(Wq x). transformers:
  // q_hf = rope_half_split(Wq_hf x) with Wq_hf = the exported rows. They must be the same
  // vector up to the same row permutation, at every position.
  const int HS = 8, C = 5, NH = 2;
  const std::vector<float> wq = llmcc::test::random_vector<float>(NH * HS * C, 7);
  const std::vector<float> x = llmcc::test::random_vector<float>(C, 8);
  std::vector<float> wq_hf(wq.size()), back(wq.size());
  llmcc::models::hf_permute_rotary(wq.data(), NH, HS, C, /*to_hf=*/true, wq_hf.data());
  llmcc::models::hf_permute_rotary(wq_hf.data(), NH, HS, C, /*to_hf=*/false, back.data());
  EXPECT_EQ(back, wq);
  // Row h*HS/2 + i of each HF head is Meta row 2i + h.
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(wq_hf[(HS + 1) * C + c], wq[(HS + 2) * C + c]);           // head 1, i = 1, h = 0
    EXPECT_EQ(wq_hf[(HS + HS / 2 + 1) * C + c], wq[(HS + 3) * C + c]);  // head 1, i = 1, h = 1
  }

  const float theta = 10000.0f;
  for (int pos : {0, 1, 5, 13}) {
    SCOPED_TRACE("pos " + std::to_string(pos));
    auto matvec = [&](const std::vector<float>& w) {
      std::vector<float> y(NH * HS, 0.0f);
      for (int r = 0; r < NH * HS; ++r) {
        for (int c = 0; c < C; ++c) y[r] += w[r * C + c] * x[c];
      }
      return y;
    };
    // llmcc's rope op (interleaved pairs) on (B=1, T=pos+1) with the vector at t = pos.
    llmcc::Arena arena(1 << 20);
    llmcc::ArenaScope scope(arena);
    std::vector<float> q_in((pos + 1) * NH * HS, 0.0f);
    const std::vector<float> q = matvec(wq);
    std::copy(q.begin(), q.end(), q_in.begin() + pos * NH * HS);
    const llmcc::Tensor qt = llmcc::test::tensor_from(arena, llmcc::Shape{1, pos + 1, NH * HS}, q_in);
    const llmcc::Tensor ours = llmcc::rope(qt, NH, theta, 0);
    const float* q_rot = ours.f32() + pos * NH * HS;
    // transformers: out = q * cos + rotate_half(q) * sin, cos/sin of pos * theta^(-2i/HS) for
    // channel i and i + HS/2.
    const std::vector<float> qh = matvec(wq_hf);
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < HS / 2; ++i) {
        const double angle = pos * std::pow(double(theta), -2.0 * i / HS);
        const double a = qh[h * HS + i], b = qh[h * HS + i + HS / 2];
        const double hf0 = a * std::cos(angle) - b * std::sin(angle);  // channel i
        const double hf1 = b * std::cos(angle) + a * std::sin(angle);  // channel i + HS/2
        // HF channel i is Meta channel 2i, HF channel i + HS/2 is Meta channel 2i + 1.
        EXPECT_NEAR(hf0, q_rot[h * HS + 2 * i], 1e-5);
        EXPECT_NEAR(hf1, q_rot[h * HS + 2 * i + 1], 1e-5);
      }
    }
  }
}

TEST(LlamaHf, ExportUsesHuggingFaceNamesAndImportIsBitIdentical) {
  TempDir dir;
  const LlamaConfig c = small_config();
  LlamaWeights w = distinct_model(c);
  llmcc::models::save_llama_hf(w.model, dir.file("hf"));
  const SafetensorsReader r(dir.file("hf/model.safetensors"));
  EXPECT_EQ(r.tensors().size(), 1u + 9u * c.n_layer + 2u);
  TensorShape shape;
  const std::vector<float> k = r.read_f32("model.layers.1.self_attn.k_proj.weight", &shape);
  EXPECT_EQ(shape, (TensorShape{c.n_kv_head * c.head_dim(), c.n_embd}));
  std::vector<float> want(k.size());
  llmcc::models::hf_permute_rotary(w.model.layers[1].attention.wk.f32(), c.n_kv_head, c.head_dim(), c.n_embd, true,
                                   want.data());
  EXPECT_EQ(k, want);
  const std::vector<float> gate = r.read_f32("model.layers.0.mlp.gate_proj.weight", &shape);
  EXPECT_EQ(shape, (TensorShape{c.hidden_dim, c.n_embd}));
  EXPECT_EQ(0, std::memcmp(gate.data(), w.model.layers[0].feed_forward.w1.f32(), gate.size() * 4));
  EXPECT_EQ(r.read_f32("model.layers.0.mlp.down_proj.weight", &shape).size(), std::size_t(c.n_embd * c.hidden_dim));
  EXPECT_EQ(shape, (TensorShape{c.n_embd, c.hidden_dim}));
  EXPECT_TRUE(r.has("lm_head.weight"));
  EXPECT_TRUE(r.has("model.norm.weight"));
  EXPECT_TRUE(r.has("model.layers.1.post_attention_layernorm.weight"));

  const std::string json = slurp(dir.file("hf/config.json"));
  for (const char* key : {"\"LlamaForCausalLM\"", "\"num_key_value_heads\": 2", "\"rms_norm_eps\": 1e-06",
                          "\"rope_theta\": 500000.0", "\"intermediate_size\": 24", "\"tie_word_embeddings\": false"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in\n" << json;
  }
  LlamaWeights back = llmcc::models::load_llama_hf(dir.file("hf"));
  EXPECT_EQ(back.model.cfg.str(), c.str());
  EXPECT_EQ(back.model.cfg.norm_eps, c.norm_eps);
  EXPECT_TRUE(same_params(back, w));
  LlamaWeights via = llmcc::models::load_llama(dir.file("hf/model.safetensors"));  // the commands' loader
  EXPECT_TRUE(same_params(via, w));
}

// Llama 3.2's rope scaling is written as Hugging Face's rope_scaling object and read back; the
// llmcc checkpoint's key=value config keeps it too.
TEST(LlamaHf, Llama3RopeScalingRoundTrips) {
  TempDir dir;
  LlamaConfig c = small_config();
  c.rope_scaling.type = llmcc::RopeScaling::Type::Llama3;
  c.rope_scaling.factor = 32.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position_embeddings = 8192;
  LlamaWeights w = distinct_model(c);
  llmcc::models::save_llama_hf(w.model, dir.file("hf"));
  const std::string json = slurp(dir.file("hf/config.json"));
  EXPECT_NE(json.find("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
                      "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}"),
            std::string::npos)
      << json;
  const LlamaWeights back = llmcc::models::load_llama_hf(dir.file("hf"));
  EXPECT_EQ(back.model.cfg.rope_scaling, c.rope_scaling);
  EXPECT_EQ(back.model.cfg.str(), c.str());
  EXPECT_NE(c.str().find("llama3 rope x32 (1, 4, 8192)"), std::string::npos) << c.str();
  EXPECT_EQ(back.model.layers[0].attention.rope_freqs.scaling, c.rope_scaling);  // what the model runs
  llmcc::KeyValues kv;
  llmcc::models::llama_config_to_kv(c, kv);
  EXPECT_EQ(kv.at("model.rope_scaling"), "llama3");
  EXPECT_EQ(llmcc::models::llama_config_from_kv(kv, "kv").rope_scaling, c.rope_scaling);
  kv["model.rope_scaling"] = "dynamic";
  EXPECT_TRUE(throws_error([&] { llmcc::models::llama_config_from_kv(kv, "kv"); }, {"rope_type 'dynamic'"}));
  kv["model.rope_scaling"] = "llama3";
  kv.erase("model.rope_factor");
  EXPECT_TRUE(throws_error([&] { llmcc::models::llama_config_from_kv(kv, "kv"); }, {"model.rope_factor"}));
  // Unscaled configs write null and no checkpoint keys.
  llmcc::KeyValues plain;
  llmcc::models::llama_config_to_kv(small_config(), plain);
  EXPECT_EQ(plain.count("model.rope_scaling"), 0u);
}

TEST(LlamaHf, TiedCheckpointsAndErrors) {
  TempDir dir;
  const LlamaConfig c = small_config();
  LlamaWeights w = distinct_model(c);
  llmcc::models::save_llama_hf(w.model, dir.file("hf"));
  const std::string config = slurp(dir.file("hf/config.json"));
  const SafetensorsReader r(dir.file("hf/model.safetensors"));

  // Rewrites the exported tensors (all but `drop`, plus `extra`) with an edited config.
  auto variant = [&](const std::string& name, const std::string& cfg, const std::string& drop,
                     const std::string& extra = "") {
    const std::string sub = dir.file(name);
    fs::create_directories(sub);
    std::ofstream(sub + "/config.json", std::ios::binary) << cfg;
    std::vector<std::vector<float>> data;
    std::vector<llmcc::SafetensorsTensor> ts;
    for (const auto& e : r.tensors()) {
      if (e.name == drop) continue;
      data.push_back(r.read_f32(e.name));
      ts.push_back(llmcc::safetensors_tensor(e.name, e.shape, data.back().data()));
    }
    static const float one = 1.0f;
    if (!extra.empty()) ts.push_back(llmcc::safetensors_tensor(extra, {1}, &one));
    llmcc::write_safetensors(sub + "/model.safetensors", ts, {{"format", "pt"}});
    return sub;
  };

  const std::string tied_cfg = replace_once(config, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
  // A tied folder: the embedding is the head; a copy of it as lm_head.weight is skipped.
  for (const char* drop : {"lm_head.weight", ""}) {
    LlamaWeights tied = llmcc::models::load_llama_hf(variant(std::string("tied") + drop, tied_cfg, drop));
    EXPECT_TRUE(tied.model.cfg.tie_embeddings);
    EXPECT_TRUE(tied.model.output.empty());
    EXPECT_EQ(0, std::memcmp(tied.model.tok_embeddings.f32(), w.model.tok_embeddings.f32(),
                             static_cast<std::size_t>(w.model.tok_embeddings.numel()) * 4));
    // Saved again: tie_word_embeddings true and no lm_head.weight.
    llmcc::models::save_llama_hf(tied.model, dir.file(std::string("tied_again") + drop));
    EXPECT_NE(slurp(dir.file(std::string("tied_again") + drop + "/config.json")).find("\"tie_word_embeddings\": true"),
              std::string::npos);
    const SafetensorsReader again(dir.file(std::string("tied_again") + drop + "/model.safetensors"));
    EXPECT_FALSE(again.has("lm_head.weight"));
    EXPECT_EQ(again.tensors().size() + 1, r.tensors().size());
  }
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama_hf(variant("untied", config, "lm_head.weight")); },
                           {"[safetensors]", "no tensor 'lm_head.weight'"}));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::models::load_llama_hf(variant("extra", config, "", "model.layers.0.self_attn.q_proj.bias")); },
      {"[llama_hf]", "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"}));
  // Rope scaling: llama3 needs its four numbers; other types are named in the error.
  auto scaling = [&](const std::string& name, const std::string& object) {
    return variant(name, replace_once(config, "\"rope_scaling\": null", "\"rope_scaling\": " + object), "");
  };
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama_hf(scaling("s1", "{\"rope_type\": \"llama3\"}")); },
                           {"config.json", "factor is missing"}));
  EXPECT_TRUE(
      throws_error([&] { llmcc::models::load_llama_hf(scaling("s2", "{\"rope_type\": \"yarn\", \"factor\": 4.0}")); },
                   {"config.json", "rope_scaling", "rope_type 'yarn' is not supported", "'llama3'"}));
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama_hf(scaling("s3", "{\"factor\": 4.0}")); },
                           {"config.json", "rope_scaling has no rope_type"}));
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_llama_hf(scaling("s4",
                                             "{\"rope_type\": \"llama3\", \"factor\": 0.5, "
                                             "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                                             "\"original_max_position_embeddings\": 8192}"));
      },
      {"config.json", "rope_scaling", "factor is 0.5"}));
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama_hf(scaling("s5", "7")); },
                           {"config.json", "rope_scaling must be an object or null"}));
  // "default" is no scaling; transformers 5's rope_parameters (with rope_theta inside) is read too.
  EXPECT_EQ(llmcc::models::load_llama_hf(scaling("s6", "{\"type\": \"default\"}")).model.cfg.rope_scaling,
            llmcc::RopeScaling{});
  const LlamaWeights v5 = llmcc::models::load_llama_hf(variant(
      "s7",
      replace_once(config, "\"rope_scaling\": null",
                   "\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 250000.0, \"factor\": 8.0, "
                   "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}"),
      ""));
  EXPECT_EQ(v5.model.cfg.rope_theta, 250000.0f);
  EXPECT_EQ(v5.model.cfg.rope_scaling.type, llmcc::RopeScaling::Type::Llama3);
  EXPECT_EQ(v5.model.cfg.rope_scaling.factor, 8.0f);
  EXPECT_EQ(v5.model.layers[1].attention.rope_freqs.scaling, v5.model.cfg.rope_scaling);
  EXPECT_TRUE(throws_error(
      [&] { llmcc::models::load_llama_hf(variant("gelu", replace_once(config, "\"silu\"", "\"gelu\""), "")); },
      {"hidden_act is 'gelu'"}));
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_llama_hf(
            variant("gpt2", replace_once(config, "\"model_type\": \"llama\"", "\"model_type\": \"gpt2\""), ""));
      },
      {"model_type is 'gpt2', expected 'llama'"}));
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_llama_hf(
            variant("kv", replace_once(config, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"), ""));
      },
      {"config.json", "cannot build"}));
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_llama_hf(
            variant("width", replace_once(config, "\"intermediate_size\": 24", "\"intermediate_size\": 32"), ""));
      },
      {"tensor 'model.layers.0.mlp.gate_proj.weight'", "shape (24, 16), expected (32, 16)"}));
  // More layers in the config than in the file: the first missing one, before any allocation.
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_llama_hf(
            variant("deep", replace_once(config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 65536"), ""));
      },
      {"[llama_hf]", "no tensor 'model.layers.2.input_layernorm.weight'", "n_layer = 65536"}));
}

TEST(LlamaHf, ConfigLargerThanItsFileFailsBeforeAllocating) {
  // Files of a few hundred bytes whose configuration describes a 20 GB model (found by
  // fuzz_hf_model and fuzz_model_load): refused before the model is allocated.
  TempDir dir;
  LlamaConfig c = small_config();
  c.n_layer = 1;
  c.n_embd = 16384;
  c.n_head = 1;
  c.n_kv_head = 1;
  c.hidden_dim = 65536;
  const std::string sub = dir.file("huge");
  fs::create_directories(sub);
  std::ofstream(sub + "/config.json", std::ios::binary) << llmcc::models::llama_hf_config_json(c);
  static const float zero = 0.0f;
  llmcc::write_safetensors(sub + "/model.safetensors",
                           {llmcc::safetensors_tensor("model.embed_tokens.weight", {1}, &zero),
                            llmcc::safetensors_tensor("model.layers.0.input_layernorm.weight", {1}, &zero)});
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama(sub); },
                           {"[safetensors]", "tensor 'model.embed_tokens.weight'", "shape (1), expected"}));

  const llmcc::ParameterStore tiny({{"tok_embeddings.weight", llmcc::Shape{1}}});
  llmcc::TrainState state;
  llmcc::models::llama_config_to_kv(c, state.config);
  llmcc::save_checkpoint(dir.file("huge.ckpt"), tiny, nullptr, state);
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_llama(dir.file("huge.ckpt")); },
                           {"[llama]", "huge.ckpt [params]: holds 1 weights", "too few for the model"}));
}

TEST(LlamaHf, ExportCommandConvertsBothWays) {
  TempDir dir;
  LlamaWeights w = distinct_model(small_config());
  llmcc::TrainState state;
  llmcc::models::llama_config_to_kv(w.model.cfg, state.config);
  llmcc::save_checkpoint(dir.file("llama.ckpt"), w.params, nullptr, state);

  auto r = llmcc::test::run_llmcc(dir, {"export", "--ckpt", dir.file("llama.ckpt"), "--out", dir.file("hf")});
  ASSERT_EQ(r.code, 0) << r.err;  // auto: a Llama checkpoint goes to safetensors
  EXPECT_NE(r.out.find("LlamaForCausalLM"), std::string::npos) << r.out;
  LlamaWeights exported = llmcc::models::load_llama_hf(dir.file("hf"));
  EXPECT_TRUE(same_params(exported, w));

  r = llmcc::test::run_llmcc(dir, {"export", "--ckpt", dir.file("hf"), "--out", dir.file("back.ckpt")});
  ASSERT_EQ(r.code, 0) << r.err;  // auto: Hugging Face goes to an llmcc checkpoint
  LlamaWeights back = llmcc::models::load_llama(dir.file("back.ckpt"));
  EXPECT_TRUE(same_params(back, w));

  r = llmcc::test::run_llmcc(dir, {"export", "--ckpt", dir.file("hf"), "--format", "llmc", "--out", dir.file("x.bin")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds a Llama model, which exports as llmcc, gguf, safetensors, not llmc"), std::string::npos)
      << r.err;
}

}  // namespace
