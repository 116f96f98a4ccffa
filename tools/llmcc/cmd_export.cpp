// llmcc export: convert model weights between llmcc checkpoints, llm.c model files (GPT-2) and
// Hugging Face safetensors (GPT-2 and Llama).
//
//   llmcc checkpoint -> llm.c gpt2_124M.bin layout (fp32, version 3; or bf16, version 5)
//   llm.c model file (fp32 or bf16) -> llmcc weights-only checkpoint (no optimizer state)
//   any of them -> a Hugging Face GPT2LMHeadModel directory (model.safetensors + config.json)
//   a Hugging Face directory or .safetensors file -> any of the others
//   Llama: llmcc checkpoint <-> Hugging Face LlamaForCausalLM (llm.c files hold GPT-2 only)
// The input kind is told by its first bytes (a directory is a Hugging Face model); the default
// output is llm.c's for an llmcc input and llmcc's otherwise. Only the weights
// travel: an exported llmcc checkpoint can start a run (--init-from) or be evaluated and sampled,
// not resumed. The tokenizer a checkpoint stored goes along (run_tokenizer.h): into an llmcc
// output as it is, into a Hugging Face Llama directory as tokenizer.model (SentencePiece only).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "llmcc/train/checkpoint.h"
#include "nn/gpt2_hf.h"
#include "nn/gpt2_llmc.h"
#include "nn/gpt2_weights.h"
#include "nn/hf_files.h"
#include "nn/llama_hf.h"
#include "nn/llama_weights.h"
#include "model_family.h"
#include "run_tokenizer.h"

namespace llmcc::cli {

namespace {

constexpr const char* kCmd = "llmcc export";

std::string describe(const nn::Gpt2Config& c) {
  return c.str() + ", " + std::to_string(c.parameter_count()) + " parameters";
}

std::string describe(const nn::LlamaConfig& c) {
  return "Llama " + c.str() + ", " + std::to_string(c.parameter_count()) + " parameters";
}

// The input's tokenizer into an llmcc output's config and files (nothing when it stores none).
void carry_tokenizer(const std::string& ckpt, TrainState& state) {
  if (const auto t = checkpoint_tokenizer(ckpt)) {
    store_tokenizer(*t->tok, state.config, state.files);
    std::printf("tokenizer: %s, carried over\n", t->tok->describe().c_str());
  }
}

void print_written(const std::string& out, const char* kind) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  std::printf("wrote %s (%s, %llu bytes)\n", out.c_str(), kind, static_cast<unsigned long long>(ec ? 0 : bytes));
}

// Llama: llmcc checkpoint <-> Hugging Face; `format` is llmcc or safetensors.
int export_llama(const std::string& ckpt, const std::string& out, const std::string& format, bool from_hf) {
  if (format != "llmcc" && format != "safetensors")
    fail(kCmd, ckpt + " holds a Llama; llm.c model files hold GPT-2 only (use --format safetensors or llmcc)");
  nn::LlamaWeights w = nn::load_llama(ckpt);
  warn_nonfinite_weights(w.params, ckpt, kCmd);
  std::printf("read %s (%s, %s)\n", ckpt.c_str(), from_hf ? "Hugging Face safetensors" : "llmcc checkpoint",
              describe(w.model.cfg).c_str());
  if (format == "safetensors") {
    nn::save_llama_hf(w.model, out);
    print_written((std::filesystem::path(out) / nn::kHfWeightsFile).string(),
                  "Hugging Face LlamaForCausalLM, fp32; config.json beside it");
    // Llama-2-style repositories keep their SentencePiece model beside the weights.
    const std::optional<RunTokenizer> t = from_hf ? std::nullopt : checkpoint_tokenizer(ckpt);
    if (t && !t->tok->model_bytes().empty()) {
      const std::string path = (std::filesystem::path(out) / "tokenizer.model").string();
      const std::string bytes = t->tok->model_bytes();
      std::FILE* f = std::fopen(path.c_str(), "wb");
      const bool ok = f != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      if (f != nullptr && std::fclose(f) != 0) fail(kCmd, "cannot write " + path);
      if (!ok) fail(kCmd, "cannot write " + path);
      print_written(path, "the checkpoint's SentencePiece tokenizer");
    }
    return 0;
  }
  TrainState state;  // step 0: a starting point, not a resumable run
  nn::llama_config_to_kv(w.model.cfg, state.config);
  carry_tokenizer(ckpt, state);
  save_checkpoint(out, w.params, /*opt=*/nullptr, state);
  print_written(out, "llmcc weights-only checkpoint");
  return 0;
}

}  // namespace

