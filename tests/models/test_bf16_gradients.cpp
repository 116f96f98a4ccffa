// Gradients with bf16 matrix products against fp32 ones (Model::gradient), for every registered
// family at its smallest preset: per parameter tensor, the cosine similarity of the two gradients
// is at least 0.999, and the loss agrees to bf16 precision. The figures are printed per model
// (the smallest cosine and its tensor). (Against transformers at sizes drawn per run:
// tests/hf/test_hf_gradients.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/gemm_amx.h"
#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "models/model.h"
#include "models/registry.h"
#include "random_ids.h"
#include "smallest_preset.h"
#include "test_support.h"

namespace {

using llmcc::models::Model;

double cosine(const float* a, const float* b, std::int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (std::int64_t i = 0; i < n; ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa == 0 && bb == 0 ? 1.0 : ab / std::sqrt(aa * bb);
}

// Model::gradient (one forward and the generated backward) with fp32 and with bf16 matrix
// products, compared per tensor.
void expect_bf16_gradients_close(const std::string& what, const Model& m, const llmcc::Tokens& x,
                                 const llmcc::Tokens& y) {
  std::printf("[ note     ] bf16 GEMM kernel: %s\n", llmcc::cpu::gemm_bf16_kernel_name());
  llmcc::Arena arena(256 << 20);
  float loss[2];
  std::vector<std::vector<float>> grads[2];
  for (int run = 0; run < 2; ++run) {
    llmcc::set_matmul_dtype(run == 0 ? llmcc::MatmulDtype::Fp32 : llmcc::MatmulDtype::Bf16);
    arena.reset();
    llmcc::ArenaScope scope(arena);
    const llmcc::ParameterStore g = m.gradient(x, y, &loss[run]);
    for (std::size_t i = 0; i < g.count(); ++i) {
      const llmcc::Tensor t = g.tensor(i);
      grads[run].emplace_back(t.f32(), t.f32() + t.numel());
    }
  }
  llmcc::set_matmul_dtype(llmcc::MatmulDtype::Fp32);
  EXPECT_NEAR(loss[1], loss[0], 1e-2 * std::fabs(loss[0])) << what;
  // The bf16 products were used: some gradient differs in its bits.
  bool any_differs = false;
  for (std::size_t i = 0; i < grads[0].size(); ++i) any_differs = any_differs || grads[0][i] != grads[1][i];
  EXPECT_TRUE(any_differs) << what << ": bf16 gradients are bit-identical to fp32 ones";
  double worst = 2;
  std::string worst_name;
  const llmcc::ParameterStore& p = m.params();
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    const double c = cosine(grads[0][i].data(), grads[1][i].data(), static_cast<std::int64_t>(grads[0][i].size()));
    EXPECT_GE(c, 0.999) << what << " " << p.name(i);
    if (c < worst) worst = c, worst_name = p.name(i);
  }
  std::printf("[ note     ] %s: loss fp32 %.8f, bf16 %.8f; smallest gradient cosine over %zu tensors %.6f (%s)\n",
              what.c_str(), static_cast<double>(loss[0]), static_cast<double>(loss[1]), grads[0].size(), worst,
              worst_name.c_str());
}

// Every registered family at its smallest preset with a vocabulary of 512, on a batch of 4 x 64.
TEST(Bf16Gradients, EveryFamilyMatchesFp32PerTensor) {
  for (const llmcc::models::Family* f : llmcc::models::model_families()) {
    const std::string preset = llmcc::test::smallest_preset(*f);
    llmcc::models::ModelConfig c = f->preset(preset);
    c.set("vocab_size", 512);
    std::unique_ptr<Model> m = llmcc::models::make_model(c);
    m->init(5);
    const int B = 4, T = 64;
    const auto idx = llmcc::test::random_ids(B * T, 512, 6), tgt = llmcc::test::random_ids(B * T, 512, 7);
    expect_bf16_gradients_close(preset + " (vocab 512)", *m, llmcc::Tokens(idx.data(), B, T),
                                llmcc::Tokens(tgt.data(), B, T));
  }
}

}  // namespace
