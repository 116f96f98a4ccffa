// Llama in `llmcc bench`: LlamaConfig::flops_per_step counts what the step multiplies (SwiGLU's
// three matrices, GQA's narrower k and v, the untied head, causal attention), and its bench step
// (Model::bench_step) trains (the loss on its fixed batch falls) and reports its memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "bench_run.h"
#include "cli_run.h"
#include "models/llama/llama_config.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

using llmcc::models::LlamaConfig;

LlamaConfig flop_config() {
  LlamaConfig c;
  c.n_layer = 2;
  c.n_embd = 64;
  c.n_head = 4;     // HS 16
  c.n_kv_head = 2;  // k and v 32 wide
  c.hidden_dim = 176;
  c.vocab_size = 100;
  c.max_seq_len = 32;
  return c;
}

TEST(LlamaFlops, CountsEachMatmulOfTheStep) {
  const LlamaConfig c = flop_config();
  const int B = 3, T = 10;
  // Per layer: wq 64*64 + wk 32*64 + wv 32*64 + wo 64*64 + w1, w2, w3 3 * 176*64 = 46080 weights;
  // two layers and the untied head 100*64: 98560 weights, 6 FLOPs each per token (2 forward, 4
  // backward). Attention: QK^T and AV under the causal mask, 2*T*C per token per layer forward and
  // twice that backward: 2 * 6 * 10 * 64 = 7680 per token. 30 tokens.
  const double expected = 30.0 * (6.0 * 98560.0 + 7680.0);
  EXPECT_DOUBLE_EQ(c.flops_per_step(B, T), expected);
  EXPECT_DOUBLE_EQ(expected, 17971200.0);

  // The matmul weights are the parameters minus the embedding and the RMSNorm weights.
  const double matmul_params = static_cast<double>(c.parameter_count()) - 100.0 * 64 - (2.0 * c.n_layer + 1) * c.n_embd;
  EXPECT_DOUBLE_EQ(c.flops_per_step(1, 1), 6.0 * matmul_params + 6.0 * c.n_layer * c.n_embd);

  // GQA: each kv head fewer removes one (HS x C) slice of wk and of wv in every layer.
  LlamaConfig mha = c;
  mha.n_kv_head = 4;
  EXPECT_DOUBLE_EQ(mha.flops_per_step(B, T) - c.flops_per_step(B, T), 30.0 * 6.0 * 2 * 2 * (2 * 16 * 64));
  // SwiGLU: three matrices of F x C per layer.
  LlamaConfig wider = c;
  wider.hidden_dim += 1;
  EXPECT_DOUBLE_EQ(wider.flops_per_step(B, T) - c.flops_per_step(B, T), 30.0 * 6.0 * 2 * 3 * 64);
  // The head scales with the vocabulary, untied: V x C once.
  LlamaConfig more_vocab = c;
  more_vocab.vocab_size += 1;
  EXPECT_DOUBLE_EQ(more_vocab.flops_per_step(B, T) - c.flops_per_step(B, T), 30.0 * 6.0 * 64);
}

TEST(LlamaFlops, Stories15mAtItsContext) {
  // stories15m (L6 C288 F768 V32000, MHA): 6 * (2*288^2 + 2*288^2 + 3*768*288) + 32000*288
  // = 6 * 995328 + 9216000 = 15187968 matmul weights.
  const LlamaConfig c = llmcc::models::llama_preset("stories15m");
  const double per_token = 6.0 * 15187968.0 + 6.0 * 6 * 256 * 288;
  EXPECT_DOUBLE_EQ(c.flops_per_step(4, 256), 1024.0 * per_token);
}

TEST(LlamaBenchStep, TrainsItsFixedBatchAndReportsMemory) {
  llmcc::models::ModelConfig c = llmcc::models::model_preset("llama-tiny");
  c.set("vocab_size", 512);
  llmcc::test::BenchRun run = llmcc::test::bench_run(c, 2, 16);
  llmcc::models::BenchStep& bench = *run;
  const float first = bench.step();
  float last = first;
  for (int i = 0; i < 5; ++i) last = bench.step();
  EXPECT_LT(last, first);
  EXPECT_NEAR(first, std::log(512.0f), 0.5f);  // random init: about uniform
  const auto split = bench.step_split();
  EXPECT_GT(split.forward, 0.0);
  EXPECT_GT(split.backward, 0.0);
  EXPECT_GT(bench.arena_high_water(), 0u);
  EXPECT_LE(bench.arena_high_water(), bench.arena_capacity());
  EXPECT_TRUE(llmcc::test::throws_error([&] { run.model->bench_step(1, c.max_seq_len() + 1, 1); },
                                        {"llmcc bench", "sequence length"}));
}

// The value after "key=" in the result line.
double result_value(const std::string& out, const std::string& key) {
  const std::size_t line = out.find("result: ");
  const std::size_t at = out.find(" " + key + "=", line);
  if (line == std::string::npos || at == std::string::npos) return NAN;
  return std::strtod(out.c_str() + at + key.size() + 2, nullptr);
}

TEST(LlamaBenchCli, ReportsStepSpeedMfuAndProfile) {
  llmcc::test::TempDir dir;
  const auto r = llmcc::test::run_llmcc(
      dir, {"bench", "--model", "llama-tiny", "--vocab-size", "512", "--batch-size", "2", "--seq-len", "16",
            "--threads", "1", "--warmup", "1", "--steps", "2", "--profile-steps", "1", "--peak-seconds", "0.1"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* want : {"llmcc bench: llama-tiny (Llama L4 H4/2 C128", "ms/step: median", "tokens/s:", "MFU",
                           "peak RSS:", "per-op profile", "linear_nobias", "rope", "rmsnorm", "swiglu", "adamw.step",
                           "result: impl=llmcc model=llama-tiny B=2 T=16 threads=1"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " not in\n" << r.out;
  }
  // GFLOP/s times the median step is LlamaConfig::flops_per_step.
  LlamaConfig c = llmcc::models::llama_preset("llama-tiny");
  c.vocab_size = 512;
  const double gflop = result_value(r.out, "gflops") * result_value(r.out, "median_ms") * 1e-3;
  EXPECT_NEAR(gflop, c.flops_per_step(2, 16) * 1e-9, 1e-3 * gflop) << r.out;
  // A sequence longer than the model's context is an error naming the flag.
  const auto bad = llmcc::test::run_llmcc(dir, {"bench", "--model", "llama-tiny", "--seq-len", "300"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--seq-len must be in [1, 256]"), std::string::npos) << bad.err;
}

}  // namespace
