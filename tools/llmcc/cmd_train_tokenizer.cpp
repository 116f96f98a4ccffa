// llmcc train-tokenizer: train a SentencePiece model (BPE by default) on text files with the
// SentencePiece library, for `llmcc prepare --tokenizer sp:PREFIX.model`.
//
//   llmcc train-tokenizer --input tinyshakespeare --vocab-size 512 --out data/tok512
//     -> data/tok512.model (the tokenizer) and data/tok512.vocab (its pieces and scores, for reading)
//
// The options are the ones that make a tokenizer round-trip any text exactly (see
// llmcc/text/sp_tokenizer.h); training is deterministic.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "data_sets.h"
#include "llmcc/error.h"
#include "llmcc/text/sp_tokenizer.h"

namespace llmcc::cli {

int run_train_tokenizer(int argc, char** argv) {
  SpTrainOptions o;
  bool verbose = false;
  ArgParser p("train-tokenizer", "Train a SentencePiece tokenizer (BPE by default) on text files.");
  p.add("--input", &o.inputs,
        "text files (or the data set name 'tinyshakespeare'); every line is one training sentence");
  p.add("--vocab-size", &o.vocab_size,
        "number of tokens, including <unk>, <s>, </s> and (with byte fallback) 256 byte tokens");
  p.add("--out", &o.model_prefix, "output prefix: writes PREFIX.model and PREFIX.vocab");
  p.add("--model-type", &o.model_type, "bpe or unigram");
  p.add("--byte-fallback", &o.byte_fallback,
        "spell characters the vocabulary lacks as UTF-8 byte tokens <0xNN> instead of <unk> (--no-byte-fallback)");
  p.add("--character-coverage", &o.character_coverage,
        "fraction of the input's characters that get their own piece; rarer ones fall back to bytes");
  p.add("--max-sentence-length", &o.max_sentence_length,
        "longest line in bytes the trainer uses; longer lines are skipped");
  p.add("--verbose", &verbose, "show SentencePiece's training log");
  p.require("--input");
  p.require("--vocab-size");
  p.require("--out");
  p.epilogue(
      "Ids: <unk> 0, <s> (bos) 1, </s> (eos) 2, no padding id. Normalisation 'identity', whitespace kept,\n"
      "digits split, byte fallback on: decoding the ids of any text gives the text back byte for byte.\n"
      "Training uses one thread and every input line, so the same input and flags give the same model.\n\n"
      "Examples:\n"
      "  llmcc train-tokenizer --input tinyshakespeare --vocab-size 512 --out data/tok512\n"
      "  llmcc prepare --input tinyshakespeare --tokenizer sp:data/tok512.model --out data/ts-sp512");
  if (!p.parse(argc, argv)) return 0;
  o.quiet = !verbose;
  for (std::string& input : o.inputs) {
    if (is_data_set_name(input)) input = data_set_path(input, "llmcc train-tokenizer");
  }

  std::printf("training a %d-token SentencePiece %s model on %zu file(s)\n", o.vocab_size, o.model_type.c_str(),
              o.inputs.size());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string model = train_sp_tokenizer(o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SpTokenizer tok = SpTokenizer::load(model);
  std::printf("wrote %s and %s.vocab (%d tokens, bos %d, eos %d, unk %d) in %.1f s\n", model.c_str(),
              o.model_prefix.c_str(), tok.vocab_size(), tok.bos(), tok.eos(), tok.unk(), s);
  return 0;
}

}  // namespace llmcc::cli
