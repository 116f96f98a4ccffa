// llmcc_gradient_dump: a model's mean cross-entropy on one batch and its gradient from the
// generated backward (Model::gradient), written in the family's Hugging Face layout (each
// weight's gradient where `llmcc export --format safetensors` writes the weight), so that
// test_hf_gradients.py compares it with transformers' (or PEFT's) gradient tensor by tensor,
// by name.
//
//   llmcc_gradient_dump MODEL BATCH OUT [--threads N] [--kernels fast|reference] [--dtype fp32|bf16]
//                       [--checkpoint-activations on|off] [--base-dtype f32|bf16] [--decode-logits FILE]
//
// MODEL is anything llmcc loads (a Hugging Face folder, a PEFT adapter directory, ...). BATCH
// holds little-endian int32 values: B, T, the token ids (B, T), then the targets (B, T), -1 for an
// ignored target. OUT is a directory that receives the gradient as a Hugging Face model in f32
// (config.json and model.safetensors), or for a model with LoRA adapters the adapters' gradient
// as a PEFT adapter (adapter_model.safetensors). Prints `loss <value>` on stdout; a bad argument
// or file gets a message naming it on stderr and exit code 2. --base-dtype bf16 stores a LoRA
// model's frozen base matrices in bf16 (Model::store_base_in_bf16, `--base-dtype` of llmcc).
// --decode-logits also runs the model's KV-cache generator on the batch's first row: a prefill of
// its first T / 2 tokens (at least one), then one step per token after them, and writes the
// logits each returns (T - P + 1 rows of vocab_size float32 values, P the prefill's length) to
// FILE, the logits of positions P - 1 .. T - 1 of a forward.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "llmcc/runtime.h"
#include "llmcc/tensor.h"
#include "models/generate.h"
#include "models/model.h"
#include "models/registry.h"

namespace {

constexpr const char* kUsage =
    "usage: llmcc_gradient_dump MODEL BATCH OUT [--threads N] [--kernels fast|reference] [--dtype fp32|bf16]\n"
    "                           [--checkpoint-activations on|off] [--base-dtype f32|bf16] [--decode-logits FILE]";

struct Batch {
  int B = 0, T = 0;
  std::vector<std::int32_t> idx, targets;  // (B, T) each
};

Batch read_batch(const std::string& path, int vocab) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw llmcc::Error("batch file '" + path + "' cannot be opened");
  std::vector<std::int32_t> v;
  std::int32_t x = 0;
  while (f.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  if (v.size() < 2 || v[0] < 1 || v[1] < 1)
    throw llmcc::Error("batch file '" + path + "' must start with B >= 1 and T >= 1 (int32)");
  Batch b;
  b.B = v[0];
  b.T = v[1];
  const std::size_t n = static_cast<std::size_t>(b.B) * static_cast<std::size_t>(b.T);
  if (v.size() != 2 + 2 * n)
    throw llmcc::Error("batch file '" + path + "' holds " + std::to_string(v.size()) +
                       " int32 values, expected 2 + 2 * B * T = " + std::to_string(2 + 2 * n));
  b.idx.assign(v.begin() + 2, v.begin() + 2 + static_cast<std::ptrdiff_t>(n));
  b.targets.assign(v.begin() + 2 + static_cast<std::ptrdiff_t>(n), v.end());
  for (std::size_t i = 0; i < n; ++i) {
    if (b.idx[i] < 0 || b.idx[i] >= vocab)
      throw llmcc::Error("batch file '" + path + "': token id " + std::to_string(b.idx[i]) + " at " +
                         std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
    if (b.targets[i] < -1 || b.targets[i] >= vocab)
      throw llmcc::Error("batch file '" + path + "': target " + std::to_string(b.targets[i]) + " at " +
                         std::to_string(i) + " is outside [-1, " + std::to_string(vocab) + ")");
  }
  return b;
}

// The generator's logits over the batch's first row, as --decode-logits describes.
void write_decode_logits(const llmcc::models::Model& model, const Batch& b, const std::string& path) {
  const int V = model.config().vocab_size(), P = std::max(1, b.T / 2);
  std::unique_ptr<llmcc::models::Generator> gen = model.generator(llmcc::models::ContextFull::Stop);
  std::vector<float> rows;  // (T - P + 1, V)
  auto keep = [&](const llmcc::Tensor& logits) { rows.insert(rows.end(), logits.f32(), logits.f32() + V); };
  keep(gen->prefill({b.idx.data(), static_cast<std::size_t>(P)}));
  for (int t = P; t < b.T; ++t) keep(gen->step(b.idx[static_cast<std::size_t>(t)]));
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
  if (!f) throw llmcc::Error("--decode-logits: cannot write '" + path + "'");
}

int parse_int(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 1) throw llmcc::Error(flag + " expects a positive integer, got '" + text + "'");
  return v;
}

int run(int argc, char** argv) {
  std::vector<std::string> positional;
  int threads = 1;
  llmcc::KernelMode kernels = llmcc::KernelMode::Fast;
  std::string dtype = "fp32";
  bool checkpoint = false;  // the generated backward that runs each block's forward again
  bool bf16_base = false;
  std::string decode_logits;  // empty: no decoding
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    if (i + 1 >= argc) throw llmcc::Error(a + " expects a value");
    const std::string v = argv[++i];
    if (a == "--threads") {
      threads = parse_int(a, v);
    } else if (a == "--kernels") {
      if (v != "fast" && v != "reference") throw llmcc::Error("--kernels expects fast or reference, got '" + v + "'");
      kernels = v == "fast" ? llmcc::KernelMode::Fast : llmcc::KernelMode::Reference;
    } else if (a == "--dtype") {
      dtype = v;
    } else if (a == "--checkpoint-activations") {
      if (v != "on" && v != "off") throw llmcc::Error("--checkpoint-activations expects on or off, got '" + v + "'");
      checkpoint = v == "on";
    } else if (a == "--decode-logits") {
      decode_logits = v;
    } else if (a == "--base-dtype") {
      if (v != "f32" && v != "bf16") throw llmcc::Error("--base-dtype expects f32 or bf16, got '" + v + "'");
      bf16_base = v == "bf16";
    } else {
      throw llmcc::Error("unknown flag " + a);
    }
  }
  if (positional.size() != 3) throw llmcc::Error("expected MODEL, BATCH and OUT");
  llmcc::set_num_threads(threads);
  llmcc::set_kernel_mode(kernels);
  llmcc::set_matmul_dtype(llmcc::parse_matmul_dtype(dtype));

