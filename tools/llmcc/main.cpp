// llmcc: the command line. `llmcc <command> [flags]`; `llmcc <command> --help` lists the flags.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "commands.h"
#include "llmcc/dist/communicator.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"prepare", llmcc::cli::run_prepare, "tokenize text files into train/val shards (llm.c format)"},
    {"tokenize", llmcc::cli::run_tokenize, "print the token ids of a text (or decode ids)"},
    {"train-tokenizer", llmcc::cli::run_train_tokenizer, "train a SentencePiece tokenizer on text files"},
    {"train", llmcc::cli::run_train, "train a model (or resume) on token shards"},
    {"eval", llmcc::cli::run_eval, "validation loss of a checkpoint"},
    {"generate", llmcc::cli::run_generate, "sample text from a checkpoint"},
    {"export", llmcc::cli::run_export, "convert weights: llmcc checkpoints, llm.c files, Hugging Face safetensors"},
    {"bench", llmcc::cli::run_bench, "time training steps and print a per-op profile"},
    {"plot", llmcc::cli::run_plot, "draw training logs (loss, lr, tokens/s, grad norm) as an SVG"},
};

// Under mpirun with more than one rank, errors name the rank ("llmcc train [rank 1 of 2]: error:
// ...") and end the whole job, so no other rank waits in a collective for this one.
llmcc::dist::Communicator* job() {
  if (!llmcc::dist::launched_by_mpi()) return nullptr;
  llmcc::dist::Communicator& comm = llmcc::dist::world();
  return comm.distributed() ? &comm : nullptr;
}

int end_with(int code) {
  if (llmcc::dist::Communicator* comm = job()) {
    std::fflush(stderr);
    std::fflush(stdout);
    comm->abort(code);
  }
  return code;
}

std::string rank_tag() {
  const llmcc::dist::Communicator* comm = job();
  return comm ? " [" + comm->describe() + "]" : std::string();
}

void usage(std::FILE* out) {
  std::fputs("usage: llmcc <command> [flags]\n\nCommands:\n", out);
  for (const Command& c : kCommands) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
  std::fputs("\n`llmcc <command> --help` lists a command's flags.\n", out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  llmcc::set_flush_denormals(true);  // llmcc/runtime.h
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(argc - 2, argv + 2);
    } catch (const llmcc::Error& e) {
      // The command's own errors carry its name as their prefix already; it is printed once.
      std::string_view what = e.what();
      const std::string own = std::string("[llmcc ") + c.name + "] ";
      if (what.starts_with(own)) what.remove_prefix(own.size());
      std::fprintf(stderr, "llmcc %s%s: error: %.*s\n", c.name, rank_tag().c_str(), static_cast<int>(what.size()),
                   what.data());
      return end_with(1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "llmcc %s%s: internal error: %s\n", c.name, rank_tag().c_str(), e.what());
      return end_with(3);
    }
  }
  std::fprintf(stderr, "llmcc: unknown command '%s'\n\n", name.c_str());
  usage(stderr);
  return 2;
}
