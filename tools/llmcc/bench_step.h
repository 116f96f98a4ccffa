// One GPT-2 training step as `llmcc bench`, bench/bench_gpt2.cpp and the steady-state allocation
// test run it: randomly initialised weights, one fixed batch of random tokens, and per step
//   arena reset -> gpt2_loss_grad (forward + backward, reusing the kept Saved record) -> AdamW
//   step, which also zeroes the gradient store for the next step (AdamW::step_zero_grads).
// After the first step (which sizes the Saved record's vectors and the scratch arenas) a step
// allocates nothing from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "nn/gpt2_config.h"
#include "nn/gpt2_weights.h"

namespace llmcc::cli {

class Gpt2BenchStep {
 public:
  // Throws llmcc::Error for B or T out of range (T must be at most config.max_seq_len).
  Gpt2BenchStep(const nn::Gpt2Config& config, int B, int T, std::uint64_t seed = 1337);
  Gpt2BenchStep(const Gpt2BenchStep&) = delete;
  Gpt2BenchStep& operator=(const Gpt2BenchStep&) = delete;

  // One training step; returns the loss.
  float step();

  // The same step with the forward, the backward and the optimizer (gradient zeroing included)
  // timed separately, in seconds.
  struct Split {
    float loss = 0;
    double forward = 0, backward = 0, optimizer = 0;
  };
  Split step_split();

  // Bytes the step's arena and adgen's scratch arenas have used at most.
  std::size_t arena_high_water() const { return arena_.high_water(); }
  std::size_t scratch_high_water() const;
  std::size_t arena_capacity() const { return arena_.capacity(); }

  const nn::Gpt2Config& config() const { return config_; }
  int batch() const { return B_; }
  int seq_len() const { return T_; }

 private:
  nn::Gpt2Config config_;
  int B_, T_;
  nn::Gpt2Weights weights_;
  adgen::GradBuffer<nn::Gpt2_Grad> grads_;
  AdamW opt_;
  Arena arena_;
  nn::gpt2_loss_Saved saved_;
  std::vector<std::int32_t> inputs_, targets_;  // (B, T) each
};

// A step arena large enough for (config, B, T): about twice what a GPT-2 step keeps (saved
// activations, logits and their gradient), plus slack. Untouched pages cost only address space.
std::size_t bench_arena_bytes(const nn::Gpt2Config& config, int B, int T);

}  // namespace llmcc::cli
