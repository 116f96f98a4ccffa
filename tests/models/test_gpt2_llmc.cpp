// llm.c's GPT-2 model file: layout (checked element by element against llm.c's tensor table),
// fp32 round trip, bf16 import and export, vocabulary padding, load_gpt2's dispatch, the
// `llmcc export` command, and an error for every kind of bad file.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "commands.h"
#include "llmcc/io/checkpoint.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/gpt2/gpt2_weights.h"
#include "distinct_gpt2.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

using llmcc::models::Gpt2Config;
using llmcc::models::Gpt2Weights;
using llmcc::models::LlmcDType;
using llmcc::test::distinct_gpt2;
using llmcc::test::throws_error;

Gpt2Config small_config() {
  Gpt2Config c;
  c.vocab_size = 67;
  c.padded_vocab_size = 128;
  c.max_seq_len = 9;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::int32_t header_int(const std::vector<char>& bytes, int i) {
  std::int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

void set_header_int(std::vector<char>& bytes, int i, std::int32_t v) { std::memcpy(bytes.data() + 4 * i, &v, 4); }

bool same_params(const Gpt2Weights& a, const Gpt2Weights& b) {
  return a.params.size() == b.params.size() &&
         std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)) == 0;
}

TEST(Gpt2Llmc, Fp32FileFollowsLlmcsTensorTable) {
  const Gpt2Config c = small_config();
  const Gpt2Weights w = distinct_gpt2(c);
  llmcc::test::TempDir dir;
  const std::string path = dir.file("model.bin");
  llmcc::models::save_gpt2_llmc(w.model, path);
  const std::vector<char> bytes = read_bytes(path);

  const std::int64_t C = c.n_embd, L = c.n_layer, Vp = c.padded_vocab_size, maxT = c.max_seq_len;
  const std::int32_t expected_header[8] = {20240326,  3,        c.max_seq_len, c.vocab_size,
                                           c.n_layer, c.n_head, c.n_embd,      c.padded_vocab_size};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(header_int(bytes, i), expected_header[i]) << "header int " << i;
  for (int i = 8; i < 256; ++i) ASSERT_EQ(header_int(bytes, i), 0) << "header int " << i;
  ASSERT_EQ(bytes.size(), 1024 + 4 * static_cast<std::size_t>(c.parameter_count()));

  // llm.c's param_sizes table, written out independently of the exporter: (name, elements).
  // Each layered tensor is L slices; the model tensor for layer l and slice element e is given.
  struct Entry {
    const char* name;
    std::int64_t size;
    std::function<float(std::int64_t l, std::int64_t e)> model_value;  // l = layer, e = element within the slice
  };
  const auto& m = w.model;
  auto layer = [&](std::size_t l) -> const llmcc::models::Gpt2Block& { return m.h[l]; };
  const std::vector<Entry> table = {
      {"wte", Vp * C, [&](auto, auto e) { return m.wte.f32()[e]; }},
      {"wpe", maxT * C, [&](auto, auto e) { return m.wpe.f32()[e]; }},
      {"ln1w", C, [&](auto l, auto e) { return layer(l).ln_1.w.f32()[e]; }},
      {"ln1b", C, [&](auto l, auto e) { return layer(l).ln_1.b.f32()[e]; }},
      // c_attn (3C, C) is qkvw's slice as it is: rows q, k, v in both (the row order the
      // attention op reads is checked against PyTorch by tests/models/test_gpt2_parity.cpp).
      {"qkvw", 3 * C * C, [&](auto l, auto e) { return layer(l).attn.c_attn.w.f32()[e]; }},
      {"qkvb", 3 * C, [&](auto l, auto e) { return layer(l).attn.c_attn.b.f32()[e]; }},
      {"attprojw", C * C, [&](auto l, auto e) { return layer(l).attn.c_proj.w.f32()[e]; }},
      {"attprojb", C, [&](auto l, auto e) { return layer(l).attn.c_proj.b.f32()[e]; }},
      {"ln2w", C, [&](auto l, auto e) { return layer(l).ln_2.w.f32()[e]; }},
      {"ln2b", C, [&](auto l, auto e) { return layer(l).ln_2.b.f32()[e]; }},
      {"fcw", 4 * C * C, [&](auto l, auto e) { return layer(l).mlp.c_fc.w.f32()[e]; }},
      {"fcb", 4 * C, [&](auto l, auto e) { return layer(l).mlp.c_fc.b.f32()[e]; }},
      {"fcprojw", C * 4 * C, [&](auto l, auto e) { return layer(l).mlp.c_proj.w.f32()[e]; }},
      {"fcprojb", C, [&](auto l, auto e) { return layer(l).mlp.c_proj.b.f32()[e]; }},
      {"lnfw", C, [&](auto, auto e) { return m.ln_f.w.f32()[e]; }},
      {"lnfb", C, [&](auto, auto e) { return m.ln_f.b.f32()[e]; }},
  };
  std::size_t offset = 1024;
  for (const Entry& entry : table) {
    const std::string n = entry.name;
    const bool layered = !(n == "wte" || n == "wpe" || n == "lnfw" || n == "lnfb");
    for (std::int64_t l = 0; l < (layered ? L : 1); ++l) {
      for (std::int64_t e = 0; e < entry.size; ++e) {
        float got;
        std::memcpy(&got, bytes.data() + offset, 4);
        offset += 4;
        ASSERT_EQ(got, entry.model_value(l, e)) << entry.name << " layer " << l << " element " << e;
      }
    }
  }
  EXPECT_EQ(offset, bytes.size());
}

