// Writes the seed corpus of every fuzz target: valid inputs made with llmcc's own writers, so
// the fuzzers start from files llmcc produces and reads (docs/fuzzing.md).
//
//   llmcc_fuzz_make_seeds <dir>     writes <dir>/<target>/<seed> for every target
//
// Inputs that stand for several files join them with kPartSeparator; checkpoint inputs start
// with the mode byte of checkpoint_fixup.h.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/data_files.h"
#include "fuzz_common.h"
#include "llmcc/error.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/io/safetensors.h"
#include "llmcc/text/sp_tokenizer.h"
#include "llmcc/text/text_tokenizer.h"
#include "llmcc/io/token_file.h"
#include "model_report.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/gpt2/gpt2_weights.h"
#include "llama.grad.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_weights.h"
#include "run_tokenizer.h"
#include "tiny_models.h"
#include "tiny_store.h"
#include "train_options.h"

namespace fs = std::filesystem;
using llmcc::fuzz::kPartSeparator;

namespace {

fs::path g_out;
fs::path g_tmp;
int g_count = 0;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) llmcc::fail("make_seeds", "cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = g_out / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) llmcc::fail("make_seeds", "cannot write " + (dir / name).string());
  ++g_count;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? std::string(kPartSeparator) : "") + parts[i];
  return out;
}