  std::unique_ptr<llmcc::models::Model> model = llmcc::models::load_model(positional[0]);
  model->set_checkpoint_activations(checkpoint);
  if (bf16_base) {
    if (model->lora() == nullptr)
      throw llmcc::Error("--base-dtype bf16 needs a model with LoRA adapters; MODEL '" + positional[0] + "' has none");
    model->store_base_in_bf16();
  }
  const Batch b = read_batch(positional[1], model->config().vocab_size());

  // Pages are touched only as they are used: the capacity bounds the batch, not the memory.
  llmcc::Arena arena(std::size_t{8} << 30);
  llmcc::ArenaScope scope(arena);
  if (!decode_logits.empty()) {
    write_decode_logits(*model, b, decode_logits);
    arena.reset();
  }
  float loss = 0.0f;
  const llmcc::ParameterStore grad = model->gradient({b.idx.data(), b.B, b.T}, {b.targets.data(), b.B, b.T}, &loss);

  // The gradient as the weights of a model of the same config, written in its family's layout;
  // with LoRA adapters, as the adapters, written in PEFT's layout.
  const bool lora = model->lora() != nullptr;
  std::unique_ptr<llmcc::models::Model> out = lora ? std::move(model) : llmcc::models::make_model(model->config());
  llmcc::ParameterStore& dst = out->params();
  if (dst.count() != grad.count()) throw llmcc::Error("gradient and model have different parameter counts");
  for (std::size_t i = 0; i < grad.count(); ++i) {
    const llmcc::Tensor g = grad.tensor(i), w = dst.tensor(i);
    if (dst.name(i) != grad.name(i) || w.shape() != g.shape())
      throw llmcc::Error("gradient tensor " + grad.name(i) + " does not match parameter " + dst.name(i));
    std::memcpy(w.f32(), g.f32(), static_cast<std::size_t>(g.numel()) * sizeof(float));
  }
  if (lora)
    out->save_peft(positional[2]);
  else
    out->save_as("safetensors", positional[2], {});
  std::printf("loss %.9g\n", static_cast<double>(loss));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmcc_gradient_dump: %s\n%s\n", e.what(), kUsage);
    return 2;
  }
}
