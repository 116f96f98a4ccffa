// AdamW against values computed by hand (scripts/adamw_reference.py, PyTorch's formula in plain
// Python floats) and against a double-precision scalar reference over awkward sizes.
#include "llmcc/train/adamw.h"
#include "llmcc/train/grad_clip.h"

#include <algorithm>
#include <cmath>

#include "test_support.h"

namespace llmcc {
namespace {

// The scalar reference: PyTorch's AdamW update for one tensor, in double.
void adamw_reference(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                     std::vector<double>& v, const AdamWConfig& c, double lr, std::int64_t t, bool decay) {
  const double bc1 = 1.0 - std::pow(double{c.beta1}, double(t));
  const double bc2 = 1.0 - std::pow(double{c.beta2}, double(t));
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (decay) p[i] *= 1.0 - lr * c.weight_decay;
    m[i] = c.beta1 * m[i] + (1.0 - c.beta1) * g[i];
    v[i] = c.beta2 * v[i] + (1.0 - c.beta2) * g[i] * g[i];
    p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
  }
}

std::vector<float> values_of(const ParameterStore& s, std::size_t i) {
  const float* p = s.data() + s.offset(i);
  return std::vector<float>(p, p + s.shape(i).numel());
}

void set_values(ParameterStore& s, std::size_t i, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), s.data() + s.offset(i));
}

TEST(AdamW, MatchesHandComputedValuesForThreeSteps) {
  // Inputs and expected outputs: scripts/adamw_reference.py.
  ParameterStore params({{"w", Shape{2, 2}}, {"b", Shape{2}}});  // (2, 2) decayed, (2) not
  set_values(params, 0, {0.5f, -1.0f, 2.0f, 0.0f});
  set_values(params, 1, {0.25f, -0.75f});
  const std::vector<std::vector<float>> gw = {
      {0.1f, -0.2f, 0.3f, 0.0f}, {-0.5f, 0.4f, 0.0f, 1.0f}, {0.05f, 0.05f, -2.0f, 0.3f}};
  const std::vector<std::vector<float>> gb = {{1.0f, -1.0f}, {0.0f, 0.5f}, {-0.25f, 3.0f}};
  const std::vector<std::vector<double>> want_w = {{0.39500001, -0.890000005, 1.88, 0},
                                                   {0.450203295, -0.917437399, 1.79333523, -0.0734959992},
                                                   {0.485540657, -0.94366551, 1.82960447, -0.1460955}};
  const std::vector<std::vector<double>> want_b = {
      {0.150000001, -0.650000001}, {0.0821352273, -0.623163057}, {0.0466074614, -0.674831869}};
  ParameterStore grads = params.like();
  AdamW opt(params, {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f});
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    set_values(grads, 0, gw[step]);
    set_values(grads, 1, gb[step]);
    opt.step(params, grads, 0.1f);
    EXPECT_EQ(opt.t(), step + 1);
    EXPECT_TRUE(test::all_close("weight", values_of(params, 0), want_w[step], 1e-6, 1e-6));
    EXPECT_TRUE(test::all_close("bias", values_of(params, 1), want_b[step], 1e-6, 1e-6));
  }
}

TEST(AdamW, MatchesScalarReferenceOverAwkwardSizesAndThreads) {
  // One 2-D and one 1-D tensor per awkward size, plus one spanning several OpenMP chunks.
  std::vector<ParameterInfo> infos;
  for (int n : test::awkward_sizes()) {
    infos.push_back({"w" + std::to_string(n), Shape{n, 3}});  // (n, 3)
    infos.push_back({"b" + std::to_string(n), Shape{n}});     // (n)
  }
  infos.push_back({"big", Shape{3, 40001}});  // (3, 40001)
  const AdamWConfig config{.beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.05f};
  std::vector<std::vector<float>> results;
  test::for_each_thread_count([&](int) {
    ParameterStore params(infos);
    ParameterStore grads = params.like(), m = params.like(), v = params.like();
    std::vector<std::vector<double>> rp, rm, rv;
    for (std::size_t i = 0; i < params.count(); ++i) {
      const auto init = test::random_vector<float>(params.shape(i).numel(), 100 + i);
      set_values(params, i, init);
      rp.push_back(test::cast_vector<double>(init));
      rm.emplace_back(init.size(), 0.0);
      rv.emplace_back(init.size(), 0.0);
    }
    for (std::int64_t t = 1; t <= 5; ++t) {
      const float lr = 0.01f * static_cast<float>(t);
      for (std::size_t i = 0; i < params.count(); ++i) {
        // Mixed magnitudes and exact zeros, so eps matters somewhere.
        auto g = test::random_vector<float>(params.shape(i).numel(), 1000 * t + i, -2.0, 2.0);
        for (std::size_t k = 0; k < g.size(); k += 7) g[k] = 0.0f;
        set_values(grads, i, g);
        adamw_reference(rp[i], test::cast_vector<double>(g), rm[i], rv[i], config, lr, t, params.shape(i).ndim() >= 2);
      }
      adamw_step(params, grads, m, v, config, lr, t);
    }
    std::vector<float> all;
    for (std::size_t i = 0; i < params.count(); ++i) {
      SCOPED_TRACE(params.name(i));
      EXPECT_TRUE(test::all_close("params", values_of(params, i), rp[i], 1e-5, 1e-5));
      EXPECT_TRUE(test::all_close("m", values_of(m, i), rm[i], 1e-6, 1e-5));
      EXPECT_TRUE(test::all_close("v", values_of(v, i), rv[i], 1e-6, 1e-5));
      const auto p = values_of(params, i);
      all.insert(all.end(), p.begin(), p.end());
    }
    results.push_back(all);
  });
  // The update is element-wise: the thread count cannot change a single bit.
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0] == results[1]);
}

