// llmcc eval: the mean validation loss (and perplexity) of a checkpoint's weights on token shards.
//
// Batches are read sequentially from the start of the shards, as the trainer's validation does,
// so the same flags give the same number the training log shows.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/io/checkpoint.h"
#include "llmcc/train/data_loader.h"
#include "llmcc/train/train_log.h"
#include "llmcc/train/trainer.h"
#include "model_report.h"
#include "models/hf_files.h"
#include "model_flags.h"
#include "run_tokenizer.h"
#include "train_options.h"
#include "run_training.h"

namespace llmcc::cli {

namespace {

constexpr const char* kWhere = "llmcc eval";

// The checkpoint's stored training batch shape, so eval defaults to what validation used.
void defaults_from_checkpoint(const std::string& path, int* B, int* T) {
  CheckpointReader reader(path);
  if (!reader.has("config")) return;
  const KeyValues kv = parse_key_values(reader.blob("config"), path + " [config]");
  auto get = [&](const char* key, int* out) {
    const auto it = kv.find(key);
    if (it == kv.end()) return;
    try {
      const int v = std::stoi(it->second);
      if (v > 0) *out = v;
    } catch (const std::exception&) {
      // A malformed value: keep the flag's default.
    }
  };
  get("train.batch_size", B);
  get("train.seq_len", T);
}

}  // namespace

namespace {

// logits (B, T, rows), rows >= V, as NumPy's .npy format 1.0: float32 (B, T, V), little-endian.
void write_logits_npy(const std::string& path, const Tensor& logits, int B, int T, int V) {
  const std::int64_t rows = logits.shape()[2];
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(B) + ", " +
                       std::to_string(T) + ", " + std::to_string(V) + "), }";
  // Magic, version, header length, then the header padded with spaces to a multiple of 64 bytes
  // and ended by a newline.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  bytes += static_cast<char>(len & 0xFF);
  bytes += static_cast<char>(len >> 8);
  bytes += header;
  const float* src = logits.f32();
  for (std::int64_t bt = 0; bt < static_cast<std::int64_t>(B) * T; ++bt)
    bytes.append(reinterpret_cast<const char*>(src + bt * rows), static_cast<std::size_t>(V) * sizeof(float));
  models::write_text_file(path, bytes, kWhere);
}

}  // namespace

int run_eval(int argc, char** argv) {
  std::string ckpt;
  std::vector<std::string> val_data;
  int batch_size = 4, seq_len = 64, threads = 0;
  std::string dtype = "fp32";
  std::int64_t steps = 0;
  bool json = false;
  std::string logits_out;
  ArgParser p("eval", "Mean next-token loss (and perplexity) of a checkpoint's weights on token shards.");
  p.add("--ckpt", &ckpt, "weights: " + models::model_path_help());
  p.add("--val-data", &val_data, "token shards: files or glob patterns (llm.c format)");
  p.add("--batch-size", &batch_size, "sequences per batch (default: the checkpoint's training --batch-size)");
  p.add("--seq-len", &seq_len, "tokens per sequence (default: the checkpoint's training --seq-len)");
  p.add("--steps", &steps, "batches to evaluate (0: one pass over all shards)");
  p.add("--threads", &threads, "worker threads (0: all cores)");
  p.add("--dtype", &dtype, "matrix products in fp32 or bf16 (bf16 operands, fp32 sums), or 'auto' (the faster here)");
  p.add("--json", &json, "print one JSON object instead of text");
  p.add("--logits-out", &logits_out,
        "also write the first batch's logits to this .npy file: float32 (batch, seq, vocab), for comparing llmcc "
        "with other runtimes");
  p.require("--ckpt");
  p.require("--val-data");
  p.epilogue(
      "Example:\n"
      "  llmcc eval --ckpt runs/tiny/ckpt_000500.bin --val-data data/tinyshakespeare/val_*.bin");
  if (!p.parse(argc, argv)) return 0;

  if (threads < 0) fail(kWhere, "--threads must be >= 0, got " + std::to_string(threads));
  if (steps < 0) fail(kWhere, "--steps must be >= 0, got " + std::to_string(steps));
  if (threads > 0) set_num_threads(threads);
  if (dtype != "fp32" && dtype != "bf16" && dtype != "auto")
    fail(kWhere, "--dtype must be 'fp32', 'bf16' or 'auto', got '" + dtype + "'");
  const MatmulDtypeChoice choice = choose_matmul_dtype(dtype);
  if (!choice.note.empty()) std::fprintf(stderr, "llmcc eval: %s\n", choice.note.c_str());
  set_matmul_dtype(choice.dtype);
  const std::vector<std::string> files = expand_data_paths(val_data, "--val-data", kWhere);
  const std::unique_ptr<Model> model = load_model(ckpt);
  warn_nonfinite_weights(model->params(), ckpt, kWhere);
  const ModelConfig& cfg = model->config();
  // Ids of another tokenizer are other words: the loss would mean nothing.
  if (const auto data = data_tokenizer(files)) {
    if (const auto trained = checkpoint_tokenizer(ckpt); trained && !same_tokenizer(*data->tok, *trained->tok))
      fail(kWhere, "the shards were prepared with " + data->tok->describe() + " (" + data->source + ") but " + ckpt +
                       " was trained with " + trained->tok->describe() +
                       "; prepare the data with the model's tokenizer");
  }
  int B = batch_size, T = seq_len;
  if (!p.given("--batch-size") || !p.given("--seq-len")) {
    int cB = B, cT = T;
    try {
      defaults_from_checkpoint(ckpt, &cB, &cT);
    } catch (const Error&) {
      // Not an llmcc checkpoint (an llm.c file): the flags' defaults stand.
    }
    if (!p.given("--batch-size")) B = cB;
    if (!p.given("--seq-len")) T = cT;
  }
  if (B <= 0) fail(kWhere, "--batch-size must be positive, got " + std::to_string(B));
  if (T <= 0 || T > cfg.max_seq_len())
    fail(kWhere, "--seq-len must be in [1, " + std::to_string(cfg.max_seq_len()) + "] (the model's max_seq_len), got " +
                     std::to_string(T));

  DataLoader loader(files,
                    DataLoaderConfig{.B = B, .T = T, .mode = SampleMode::Sequential, .vocab_size = cfg.vocab_size()});
  const std::int64_t epoch = loader.batches_per_epoch();
  const std::int64_t batches = steps > 0 ? steps : epoch;
  // The arena a forward of one batch needs, measured on the first batch.
  loader.next_batch();
  Arena arena(arena_capacity_for(measure_step_arena([&] { model->loss(loader.inputs(), loader.targets()); }, kWhere)));
  if (!logits_out.empty()) {
    loader.reset();
    loader.next_batch();
    arena.reset();
    {
      ArenaScope scope(arena);
      write_logits_npy(logits_out, model->logits(loader.inputs()), B, T, cfg.vocab_size());
    }
    arena.reset();
  }
  // From the first batch again, in order.
  loader.reset();
  const double sum = sum_of_losses(batches, arena, [&] {
    loader.next_batch();
    return model->loss(loader.inputs(), loader.targets());
  });
  const double loss = batches > 0 ? sum / static_cast<double>(batches) : std::numeric_limits<double>::quiet_NaN();
  const double ppl = std::exp(loss);
  if (json) {
    // Shortest exact forms: the loss reads back as the double computed (non-finite: null).
    JsonLine line;
    line.begin()
        .field("loss", loss)
        .field("perplexity", ppl)
        .field("batches", batches)
        .field("batch_size", std::int64_t{B})
        .field("seq_len", std::int64_t{T})
        .field("tokens", batches * B * T);
    std::printf("%s\n", line.end().c_str());
  } else {
    std::printf("%s: %s %s\n", ckpt.c_str(), cfg.display_name(), cfg.str().c_str());
    std::printf("val loss %.4f, perplexity %.2f (%lld batches of %d x %d tokens%s)\n", loss, ppl,
                static_cast<long long>(batches), B, T, batches > epoch ? ", more than one pass: batches repeat" : "");
  }
  return 0;
}

}  // namespace llmcc::cli