TEST(Gpt2Llmc, Fp32RoundTripIsByteIdentical) {
  const Gpt2Weights w = distinct_gpt2(small_config());
  llmcc::test::TempDir dir;
  llmcc::models::save_gpt2_llmc(w.model, dir.file("a.bin"));
  const Gpt2Weights back = llmcc::models::load_gpt2_llmc(dir.file("a.bin"));
  EXPECT_EQ(back.model.cfg.str(), w.model.cfg.str());
  EXPECT_TRUE(same_params(back, w));
  llmcc::models::save_gpt2_llmc(back.model, dir.file("b.bin"));
  EXPECT_EQ(read_bytes(dir.file("a.bin")), read_bytes(dir.file("b.bin")));
  // load_gpt2 takes llm.c files too.
  EXPECT_TRUE(same_params(llmcc::models::load_gpt2(dir.file("a.bin")), w));
}

TEST(Gpt2Llmc, Bf16Conversion) {
  using llmcc::models::bf16_to_f32;
  using llmcc::models::f32_to_bf16;
  auto bits = [](std::uint32_t u) { return std::bit_cast<float>(u); };
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(bits(0x3f808000u)), 0x3f80);  // tie, even below: down
  EXPECT_EQ(f32_to_bf16(bits(0x3f818000u)), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(f32_to_bf16(bits(0x3f808001u)), 0x3f81);  // above the tie: up
  EXPECT_EQ(f32_to_bf16(bits(0x3f807fffu)), 0x3f80);  // below the tie: down
  EXPECT_EQ(f32_to_bf16(bits(0x7f7fffffu)), 0x7f80);  // max float rounds to inf, as in PyTorch
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits(0x7f800001u)))));  // NaN with a low payload
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(Gpt2Llmc, Bf16ImportAndExport) {
  const Gpt2Config c = small_config();
  const Gpt2Weights w = distinct_gpt2(c);
  llmcc::test::TempDir dir;
  const std::string path = dir.file("model_bf16.bin");
  llmcc::models::save_gpt2_llmc(w.model, path, LlmcDType::BF16);
  const std::vector<char> bytes = read_bytes(path);
  EXPECT_EQ(header_int(bytes, 1), 5);
  ASSERT_EQ(bytes.size(), 1024 + 2 * static_cast<std::size_t>(c.parameter_count()));
  EXPECT_EQ(llmcc::models::read_llmc_header(path).dtype, LlmcDType::BF16);

  const Gpt2Weights back = llmcc::models::load_gpt2(path);
  EXPECT_EQ(back.model.cfg.str(), c.str());
  for (std::size_t i = 0; i < w.params.count(); ++i) {
    const llmcc::Tensor a = w.params.tensor(i), b = back.params.tensor(i);
    for (std::int64_t k = 0; k < a.numel(); ++k) {
      const float x = a.f32()[k], y = b.f32()[k];
      ASSERT_EQ(y, llmcc::models::bf16_to_f32(llmcc::models::f32_to_bf16(x))) << w.params.name(i) << "[" << k << "]";
      ASSERT_LE(std::fabs(x - y), std::ldexp(std::fabs(x), -8)) << w.params.name(i) << "[" << k << "]";
    }
  }
  // The first bf16 weight is wte[0], right after the header.
  std::uint16_t first;
  std::memcpy(&first, bytes.data() + 1024, 2);
  EXPECT_EQ(first, llmcc::models::f32_to_bf16(w.model.wte.f32()[0]));
  // bf16 -> fp32 -> bf16 is exact.
  llmcc::models::save_gpt2_llmc(back.model, dir.file("again_bf16.bin"), LlmcDType::BF16);
  EXPECT_EQ(read_bytes(dir.file("again_bf16.bin")), bytes);
}

