// The parity checks GPT-2 and Llama share (tests/models/test_*_parity.cpp): a model's logits,
// loss and every parameter gradient against a reference script's fixtures, and a 10-step AdamW
// loss curve, with the fast and the reference kernels on 1 and 2 threads (parity.h). A test
// file describes its family with a struct and derives its suite from ModelParity:
//
//   struct Gpt2ParityFamily {
//     using Weights = llmcc::models::Gpt2Weights;        // .model and .params
//     static const llmcc::test::FixtureDir& fixtures();
//     static constexpr const char* kReference = "PyTorch";  // in the printed loss curve
//     static Weights load_model();                    // the fixture's model
//     static Weights load_grads();                    // the fixture's gradients, read as a model
//     static float loss(const Weights&, Tokens idx, Tokens targets);
//     static float loss_grad(const Weights&, Tokens idx, Tokens targets, auto& grad);
//   };
//   class Gpt2Parity : public llmcc::test::ModelParity<Gpt2ParityFamily> {};
//   TEST_P(Gpt2Parity, TenAdamWStepsMatchPyTorch) { ten_adamw_steps_match_reference(); }
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"
#include "parity.h"

namespace llmcc::test {

// For the logits and for every gradient part, the max abs error relative to that part's max
// magnitude; for the loss and each AdamW loss, the abs error.
constexpr double kParityTolerance = 1e-4;

// Everything a reference script wrote, read once per test executable.
template <class Family>
struct ParityFixtures {
  Reference ref;
  Batch batch;
  std::vector<float> logits;       // (B, T, logits width)
  typename Family::Weights grads;  // the reference gradients, read as a model

  static const ParityFixtures& get() {
    static const ParityFixtures f = [] {
      ParityFixtures x;
      x.ref = Reference::read(Family::fixtures());
      x.batch = Batch::read(Family::fixtures());
      x.logits = Family::fixtures().template array<float>("logits.bin");
      x.grads = Family::load_grads();
      return x;
    }();
    return f;
  }
  double number(const std::string& key) const { return ref.number(key); }
};

// What the gradient check measures: count elements of one parameter tensor from `begin`.
struct GradientPart {
  std::string name;  // "h.0.attn.c_attn.bias[k rows]"
  std::size_t tensor = 0;
  std::int64_t begin = 0, count = 0;
};

// Every tensor of the store, whole.
inline std::vector<GradientPart> whole_tensor_parts(const ParameterStore& store) {
  std::vector<GradientPart> parts;
  for (std::size_t i = 0; i < store.count(); ++i) parts.push_back({store.name(i), i, 0, store.tensor(i).numel()});
  return parts;
}

// The gradient check's findings: each part's deviation from the reference (parts[i] <-> devs[i])
// and its reference's own max magnitude, and the largest of those over the model.
struct GradientReport {
  std::vector<GradientPart> parts;
  std::vector<Deviation> devs;
  std::vector<double> own_scale;  // max |reference| of each part, without the floor
  double global = 0;              // the max of own_scale
  double floor = 0;               // the scale floor the deviations were measured with
};

template <class Family>
class ModelParity : public ParityTest {
 protected:
  const ParityFixtures<Family>& fx_ = ParityFixtures<Family>::get();
  Tokens idx() const { return fx_.batch.idx_tokens(); }
  Tokens targets() const { return fx_.batch.target_tokens(); }
  Arena arena_{64 << 20};

