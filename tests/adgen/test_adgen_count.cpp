// The counting test on a 3-level model (loss -> Model -> std::vector<Block> -> Linear ->
// matmul / tanh_op): one gradient call runs each rule's forward exactly once and its pullback
// once, and the forward allocates nothing but the rules' outputs (no tensor data is copied).
// With one block checkpointed, that block's forward runs twice and the Saved state shrinks.
#include <gtest/gtest.h>

#include <cstdio>

#include "adgen_test_util.h"
#include "ckpt.grad.h"
#include "mlp.grad.h"

namespace {

using llmcc::Tensor;

constexpr int kL = 3, kC = 4, kN = 5;

template <class Model>
void shape_blocks(Model& m) {
  m.h.resize(kL);
  for (auto& b : m.h) {
    b.fc1.w = Tensor(nullptr, {kC, 2 * kC});
    b.fc2.w = Tensor(nullptr, {2 * kC, kC});
  }
}

TEST(AdgenCount, EachRuleForwardRunsOncePerGradientCall) {
  mlp::Model m;
  m.in.w = Tensor(nullptr, {kC, kC});
  shape_blocks(m);
  std::vector<float> params, xs;
  adgen_test::bind_random(m, params, 7);
  Tensor x = adgen_test::random_tensor(xs, {kN, kC}, 8);
  auto g = llmcc::adgen::make_grad(m);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);

  toy::counters().reset();
  llmcc::adgen::release_scratch();
  mlp::loss_Saved saved;
  mlp::loss_fwd(m, x, saved);
  const std::size_t fwd_bytes = arena.used();
  // Only rule outputs were allocated: the toy rules' (counted) and one llmcc::add per block (the
  // residual). Nothing else: no tensor data was copied.
  const std::size_t a = llmcc::Arena::kAlignment;
  const std::size_t add_bytes = kL * ((kN * kC * sizeof(float) + a - 1) / a * a);
  EXPECT_EQ(fwd_bytes, toy::counters().out_bytes + add_bytes);
  mlp::loss_bwd(m, x, saved, 1.0f, &g.grad, nullptr);
  auto& c = toy::counters().calls;
  EXPECT_EQ(c["matmul"], 1 + 2 * kL);
  EXPECT_EQ(c["tanh_op"], kL);
  EXPECT_EQ(c["sumsq"], 1);
  EXPECT_EQ(c["matmul_pullback"], 1 + 2 * kL);
  EXPECT_EQ(c["tanh_op_pullback"], kL);
  EXPECT_EQ(c["sumsq_pullback"], 1);
  // Adjoint liveness: each callee's adjoints are freed when its backward returns, so the
  // backward needs little beyond the saved activations (one block's working set).
  const std::size_t bwd_bytes = arena.used() - fwd_bytes + llmcc::adgen::scratch_high_water();
  EXPECT_LT(bwd_bytes, fwd_bytes);
  std::printf("3-level model, L=%d: matmul fwd %d, tanh fwd %d per gradient call; forward "
              "allocated %zu bytes = rule outputs %zu; backward working set at most %zu bytes\n",
              kL, c["matmul"], c["tanh_op"], fwd_bytes, toy::counters().out_bytes + add_bytes, bwd_bytes);

  // The entry point does the same.
  toy::counters().reset();
  arena.reset();
  mlp::loss_grad(m, x, g.grad, nullptr);
  EXPECT_EQ(c["matmul"], 1 + 2 * kL);
  EXPECT_EQ(c["tanh_op"], kL);
}

