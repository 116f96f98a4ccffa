// llmcc export: convert model weights between llmcc checkpoints, Hugging Face safetensors and
// the formats a family has of its own (Family::export_formats: GPT-2's llm.c files).
//
//   llmcc checkpoint -> the family's first format (auto), or any format it writes
//   a Hugging Face directory or .safetensors file, or a family's own file -> llmcc (auto)
//
// The input kind is told once (models::identify_model_file). Only the weights travel: an
// exported llmcc checkpoint can start a run (--init-from) or be evaluated and sampled, not
// resumed. The tokenizer a checkpoint stored goes along (run_tokenizer.h): into an llmcc output
// as it is, into a Hugging Face directory as its files (tokenizer.json with its
// tokenizer_config.json and chat template, or a SentencePiece tokenizer.model).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"
#include "model_report.h"
#include "run_tokenizer.h"

namespace llmcc::cli {

namespace {

constexpr const char* kCmd = "llmcc export";

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

// Every format any family writes, with llmcc's own first: "llmcc, llmc, llmc-bf16, safetensors".
std::vector<std::string> all_formats() {
  std::vector<std::string> out = {"llmcc", "gguf"};
  for (const models::Family* f : models::model_families())
    for (const models::ExportFormat& e : f->export_formats())
      if (std::find(out.begin(), out.end(), e.name) == out.end()) out.push_back(e.name);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The --format help: each format and the families that write it.
std::string format_help() {
  std::string h =
      "output format: llmcc (a weights-only llmcc checkpoint, every family), gguf (one file for llama.cpp: every "
      "family llama.cpp has an architecture for, quantized by --quant, with the tokenizer)";
  for (const std::string& name : all_formats()) {
    if (name == "llmcc" || name == "gguf") continue;
    std::string families, help;
    for (const models::Family* f : models::model_families())
      for (const models::ExportFormat& e : f->export_formats())
        if (name == e.name) {
          families += (families.empty() ? "" : ", ") + std::string(f->display_name());
          if (help.empty()) help = e.help;
        }
    h += ", " + name + " (" + families + ": " + help + ")";
  }
  h += ", peft (LoRA adapters without their base: adapter_config.json + adapter_model.safetensors, as peft writes "
       "them)";
  return h + ", or auto: a family's first format (" + [] {
    std::string firsts;
    for (const models::Family* f : models::model_families())
      firsts +=
          (firsts.empty() ? "" : ", ") + std::string(f->export_formats().front().name) + " for " + f->display_name();
    return firsts;
  }() + ") for an llmcc checkpoint, llmcc for anything else";
}

// The input's tokenizer beside a Hugging Face export: its files (TextTokenizer::files()), as
// current repositories ship them: a tokenizer.json (the input folder's, or the one a checkpoint
// carries) with the tokenizer_config.json and chat_template.jinja that came with it; a
// SentencePiece model as tokenizer.model (Llama 2's layout). Each write is atomic; nothing is
// copied onto itself.
void write_tokenizer_beside(const std::string& ckpt, const std::string& dir) {
  const std::optional<RunTokenizer> t = checkpoint_tokenizer(ckpt);
  if (!t) return;
  namespace fs = std::filesystem;
  const std::string spec = t->tok->spec();
  const fs::path from_dir = spec.rfind("hf:", 0) == 0 ? fs::path(spec.substr(3)).parent_path() : fs::path();
  for (const auto& [name, bytes] : t->tok->files()) {
    std::error_code ec;
    const fs::path to = fs::path(dir) / name;
    if (!from_dir.empty() && fs::equivalent(from_dir / name, to, ec)) continue;
    models::write_text_file(to.string(), bytes, kCmd);
    print_written(to.string(), ("the input's " + name).c_str());
  }
}

// "--max-shard-size": bytes, with an optional unit as save_pretrained's max_shard_size takes it
// (KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024; B), e.g. "2GB".
std::uint64_t parse_shard_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  const std::pair<const char*, double> units[] = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  double scale = 0;
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  char* end = nullptr;
  const std::string number = text.substr(0, digits);
  const double value = number.empty() ? 0 : std::strtod(number.c_str(), &end);
  if (scale == 0 || number.empty() || end != number.c_str() + number.size() || !(value > 0) || value * scale > 1e18)
    fail(kCmd, "--max-shard-size must be a positive size such as 2GB, 500MB or 4GiB (bytes without a unit), got '" +
                   text + "'");
  return static_cast<std::uint64_t>(value * scale);
}

// What the Hugging Face export wrote: its one file, or the index and how many shards it names.
void print_hf_written(const std::string& dir, const std::string& kind) {
  const std::filesystem::path index = std::filesystem::path(dir) / models::kHfIndexFile;
  std::error_code ec;
  if (!std::filesystem::exists(index, ec)) {
    print_written((std::filesystem::path(dir) / models::kHfWeightsFile).string(), kind.c_str());
    return;
  }
  const SafetensorsIndex shards = read_safetensors_index(index.string());
  std::uint64_t bytes = 0;
  for (const std::string& s : shards.shards) bytes += std::filesystem::file_size(std::filesystem::path(dir) / s, ec);
  std::printf("wrote %s (%s, %zu shards of %llu bytes in all)\n", index.c_str(), kind.c_str(), shards.shards.size(),
              static_cast<unsigned long long>(bytes));
}

// --format gguf: the model with its tokenizer (--tokenizer, else the checkpoint's, else GPT-2's),
// each matrix as `quant` makes it.
void write_gguf_export(const std::string& ckpt, const std::string& out, models::GgufModelParts parts,
                       models::GgufQuant quant, const std::string& tokenizer_spec) {
  RunTokenizer tok;
  if (!tokenizer_spec.empty()) {
    tok = {load_text_tokenizer(tokenizer_spec), "--tokenizer " + tokenizer_spec};
  } else if (std::optional<RunTokenizer> stored = checkpoint_tokenizer(ckpt)) {
    tok = std::move(*stored);
  } else {
    tok = {load_text_tokenizer("gpt2"), "GPT-2's default files"};
    std::printf(
        "note: %s stores no tokenizer; the file carries GPT-2's (give --tokenizer if the model was trained "
        "with another)\n",
        ckpt.c_str());
  }
  // A model with more rows than the tokenizer has tokens gets placeholder tokens for the rest
  // (write_model_gguf); one with fewer is refused there.
  models::GgufExportOptions options;
  options.quant = quant;
  options.tokenizer = tok.tok.get();
  options.name = std::filesystem::path(ckpt).stem().string();
  models::write_model_gguf(std::move(parts), options, out);
  std::printf("tokenizer: %s (%s)\n", tok.tok->describe().c_str(), tok.source.c_str());
  print_written(out, (std::string("GGUF for llama.cpp, ") + models::gguf_quant_name(quant)).c_str());
}

}  // namespace

int run_export(int argc, char** argv) {
  std::string ckpt, out, format = "auto", max_shard_size, weights_dtype = "f32", quant_name, tokenizer_spec;
  bool merge_lora = false;
  ArgParser p("export",
              "Convert weights between llmcc checkpoints, Hugging Face safetensors and the formats a "
              "family has of its own.");
  p.add("--ckpt", &ckpt, "input: " + models::model_path_help());
  p.add("--out", &out, "output file (written atomically); a directory for --format safetensors");
  p.add("--format", &format, format_help());
  p.add("--weights-dtype", &weights_dtype,
        "--format safetensors: the stored dtype of the weights, f32, bf16 or f16 (rounded to nearest even); "
        "config.json's torch_dtype says which");
  p.add("--max-shard-size", &max_shard_size,
        "--format safetensors: split the weights into shards of at most this size (2GB, 500MB, 4GiB, ...) "
        "listed by model.safetensors.index.json, as save_pretrained does; empty: one model.safetensors");
  p.add("--quant", &quant_name,
        "--format gguf: what the matrices become, " + models::gguf_quant_names() +
            " (norms and biases stay f32; q4_0 and q4_k_m keep the head and, for q4_k_m, some attn_v and ffn_down "
            "in q6_K, as llama.cpp's quantizer does) [default: f16]");
  p.add("--tokenizer", &tokenizer_spec,
        "--format gguf: the tokenizer the file carries, as llmcc generate takes it (gpt2, sp:MODEL, ...) [default: "
        "the one the checkpoint stored, else GPT-2's]");
  p.add("--merge-lora", &merge_lora,
        "--ckpt holds LoRA adapters (llmcc train --lora-rank): write their base with every adapter added in, "
        "a plain model of the base's family");
  p.require("--ckpt");
  p.require("--out");
  p.epilogue(
      "Only weights are converted: optimizer state, step and data position are not. On import BF16 and\n"
      "F16 weights become fp32. Each format's names and layouts: docs/data-format.md.\n\n"
      "Examples:\n"
      "  llmcc export --ckpt gpt2_124M.bin --out gpt2_124M.ckpt          # llm.c -> llmcc\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model.bin          # auto: the family's first format\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --out model_bf16.bin --format llmc-bf16\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --format safetensors --out hf/   # for transformers\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --format safetensors --out hf/ --weights-dtype bf16 \\\n"
      "      --max-shard-size 2GB                                            # sharded bf16\n"
      "  llmcc export --ckpt hf/ --out model.ckpt --format llmcc                  # Hugging Face -> llmcc\n"
      "  llmcc export --ckpt lora/ckpt_000200.bin --merge-lora --format safetensors --out merged/   # LoRA\n"
      "  llmcc export --ckpt lora/ckpt_000200.bin --format peft --out adapter/   # for peft.PeftModel\n"
      "  llmcc export --ckpt run/ckpt_001000.bin --format gguf --quant q8_0 --out model.gguf   # for llama.cpp");
  if (!p.parse(argc, argv)) return 0;

  if (format == "peft") {
    if (out.empty()) fail(kCmd, "--out must not be empty");
    if (merge_lora) fail(kCmd, "--merge-lora writes the merged model; --format peft writes the adapters alone");
    if (!max_shard_size.empty() || weights_dtype != "f32")
      fail(kCmd, "--weights-dtype and --max-shard-size apply to --format safetensors, not peft");
    check_model_path(ckpt, "--ckpt", kCmd);
    const std::unique_ptr<Model> model = load_model(ckpt);
    const models::LoraInfo* lora = model->lora();
    if (lora == nullptr) fail(kCmd, "--format peft: " + ckpt + " holds a model without LoRA adapters");
    warn_nonfinite_weights(model->params(), ckpt, kCmd);
    model->save_peft(out);
    std::printf("wrote %s (PEFT LoRA adapters: rank %d, alpha %g, %lld parameters, over %s)\n", out.c_str(),
                lora->cfg.rank, static_cast<double>(lora->cfg.alpha),
                static_cast<long long>(model->params().parameter_count()), lora->base.path.c_str());
    return 0;
  }
  const std::vector<std::string> formats = all_formats();
  if (format != "auto" && std::find(formats.begin(), formats.end(), format) == formats.end())
    fail(kCmd, "--format must be auto, " + joined(formats) + ", peft, got '" + format + "'");
  if (out.empty()) fail(kCmd, "--out must not be empty");
  {
    std::error_code ec;
    if (!std::filesystem::exists(ckpt, ec)) fail(kCmd, "--ckpt " + ckpt + " does not exist");
    if (std::filesystem::is_directory(ckpt, ec) && !models::is_hf_model(ckpt) && !models::is_peft_adapter(ckpt))
      fail(kCmd, "--ckpt " + ckpt +
                     " is a directory without model.safetensors or model.safetensors.index.json; give one checkpoint "
                     "file (e.g. " +
                     checkpoint_path(ckpt, 1000) + ") or a Hugging Face model directory");
  }

  const models::ModelFile in = models::identify_model_file(ckpt);
  const models::Family& family = *in.family;
  const bool from_llmcc =
      in.kind != models::ModelFile::Kind::HuggingFace && in.kind != models::ModelFile::Kind::FamilyFile;
  if (format == "auto") format = from_llmcc ? family.export_formats().front().name : "llmcc";
  const std::vector<models::ExportFormat> own = family.export_formats();
  const bool known =
      format == "llmcc" || format == "gguf" ||
      std::any_of(own.begin(), own.end(), [&](const models::ExportFormat& e) { return format == e.name; });
  if (!known) {
    std::vector<std::string> names = {"llmcc", "gguf"};
    for (const models::ExportFormat& e : own) names.push_back(e.name);
    fail(kCmd,
         ckpt + " holds a " + family.display_name() + " model, which exports as " + joined(names) + ", not " + format);
  }
  const bool to_dir = format == "safetensors";
  SafetensorsModelOptions safetensors;
  if (!parse_safetensors_dtype(weights_dtype, &safetensors.dtype))
    fail(kCmd, "--weights-dtype must be f32, bf16 or f16, got '" + weights_dtype + "'");
  if (!max_shard_size.empty()) safetensors.max_shard_bytes = parse_shard_size(max_shard_size);
  if (!to_dir && (safetensors.dtype != SafetensorsDType::F32 || !max_shard_size.empty()))
    fail(kCmd, "--weights-dtype and --max-shard-size apply to --format safetensors, not " + format);
  if (format != "gguf" && (!quant_name.empty() || !tokenizer_spec.empty()))
    fail(kCmd, "--quant and --tokenizer apply to --format gguf, not " + format);
  models::GgufQuant quant = models::GgufQuant::F16;
  if (!quant_name.empty() && !models::parse_gguf_quant(quant_name, &quant))
    fail(kCmd, "--quant must be " + models::gguf_quant_names() + ", got '" + quant_name + "'");
  {
    std::error_code ec;
    if (to_dir && std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
      fail(kCmd,
           "--out " + out + " is a file; --format safetensors writes a directory (model.safetensors, config.json)");
    if (!to_dir && std::filesystem::is_directory(out, ec))
      fail(kCmd, "--out " + out + " is a directory, expected a file name");
  }

  if (format == "gguf" && in.kind == models::ModelFile::Kind::HuggingFace && !merge_lora) {
    if (std::optional<models::GgufModelParts> parts = family.hf_gguf_parts(ckpt)) {
      std::printf("read %s (Hugging Face safetensors, %s; each tensor read as it is written)\n", ckpt.c_str(),
                  family.display_name());
      write_gguf_export(ckpt, out, std::move(*parts), quant, tokenizer_spec);
      return 0;
    }
  }
  std::unique_ptr<Model> model = load_model(ckpt);
  if (model->lora() == nullptr && merge_lora)
    fail(kCmd, "--merge-lora: " + ckpt + " holds a model without LoRA adapters");
  if (const models::LoraInfo* lora = model->lora()) {
    if (!merge_lora)
      fail(kCmd, ckpt + " holds LoRA adapters over " + lora->base.path +
                     "; give --merge-lora to write the base with the adapters added in");
    std::printf("merging LoRA adapters (rank %d, %lld parameters) into %s\n", lora->cfg.rank,
                static_cast<long long>(model->params().parameter_count()), lora->base.path.c_str());
    model = model->merged();
  }
  warn_nonfinite_weights(model->params(), ckpt, kCmd);
  const char* source = in.kind == models::ModelFile::Kind::HuggingFace  ? "Hugging Face safetensors"
                       : in.kind == models::ModelFile::Kind::FamilyFile ? "a file of the family's own format"
                                                                        : "llmcc checkpoint";
  std::printf("read %s (%s, %s %s, %lld parameters)\n", ckpt.c_str(), source, family.display_name(),
              model->config().str().c_str(), static_cast<long long>(model->config().parameter_count()));

  if (format == "gguf") {
    write_gguf_export(ckpt, out, model->gguf_parts(), quant, tokenizer_spec);
    return 0;
  }
  if (format == "llmcc") {
    TrainState state;  // step 0: a starting point, not a resumable run
    model->config().to_kv(state.config);
    if (in.kind != models::ModelFile::Kind::FamilyFile) carry_tokenizer(ckpt, state);
    save_checkpoint(out, model->params(), /*opt=*/nullptr, state);
    print_written(out, "llmcc weights-only checkpoint");
    return 0;
  }
  model->save_as(format, out, safetensors);
  if (to_dir) {
    print_hf_written(out, std::string("Hugging Face ") + family.hf_architecture() + ", " +
                              models::hf_torch_dtype(safetensors.dtype) + "; config.json beside it");
    write_tokenizer_beside(ckpt, out);
    return 0;
  }
  for (const models::ExportFormat& e : own)
    if (format == e.name) print_written(out, e.help);
  return 0;
}

}  // namespace llmcc::cli