TEST(AdamW, StepZeroGradsEqualsStepAndLeavesTheWholeGradientZero) {
  // The zeroing variant updates parameters and moments bit for bit as the plain step (with a
  // gradient scale, as the plain step after scale_grads), and leaves every float of the gradient
  // store zero, alignment padding included (as ParameterStore::zero).
  std::vector<ParameterInfo> infos;
  for (int n : test::awkward_sizes()) {
    infos.push_back({"w" + std::to_string(n), Shape{3, n}});  // (3, n)
    infos.push_back({"b" + std::to_string(n), Shape{n}});     // (n)
  }
  infos.push_back({"big", Shape{2, 70001}});  // (2, 70001): several cache-line ranges per thread
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  test::for_each_thread_count([&](int) {
    ParameterStore params(infos);
    for (std::size_t i = 0; i < params.count(); ++i)
      set_values(params, i, test::random_vector<float>(params.shape(i).numel(), 7 + i));
    ParameterStore params_z = params.like();
    std::copy(params.data(), params.data() + params.size(), params_z.data());
    AdamW plain(params, config), zeroing(params_z, config);
    ParameterStore grads = params.like(), grads_z = params.like();
    for (int step = 1; step <= 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (std::size_t i = 0; i < params.count(); ++i) {
        const auto g = test::random_vector<float>(params.shape(i).numel(), 100 * step + i, -2.0, 2.0);
        set_values(grads, i, g);
        set_values(grads_z, i, g);
      }
      // Step 2 clips: the zeroing step's grad_scale gives the bits of scaling the gradient first.
      const float scale = step == 2 ? 0.37f : 1.0f;
      if (step == 2) scale_grads(grads, scale);
      plain.step(params, grads, 1e-3f);
      zeroing.step_zero_grads(params_z, grads_z, 1e-3f, nullptr, scale);
      EXPECT_EQ(zeroing.t(), step);
      const std::size_t n = params.size();
      EXPECT_TRUE(std::equal(params.data(), params.data() + n, params_z.data()));
      EXPECT_TRUE(std::equal(plain.m().data(), plain.m().data() + n, zeroing.m().data()));
      EXPECT_TRUE(std::equal(plain.v().data(), plain.v().data() + n, zeroing.v().data()));
      EXPECT_EQ(std::count(grads_z.data(), grads_z.data() + n, 0.0f), static_cast<std::ptrdiff_t>(n));
      EXPECT_LT(std::count(grads.data(), grads.data() + n, 0.0f),  // the plain step keeps them
                static_cast<std::ptrdiff_t>(n));
    }
  });
}

TEST(AdamW, RangesInAnyCutGiveTheWholeStepsBits) {
  // ZeRO-1: each data-parallel rank steps its slices with adamw_step_range, its gradients and
  // moments held apart from the store. Cut at points that fall inside tensors, at their edges and
  // on no 16-float boundary, the pieces give the whole step's parameters and moments bit for bit,
  // and zero the gradient pieces when asked.
  std::vector<ParameterInfo> infos;
  for (int n : test::awkward_sizes()) {
    infos.push_back({"w" + std::to_string(n), Shape{3, n}});  // (3, n)
    infos.push_back({"b" + std::to_string(n), Shape{n}});     // (n)
  }
  infos.push_back({"big", Shape{2, 70001}});  // (2, 70001)
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  test::for_each_thread_count([&](int) {
    ParameterStore params(infos);
    for (std::size_t i = 0; i < params.count(); ++i)
      set_values(params, i, test::random_vector<float>(params.shape(i).numel(), 7 + i));
    ParameterStore sliced = params.like();
    std::copy(params.data(), params.data() + params.size(), sliced.data());
    AdamW whole(params, config);
    const std::size_t n = params.size();
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    const std::vector<std::size_t> cuts = {0, 1, 17, params.offset(3), params.offset(3) + 5, n / 2, n - 3, n};
    ParameterStore grads = params.like();
    for (int step = 1; step <= 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (std::size_t i = 0; i < params.count(); ++i)
        set_values(grads, i, test::random_vector<float>(params.shape(i).numel(), 100 * step + i, -2.0, 2.0));
      std::vector<float> g(grads.data(), grads.data() + n);
      whole.step(params, grads, 1e-3f);
      for (std::size_t c = 0; c + 1 < cuts.size(); ++c)
        EXPECT_TRUE(adamw_step_range(sliced, cuts[c], cuts[c + 1], g.data() + cuts[c], m.data() + cuts[c],
                                     v.data() + cuts[c], config, 1e-3f, step, step == 2));
      EXPECT_TRUE(std::equal(params.data(), params.data() + n, sliced.data()));
      EXPECT_TRUE(std::equal(whole.m().data(), whole.m().data() + n, m.data()));
      EXPECT_TRUE(std::equal(whole.v().data(), whole.v().data() + n, v.data()));
      if (step == 2) {
        EXPECT_EQ(std::count(g.begin(), g.end(), 0.0f), static_cast<std::ptrdiff_t>(n));
      }
    }
    EXPECT_THROW(adamw_step_range(sliced, 5, n + 1, nullptr, nullptr, nullptr, config, 1e-3f, 1), Error);
  });
}

