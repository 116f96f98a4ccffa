// llmcc eval: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_eval(int, char**) { fail("llmcc eval", "not implemented yet"); }

}  // namespace llmcc::cli
