// llmcc's GGUF export (models/gguf_export.h) as llama.cpp's quantizer types tensors, and every
// registered family that llama.cpp has an architecture for writing a file, with nothing here
// naming a family. What the files hold (metadata, names, layouts, values within each type's
// bound) is checked against the `gguf` package in tests/hf/test_gguf_export.py, and against
// llama.cpp itself by bench/gguf_llama_cpp.py.
#include "models/gguf_export.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/registry.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

using llmcc::GgmlType;
using llmcc::models::gguf_tensor_type;
using llmcc::models::GgufQuant;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

TEST(GgufExportApi, TypesFollowLlamaCppsQuantizer) {
  const std::vector<std::int64_t> matrix = {512, 1024}, vector = {512};
  // Norms, biases and learned positions stay f32 whatever the quantization.
  for (GgufQuant q : {GgufQuant::F16, GgufQuant::Q8_0, GgufQuant::Q4_0, GgufQuant::Q4_K_M}) {
    EXPECT_EQ(gguf_tensor_type(q, "blk.0.attn_norm.weight", vector, 12, true), GgmlType::F32);
    EXPECT_EQ(gguf_tensor_type(q, "position_embd.weight", matrix, 12, true), GgmlType::F32);
  }
  EXPECT_EQ(gguf_tensor_type(GgufQuant::F32, "blk.0.attn_q.weight", matrix, 12, true), GgmlType::F32);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::F16, "token_embd.weight", matrix, 12, true), GgmlType::F16);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::BF16, "output.weight", matrix, 12, true), GgmlType::BF16);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q8_0, "output.weight", matrix, 12, true), GgmlType::Q8_0);
  // q4_0: the head in q6_K, the tied embedding when it is the head.
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_0, "output.weight", matrix, 12, true), GgmlType::Q6_K);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_0, "token_embd.weight", matrix, 12, true), GgmlType::Q4_0);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_0, "token_embd.weight", matrix, 12, false), GgmlType::Q6_K);
  // q4_k_m: q6_K for the head and for attn_v, attn_qkv and ffn_down in llama.cpp's "more bits"
  // layers (12 layers: 0, 3, 6, 9, 10, 11), q4_K elsewhere.
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "output.weight", matrix, 12, true), GgmlType::Q6_K);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "token_embd.weight", matrix, 12, true), GgmlType::Q4_K);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "token_embd.weight", matrix, 12, false), GgmlType::Q6_K);
  std::string more;
  for (int l = 0; l < 12; ++l)
    for (const char* t : {"attn_v", "attn_qkv", "ffn_down"}) {
      const GgmlType ty =
          gguf_tensor_type(GgufQuant::Q4_K_M, "blk." + std::to_string(l) + "." + t + ".weight", matrix, 12, true);
      EXPECT_TRUE(ty == GgmlType::Q6_K || ty == GgmlType::Q4_K);
      if (ty == GgmlType::Q6_K && std::string(t) == "attn_v") more += std::to_string(l) + " ";
    }
  EXPECT_EQ(more, "0 3 6 9 10 11 ");
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "blk.0.attn_q.weight", matrix, 12, true), GgmlType::Q4_K);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "blk.0.ffn_up.weight", matrix, 12, true), GgmlType::Q4_K);
  // Rows the 256-value super-blocks do not divide: llama.cpp's fallbacks, then f16.
  const std::vector<std::int64_t> narrow = {96, 64}, odd = {100, 64};
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "blk.1.attn_q.weight", narrow, 12, true), GgmlType::Q5_0);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "output.weight", narrow, 12, true), GgmlType::Q8_0);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_K_M, "blk.1.attn_q.weight", odd, 12, true), GgmlType::F16);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q8_0, "blk.1.attn_q.weight", odd, 12, true), GgmlType::F16);
  EXPECT_EQ(gguf_tensor_type(GgufQuant::Q4_0, "blk.1.attn_q.weight", odd, 12, true), GgmlType::F16);
}

TEST(GgufExportApi, QuantNamesParseAndTheUnknownIsNot) {
  GgufQuant q = GgufQuant::F32;
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m"}) {
    ASSERT_TRUE(llmcc::models::parse_gguf_quant(name, &q)) << name;
    EXPECT_EQ(std::string(llmcc::models::gguf_quant_name(q)), name);
  }
  EXPECT_FALSE(llmcc::models::parse_gguf_quant("q4_k_s", &q));
  EXPECT_FALSE(llmcc::models::parse_gguf_quant("Q8_0", &q));
}

// A GPT-2-style tokenizer of `extra` tokens beyond the 256 bytes and <|endoftext|>.
std::unique_ptr<llmcc::TextTokenizer> small_tokenizer(const TempDir& dir, int extra) {
  std::string json = "{";
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    char buf[32];
    std::snprintf(buf, sizeof buf, "\"\\u%04x\": %d, ", printable ? b : next++, b);
    json += buf;
  }
  std::string bpe = "#version: 0.2\n";
  for (int i = 0; i < extra; ++i) {
    // "a" + i times "b": merged from the previous token and "b".
    const std::string left = "a" + std::string(static_cast<std::size_t>(i), 'b');
    json += "\"" + left + "b\": " + std::to_string(256 + i) + ", ";
    bpe += left + " b\n";
  }
  json += "\"<|endoftext|>\": " + std::to_string(256 + extra) + "}";
  std::ofstream(dir.file("encoder.json")) << json;
  std::ofstream(dir.file("vocab.bpe")) << bpe;
  return llmcc::load_text_tokenizer("gpt2:" + dir.path.string());
}

TEST(GgufExportApi, EveryFamilyWritesItsFileAndRefusesATokenizerLargerThanItsVocabulary) {
  const TempDir dir;
  const auto tok = small_tokenizer(dir, 40);  // 297 tokens
  for (const llmcc::models::Family* f : llmcc::models::model_families()) {
    SCOPED_TRACE(f->name());
    llmcc::models::ModelConfig c = f->preset(f->preset_names().front());
    c.set("n_layer", 2);
    c.set("vocab_size", 300);
    const std::unique_ptr<llmcc::models::Model> m = llmcc::models::make_model(c);
    m->init(1);
    llmcc::models::GgufModelParts parts = m->gguf_parts();
    EXPECT_FALSE(parts.arch.empty());
    EXPECT_EQ(parts.vocab_rows, 300);
    // Two quantizations: every type and rule is covered by the tests above and the Python ones.
    for (GgufQuant q : {GgufQuant::F32, GgufQuant::Q8_0}) {
      const std::string path = dir.file(std::string(f->name()) + "." + llmcc::models::gguf_quant_name(q) + ".gguf");
      llmcc::models::write_model_gguf(m->gguf_parts(), {q, tok.get(), "test"}, path);
      EXPECT_GT(std::filesystem::file_size(path), 0u);
    }
    // More tokens than the model has rows: refused, nothing written.
    c.set("vocab_size", 280);
    const std::unique_ptr<llmcc::models::Model> small = llmcc::models::make_model(c);
    const std::string path = dir.file("small.gguf");
    EXPECT_TRUE(throws_error(
        [&] { llmcc::models::write_model_gguf(small->gguf_parts(), {GgufQuant::F16, tok.get(), ""}, path); },
        {"[llmcc export]", "297 tokens", "280"}));
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

}  // namespace
