// GPT-2 <-> Hugging Face GPT2LMHeadModel (model.safetensors + config.json): names and Conv1D
// layouts element by element, export -> import bit-identical, the variants transformers writes
// (GPT2Model names, mask buffers, a tied lm_head, BF16/F16 weights), load_gpt2's dispatch, the
// `llmcc export --format safetensors` command, and an error for each kind of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_run.h"
#include "gpt2.grad.h"
#include "llmcc/io/safetensors.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/hf_files.h"
#include "distinct_gpt2.h"
#include "model_weights.h"
#include "temp_dir.h"
#include "test_support.h"
#include "text_edit.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;
using llmcc::SafetensorsReader;
using llmcc::TensorShape;
using llmcc::models::Gpt2Config;
using llmcc::models::Gpt2Weights;
using llmcc::test::distinct_gpt2;
using llmcc::test::replace_once;
using llmcc::test::same_params;
using llmcc::test::slurp;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

Gpt2Config small_config() {
  Gpt2Config c;
  c.vocab_size = 67;
  c.padded_vocab_size = 128;
  c.max_seq_len = 9;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

// The parameter named `name` (llmcc's checkpoint names, e.g. "h.1.attn.c_attn.weight").
const llmcc::Tensor& param(Gpt2Weights& w, const std::string& name) {
  const llmcc::Tensor* found = nullptr;
  llmcc::for_each_parameter(w.model, [&](const std::string& n, llmcc::Tensor& t) {
    if (n == name) found = &t;
  });
  if (found == nullptr) throw std::runtime_error("no parameter " + name);
  return *found;
}

// A tensor for a hand-built file: any dtype, raw little-endian bytes.
struct RawTensor {
  std::string name, dtype;
  TensorShape shape;
  std::string bytes;
};

void write_raw_safetensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  for (const RawTensor& t : tensors) {
    std::string shape;
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

// The tensors of an exported file as raw F32 tensors, to rename, drop, convert or add to.
std::vector<RawTensor> raw_tensors(const std::string& path) {
  const SafetensorsReader r(path);
  std::vector<RawTensor> out;
  for (const auto& e : r.tensors()) {
    const std::vector<float> v = r.read_f32(e.name);
    out.push_back({e.name, "F32", e.shape, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(Gpt2Hf, ExportUsesHuggingFaceNamesAndConv1DLayout) {
  TempDir dir;
  const Gpt2Config c = small_config();
  Gpt2Weights w = distinct_gpt2(c);
  llmcc::models::save_gpt2_hf(w.model, dir.file("hf"));
  const SafetensorsReader r(dir.file("hf/model.safetensors"));
  ASSERT_EQ(r.metadata().size(), 1u);
  EXPECT_EQ(r.metadata()[0], (std::pair<std::string, std::string>{"format", "pt"}));
  EXPECT_EQ(r.tensors().size(), 2u + 12u * c.n_layer + 2u);
  EXPECT_FALSE(r.has("lm_head.weight"));  // tied: transformers re-ties it on load
  const std::int64_t V = c.vocab_size, C = c.n_embd;

  TensorShape shape;
  const std::vector<float> wte = r.read_f32("transformer.wte.weight", &shape);
  EXPECT_EQ(shape, (TensorShape{V, C}));
  EXPECT_EQ(0, std::memcmp(wte.data(), w.model.wte.f32(), wte.size() * 4));
  const std::vector<float> wpe = r.read_f32("transformer.wpe.weight", &shape);
  EXPECT_EQ(shape, (TensorShape{c.max_seq_len, C}));
  EXPECT_EQ(0, std::memcmp(wpe.data(), w.model.wpe.f32(), wpe.size() * 4));

  // Conv1D weights are (in, out): element [i][o] is our [o][i].
  struct Conv {
    const char* name;
    const llmcc::Tensor* ours;
  };
  for (const Conv& conv : {Conv{"transformer.h.1.attn.c_attn.weight", &param(w, "h.1.attn.c_attn.weight")},
                           Conv{"transformer.h.1.attn.c_proj.weight", &param(w, "h.1.attn.c_proj.weight")},
                           Conv{"transformer.h.1.mlp.c_fc.weight", &param(w, "h.1.mlp.c_fc.weight")},
                           Conv{"transformer.h.1.mlp.c_proj.weight", &param(w, "h.1.mlp.c_proj.weight")}}) {
    SCOPED_TRACE(conv.name);
    const std::vector<float> v = r.read_f32(conv.name, &shape);
    const std::int64_t out = conv.ours->shape()[0], in = conv.ours->shape()[1];
    ASSERT_EQ(shape, (TensorShape{in, out}));
    for (std::int64_t i = 0; i < in; ++i) {
      for (std::int64_t o = 0; o < out; ++o) ASSERT_EQ(v[i * out + o], conv.ours->f32()[o * in + i]) << i << "," << o;
    }
  }
  EXPECT_EQ(r.read_f32("transformer.h.1.attn.c_attn.bias", &shape).size(), 3u * C);
  EXPECT_EQ(r.read_f32("transformer.h.0.ln_2.bias")[3], param(w, "h.0.ln_2.bias").f32()[3]);
  EXPECT_EQ(r.read_f32("transformer.ln_f.weight")[5], param(w, "ln_f.weight").f32()[5]);

  const Gpt2Config back = llmcc::models::gpt2_config_from_hf(dir.file("hf/config.json"));
  EXPECT_EQ(back.str(), c.str());
  const std::string json = slurp(dir.file("hf/config.json"));
  for (const char* key :
       {"\"architectures\": [\"GPT2LMHeadModel\"]", "\"model_type\": \"gpt2\"", "\"n_positions\": 9",
        "\"layer_norm_epsilon\": 1e-05", "\"activation_function\": \"gelu_new\"", "\"tie_word_embeddings\": true"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in\n" << json;
  }
}

TEST(Gpt2Hf, ExportThenImportIsBitIdentical) {
  TempDir dir;
  Gpt2Weights w = distinct_gpt2(small_config());
  llmcc::models::save_gpt2_hf(w.model, dir.file("hf"));
  for (const std::string& path : {dir.file("hf"), dir.file("hf/model.safetensors")}) {
    SCOPED_TRACE(path);
    Gpt2Weights back = llmcc::models::load_gpt2_hf(path);
    EXPECT_EQ(back.model.cfg.str(), w.model.cfg.str());
    EXPECT_TRUE(same_params(back, w));
    Gpt2Weights via = llmcc::models::load_gpt2(path);  // the loader every command uses
    EXPECT_TRUE(same_params(via, w));
  }
  // GPT-2's own sizes: 50257 real rows, 50304 in llmcc; the pad rows come back zero.
  Gpt2Config c = small_config();
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  Gpt2Weights big = distinct_gpt2(c);
  llmcc::models::save_gpt2_hf(big.model, dir.file("hf50257"));
  EXPECT_EQ(SafetensorsReader(dir.file("hf50257/model.safetensors")).find("transformer.wte.weight")->shape,
            (TensorShape{50257, 8}));
  Gpt2Weights big_back = llmcc::models::load_gpt2(dir.file("hf50257"));
  EXPECT_EQ(big_back.model.cfg.padded_vocab_size, 50304);
  EXPECT_TRUE(same_params(big_back, big));
  EXPECT_NE(slurp(dir.file("hf50257/config.json")).find("\"eos_token_id\": 50256"), std::string::npos);
}

TEST(Gpt2Hf, ReadsGpt2ModelNamesBuffersTiedHeadAndHalfPrecision) {
  TempDir dir;
  const Gpt2Config c = small_config();
  Gpt2Weights w = distinct_gpt2(c);
  llmcc::models::save_gpt2_hf(w.model, dir.file("hf"));
  const std::vector<RawTensor> tensors = raw_tensors(dir.file("hf/model.safetensors"));

  // The original openai-community/gpt2 file: GPT2Model names, mask buffers, lm_head = wte.
  fs::create_directories(dir.file("old"));
  fs::copy_file(dir.file("hf/config.json"), dir.file("old/config.json"));
  std::vector<RawTensor> old;
  for (RawTensor t : tensors) {
    t.name = t.name.substr(std::string("transformer.").size());
    old.push_back(t);
    if (t.name == "wte.weight") old.push_back({"lm_head.weight", "F32", t.shape, t.bytes});
  }
  for (int l = 0; l < c.n_layer; ++l) {
    old.push_back({"h." + std::to_string(l) + ".attn.bias", "F32", {1, 1, 9, 9}, std::string(81 * 4, '\0')});
    old.push_back({"h." + std::to_string(l) + ".attn.masked_bias", "F32", {}, std::string(4, '\0')});
  }
  write_raw_safetensors(dir.file("old/model.safetensors"), old);
  Gpt2Weights back = llmcc::models::load_gpt2(dir.file("old"));
  EXPECT_TRUE(same_params(back, w));

  // BF16 and F16 weights load as the fp32 values they hold.
  for (const char* dtype : {"BF16", "F16"}) {
    SCOPED_TRACE(dtype);
    const std::string sub = dir.file(std::string("half_") + dtype);
    fs::create_directories(sub);
    fs::copy_file(dir.file("hf/config.json"), sub + "/config.json");
    std::vector<RawTensor> half;
    for (RawTensor t : tensors) {
      std::string bytes;
      for (std::size_t i = 0; i < t.bytes.size(); i += 4) {
        float x;
        std::memcpy(&x, t.bytes.data() + i, 4);
        std::uint16_t h;
        if (dtype == std::string("BF16")) {
          h = llmcc::models::f32_to_bf16(x);
        } else {
          const _Float16 f = static_cast<_Float16>(x);
          std::memcpy(&h, &f, 2);
        }
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
      half.push_back({t.name, dtype, t.shape, bytes});
    }
    write_raw_safetensors(sub + "/model.safetensors", half);
    Gpt2Weights hb = llmcc::models::load_gpt2(sub);
    std::size_t checked = 0;
    for (std::size_t k = 0; k < 3; ++k) {  // wte, wpe, and a Conv1D weight (transposed)
      const char* name = k == 0 ? "wte" : k == 1 ? "wpe" : "h.0.attn.c_attn.weight";
      const llmcc::Tensor& ours = param(w, name);
      const llmcc::Tensor& got = param(hb, name);
      const std::int64_t n = k == 0 ? std::int64_t{c.vocab_size} * c.n_embd : ours.numel();
      for (std::int64_t i = 0; i < n; ++i) {
        const float x = ours.f32()[i];
        const float want = dtype == std::string("BF16") ? llmcc::models::bf16_to_f32(llmcc::models::f32_to_bf16(x))
                                                        : static_cast<float>(static_cast<_Float16>(x));
        ASSERT_EQ(got.f32()[i], want) << "tensor " << k << " element " << i;
        ++checked;
      }
    }
    EXPECT_GT(checked, 500u);
  }
}

TEST(Gpt2Hf, BadFilesFailNamingTheTensorOrKey) {
  TempDir dir;
  const Gpt2Config c = small_config();
  Gpt2Weights w = distinct_gpt2(c);
  llmcc::models::save_gpt2_hf(w.model, dir.file("hf"));
  const std::vector<RawTensor> tensors = raw_tensors(dir.file("hf/model.safetensors"));
  const std::string config = slurp(dir.file("hf/config.json"));

  // A variant directory: the exported config (possibly edited) and tensors (possibly edited).
  auto variant = [&](const std::string& name, std::vector<RawTensor> ts, const std::string& cfg) {
    const std::string sub = dir.file(name);
    fs::create_directories(sub);
    write_text(sub + "/config.json", cfg);
    write_raw_safetensors(sub + "/model.safetensors", ts);
    return sub;
  };

  std::vector<RawTensor> missing = tensors;
  missing.erase(missing.begin() + 5);
  const std::string missing_name = tensors[5].name;
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("missing", missing, config)); },
                           {"[safetensors]", "model.safetensors", ("no tensor '" + missing_name + "'").c_str()}));

  std::vector<RawTensor> extra = tensors;
  extra.push_back({"transformer.h.7.attn.c_attn.weight", "F32", {1}, std::string(4, '\0')});
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("extra", extra, config)); },
                           {"[gpt2_hf]", "unexpected tensor 'transformer.h.7.attn.c_attn.weight'"}));

  std::vector<RawTensor> ints = tensors;
  for (RawTensor& t : ints) {
    if (t.name == "transformer.wpe.weight") t.dtype = "I32";
  }
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("ints", ints, config)); },
                           {"tensor 'transformer.wpe.weight'", "dtype I32, expected F32, BF16 or F16"}));

  // Our own (3C, C) layout instead of Conv1D's (C, 3C): a shape error, not silent garbage.
  std::vector<RawTensor> untransposed = tensors;
  for (RawTensor& t : untransposed) {
    if (t.name == "transformer.h.0.attn.c_attn.weight") t.shape = {24, 8};
  }
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("layout", untransposed, config)); },
                           {"tensor 'transformer.h.0.attn.c_attn.weight'", "shape (24, 8), expected (8, 24)"}));

  std::vector<RawTensor> untied = tensors;
  untied.push_back({"lm_head.weight", "F32", {67, 8}, std::string(67 * 8 * 4, '\0')});
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("untied", untied, config)); },
                           {"lm_head.weight differs from transformer.wte.weight", "ties them"}));

  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_gpt2(variant("wrongcfg", tensors, replace_once(config, "\"n_embd\": 8", "\"n_embd\": 16")));
      },
      {"tensor 'transformer.wte.weight'", "shape (67, 8), expected (67, 16)"}));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::models::load_gpt2(variant("relu", tensors, replace_once(config, "gelu_new", "relu"))); },
      {"config.json", "activation_function is 'relu'"}));
  EXPECT_TRUE(
      throws_error([&] { llmcc::models::load_gpt2(variant("eps", tensors, replace_once(config, "1e-05", "1e-06"))); },
                   {"layer_norm_epsilon is 1e-06"}));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::models::load_gpt2(variant("nohead", tensors, replace_once(config, "\"n_head\": 2,", ""))); },
      {"config.json", "n_head is missing"}));
  EXPECT_TRUE(throws_error(
      [&] { llmcc::models::load_gpt2(variant("llama", tensors, replace_once(config, "\"gpt2\"", "\"llama\""))); },
      {"model_type is 'llama', expected 'gpt2'"}));
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(variant("badjson", tensors, "{\"n_embd\": 8,")); },
                           {"config.json:1:14", "expected"}));
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_gpt2(variant("heads", tensors, replace_once(config, "\"n_head\": 2", "\"n_head\": 3")));
      },
      {"config.json", "cannot build"}));
  // A config naming far more layers than the file holds fails on the first missing layer, before
  // the weights of 65,536 layers are allocated.
  EXPECT_TRUE(throws_error(
      [&] {
        llmcc::models::load_gpt2(
            variant("deep", tensors, replace_once(config, "\"n_layer\": 2", "\"n_layer\": 65536")));
      },
      {"[gpt2_hf]", "no tensor 'transformer.h.2.ln_1.weight'", "n_layer = 65536", "holds 2 layers"}));

  const std::string no_config = dir.file("noconfig");
  fs::create_directories(no_config);
  fs::copy_file(dir.file("hf/model.safetensors"), no_config + "/model.safetensors");
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(no_config); }, {"no config.json beside it"}));
  const std::string empty = dir.file("empty");
  fs::create_directories(empty);
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2_hf(empty); },
                           {"no model.safetensors or model.safetensors.index.json in this directory"}));
}

