// llmcc generate: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_generate(int, char**) { fail("llmcc generate", "not implemented yet"); }

}  // namespace llmcc::cli