// Small but not all-zero values, so conversions and comparisons see real numbers.
void fill(llmcc::ParameterStore& p) {
  for (std::size_t i = 0; i < p.size(); ++i) p.data()[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
}

const std::vector<std::string> kTexts = {
    "Hello world",
    "The quick brown fox's tail; it's 42 and they'll go.",
    "  leading and trailing spaces  \n\n\ttabs\r\n",
    "<|endoftext|>a document<|endoftext|>",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 123456",
    "bad utf-8: \xC3 \xFF\xFE \xED\xA0\x80 \xF4\x90\x80\x80",
    std::string("nul\0byte", 8),
};

void checkpoint_seeds() {
  llmcc::ParameterStore params = llmcc::fuzz::tiny_store();
  fill(params);
  llmcc::AdamW opt(params);
  llmcc::TrainState st;
  st.step = 7;
  st.data.shard = 1;
  st.data.position = 64;
  st.data.rng = 99;
  st.data.batches = 3;
  st.rngs["sample"] = 12345;
  st.config = {{"model.family", "gpt2"}, {"train.lr", "0.0006"}};
  st.files["tokenizer.model"] = "not a real model";
  const fs::path p = g_tmp / "c.ckpt";
  llmcc::save_checkpoint(p.string(), params, &opt, st);
  const std::string full = read_bytes(p);
  seed("checkpoint", "full_fixup", "\x01" + full);
  seed("checkpoint", "full_raw", std::string(1, '\0') + full);
  llmcc::save_checkpoint(p.string(), params, nullptr, llmcc::TrainState{});
  seed("checkpoint", "weights_only", "\x01" + read_bytes(p));
  llmcc::CheckpointWriter w;
  w.add_blob("state", "step=1\n");
  w.save(p.string());
  seed("checkpoint", "one_blob", "\x01" + read_bytes(p));
  seed("key_values", "state",
       llmcc::format_key_values({{"step", "7"}, {"adamw.t", "7"}, {"data", st.data.to_string()}, {"rng.sample", "1"}}));
  seed("key_values", "loader_state", st.data.to_string());
}

void model_seeds() {
  using namespace llmcc;
  models::Gpt2Weights g = models::make_gpt2(fuzz::tiny_gpt2_config());
  fill(g.params);
  models::LlamaWeights l = models::make_llama(fuzz::tiny_llama_config());
  fill(l.params);

  // llmcc checkpoints of both families (what load_gpt2 / load_llama read).
  const fs::path ck = g_tmp / "m.ckpt";
  TrainState st;
  models::gpt2_config_to_kv(g.model.cfg, st.config);
  save_checkpoint(ck.string(), g.params, nullptr, st);
  seed("model_load", "gpt2_ckpt", "\x01" + read_bytes(ck));
  seed("key_values", "gpt2_config", format_key_values(st.config));
  st.config.clear();
  models::llama_config_to_kv(l.model.cfg, st.config);
  save_checkpoint(ck.string(), l.params, nullptr, st);
  seed("model_load", "llama_ckpt", "\x01" + read_bytes(ck));
  seed("key_values", "llama_config", format_key_values(st.config));
  models::LlamaConfig scaled = fuzz::tiny_llama_config();
  scaled.rope_scaling = models::llama_preset("llama-3.2-1b").rope_scaling;
  KeyValues kv;
  models::llama_config_to_kv(scaled, kv);
  seed("key_values", "llama_config_scaled", format_key_values(kv));

  // llm.c files, fp32 and bf16.
  const fs::path lc = g_tmp / "m.bin";
  models::save_gpt2_llmc(g.model, lc.string(), models::LlmcDType::F32);
  seed("llmc_model", "fp32", read_bytes(lc));
  seed("model_load", "llmc_fp32", std::string(1, '\0') + read_bytes(lc));
  models::save_gpt2_llmc(g.model, lc.string(), models::LlmcDType::BF16);
  seed("llmc_model", "bf16", read_bytes(lc));

  // Hugging Face directories: config.json, model.safetensors.
  const fs::path hg = g_tmp / "hf_gpt2", hl = g_tmp / "hf_llama";
  models::save_gpt2_hf(g.model, hg.string());
  models::save_llama_hf(l.model, hl.string());
  for (const auto& [name, dir] : {std::pair<std::string, fs::path>{"gpt2", hg}, {"llama", hl}}) {
    const std::string config = read_bytes(dir / "config.json");
    const std::string weights = read_bytes(dir / "model.safetensors");
    seed("hf_model", name, join({config, weights}));
    seed("hf_config", name, config);
    seed("json", "config_" + name, config);
    seed("safetensors", "model_" + name, weights);
    // The header alone, as JSON.
    std::uint64_t n = 0;
    std::memcpy(&n, weights.data(), 8);
    seed("json", "safetensors_header_" + name, weights.substr(8, n));
  }
  // The same models in bf16, in two shards (the names the target writes): config.json, the index,
  // the shards. The shard size grows from half the data until the greedy split gives two.
  for (const auto& [name, dir] : {std::pair<std::string, fs::path>{"gpt2", hg}, {"llama", hl}}) {
    std::uint64_t total = 0;  // bytes of the tensors in bf16
    const SafetensorsReader single((dir / "model.safetensors").string());
    for (const SafetensorsEntry& e : single.tensors()) total += (e.end - e.begin) / 2;
    const fs::path sharded = g_tmp / ("sharded_" + name);
    for (std::uint64_t max = total / 2; max < total; max += total / 64) {
      const SafetensorsModelOptions options{SafetensorsDType::BF16, max};
      if (name == "gpt2")
        models::save_gpt2_hf(g.model, sharded.string(), options);
      else
        models::save_llama_hf(l.model, sharded.string(), options);
      if (fs::exists(sharded / "model-00002-of-00002.safetensors")) break;
    }
    seed("hf_model", "sharded_" + name,
         join({read_bytes(sharded / "config.json"), read_bytes(sharded / "model.safetensors.index.json"),
               read_bytes(sharded / "model-00001-of-00002.safetensors"),
               read_bytes(sharded / "model-00002-of-00002.safetensors")}));
  }
  seed("hf_config", "llama_scaled", models::llama_hf_config_json(scaled));
  seed("hf_config", "gpt2_124m", models::gpt2_hf_config_json(models::gpt2_preset("gpt2")));
}

void safetensors_seeds() {
  using namespace llmcc;
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-8f, 65504.0f};
  const fs::path p = g_tmp / "t.safetensors";
  write_safetensors(p.string(),
                    {safetensors_tensor("a", {2, 3}, a.data()), safetensors_tensor("s", {}, a.data()),
                     safetensors_tensor("v", {6}, a.data())},
                    {{"format", "pt"}, {"note", "fuzz seed"}});
  seed("safetensors", "f32", read_bytes(p));
  // BF16 and F16 tensors (write_safetensors writes F32 only): a header by hand.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},"i":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string file(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header;
  const unsigned char payload[16] = {0x00, 0x3C, 0x00, 0xC0, 0x80, 0x3F, 0x00, 0xC0, 1, 0, 0, 0, 0, 0, 0, 0};
  file.append(reinterpret_cast<const char*>(payload), sizeof payload);
  seed("safetensors", "f16_bf16_i64", file);
}

