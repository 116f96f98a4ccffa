// run_training: the training run behind `llmcc train` (CliTrainer in run_training.cpp): the model
// resolved from flags, --init-from or --resume, data, hooks for samples, handed to the library's
// Trainer (llmcc/train/trainer.h) through Model::make_trainer.
//
// One optimizer step (0-based index s, learning rate schedule.lr(s)):
//   zero the gradient buffer
//   for each of grad_accum micro-batches: next (B, T) batch, forward + generated backward
//       (llmcc::Trainer<Entry> on the family's adgen entry, made by
//       Model::make_trainer, with d_loss = 1 / grad_accum, so the accumulated gradient is the
//       mean over micro-batches), step arena reset after each
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
#include "llmcc/train/trainer.h"
#include "model_report.h"
#include "train_options.h"

namespace llmcc::cli {

using TrainResult = TrainResult;

// Resolves the model (fresh, --init-from or --resume), validates, trains and checkpoints.
// Throws llmcc::Error for bad options or data.
TrainResult run_training(TrainOptions options);

}  // namespace llmcc::cli
