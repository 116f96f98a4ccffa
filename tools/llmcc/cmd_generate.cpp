// llmcc generate: sample text from a checkpoint of any family, on the family's KV-cache decoder
// (Model::generator) driven by models::generate.
//
//   llmcc generate --ckpt run/ckpt_005000.bin --prompt "ROMEO:" --max-tokens 200 --top-k 40
//
// The tokenizer is the one the checkpoint stored (run_tokenizer.h), else GPT-2's; --tokenizer
// overrides. SentencePiece prompts start with its bos; --stop-at-eot stops at its eos.
//
// --weights-dtype bf16|int8: each decoding step reads low-precision copies of the weights
// (llmcc/decode_weights.h): bf16 is half the bytes of fp32, int8 (a scale per 32 weights) 0.28 of
// them, for about that fraction of the time per token where memory bandwidth bounds it.
//
// --chat: the prompt is a user's message in the folder's chat format (llmcc/text/chat_template.h),
// after --system's message if given; only the reply is written, and it ends at the format's
// end-of-turn token.
//
// The prompt and then each new token's text go to stdout as they are produced; the timing
// (prefill and decode tokens/s) goes to stderr, so the text pipes cleanly.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/decode_weights.h"
#include "llmcc/error.h"
#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"
#include "llmcc/text/text_tokenizer.h"
#include "model_report.h"
#include "run_tokenizer.h"

namespace llmcc::cli {

namespace {

constexpr const char* kCmd = "llmcc generate";

void write_out(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);  // stream: each token's text appears as soon as it is chosen
}

}  // namespace