  // The forward's logits, the adgen-generated loss and gradient against the reference; the
  // gradient part by part (parts_of(store) of the reference's store), each against its own max
  // magnitude floored at floor_of_global times the largest gradient magnitude in the model. The
  // caller checks HasFatalFailure() before it reads *report.
  void logits_loss_and_gradient_match(std::vector<GradientPart> (*parts_of)(const ParameterStore&),
                                      double floor_of_global, GradientReport* report) {
    const typename Family::Weights w = Family::load_model();
    ArenaScope scope(arena_);

    const Tensor logits = w.model.forward(idx());  // (B, T, logits width)
    ASSERT_EQ(std::size_t(logits.numel()), fx_.logits.size());
    const Deviation dl = deviation(logits.f32(), fx_.logits.data(), logits.numel());
    EXPECT_LE(dl.rel, kParityTolerance) << "logits: max abs error " << dl.abs << " at " << dl.at << ", max |ref| "
                                        << dl.scale;

    arena_.reset();
    auto g = adgen::make_grad(w.model);
    const float loss = Family::loss_grad(w, idx(), targets(), g.grad);
    EXPECT_NEAR(loss, fx_.number("loss"), kParityTolerance);

    const ParameterStore& ref = fx_.grads.params;
    ASSERT_EQ(g.store.count(), ref.count());
    for (std::size_t i = 0; i < ref.count(); ++i) {
      ASSERT_EQ(g.store.name(i), ref.name(i));
      ASSERT_EQ(g.store.shape(i), ref.shape(i)) << ref.name(i);
    }
    GradientReport& r = *report;
    r.parts = parts_of(ref);
    const std::vector<GradientPart>& parts = r.parts;
    auto ref_of = [&](const GradientPart& p) { return ref.tensor(p.tensor).f32() + p.begin; };
    auto got_of = [&](const GradientPart& p) { return g.store.tensor(p.tensor).f32() + p.begin; };
    for (const GradientPart& p : parts) {
      r.own_scale.push_back(deviation(ref_of(p), ref_of(p), p.count).scale);
      r.global = std::max(r.global, r.own_scale.back());
    }
    r.floor = floor_of_global * r.global;
    std::size_t worst = 0;
    std::ostringstream table;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      r.devs.push_back(deviation(got_of(parts[i]), ref_of(parts[i]), parts[i].count, r.floor));
      if (r.devs[i].rel > r.devs[worst].rel) worst = i;
      table << "\n  " << parts[i].name << ": rel " << r.devs[i].rel << " (abs " << r.devs[i].abs << ", scale "
            << r.devs[i].scale << ")";
    }
    EXPECT_LE(r.devs[worst].rel, kParityTolerance)
        << "worst gradient: " << parts[worst].name << " element " << r.devs[worst].at << ", all:" << table.str();
    std::printf("[parity] logits rel %.3g, loss err %.3g, worst gradient %s rel %.3g (floor %.3g)\n", dl.rel,
                std::fabs(loss - fx_.number("loss")), parts[worst].name.c_str(), r.devs[worst].rel, r.floor);
  }

  // 10 AdamW steps with the reference's settings (weight decay on ndim >= 2 only, as the
  // scripts): each step's loss and the final loss match the reference's curve.
  void ten_adamw_steps_match_reference() {
    typename Family::Weights w = Family::load_model();
    const std::vector<double> want = fx_.ref.list("adamw.losses");  // (10)
    ASSERT_EQ(want.size(), 10u);
    const float lr = float(fx_.number("adamw.lr"));
    AdamW opt(w.params, fx_.ref.adamw());
    auto g = adgen::make_grad(w.model);
    std::ostringstream curve;
    double worst = 0;
    for (std::size_t step = 0; step < want.size(); ++step) {
      arena_.reset();
      ArenaScope scope(arena_);
      g.zero();
      const float loss = Family::loss_grad(w, idx(), targets(), g.grad);
      opt.step(w.params, g.store, lr);
      worst = std::max(worst, std::fabs(loss - want[step]));
      curve << "\n  step " << step << ": " << loss << " (" << Family::kReference << " " << want[step] << ")";
      EXPECT_NEAR(loss, want[step], kParityTolerance) << "AdamW step " << step;
    }
    arena_.reset();
    ArenaScope scope(arena_);
    const float final_loss = Family::loss(w, idx(), targets());
    EXPECT_NEAR(final_loss, fx_.number("adamw.final_loss"), kParityTolerance) << "after 10 steps" << curve.str();
    worst = std::max(worst, std::fabs(final_loss - fx_.number("adamw.final_loss")));
    std::printf("[parity] AdamW losses: worst error %.3g over 10 steps and the final loss\n", worst);
  }
};

}  // namespace llmcc::test
