// The subcommands of `llmcc`, one file each (cmd_<name>.cpp). Each gets the arguments after its
// name, returns the process exit code and throws llmcc::Error for bad input (main prints it).
#pragma once

namespace llmcc::cli {

int run_prepare(int argc, char** argv);          // text -> train/val token shards
int run_tokenize(int argc, char** argv);         // text -> token ids (and back)
int run_train_tokenizer(int argc, char** argv);  // text -> SentencePiece model
int run_train(int argc, char** argv);            // train or resume
int run_eval(int argc, char** argv);             // validation loss of a checkpoint
int run_generate(int argc, char** argv);         // sample text from a checkpoint
int run_export(int argc, char** argv);           // checkpoint <-> llm.c weight files
int run_bench(int argc, char** argv);            // training-step speed and profile
int run_plot(int argc, char** argv);             // training logs -> SVG chart

}  // namespace llmcc::cli