TEST(AdamW, TensorByTensorGivesTheWholeStepsBits) {
  // An optimizer that holds each tensor apart (the PyTorch extension's) steps them one by one
  // with adamw_step_tensor, decaying the matrices: the whole step's bits, on 1 and 2 threads.
  std::vector<ParameterInfo> infos;
  for (int n : test::awkward_sizes()) {
    infos.push_back({"w" + std::to_string(n), Shape{3, n}});  // (3, n)
    infos.push_back({"b" + std::to_string(n), Shape{n}});     // (n)
  }
  infos.push_back({"big", Shape{2, 70001}});  // (2, 70001): split between threads
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  test::for_each_thread_count([&](int) {
    ParameterStore params(infos);
    for (std::size_t i = 0; i < params.count(); ++i)
      set_values(params, i, test::random_vector<float>(params.shape(i).numel(), 11 + i));
    ParameterStore apart = params.like();
    std::copy(params.data(), params.data() + params.size(), apart.data());
    ParameterStore m = params.like(), v = params.like(), grads = params.like();
    AdamW whole(params, config);
    for (int step = 1; step <= 3; ++step) {
      for (std::size_t i = 0; i < params.count(); ++i)
        set_values(grads, i, test::random_vector<float>(params.shape(i).numel(), 50 * step + i, -2.0, 2.0));
      whole.step(params, grads, 2e-3f);
      for (std::size_t i = 0; i < params.count(); ++i) {
        const std::size_t at = params.offset(i);
        EXPECT_TRUE(adamw_step_tensor(apart.data() + at, grads.data() + at, m.data() + at, v.data() + at,
                                      params.shape(i).numel(), params.shape(i).ndim() >= 2, config, 2e-3f, step));
      }
      const std::size_t n = params.size();
      EXPECT_TRUE(std::equal(params.data(), params.data() + n, apart.data())) << "step " << step;
      EXPECT_TRUE(std::equal(whole.m().data(), whole.m().data() + n, m.data())) << "step " << step;
      EXPECT_TRUE(std::equal(whole.v().data(), whole.v().data() + n, v.data())) << "step " << step;
    }
    float x = 1.0f, g = 1.0f, mm = 0.0f, vv = 0.0f;
    EXPECT_THROW(adamw_step_tensor(&x, &g, &mm, &vv, 1, true, config, 1e-3f, 0), Error);
  });
}

TEST(AdamW, DecaysOnlyTensorsOfTwoOrMoreDims) {
  ParameterStore params({{"w", Shape{1, 1}}, {"b", Shape{1}}, {"e", Shape{1, 1, 1}}});
  for (std::size_t i = 0; i < 3; ++i) set_values(params, i, {1.0f});
  ParameterStore grads = params.like();  // zero gradient: only the decay moves a weight
  AdamW opt(params, {.weight_decay = 0.5f});
  opt.step(params, grads, 0.1f);
  EXPECT_FLOAT_EQ(values_of(params, 0)[0], 0.95f);
  EXPECT_FLOAT_EQ(values_of(params, 1)[0], 1.0f);
  EXPECT_FLOAT_EQ(values_of(params, 2)[0], 0.95f);
}

TEST(AdamW, RejectsMismatchedLayoutsAndBadStep) {
  ParameterStore params({{"w", Shape{4, 4}}, {"b", Shape{4}}});
  ParameterStore grads = params.like(), m = params.like(), v = params.like();
  ParameterStore other({{"w", Shape{4, 4}}, {"b", Shape{5}}});
  ParameterStore renamed({{"w", Shape{4, 4}}, {"bias", Shape{4}}});
  EXPECT_TRUE(test::throws_error([&] { adamw_step(params, other, m, v, {}, 0.1f, 1); },
                                 {"[adamw]", "grads", "'b' (5)", "(4)"}));
  EXPECT_TRUE(test::throws_error([&] { adamw_step(params, grads, renamed, v, {}, 0.1f, 1); },
                                 {"[adamw]", "m tensor 1 is 'bias'"}));
  EXPECT_TRUE(
      test::throws_error([&] { adamw_step(params, grads, m, v, {}, 0.1f, 0); }, {"[adamw]", "counts from 1", "got 0"}));
}

}  // namespace
}  // namespace llmcc
