// The model tests GPT-2 and Llama share (src/models/<family>/<family>.h with their adgen-generated gradients): the
// loss at initialisation is log(vocab), the generated gradient memorises a fixed batch, and it
// matches central finite differences of the float forward. A test file describes its family
// with a struct and calls one function per TEST:
//
//   struct Gpt2Family {
//     using Config = llmcc::models::Gpt2Config;
//     using Weights = llmcc::models::Gpt2Weights;       // .model (with .cfg) and .params
//     static constexpr const char* kName = "gpt2";  // in printed figures
//     static Weights make(const Config&);           // allocated, not initialised
//     static void init(Weights&, std::uint64_t seed);
//     static float loss(const Weights&, Tokens idx, Tokens targets);
//     static float loss_grad(const Weights&, Tokens idx, Tokens targets, auto& grad);  // adgen's
//     // The leading elements of a parameter that the model uses (GPT-2's wte: not the padding rows).
//     static std::int64_t real_elements(const std::string& name, const Tensor&, const Config&);
//   };
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/tensor.h"
#include "llmcc/train/adamw.h"
#include "random_ids.h"

namespace llmcc::test {

// The standard deviation of a tensor's elements (about its own mean).
inline double standard_deviation(const Tensor& t) {
  double s = 0, s2 = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) s += t.f32()[i], s2 += double(t.f32()[i]) * t.f32()[i];
  const double mean = s / t.numel();
  return std::sqrt(s2 / t.numel() - mean * mean);
}

// The preset's model at initialisation predicts nearly uniformly: its loss on random tokens
// (B = 2, T = 32) is log(vocab_size) within 0.05.
template <class Family>
void model_loss_at_initialisation_is_log_vocab(const typename Family::Config& c, double vocab_size) {
  auto w = Family::make(c);
  Family::init(w, 7);
  const int B = 2, T = 32;
  const auto idx = random_ids(B * T, c.vocab_size, 1), tgt = random_ids(B * T, c.vocab_size, 2);  // (B * T) each
  Arena arena(256 << 20);
  ArenaScope scope(arena);
  const float loss = Family::loss(w, Tokens(idx.data(), B, T), Tokens(tgt.data(), B, T));
  EXPECT_NEAR(loss, std::log(vocab_size), 0.05);
}

// 100 AdamW steps of the generated gradient on one batch (B = 2, T = 8) take the loss from
// log(vocab_size) to under 0.3.
template <class Family>
void model_generated_gradient_memorises_a_batch(const typename Family::Config& c) {
  auto w = Family::make(c);
  Family::init(w, 3);
  const int B = 2, T = 8;
  const auto idx = random_ids(B * T, c.vocab_size, 4), tgt = random_ids(B * T, c.vocab_size, 5);  // (B * T) each
  const Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  auto g = adgen::make_grad(w.model);
  AdamW opt(w.params, {0.9f, 0.95f, 1e-8f, 0.0f});
  Arena arena(64 << 20);
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    arena.reset();
    ArenaScope scope(arena);
    g.zero();
    last = Family::loss_grad(w, x, y, g.grad);
    if (step == 0) first = last;
    opt.step(w.params, g.store, 1e-2f);
  }
  EXPECT_NEAR(first, std::log(double(c.vocab_size)), 0.1);
  EXPECT_LT(last, 0.3f) << "from " << first;
}

// How the finite-difference check spreads over the parameters and how close it must be.
struct GradientSpread {
  int samples_per_tensor;   // elements k = 0, s, 2s, ... with s = numel / samples_per_tensor
  double tolerance;         // |adgen - fd| <= tolerance * max(max|fd| of the tensor, 1e-2)
  std::size_t min_checked;  // elements checked over all tensors, at least
};

// Central differences of the (float) forward with step 1e-2, accumulated in double, on a spread
// of elements of every parameter of `w` (drawn by the caller so that every path carries signal)
// against the generated gradient, on a batch (B = 2, T = 5) with one ignored target. Each
// sampled tensor must show signal (max |fd| > 1e-4). The PyTorch parity tests in tests/models (*_parity.cpp) are
// the tight check.
template <class Family>
void model_generated_gradient_matches_finite_differences(typename Family::Weights& w, const GradientSpread& spread) {
  const auto& c = w.model.cfg;
  const int B = 2, T = 5;
  auto idx = random_ids(B * T, c.vocab_size, 13), tgt = random_ids(B * T, c.vocab_size, 14);  // (B * T) each
  tgt[3] = -1;                                                                                // an ignored position
  const Tokens x(idx.data(), B, T), y(tgt.data(), B, T);
  auto g = adgen::make_grad(w.model);
  Arena arena(16 << 20);
  {
    ArenaScope scope(arena);
    Family::loss_grad(w, x, y, g.grad);
  }
  auto loss = [&] {
    arena.reset();
    ArenaScope scope(arena);
    return static_cast<double>(Family::loss(w, x, y));
  };
  std::size_t checked = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < w.params.count(); ++i) {
    float* p = w.params.tensor(i).f32();
    const float* d = g.store.tensor(i).f32();
    const std::int64_t n = w.params.tensor(i).numel();
    const std::int64_t real = Family::real_elements(w.params.name(i), w.params.tensor(i), c);
    double max_ref = 0;
    std::vector<std::pair<double, double>> pairs;  // (adgen, fd) per sampled element
    for (std::int64_t k = 0; k < n && k < real; k += std::max<std::int64_t>(1, n / spread.samples_per_tensor)) {
      const float saved = p[k];
      const float h = 1e-2f;
      p[k] = saved + h;
      const double up = loss();
      p[k] = saved - h;
      const double down = loss();
      p[k] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      pairs.emplace_back(d[k], numeric);
      max_ref = std::max(max_ref, std::fabs(numeric));
    }
    ASSERT_GT(max_ref, 1e-4) << w.params.name(i) << ": no signal reaches this parameter";
    for (const auto& [a, num] : pairs) {
      const double scale = std::max(max_ref, 1e-2);
      EXPECT_NEAR(a, num, spread.tolerance * scale) << w.params.name(i);
      worst = std::max(worst, std::fabs(a - num) / scale);
      ++checked;
    }
  }
  std::printf("%s finite differences: %zu elements of %zu tensors, worst |adgen - fd| / max|fd| = %.2e\n",
              Family::kName, checked, w.params.count(), worst);
  EXPECT_GT(checked, spread.min_checked);
}

}  // namespace llmcc::test