void json_seeds() {
  seed("json", "values",
       R"({"a": [1, -2, 3.5e-3, 1E+10, -0.0, 9223372036854775807, 9223372036854775808],)"
       R"( "b": {"c": null, "d": true, "e": false}, "s": "\u00e9\ud83d\ude00\n\t\"\\\/"})");
  seed("json", "nested", "[[[[[[[[[[[[[[[[{\"x\": [[[]]]}]]]]]]]]]]]]]]]");
  seed("json", "scalar", "  \"just a string\"  ");
  const auto files = llmcc::fuzz::tiny_gpt2_tokenizer_files();
  seed("json", "encoder", files.first);
}

std::string train_sp(const std::string& name, const std::string& type, int vocab) {
  const fs::path text = g_tmp / "sp_input.txt";
  std::string t;
  for (int i = 0; i < 30; ++i)
    t += "The quick brown fox jumps over the lazy dog " + std::to_string(i * 7) + ". caf\xC3\xA9 na\xC3\xAFve\n";
  std::ofstream(text, std::ios::binary) << t;
  llmcc::SpTrainOptions o;
  o.inputs = {text.string()};
  o.vocab_size = vocab;
  o.model_type = type;
  o.model_prefix = (g_tmp / name).string();
  return read_bytes(llmcc::train_sp_tokenizer(o));
}

void tokenizer_seeds() {
  using namespace llmcc;
  const auto [encoder, vocab] = fuzz::tiny_gpt2_tokenizer_files();
  for (std::size_t i = 0; i < kTexts.size(); ++i) {
    seed("gpt2_tokenizer", "tiny_" + std::to_string(i), join({encoder, vocab, kTexts[i]}));
    seed("gpt2_encode", "text_" + std::to_string(i), kTexts[i]);
  }
  const std::string bpe = train_sp("sp_bpe", "bpe", 300);
  const std::string uni = train_sp("sp_unigram", "unigram", 300);
  seed("sp_model", "bpe", join({bpe, kTexts[1]}));
  seed("sp_model", "bpe_utf8", join({bpe, kTexts[4]}));
  seed("sp_model", "unigram", join({uni, kTexts[0]}));

  // tokenizer.txt as `llmcc prepare` writes it, for the directory fuzz_tokenizer_record makes.
  const auto sp = load_sp_tokenizer_bytes(bpe, "tokenizer.model");
  KeyValues kv = {{"spec", "sp:tokenizer.model"},
                  {"kind", "sentencepiece"},
                  {"vocab_size", std::to_string(sp->vocab_size())},
                  {"bos", std::to_string(sp->bos())},
                  {"eos", std::to_string(sp->eos())},
                  {"document_start", std::to_string(sp->document_start())},
                  {"source", "sp:data/tok.model"}};
  seed("tokenizer_record", "sp", format_key_values(kv));
  kv = {{"spec", "gpt2"}, {"kind", "gpt2"}, {"vocab_size", "271"},
        {"bos", "-1"},    {"eos", "270"},   {"document_start", "270"}};
  seed("tokenizer_record", "gpt2", format_key_values(kv));
  seed("tokenizer_record", "spec_sp", "sp:tokenizer.model");
  seed("tokenizer_record", "spec_gpt2", "gpt2:gpt2");
}