TEST(Gpt2Llmc, UnpaddedVocabularyIsPaddedOnImport) {
  Gpt2Config c = small_config();
  c.padded_vocab_size = c.vocab_size;  // Vp = V = 67, as an exporter without padding writes
  const Gpt2Weights w = distinct_gpt2(c);
  llmcc::test::TempDir dir;
  for (LlmcDType dtype : {LlmcDType::F32, LlmcDType::BF16}) {
    const std::string path = dir.file(dtype == LlmcDType::F32 ? "unpadded.bin" : "unpadded_bf16.bin");
    llmcc::models::save_gpt2_llmc(w.model, path, dtype);
    EXPECT_EQ(header_int(read_bytes(path), 7), 67);
    const Gpt2Weights back = llmcc::models::load_gpt2_llmc(path);
    EXPECT_EQ(back.model.cfg.padded_vocab_size, 128);
    EXPECT_EQ(back.model.cfg.vocab_size, 67);
    const std::int64_t real = 67 * c.n_embd;
    ASSERT_EQ(back.model.wte.numel(), 128 * c.n_embd);
    for (std::int64_t i = 0; i < back.model.wte.numel(); ++i) {
      const float want = i < real ? w.model.wte.f32()[i] : 0.0f;
      const float got = back.model.wte.f32()[i];
      ASSERT_EQ(got, dtype == LlmcDType::F32 ? want : llmcc::models::bf16_to_f32(llmcc::models::f32_to_bf16(want)))
          << i;
    }
    // Everything after wte is where it was.
    const float* a = w.model.wpe.f32();
    const float* b = back.model.wpe.f32();
    if (dtype == LlmcDType::F32) {
      EXPECT_EQ(0, std::memcmp(a, b, sizeof(float) * static_cast<std::size_t>(w.model.wpe.numel())));
      EXPECT_EQ(back.model.ln_f.b.f32()[7], w.model.ln_f.b.f32()[7]);
    }
  }
}

TEST(Gpt2Llmc, LoadGpt2TakesBothFormats) {
  const Gpt2Config c = small_config();
  const Gpt2Weights w = distinct_gpt2(c);
  llmcc::test::TempDir dir;
  llmcc::TrainState state;
  llmcc::models::gpt2_config_to_kv(c, state.config);
  llmcc::save_checkpoint(dir.file("model.ckpt"), w.params, nullptr, state);
  llmcc::models::save_gpt2_llmc(w.model, dir.file("model.bin"));
  EXPECT_FALSE(llmcc::models::is_llmc_model_file(dir.file("model.ckpt")));
  EXPECT_TRUE(llmcc::models::is_llmc_model_file(dir.file("model.bin")));
  EXPECT_FALSE(llmcc::models::is_llmc_model_file(dir.file("absent.bin")));
  EXPECT_TRUE(same_params(llmcc::models::load_gpt2(dir.file("model.ckpt")), w));
  EXPECT_TRUE(same_params(llmcc::models::load_gpt2(dir.file("model.bin")), w));
  // Neither kind: both magics named, and llm.c's other files recognised.
  write_bytes(dir.file("junk.bin"), std::vector<char>(4096, 'x'));
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir.file("junk.bin")); },
                           {"junk.bin", "neither an llmcc checkpoint", "nor an llm.c GPT-2 model file"}));
  std::vector<char> tokens(2048, 0);
  set_header_int(tokens, 0, 20240520);
  write_bytes(dir.file("tokens.bin"), tokens);
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir.file("tokens.bin")); }, {"tokens.bin", "token file"}));
  // Too short to tell: the checkpoint reader's error.
  write_bytes(dir.file("short.bin"), {'L', 'L'});
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir.file("short.bin")); }, {"short.bin", "truncated"}));
}

