// llmcc export: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_export(int, char**) { fail("llmcc export", "not implemented yet"); }

}  // namespace llmcc::cli