TEST(AdgenCount, CheckpointedBlockRunsTwiceAndSavesLess) {
  ckpt::Model m;
  shape_blocks(m);
  std::vector<float> params, xs;
  adgen_test::bind_random(m, params, 9);
  Tensor x = adgen_test::random_tensor(xs, {kN, kC}, 10);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);

  std::vector<float> plain_grad;
  std::size_t plain_saved = 0, plain_fwd = 0, plain_peak = 0;
  for (int layer : {-1, 1}) {
    m.checkpoint_layer = layer;
    auto g = llmcc::adgen::make_grad(m);
    toy::counters().reset();
    llmcc::adgen::release_scratch();
    llmcc::Arena step(1 << 22);  // a fresh step arena: with the scratch arenas, this call's peak
    llmcc::ArenaScope step_scope(step);
    ckpt::loss_Saved saved;
    const float value = ckpt::loss_fwd(m, x, saved);
    const std::size_t saved_bytes = llmcc::adgen::saved_bytes(saved);
    const std::size_t fwd_bytes = step.used();
    ckpt::loss_bwd(m, x, saved, 1.0f, &g.grad, nullptr);
    const std::size_t peak = step.high_water() + llmcc::adgen::scratch_high_water();
    auto& c = toy::counters().calls;
    const int extra = layer >= 0 ? 1 : 0;
    EXPECT_EQ(c["matmul"], 2 * kL + 2 * extra) << "layer " << layer;
    EXPECT_EQ(c["tanh_op"], kL + extra) << "layer " << layer;
    EXPECT_EQ(c["matmul_pullback"], 2 * kL);
    const int matmuls = c["matmul"];
    EXPECT_FLOAT_EQ(value, ckpt::loss(m, x));
    std::vector<float> grad(g.store.data(), g.store.data() + g.store.size());
    if (layer < 0) {
      plain_grad = grad;
      plain_saved = saved_bytes;
      plain_fwd = fwd_bytes;
      plain_peak = peak;
      adgen_test::expect_grad_matches_fd(m, g.grad, [&] {
        llmcc::Arena a(1 << 20);
        llmcc::ArenaScope s(a);
        return static_cast<double>(ckpt::loss(m, x));
      });
    } else {
      // Same gradient, less saved.
      for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_FLOAT_EQ(grad[i], plain_grad[i]) << i;
      EXPECT_LT(saved_bytes, plain_saved);
      // The checkpointed block's activations (fc1 and tanh outputs (N, 2C), fc2 output (N, C))
      // stay in scratch memory; its output is kept as one copy in place of the add's output.
      const std::size_t a = llmcc::Arena::kAlignment;
      auto rounded = [&](std::size_t floats) { return (floats * sizeof(float) + a - 1) / a * a; };
      EXPECT_EQ(plain_fwd - fwd_bytes, 2 * rounded(kN * 2 * kC) + rounded(kN * kC));
      // The peak (step arena plus scratch high-water marks, an upper bound) is reported only: with
      // one block of three checkpointed, re-running it costs about what it saved.
      std::printf("checkpointing block %d: matmul fwd %d (+2 re-run); saved tensors %zu -> %zu bytes; step "
                  "arena after forward %zu -> %zu bytes; peak (bound) %zu -> %zu bytes\n",
                  layer, matmuls, plain_saved, saved_bytes, plain_fwd, fwd_bytes, plain_peak, peak);
    }
  }
}

// A Saved record kept across steps is reused: the second call allocates no new loop records.
TEST(AdgenCount, ReusedSavedRecordKeepsItsStorage) {
  mlp::Model m;
  m.in.w = Tensor(nullptr, {kC, kC});
  shape_blocks(m);
  std::vector<float> params, xs;
  adgen_test::bind_random(m, params, 13);
  Tensor x = adgen_test::random_tensor(xs, {kN, kC}, 14);
  auto g = llmcc::adgen::make_grad(m);
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);
  mlp::loss_Saved saved;
  const float first = mlp::loss_grad(m, x, g.grad, nullptr, saved);
  ASSERT_EQ(saved.m.loop0.size(), static_cast<std::size_t>(kL));
  const auto* records = saved.m.loop0.data();
  std::vector<float> once(g.store.data(), g.store.data() + g.store.size());
  g.zero();
  arena.reset();
  EXPECT_EQ(mlp::loss_grad(m, x, g.grad, nullptr, saved), first);
  EXPECT_EQ(saved.m.loop0.data(), records);  // same storage: no reallocation
  EXPECT_EQ(saved.m.loop0.size(), static_cast<std::size_t>(kL));
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_EQ(g.store.data()[i], once[i]) << i;
}

}  // namespace