TEST(Gpt2Llmc, CheckpointWithSeparateQkvIsAClearError) {
  // Checkpoints from before c_attn held each layer's q, k and v as three (C, C) tensors
  // (h.N.attn.q.weight, ...); loading one names the fused tensor the model expects and the old one.
  const Gpt2Config c = small_config();
  const Gpt2Weights w = distinct_gpt2(c);
  std::vector<llmcc::ParameterInfo> old;
  for (std::size_t i = 0; i < w.params.count(); ++i) {
    const std::string& name = w.params.name(i);
    const auto at = name.find("attn.c_attn.");
    if (at == std::string::npos) {
      old.push_back({name, w.params.shape(i)});
      continue;
    }
    const bool weight = name.compare(at + 12, std::string::npos, "weight") == 0;
    for (const char* part : {"q", "k", "v"}) {
      old.push_back({name.substr(0, at) + "attn." + part + (weight ? ".weight" : ".bias"),
                     weight ? llmcc::Shape{c.n_embd, c.n_embd} : llmcc::Shape{c.n_embd}});
    }
  }
  const llmcc::ParameterStore store(old);
  llmcc::test::TempDir dir;
  llmcc::TrainState state;
  llmcc::models::gpt2_config_to_kv(c, state.config);
  llmcc::save_checkpoint(dir.file("old.ckpt"), store, nullptr, state);
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir.file("old.ckpt")); },
                           {"old.ckpt", "h.0.attn.c_attn.weight of the model is not in the checkpoint",
                            "it has h.0.attn.q.weight, which the model has not"}));
}

TEST(Gpt2Llmc, CheckpointConfigLargerThanItsTensorsFailsBeforeAllocating) {
  // A 500-byte checkpoint whose config section describes a 16 GB model (found by fuzz_model_load):
  // refused by comparing the config's parameter count with the tensors the file holds, before
  // the model is allocated.
  const llmcc::ParameterStore tiny({{"wte", llmcc::Shape{1}}});
  llmcc::TrainState state;
  state.config = {{"model.family", "gpt2"},      {"model.vocab_size", "50257"}, {"model.padded_vocab_size", "50304"},
                  {"model.max_seq_len", "1024"}, {"model.n_layer", "1"},        {"model.n_head", "1"},
                  {"model.n_embd", "16384"}};
  llmcc::test::TempDir dir;
  llmcc::save_checkpoint(dir.file("huge.ckpt"), tiny, nullptr, state);
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir.file("huge.ckpt")); },
                           {"[gpt2]", "huge.ckpt [params]: holds 1 weights", "too few for the model", "C16384"}));
}

TEST(Gpt2Llmc, ExportCommandConvertsBothWays) {
  const Gpt2Config c = small_config();
  const Gpt2Weights w = distinct_gpt2(c);
  llmcc::test::TempDir dir;
  llmcc::TrainState state;
  llmcc::models::gpt2_config_to_kv(c, state.config);
  llmcc::save_checkpoint(dir.file("run.ckpt"), w.params, nullptr, state);
  auto run = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return llmcc::cli::run_export(static_cast<int>(argv.size()), argv.data());
  };
  // llmcc -> llm.c (auto picks llmc), -> llmcc again (auto picks llmcc), -> llm.c bf16.
  ASSERT_EQ(0, run({"--ckpt", dir.file("run.ckpt"), "--out", dir.file("a.bin")}));
  ASSERT_TRUE(llmcc::models::is_llmc_model_file(dir.file("a.bin")));
  EXPECT_TRUE(same_params(llmcc::models::load_gpt2_llmc(dir.file("a.bin")), w));
  ASSERT_EQ(0, run({"--ckpt", dir.file("a.bin"), "--out", dir.file("b.ckpt")}));
  EXPECT_FALSE(llmcc::models::is_llmc_model_file(dir.file("b.ckpt")));
  const Gpt2Weights b = llmcc::models::load_gpt2(dir.file("b.ckpt"));
  EXPECT_TRUE(same_params(b, w));
  EXPECT_EQ(b.model.cfg.str(), c.str());
  {
    llmcc::CheckpointReader reader(dir.file("b.ckpt"));
    EXPECT_FALSE(reader.has("adamw.m"));  // weights only
  }
  ASSERT_EQ(0, run({"--ckpt", dir.file("b.ckpt"), "--out", dir.file("c.bin"), "--format", "llmc"}));
  EXPECT_EQ(read_bytes(dir.file("a.bin")), read_bytes(dir.file("c.bin")));
  ASSERT_EQ(0, run({"--ckpt", dir.file("a.bin"), "--out", dir.file("d.bin"), "--format=llmc-bf16"}));
  EXPECT_EQ(llmcc::models::read_llmc_header(dir.file("d.bin")).version, 5);
  EXPECT_EQ(0, run({"--help"}));
  EXPECT_TRUE(throws_error([&] { run({"--ckpt", dir.file("a.bin"), "--out", dir.file("e.bin"), "--format", "onnx"}); },
                           {"--format", "onnx", "gguf", "llmc-bf16"}));
  EXPECT_TRUE(throws_error([&] { run({"--ckpt", dir.file("missing.bin"), "--out", dir.file("e.bin")}); },
                           {"missing.bin", "does not exist"}));
  EXPECT_TRUE(throws_error([&] { run({"--out", dir.file("e.bin")}); }, {"--ckpt"}));
}