TEST(Gpt2Hf, ConfigLargerThanItsFileFailsBeforeAllocating) {
  // config.json describing a 16 GB model beside a file of two one-element tensors (found by
  // fuzz_hf_model): every tensor's shape is checked before the model is allocated.
  TempDir dir;
  const std::string sub = dir.file("huge");
  fs::create_directories(sub);
  write_text(
      sub + "/config.json",
      R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 16384, "n_layer": 1, )"
      R"("n_head": 1, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true})");
  write_raw_safetensors(sub + "/model.safetensors", {{"wte.weight", "F32", {1}, std::string(4, '\0')},
                                                     {"h.0.ln_1.weight", "F32", {1}, std::string(4, '\0')}});
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(sub); },
                           {"[safetensors]", "tensor 'wte.weight'", "shape (1), expected (50257, 16384)"}));
}

TEST(Gpt2Hf, ExportCommandWritesSafetensorsAndReadsThemBack) {
  TempDir dir;
  Gpt2Weights w = distinct_gpt2(small_config());
  llmcc::models::save_gpt2_llmc(w.model, dir.file("model.bin"));

  auto r = llmcc::test::run_llmcc(
      dir, {"export", "--ckpt", dir.file("model.bin"), "--format", "safetensors", "--out", dir.file("hf")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir.file("hf/config.json")));
  Gpt2Weights exported = llmcc::models::load_gpt2(dir.file("hf"));
  EXPECT_TRUE(same_params(exported, w));

  // Hugging Face directory in, llm.c file out: the same bytes as the original.
  r = llmcc::test::run_llmcc(dir,
                             {"export", "--ckpt", dir.file("hf"), "--format", "llmc", "--out", dir.file("back.bin")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(dir.file("back.bin")), slurp(dir.file("model.bin")));

  // An existing file where the directory should go.
  r = llmcc::test::run_llmcc(
      dir, {"export", "--ckpt", dir.file("model.bin"), "--format", "safetensors", "--out", dir.file("model.bin")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("a directory"), std::string::npos) << r.err;

  // Every command that reads a model takes the folder: train --init-from, generate --ckpt.
  llmcc::test::write_progression_shard(dir.file("train.bin"), 2000, 1, 67);
  r = llmcc::test::run_llmcc(
      dir, {"train", "--init-from", dir.file("hf"), "--train-data", dir.file("train.bin"), "--steps", "2",
            "--batch-size", "2", "--seq-len", "8", "--val-every", "0", "--out-dir", dir.file("run"), "--threads", "1"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // "a" is GPT-2 token 64, inside this model's 67.
  r = llmcc::test::run_llmcc(dir, {"generate", "--ckpt", dir.file("hf"), "--prompt", "a", "--max-tokens", "3",
                                   "--temperature", "0", "--top-k", "0"});
  if (r.code != 0) {
    // Without GPT-2's tokenizer files there is nothing to decode with; the folder itself was taken.
    EXPECT_NE(r.err.find("encoder.json"), std::string::npos) << r.err;
    std::cout << "note: generate from the folder stopped at the tokenizer (GPT-2's files not found)\n";
  }
  fs::create_directories(dir.file("empty"));
  const std::vector<std::vector<std::string>> bad_paths = {
      {"generate", "--ckpt", dir.file("empty")},
      {"train", "--init-from", dir.file("empty"), "--train-data", dir.file("train.bin")}};
  for (const std::vector<std::string>& args : bad_paths) {
    const std::string flag = args[1];
    r = llmcc::test::run_llmcc(dir, args);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(flag + ": " + dir.file("empty") + " is a directory without model.safetensors"),
              std::string::npos)
        << r.err;
  }
}

}  // namespace
