// Gradient-final notifications of a user's model (the classifier, whose entry leaves its input
// out of LLMCC_ADGEN_WRT): every parameter gradient notified exactly once per call with its final
// value, through `_grad` and through the Entry trait's `bwd`, also when gradients accumulate.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "classifier.grad.h"
#include "grad_final_check.h"
#include "llmcc/arena.h"
#include "llmcc/train/rng.h"

namespace {

using llmcc::test::expect_each_final_once;
using llmcc::test::RecordingListener;
using test_train::Classifier;

TEST(GradFinal, ClassifierEachGradientOnceFinal) {
  constexpr int D = 5, H = 7, K = 3, B = 4;
  Classifier model(D, H, K);
  llmcc::ParameterStore params = llmcc::bind_parameters(model);
  llmcc::Rng rng(11);
  for (std::size_t i = 0; i < params.count(); ++i) {
    llmcc::Tensor t = params.tensor(i);
    for (std::int64_t k = 0; k < t.numel(); ++k) t.f32()[k] = static_cast<float>(rng.normal()) * 0.5f;
  }
  std::vector<float> xs(static_cast<std::size_t>(B) * D);
  for (auto& v : xs) v = static_cast<float>(rng.normal());
  std::vector<std::int32_t> ys = {0, 2, 1, 2};
  const llmcc::Tensor x(xs.data(), llmcc::Shape{B, 1, D});
  const llmcc::Tokens y(ys.data(), B, 1);

  auto g = llmcc::adgen::make_grad(model);
  llmcc::Arena arena(16 << 20);
  for (int call = 0; call < 3; ++call) {  // no zeroing between: the gradients accumulate
    arena.reset();
    llmcc::ArenaScope scope(arena);
    RecordingListener listener;
    {
      llmcc::adgen::GradFinalScope notify(&listener);
      if (call < 2) {
        test_train::classifier_loss_grad(model, x, y, g.grad);
      } else {
        using Entry = test_train::classifier_loss_Entry;
        Entry::Saved saved;
        const Entry::Inputs in(x, y);
        Entry::fwd(model, in, saved);
        Entry::bwd(model, in, saved, 1.0f, &g.grad);
      }
    }
    expect_each_final_once(listener, g.store, "classifier call " + std::to_string(call + 1));
  }
}

}  // namespace
