// llmcc train: parses the flags (train_options.h) and runs the training loop (trainer.h).
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "run_training.h"

namespace llmcc::cli {

int run_train(int argc, char** argv) {
  TrainOptions options;
  if (!parse_train_flags(argc, argv, options)) return 0;  // --help
  const bool quiet = options.quiet;
  const TrainResult r = run_training(std::move(options));
  if (!quiet) {
    std::printf("done: step %lld", static_cast<long long>(r.step));
    if (std::isfinite(r.last_loss)) std::printf(", train loss %.4f", static_cast<double>(r.last_loss));
    if (std::isfinite(r.val_loss)) std::printf(", val loss %.4f", static_cast<double>(r.val_loss));
    if (!r.checkpoint.empty()) std::printf(", checkpoint %s", r.checkpoint.c_str());
    std::printf("\n");
  }
  return r.interrupted ? 130 : 0;
}

}  // namespace llmcc::cli
