// The training loop behind `llmcc train`, and the loss evaluation `llmcc eval` shares with it.
//
// One optimizer step (0-based index s, learning rate schedule.lr(s)):
//   zero the gradient buffer
//   for each of grad_accum micro-batches: next (B, T) batch, forward + generated backward
//       (gpt2_loss_fwd / gpt2_loss_bwd with d_loss = 1 / grad_accum, so the accumulated
//       gradient is the mean over micro-batches), step arena reset after each
//   global-norm clipping (or just the norm, with --grad-clip 0), AdamW
// Everything a step touches is allocated before the first one: the step arena, the adgen
// Saved record (kept across steps), the data loader's buffers and the log line's buffer.
//
// Exact resume: the step (= the schedule's position), AdamW's moments and t, the training data
// loader's state and the sampling Rng are checkpointed; validation uses its own sequential
// loader reset every time and samples their own Rng, so neither changes the training
// trajectory. N steps, a checkpoint, and M resumed steps give the same bytes as N + M steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "llmcc/arena.h"
#include "llmcc/train/data_loader.h"
#include "nn/gpt2.h"
#include "train_options.h"

namespace llmcc::cli {

struct TrainResult {
  std::int64_t step = 0;     // optimizer steps completed
  float last_loss = 0.0f;    // training loss of the last step of this invocation (NaN: none)
  float val_loss = 0.0f;     // last validation loss (NaN: none)
  std::string checkpoint;    // last checkpoint written (empty: none)
  bool interrupted = false;  // stopped by SIGINT/SIGTERM
};

// Resolves the model (fresh, --init-from or --resume), validates, trains and checkpoints.
// Throws llmcc::Error for bad options or data.
TrainResult run_training(TrainOptions options);

// Capacity of a step arena for a forward + backward of (B, T) tokens: an upper bound on
// activations, saved values and adjoints (the real high-water mark is printed after the first
// step). Pages are touched only when used, so generosity costs address space, not memory.
std::size_t step_arena_bytes(const nn::Gpt2Config& config, int B, int T);

// Mean loss over `batches` batches of a (sequential, reset here) loader: forward only, arena
// reset after each batch.
double evaluate_loss(const nn::Gpt2& model, DataLoader& loader, std::int64_t batches, Arena& arena);

}  // namespace llmcc::cli