// Two upper-case hex digits of b.
std::string hex2(int b) {
  const char* digits = "0123456789ABCDEF";
  return {digits[(b >> 4) & 15], digits[b & 15]};
}

// tokenizer.json ⧺ text: GPT-2's ByteLevel pre-tokenizer, and Llama 3's Split then ByteLevel with
// NFC and ignore_merges; each with a special and an ordinary added token; and SentencePiece-style
// ones (below).
void hf_tokenizer_seeds() {
  std::string vocab;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    char c[16];
    std::snprintf(c, sizeof c, "\\u%04x", printable ? b : next++);
    vocab += "\"" + std::string(c) + "\": " + std::to_string(b) + ", ";
  }
  vocab += R"("th": 256, "the": 257, "\u0120t": 258, "\u0120th": 259, "\u0120the": 260)";
  const std::string model = R"("model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, )"
                            R"("ignore_merges": true, "vocab": {)" +
                            vocab + R"(}, "merges": ["t h", "th e", "\u0120 t", "\u0120t h", "\u0120th e"]})";
  const std::string added =
      R"("added_tokens": [{"id": 261, "content": "<|endoftext|>", "special": true}, {"id": 262, "content": "<x>", "special": false}])";
  const std::string gpt2 = "{" + added +
                           R"(, "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, )"
                           R"("use_regex": true}, "decoder": {"type": "ByteLevel"}, )" +
                           model + "}";
  const std::string llama3 =
      "{" + added +
      R"(, "normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", )"
      R"("pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, )"
      R"("behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}, )"
      R"("decoder": {"type": "ByteLevel"}, )" +
      model + "}";
  // SentencePiece-style: Metaspace with byte fallback, and Llama 2's Prepend/Replace normalizers.
  std::string sp_vocab = R"("<unk>": 0, "<s>": 1, )";
  for (int b = 0; b < 256; ++b) sp_vocab += "\"<0x" + hex2(b) + ">\": " + std::to_string(b + 2) + ", ";
  sp_vocab += R"("\u2581": 258, "t": 259, "h": 260, "e": 261, "\u2581t": 262, "\u2581th": 263, "\u2581the": 264)";
  const std::string sp_model =
      R"("model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true, )"
      R"("vocab": {)" +
      sp_vocab + R"(}, "merges": ["\u2581 t", "\u2581t h", "\u2581th e"]})";
  const std::string sp_added = R"("added_tokens": [{"id": 1, "content": "<s>", "special": true, "normalized": false}])";
  const std::string metaspace =
      "{" + sp_added +
      R"(, "normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", )"
      R"("split": true}, "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Metaspace", )"
      R"("replacement": "\u2581", "prepend_scheme": "first"}]}, )" +
      sp_model + "}";
  const std::string llama2 =
      "{" + sp_added +
      R"(, "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": )"
      R"("Replace", "pattern": {"String": " "}, "content": "\u2581"}]}, "pre_tokenizer": null, "decoder": {"type": )"
      R"("Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": )"
      R"("ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}, )" +
      sp_model + "}";
  for (std::size_t i = 0; i < kTexts.size(); ++i) {
    seed("hf_tokenizer", "gpt2_" + std::to_string(i), join({gpt2, std::string(kTexts[i])}));
    seed("hf_tokenizer", "llama3_" + std::to_string(i), join({llama3, std::string(kTexts[i])}));
    seed("hf_tokenizer", "metaspace_" + std::to_string(i), join({metaspace, std::string(kTexts[i])}));
    seed("hf_tokenizer", "llama2_" + std::to_string(i), join({llama2, std::string(kTexts[i])}));
  }
}