int run_generate(int argc, char** argv) {
  std::string ckpt, prompt, tokenizer_spec, system, on_full = "stop", weights_dtype = "f32";
  int max_tokens = 256, top_k = 0, threads = 0;
  float temperature = 1.0f;
  std::uint64_t seed = 1337;
  bool stop_at_eot = true, chat = false;

  ArgParser p("generate",
              "Sample text from a checkpoint with a KV cache: the prompt runs once, then one position per "
              "token.");
  p.add("--ckpt", &ckpt, "weights: " + models::model_path_help());
  p.require("--ckpt");
  p.add("--prompt", &prompt,
        "text to continue (SentencePiece: after its bos); empty starts from the document start "
        "(GPT-2's <|endoftext|>, SentencePiece's bos)");
  p.add("--chat", &chat,
        "the prompt is a user's message in the model's chat format (its folder's chat template: ChatML or "
        "Llama 3); writes the reply only, which ends at the format's end of turn");
  p.add("--system", &system, "with --chat: a system message before the user's");
  p.add("--max-tokens", &max_tokens, "new tokens to generate (>= 0)");
  p.add("--temperature", &temperature, "softmax temperature (>= 0); 0 is greedy (argmax)");
  p.add("--top-k", &top_k, "sample among the k most likely tokens; 0 considers all");
  p.add("--seed", &seed, "random seed: the same seed, checkpoint and flags give the same text");
  p.add("--stop-at-eot", &stop_at_eot,
        "stop when the model produces the end token: GPT-2's <|endoftext|>, SentencePiece's eos "
        "(--no-stop-at-eot continues)");
  p.add("--on-full", &on_full,
        "when the sequence reaches the model's context (max_seq_len): 'stop', or 'slide' the window "
        "(recomputes the cache of the last max_seq_len - 1 tokens for every further token: slow)");
  p.add("--threads", &threads, "threads for the kernels; 0 uses every core");
  p.add("--weights-dtype", &weights_dtype,
        "the weights each decoding step reads: f32; bf16 copies (half the memory traffic per token, half "
        "the weights' size more memory; logits move by bf16's rounding); or int8 copies with an fp32 scale "
        "per 32 weights (0.28 of the traffic and 0.28 of the weights' size more memory; each weight off by "
        "at most 1/254 of its block's largest); the prompt runs in f32");
  p.add("--tokenizer", &tokenizer_spec,
        "gpt2, gpt2:DIR, sp:MODEL (a SentencePiece .model), hf:FILE (a tokenizer.json) or a directory "
        "with encoder.json and vocab.bpe or a tokenizer.json [default: the one llmcc train stored in the "
        "checkpoint, a tokenizer.json or tokenizer.model in a Hugging Face model's folder, else GPT-2's, "
        "found or downloaded as llmcc prepare does]");
  p.epilogue(
      "The text (prompt, then each new token) goes to stdout as it is produced; prefill and decode\n"
      "tokens/s go to stderr.\n\n"
      "Examples:\n"
      "  llmcc generate --ckpt run/ckpt_005000.bin --prompt \"ROMEO:\" --max-tokens 200 --top-k 40\n"
      "  llmcc generate --ckpt gpt2_124M.bin --prompt \"The meaning of life is\" --temperature 0\n"
      "  llmcc generate --ckpt SmolLM2-360M-Instruct --chat --prompt \"Name three rivers.\" --temperature 0");
  if (!p.parse(argc, argv)) return 0;

  if (max_tokens < 0) fail(kCmd, "--max-tokens is " + std::to_string(max_tokens) + ", expected >= 0");
  if (!std::isfinite(temperature) || temperature < 0.0f)
    fail(kCmd, "--temperature is " + std::to_string(temperature) + ", expected a finite value >= 0 (0 = greedy)");
  if (top_k < 0) fail(kCmd, "--top-k is " + std::to_string(top_k) + ", expected >= 0 (0 = off)");
  if (threads < 0) fail(kCmd, "--threads is " + std::to_string(threads) + ", expected >= 0 (0 = every core)");
  if (p.given("--system") && !chat) fail(kCmd, "--system is a chat message; give --chat with it");
  const std::optional<DecodeDtype> decode_dtype = parse_decode_dtype(weights_dtype);
  if (weights_dtype != "f32" && !decode_dtype)
    fail(kCmd, "--weights-dtype is '" + weights_dtype + "', expected f32, bf16 or int8");
  if (on_full != "stop" && on_full != "slide") fail(kCmd, "--on-full is '" + on_full + "', expected 'stop' or 'slide'");
  check_model_path(ckpt, "--ckpt", kCmd);
  if (threads > 0) set_num_threads(threads);

  RunTokenizer run_tok;
  bool guessed = false;  // neither given nor stored: GPT-2's, as before checkpoints stored one
  if (!tokenizer_spec.empty()) {
    run_tok = {load_text_tokenizer(tokenizer_spec), "--tokenizer " + tokenizer_spec};
  } else if (auto stored = checkpoint_tokenizer(ckpt)) {
    run_tok = std::move(*stored);
  } else {
    run_tok = {load_text_tokenizer("gpt2"), "GPT-2's default files (the checkpoint stores no tokenizer)"};
    guessed = true;
  }
  const TextTokenizer& tok = *run_tok.tok;
  const std::unique_ptr<Model> model = load_model(ckpt);
  warn_nonfinite_weights(model->params(), ckpt, kCmd);
  const ModelConfig& cfg = model->config();
  const int V = cfg.vocab_size(), maxT = cfg.max_seq_len();
  if (guessed && V < tok.vocab_size())
    std::fprintf(stderr,
                 "note: %s stores no tokenizer; decoding its %d ids with %s (give --tokenizer if the model "
                 "was trained with another)\n",
                 ckpt.c_str(), V, tok.describe().c_str());
  else
    check_tokenizer_fits(run_tok, V, "the model " + ckpt, kCmd);

  models::SamplingConfig sc;
  sc.temperature = temperature;
  sc.top_k = top_k;
  sc.stop_at_eot = stop_at_eot && (tok.eos() >= 0 || tok.document_start() >= 0);
  if (tok.eos() >= 0) sc.eot = tok.eos();
  // A document ends where the model emits the id that starts the next one (SentencePiece data
  // has bos there, no eos; for GPT-2 both are <|endoftext|>).
  if (tok.document_start() != sc.eot) sc.document_start = tok.document_start();
  std::vector<std::int32_t> ids;
  if (chat) {
    const ChatTemplate tmpl = tok.chat_template();
    std::vector<ChatMessage> messages;
    if (p.given("--system")) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    ids = tok.encode(tmpl.render(messages, /*add_generation_prompt=*/true));
    const std::vector<std::int32_t> end = tok.encode(tmpl.end_of_turn());
    if (end.size() != 1) fail(kCmd, "the chat format's end of turn " + tmpl.end_of_turn() + " is not one token");
    // The reply ends at the end of turn; the tokenizer's eos (when another id) still ends it.
    sc.stop_at_eot = stop_at_eot;
    sc.eot = end[0];
    sc.document_start = tok.eos() != end[0] ? tok.eos() : -1;
    std::fprintf(stderr, "chat format: %s\n", tmpl.describe().c_str());
  } else {
    ids = tok.encode_prompt(prompt);
  }
  const auto is_end = [&](std::int32_t id) { return sc.stop_at_eot && (id == sc.eot || id == sc.document_start); };
  if (ids.empty())
    fail(kCmd, "the prompt is empty and " + tok.describe() + " has no bos or eos to start from; give a --prompt");
  if (ids.size() > static_cast<std::size_t>(maxT))
    fail(kCmd, "the prompt is " + std::to_string(ids.size()) + " tokens long, more than the model's context of " +
                   std::to_string(maxT) + " tokens (max_seq_len)");
  for (std::int32_t id : ids)
    if (id >= V)
      fail(kCmd,
           "the prompt has token " + std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(V));
  // Each new token's text as the whole sequence spells it (SentencePiece drops a leading space
  // only at the start; a character may span byte tokens).
  DecodeStream text(tok, ids);

  const models::ContextFull full_mode = on_full == "slide" ? models::ContextFull::Slide : models::ContextFull::Stop;
  std::optional<DecodeWeights> copies;
  std::optional<DecodeWeightsScope> copies_scope;
  if (decode_dtype) {
    copies.emplace(model->params(), *decode_dtype);
    copies_scope.emplace(*copies);
    std::fprintf(stderr, "decoding reads %s copies of %zu matrices (%.1f MiB)\n", decode_dtype_name(*decode_dtype),
                 copies->matrices(), static_cast<double>(copies->bytes()) / (1024.0 * 1024.0));
  }
  const std::unique_ptr<models::Generator> generator = model->generator(full_mode);
  models::Generator& gen = *generator;
  std::fprintf(stderr, "model %s %s from %s; cache and scratch %.1f MiB\n", cfg.display_name(), cfg.str().c_str(),
               ckpt.c_str(), static_cast<double>(gen.planned_bytes()) / (1024.0 * 1024.0));
  if (!chat) write_out(prompt);
  Rng rng(seed);
  std::int32_t last_id = -1;
  const models::GenerateStats st = models::generate(gen, ids, max_tokens, sc, rng, [&](std::int32_t id) {
    last_id = id;
    if (is_end(id)) return;  // the end marker is not text
    write_out(text.push(id));
  });
  write_out(text.finish() + "\n");

  if (st.stopped_at_limit)
    std::fprintf(stderr, "stopped: the sequence reached the model's context of %d tokens (--on-full slide goes on)\n",
                 maxT);
  if (st.stopped_at_eot)
    std::fprintf(stderr, "stopped at the end of %s (id %d, %s)\n", chat ? "the reply" : "a document", last_id,
                 last_id == sc.eot ? (chat ? "the end of turn" : "the end token")
                                   : (chat ? "the end token" : "the document start"));
  const auto rate = [](double n, double s) { return s > 0 ? n / s : 0.0; };
  std::fprintf(stderr, "prefill: %d tokens in %.3f s (%.1f tokens/s)\n", st.prompt_tokens, st.prefill_seconds,
               rate(st.prompt_tokens, st.prefill_seconds));
  // Decode speed counts the cached steps (each new token but the last is fed back once).
  std::fprintf(stderr, "decode: %d new tokens, %d cached steps in %.3f s (%.1f tokens/s)\n", st.new_tokens,
               st.decode_steps, st.decode_seconds, rate(st.decode_steps, st.decode_seconds));
  if (gen.slides() > 0)
    std::fprintf(stderr, "the window slid %lld times (a prefill each)\n", static_cast<long long>(gen.slides()));
  return 0;
}

}  // namespace llmcc::cli
