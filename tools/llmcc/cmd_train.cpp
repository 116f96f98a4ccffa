// llmcc train: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_train(int, char**) { fail("llmcc train", "not implemented yet"); }

}  // namespace llmcc::cli