// Chat template ⧺ bos ⧺ conversation: ChatML with a default system message, a <think>
// template, Llama 3 with the dated system block and without.
void chat_template_seeds() {
  const std::string chatml = R"({%- for m in messages -%}{%- if loop.first and m['role'] != 'system' -%})"
                             R"({{ '<|im_start|>system\nBe helpful.<|im_end|>\n' }}{%- endif -%})"
                             R"({{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endfor -%})"
                             R"({%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%})";
  const std::string thinking = chatml + R"({# reasoning_content '</think>' #})";
  const std::string llama3 =
      R"({{- bos_token }}{%- set date_string = "26 Jul 2024" %}{{- "<|start_header_id|>system<|end_header_id|>\n\n" }})"
      R"({{- "Cutting Knowledge Date: December 2023\n" }}{{- "Today Date: " + date_string + "\n\n" }}{{- "<|eot_id|>" }})"
      R"({%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim)"
      R"( + '<|eot_id|>' }}{%- endfor %})";
  const std::string plain_llama3 =
      R"({% for m in messages %}{{ bos_token }}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' }})"
      R"({{ m['content'] | trim + '<|eot_id|>' }}{% endfor %})";
  const std::string conversations[] = {
      R"({"messages": [{"role": "user", "content": "Hi"}]})",
      R"({"messages": [{"role": "system", "content": " Be brief.\n"}, {"role": "user", "content": "caf\u00e9 \u3000"}]})",
      R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "x"}]})",
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": " b "}]})",
  };
  int i = 0;
  for (const std::string& c : conversations) {
    seed("chat_template", "chatml_" + std::to_string(i), join({chatml, "", c}));
    seed("chat_template", "thinking_" + std::to_string(i), join({thinking, "", c}));
    seed("chat_template", "llama3_" + std::to_string(i), join({llama3, "<|begin_of_text|>", c}));
    seed("chat_template", "plain_llama3_" + std::to_string(i), join({plain_llama3, "<|begin_of_text|>", c}));
    ++i;
  }
}

// adapter_config.json ⧺ adapter_model.safetensors: LoRA adapters of the tiny Llama as llmcc
// writes them (rank 2 on q and v; rank 1 on every map), and a config alone.
void peft_adapter_seeds() {
  const llmcc::models::Llama base(llmcc::fuzz::tiny_llama_config());
  int i = 0;
  for (const auto& [rank, targets] : std::vector<std::pair<int, std::vector<std::string>>>{
           {2, {"q", "v"}}, {1, {"q", "k", "v", "o", "gate", "up", "down"}}}) {
    llmcc::models::LoraInfo info;
    info.cfg.rank = rank;
    info.cfg.alpha = 4.0f;
    info.cfg.targets = targets;
    info.base.path = "../base";
    llmcc::models::LlamaLora lora = llmcc::models::llama_lora(base, info.cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(lora);
    for (std::size_t k = 0; k < params.size(); ++k) params.data()[k] = 0.01f * static_cast<float>(k % 17);
    const fs::path dir = g_tmp / ("peft_" + std::to_string(i));
    llmcc::models::write_peft_adapter(dir.string(), info, llmcc::models::llama_peft_modules(),
                                      llmcc::models::llama_peft_slots(base, lora));
    const std::string config = read_bytes(dir / "adapter_config.json");
    seed("peft_adapter", "adapter_" + std::to_string(i), join({config, read_bytes(dir / "adapter_model.safetensors")}));
    seed("peft_adapter", "config_" + std::to_string(i), join({config, ""}));
    ++i;
  }
}

void token_file_seeds() {
  const fs::path p = g_tmp / "tokens.bin";
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 200; ++i) ids.push_back((i * 37) % 300);
  llmcc::write_token_file(p.string(), ids, 1);
  seed("token_file", "v1", std::string(1, '\x21') + read_bytes(p));
  ids.push_back(70000);
  llmcc::write_token_file(p.string(), ids, 2);
  seed("token_file", "v2", std::string(1, '\x13') + read_bytes(p));
}