int run_export(int argc, char** argv) {
  std::string ckpt, out, format = "auto";
  ArgParser p("export",
              "Convert weights between llmcc checkpoints, llm.c GPT-2 model files (gpt2_124M.bin) and Hugging "
              "Face safetensors (GPT-2 and Llama).");
  p.add("--ckpt", &ckpt,
        "input: an llmcc checkpoint (GPT-2 or Llama), an llm.c GPT-2 model file (fp32 or bf16), or a Hugging "
        "Face GPT-2 or Llama (a directory with model.safetensors and config.json, or the .safetensors file)");
  p.add("--out", &out, "output file (written atomically); a directory for --format safetensors");
  p.add("--format", &format,
        "output format: llmc (llm.c fp32, version 3), llmc-bf16 (llm.c bf16, version 5), llmcc "
        "(weights-only llmcc checkpoint), safetensors (Hugging Face GPT2LMHeadModel or LlamaForCausalLM: "
        "OUT/model.safetensors and OUT/config.json), or auto: llmc for a GPT-2 llmcc checkpoint, safetensors "
        "for a Llama one, llmcc for anything else");
  p.require("--ckpt");
  p.require("--out");
  p.epilogue(
      "llm.c's layout: a 256 x int32 header (magic 20240326, version, maxT, V, L, NH, C, Vp) and the\n"
      "weights in llm.c's order (wte, wpe, ln1w, ln1b, qkvw, qkvb, ...). Each layer's qkvw and qkvb are\n"
      "llmcc's h.N.attn.c_attn weight and bias (rows q, k, v). llm.c's train_gpt2.c (CPU) reads fp32\n"
      "files; train_gpt2.cu reads bf16 ones when built for bf16. A file without vocabulary padding\n"
      "(Vp = V) is padded to a multiple of 128 on import.\n"
      "Safetensors: Hugging Face names (transformer.h.N.attn.c_attn.weight, ...) and layouts (Conv1D weights\n"
      "transposed to (in, out)), fp32, wte without llmcc's vocabulary padding rows, lm_head tied (not stored);\n"
      "config.json for GPT2LMHeadModel. Llama: Hugging Face names, q_proj/k_proj rows permuted for its\n"
      "half-split rotary, lm_head stored. On import BF16 and F16 weights become fp32 (docs/data-format.md).\n"
      "Only weights are converted: optimizer state, step and data position are not.\n\n"
      "Examples:\n"
      "  llmcc export --ckpt gpt2_124M.bin --out gpt2_124M.ckpt          # llm.c -> llmcc\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model.bin          # llmcc -> llm.c fp32\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model_bf16.bin --format llmc-bf16\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --format safetensors --out hf/   # for transformers\n"
      "  llmcc export --ckpt hf/ --out model.ckpt --format llmcc                  # Hugging Face -> llmcc");
  if (!p.parse(argc, argv)) return 0;

  if (format != "auto" && format != "llmc" && format != "llmc-bf16" && format != "llmcc" && format != "safetensors")
    fail(kCmd, "--format must be auto, llmc, llmc-bf16, llmcc or safetensors, got '" + format + "'");
  if (out.empty()) fail(kCmd, "--out must not be empty");
  const bool to_hf = format == "safetensors";
  {
    std::error_code ec;
    if (!std::filesystem::exists(ckpt, ec)) fail(kCmd, "--ckpt " + ckpt + " does not exist");
    if (std::filesystem::is_directory(ckpt, ec) && !nn::is_hf_model(ckpt))
      fail(kCmd, "--ckpt " + ckpt + " is a directory without model.safetensors; give one checkpoint file (e.g. " +
                     checkpoint_path(ckpt, 1000) + ") or a Hugging Face model directory");
    if (to_hf && std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
      fail(kCmd,
           "--out " + out + " is a file; --format safetensors writes a directory (model.safetensors, config.json)");
    if (!to_hf && std::filesystem::is_directory(out, ec))
      fail(kCmd, "--out " + out + " is a directory, expected a file name");
  }

  const bool from_llmc = nn::is_llmc_model_file(ckpt);
  const bool from_hf = !from_llmc && nn::is_hf_model(ckpt);
  const bool llama =
      from_hf ? nn::hf_model_type(ckpt) == "llama" : !from_llmc && checkpoint_family(ckpt) == Family::Llama;
  if (llama) return export_llama(ckpt, out, format == "auto" ? (from_hf ? "llmcc" : "safetensors") : format, from_hf);
  if (format == "auto") format = from_llmc || from_hf ? "llmcc" : "llmc";
  nn::Gpt2Weights w = nn::load_gpt2(ckpt);
  warn_nonfinite_weights(w.params, ckpt, kCmd);
  std::printf("read %s (%s, %s)\n", ckpt.c_str(),
              from_llmc ? "llm.c model file"
              : from_hf ? "Hugging Face safetensors"
                        : "llmcc checkpoint",
              describe(w.model.cfg).c_str());

  if (to_hf) {
    nn::save_gpt2_hf(w.model, out);
    const std::string weights = (std::filesystem::path(out) / nn::kHfWeightsFile).string();
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(weights, ec);
    std::printf("wrote %s (Hugging Face GPT2LMHeadModel, fp32, %llu bytes) and config.json\n", weights.c_str(),
                static_cast<unsigned long long>(ec ? 0 : bytes));
    return 0;
  }
  if (format == "llmcc") {
    TrainState state;  // step 0: a starting point, not a resumable run
    nn::gpt2_config_to_kv(w.model.cfg, state.config);
    if (!from_llmc) carry_tokenizer(ckpt, state);
    save_checkpoint(out, w.params, /*opt=*/nullptr, state);
  } else {
    nn::save_gpt2_llmc(w.model, out, format == "llmc" ? nn::LlmcDType::F32 : nn::LlmcDType::BF16);
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  const char* kind = format == "llmcc"  ? "llmcc weights-only checkpoint"
                     : format == "llmc" ? "llm.c model file, fp32, version 3"
                                        : "llm.c model file, bf16, version 5";
  std::printf("wrote %s (%s, %llu bytes)\n", out.c_str(), kind, static_cast<unsigned long long>(ec ? 0 : bytes));
  return 0;
}

}  // namespace llmcc::cli
