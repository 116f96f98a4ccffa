// llmcc tokenize: placeholder until its issue lands.
#include "commands.h"
#include "llmcc/error.h"

namespace llmcc::cli {

int run_tokenize(int, char**) { fail("llmcc tokenize", "not implemented yet"); }

}  // namespace llmcc::cli