void run_dir_seeds() {
  const std::string order = "ckpt_000001.bin\nckpt_000100.bin\nckpt_000010.bin\n";
  std::string log;
  for (int step = 0; step <= 10; ++step)
    log += "{\"step\": " + std::to_string(step) + ", \"loss\": 3.25, \"lr\": 0.0006}\n";
  seed("run_dir", "resumed", join({order, log}));
  seed("run_dir", "unlisted", join({"ckpt_000010.bin\nnot a checkpoint\n", "{\"event\": \"start\"}\n"}));
}

void cli_seeds() {
  const std::vector<std::vector<std::string>> argvs = {
      {"--int", "3", "--str", "a", "--i64=-9", "--u64", "18446744073709551615", "--float", "1e-3", "--double=2.5",
       "--flag", "--list", "x", "y"},
      {"--int=1", "--no-flag", "--list=z"},
      {"--help"},
      {"--model",
       "gpt2-tiny",
       "--train-data",
       "data/train_*.bin",
       "--val-data",
       "data/val.bin",
       "--steps",
       "100",
       "--batch-size",
       "8",
       "--seq-len",
       "64",
       "--lr",
       "3e-4",
       "--min-lr=3e-5",
       "--warmup-steps",
       "10",
       "--weight-decay",
       "0.1",
       "--grad-clip",
       "1",
       "--seed",
       "42",
       "--quiet",
       "--out-dir",
       "run"},
      {"--model", "llama-tiny", "--n-layer", "2", "--n-kv-head", "2", "--hidden-dim", "256", "--rope-theta", "500000",
       "--norm-eps", "1e-6", "--sampling", "sequential", "--train-data", "a.bin"},
      {"--model=stories15m",
       "--max-seq-len",
       "128",
       "--vocab-size",
       "512",
       "--sample-every",
       "10",
       "--sample-top-k",
       "40",
       "--sample-temperature",
       "0.8",
       "--ckpt-every",
       "50",
       "--keep-last",
       "2",
       "--val-every",
       "0",
       "--val-steps",
       "0",
       "--resume",
       "auto",
       "--no-quiet",
       "--train-data",
       "x.bin"},
      {"--init-from", "gpt2_124M.bin", "--recipe", "llmc", "--batch-size", "4", "--seq-len", "64", "--train-data",
       "a.bin", "--val-data", "b.bin"},
  };
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    std::string s;
    for (std::size_t j = 0; j < argvs[i].size(); ++j) s += (j ? std::string(1, '\0') : "") + argvs[i][j];
    seed("cli_args", "argv_" + std::to_string(i), s);
  }
  // A run's options as checkpoint key=values.
  llmcc::cli::TrainOptions o;
  o.train_data = {"data/train_000.bin"};
  o.val_data = {"data/val_000.bin"};
  const llmcc::cli::ModelConfig config = llmcc::models::model_preset("gpt2-tiny");
  seed("key_values", "train_options",
       llmcc::format_key_values(llmcc::cli::train_options_to_kv(o, config, o.train_data, o.val_data)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n  writes <corpus dir>/<target>/<seed> for every fuzz target\n",
                 argv[0]);
    return 2;
  }
  g_out = argv[1];
  g_tmp = g_out / ".tmp";
  try {
    fs::create_directories(g_tmp);
    checkpoint_seeds();
    model_seeds();
    safetensors_seeds();
    json_seeds();
    tokenizer_seeds();
    hf_tokenizer_seeds();
    chat_template_seeds();
    peft_adapter_seeds();
    token_file_seeds();
    run_dir_seeds();
    cli_seeds();
    fs::remove_all(g_tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  std::printf("make_seeds: %d seeds in %s\n", g_count, g_out.string().c_str());
  return 0;
}
