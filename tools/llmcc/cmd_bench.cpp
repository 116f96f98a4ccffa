// llmcc bench: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_bench(int, char**) { fail("llmcc bench", "not implemented yet"); }

}  // namespace llmcc::cli
