// llmcc prepare: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_prepare(int, char**) { fail("llmcc prepare", "not implemented yet"); }

}  // namespace llmcc::cli