class Gpt2LlmcErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    llmcc::models::save_gpt2_llmc(distinct_gpt2(small_config()).model, good_);
    bytes_ = read_bytes(good_);
  }
  // Writes the bytes as bad.bin and expects loading it to fail with every fragment.
  ::testing::AssertionResult fails_with(const std::vector<char>& bytes, std::initializer_list<const char*> fragments) {
    write_bytes(bad_, bytes);
    return throws_error([&] { llmcc::models::load_gpt2_llmc(bad_); }, fragments);
  }
  llmcc::test::TempDir dir_;
  std::string good_ = dir_.file("good.bin"), bad_ = dir_.file("bad.bin");
  std::vector<char> bytes_;
};

TEST_F(Gpt2LlmcErrors, BadMagic) {
  std::vector<char> b = bytes_;
  set_header_int(b, 0, 12345);
  EXPECT_TRUE(fails_with(b, {"bad.bin", "not an llm.c GPT-2 model file", "12345", "20240326"}));
  set_header_int(b, 0, 20240520);
  EXPECT_TRUE(fails_with(b, {"not an llm.c GPT-2 model file", "token file"}));
  EXPECT_TRUE(fails_with({'a', 'b'}, {"not an llm.c GPT-2 model file", "2 bytes"}));
  EXPECT_TRUE(fails_with({}, {"not an llm.c GPT-2 model file"}));
}

TEST_F(Gpt2LlmcErrors, TruncatedFile) {
  const std::size_t full = bytes_.size();
  std::vector<char> b(bytes_.begin(), bytes_.end() - 10);
  const std::string want = "expected " + std::to_string(full) + " bytes";
  const std::string have = "the file has " + std::to_string(full - 10);
  EXPECT_TRUE(fails_with(b, {"bad.bin", "truncated", want.c_str(), have.c_str()}));
  b.resize(600);  // inside the header
  EXPECT_TRUE(fails_with(b, {"truncated", "600 bytes", "1024-byte header"}));
  b = bytes_;
  b.push_back(0);
  const std::string have_more = "the file has " + std::to_string(full + 1);
  EXPECT_TRUE(fails_with(b, {"trailing bytes", want.c_str(), have_more.c_str()}));
}

TEST_F(Gpt2LlmcErrors, UnknownVersion) {
  std::vector<char> b = bytes_;
  set_header_int(b, 1, 4);
  EXPECT_TRUE(fails_with(b, {"bad.bin", "unknown version 4", "3 = fp32", "5 = bf16"}));
  set_header_int(b, 1, 1);
  EXPECT_TRUE(fails_with(b, {"unknown version 1", "older layout"}));
}

TEST_F(Gpt2LlmcErrors, HeaderValuesOutOfRange) {
  std::vector<char> b = bytes_;
  set_header_int(b, 4, 0);
  EXPECT_TRUE(fails_with(b, {"bad.bin", "L", "is 0"}));
  b = bytes_;
  set_header_int(b, 7, 50);  // Vp < V
  EXPECT_TRUE(fails_with(b, {"Vp", "is 50", "67.."}));
  b = bytes_;
  set_header_int(b, 6, -8);
  EXPECT_TRUE(fails_with(b, {"C", "is -8"}));
  b = bytes_;
  set_header_int(b, 5, 3);  // C = 8 is not a multiple of NH = 3
  EXPECT_TRUE(fails_with(b, {"C = 8", "NH = 3"}));
  b = bytes_;
  set_header_int(b, 3, 1 << 30);
  EXPECT_TRUE(fails_with(b, {"V", "1073741824"}));
  // A consistent header of another shape: the size check names both sizes.
  b = bytes_;
  set_header_int(b, 4, 2);
  EXPECT_TRUE(fails_with(b, {"has trailing bytes", "L2 H2 C8"}));
}

TEST_F(Gpt2LlmcErrors, MissingFile) {
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2_llmc(dir_.file("nope.bin")); }, {"nope.bin"}));
  EXPECT_TRUE(throws_error([&] { llmcc::models::load_gpt2(dir_.file("nope.bin")); }, {"nope.bin"}));
}

}  // namespace
