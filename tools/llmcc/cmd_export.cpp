// llmcc export: convert GPT-2 weights between llmcc checkpoints and llm.c model files.
//
//   llmcc checkpoint -> llm.c gpt2_124M.bin layout (fp32, version 3; or bf16, version 5)
//   llm.c model file (fp32 or bf16) -> llmcc weights-only checkpoint (no optimizer state)
// The input kind is told by its magic; the default output is the other kind. Only the weights
// travel: an exported llmcc checkpoint can start a run (--init-from) or be evaluated and sampled,
// not resumed.
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "llmcc/train/checkpoint.h"
#include "nn/gpt2_llmc.h"
#include "nn/gpt2_weights.h"

namespace llmcc::cli {

namespace {

constexpr const char* kCmd = "llmcc export";

std::string describe(const nn::Gpt2Config& c) {
  return c.str() + ", " + std::to_string(c.parameter_count()) + " parameters";
}

}  // namespace

int run_export(int argc, char** argv) {
  std::string ckpt, out, format = "auto";
  ArgParser p("export",
              "Convert GPT-2 weights between llmcc checkpoints and llm.c model files (gpt2_124M.bin).");
  p.add("--ckpt", &ckpt, "input: an llmcc checkpoint or an llm.c GPT-2 model file (fp32 or bf16)");
  p.add("--out", &out, "output file (written atomically)");
  p.add("--format", &format,
        "output format: llmc (llm.c fp32, version 3), llmc-bf16 (llm.c bf16, version 5), llmcc "
        "(weights-only llmcc checkpoint), or auto: llmc for an llmcc input, llmcc for an llm.c input");
  p.require("--ckpt");
  p.require("--out");
  p.epilogue(
      "llm.c's layout: a 256 x int32 header (magic 20240326, version, maxT, V, L, NH, C, Vp) and the\n"
      "weights in llm.c's order (wte, wpe, ln1w, ln1b, qkvw, qkvb, ...). llmcc's q, k, v are the rows of\n"
      "llm.c's qkvw. llm.c's train_gpt2.c (CPU) reads fp32 files; train_gpt2.cu reads bf16 ones when built\n"
      "for bf16. A file without vocabulary padding (Vp = V) is padded to a multiple of 128 on import.\n"
      "Only weights are converted: optimizer state, step and data position are not.\n\n"
      "Examples:\n"
      "  llmcc export --ckpt gpt2_124M.bin --out gpt2_124M.ckpt          # llm.c -> llmcc\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model.bin          # llmcc -> llm.c fp32\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model_bf16.bin --format llmc-bf16");
  if (!p.parse(argc, argv)) return 0;

  if (format != "auto" && format != "llmc" && format != "llmc-bf16" && format != "llmcc")
    fail(kCmd, "--format must be auto, llmc, llmc-bf16 or llmcc, got '" + format + "'");
  if (out.empty()) fail(kCmd, "--out must not be empty");
  {
    std::error_code ec;
    if (!std::filesystem::exists(ckpt, ec)) fail(kCmd, "--ckpt " + ckpt + " does not exist");
    if (std::filesystem::is_directory(ckpt, ec))
      fail(kCmd, "--ckpt " + ckpt + " is a directory; give one checkpoint file (e.g. " +
                     checkpoint_path(ckpt, 1000) + ")");
    if (std::filesystem::is_directory(out, ec))
      fail(kCmd, "--out " + out + " is a directory, expected a file name");
  }

  const bool from_llmc = nn::is_llmc_model_file(ckpt);
  if (format == "auto") format = from_llmc ? "llmcc" : "llmc";
  nn::Gpt2Weights w = nn::load_gpt2(ckpt);
  std::printf("read %s (%s, %s)\n", ckpt.c_str(), from_llmc ? "llm.c model file" : "llmcc checkpoint",
              describe(w.model.cfg).c_str());

  if (format == "llmcc") {
    TrainState state;  // step 0: a starting point, not a resumable run
    nn::gpt2_config_to_kv(w.model.cfg, state.config);
    save_checkpoint(out, w.params, /*opt=*/nullptr, state);
  } else {
    nn::save_gpt2_llmc(w.model, out, format == "llmc" ? nn::LlmcDType::F32 : nn::LlmcDType::BF16);
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  const char* kind = format == "llmcc" ? "llmcc weights-only checkpoint"
                     : format == "llmc" ? "llm.c model file, fp32, version 3"
                                        : "llm.c model file, bf16, version 5";
  std::printf("wrote %s (%s, %llu bytes)\n", out.c_str(), kind,
              static_cast<unsigned long long>(ec ? 0 : bytes));
  return 0;
}

}  // namespace llmcc::cli
