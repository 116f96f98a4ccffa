// Checking a generated gradient against finite differences: llmcc::check_gradients.
//
// For every parameter tensor of the model, a few elements: adgen's gradient (Entry::fwd +
// Entry::bwd, as the Trainer runs them) against central differences of the forward loss
// (Entry::loss), taken in double from the float loss.
//
//   const GradCheckReport r = check_gradients<mlp_loss_Entry>(model, inputs);   // prints a line per tensor
//   if (!r.ok()) ...
//
// Which elements: drawn at random among those whose gradient is at least a tenth of the
// tensor's largest, so the comparison is relative to a gradient that matters (a wrong one is off
// by its own size; an element with a tiny gradient would only test round-off). A tensor whose
// gradient is all zero gets random elements, whose differences must then be zero within the
// noise.
//
// The rule: differences at steps h and h/2 (h = 1e-2 max(1, |p|)); an element passes when
//   |analytic - numeric(h/2)| <= noise + rtol * max(|analytic|, |numeric(h/2)|)
// with noise = 16 |loss| 2^-23 / h (float roundings of the loss, differenced at step h/2).
// Float forward passes (about 1e-7 relative) differenced at h ~ 1e-2 keep about four digits, and
// the truncation error of the central difference, O(h^2), is below that for smooth models;
// |numeric(h) - numeric(h/2)| is reported as its estimate. A non-finite gradient fails.
//
// Use a small random configuration (sizes the model's author did not pick) and random inputs:
// the check costs two forwards per element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"

namespace llmcc {

struct GradCheckOptions {
  std::uint64_t seed = 1;  // which elements
  int per_tensor = 3;      // elements per tensor
  double rtol = 1e-2;
  std::FILE* out = stdout;  // a line per tensor and a summary; null: silent
};

struct GradCheckTensor {
  std::string name;
  Shape shape;
  double max_grad = 0.0;      // the tensor's largest |gradient|
  int elements = 0;           // elements compared
  double worst_rel = 0.0;     // max |adgen - fd| / max(|adgen|, |fd|)
  double worst_excess = 0.0;  // the same beyond the noise allowance (what the rule judges)
  double truncation = 0.0;    // max |fd(h) - fd(h/2)|
  bool finite = true;
  bool ok = true;
  std::string first_bad;  // "[i]: adgen a, fd b" of the first element that failed
};

struct GradCheckReport {
  float loss = 0.0f;
  double noise = 0.0;  // the noise allowance at the largest step
  std::vector<GradCheckTensor> tensors;
  int failed() const {
    return static_cast<int>(
        std::count_if(tensors.begin(), tensors.end(), [](const GradCheckTensor& t) { return !t.ok; }));
  }
  bool ok() const { return failed() == 0 && !tensors.empty(); }
};

template <class Entry>
GradCheckReport check_gradients(const typename Entry::Model& model, const typename Entry::Inputs& inputs,
                                const GradCheckOptions& options = {}) {
  adgen::GradBuffer<typename Entry::Grad> grad = adgen::make_grad(model);
  typename Entry::Saved saved;
  GradCheckReport report;
  auto forward_backward = [&] {
    report.loss = Entry::fwd(model, inputs, saved);
    Entry::bwd(model, inputs, saved, 1.0f, &grad.grad);
  };
  // The arena one forward and backward needs, measured by running them once; that run's
  // gradient is the one checked.
  Arena arena(arena_capacity_for(measure_step_arena(forward_backward, "check_gradients")));
  auto loss = [&]() -> double {
    arena.reset();
    ArenaScope scope(arena);
    return Entry::loss(model, inputs);
  };
  Rng rng(options.seed);
  const double ulps16 = 16.0 * std::fabs(static_cast<double>(report.loss)) * 0x1p-23;
  report.noise = ulps16 / 1e-2;
  std::FILE* out = options.out;
  if (out)
    std::fprintf(out,
                 "gradient check: loss %.6f; per tensor, %d elements with |grad| >= 0.1 max |grad|; central "
                 "differences fd at h and h/2 (h = 1e-2 max(1, |p|)); pass if |adgen - fd(h/2)| <= noise + %.0e "
                 "max(|adgen|, |fd|), noise = 16 ulp(loss) / h <= %.1e\n",
                 static_cast<double>(report.loss), options.per_tensor, options.rtol, report.noise);
  grad.grad.for_each_pair(model, "", [&](const std::string& name, const Tensor& p, Tensor& g) {
    GradCheckTensor t;
    t.name = name;
    t.shape = p.shape();
    const std::int64_t n = p.numel();
    const float* gd = g.f32();
    float* pd = p.f32();  // perturbed in place and restored
    for (std::int64_t i = 0; i < n; ++i) {
      t.finite = t.finite && std::isfinite(gd[i]);
      t.max_grad = std::max(t.max_grad, std::fabs(static_cast<double>(gd[i])));
    }
    std::vector<std::int64_t> pool;  // elements with a gradient that matters
    for (std::int64_t i = 0; i < n; ++i)
      if (t.max_grad == 0.0 || std::fabs(static_cast<double>(gd[i])) >= 0.1 * t.max_grad) pool.push_back(i);
    t.elements = std::min<int>(options.per_tensor, static_cast<int>(pool.size()));
    for (int c = 0; c < t.elements; ++c) {
      const std::size_t pick = static_cast<std::size_t>(rng.below(pool.size()));
      const std::int64_t i = pool[pick];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
      const float p0 = pd[i];
      const double h = 1e-2 * std::max(1.0, std::fabs(static_cast<double>(p0)));
      auto diff = [&](double step) {
        // The perturbed values as float, and the step as it lands on them.
        const float up = static_cast<float>(p0 + step), down = static_cast<float>(p0 - step);
        pd[i] = up;
        const double l_up = loss();
        pd[i] = down;
        const double l_down = loss();
        pd[i] = p0;
        return (l_up - l_down) / (static_cast<double>(up) - static_cast<double>(down));
      };
      const double n1 = diff(h), n2 = diff(h / 2);
      const double a = gd[i];
      const double excess = std::fabs(a - n2) - ulps16 / h;
      const double scale = std::max(std::fabs(a), std::fabs(n2));
      const double rel = excess <= 0.0 ? 0.0 : excess / scale;
      t.worst_excess = std::max(t.worst_excess, rel);
      t.worst_rel = std::max(t.worst_rel, scale > 0.0 ? std::fabs(a - n2) / scale : 0.0);
      t.truncation = std::max(t.truncation, std::fabs(n1 - n2));
      if (!(rel <= options.rtol) && t.ok) {
        t.ok = false;
        char buf[160];
        std::snprintf(buf, sizeof buf, "[%lld]: adgen %.6g, fd %.6g", static_cast<long long>(i), a, n2);
        t.first_bad = buf;
      }
    }
    if (!t.finite) t.ok = false;
    if (out) {
      std::string note = t.max_grad < report.noise ? " (gradient ~0, below the noise: fd ~0 too)" : "";
      if (!t.first_bad.empty()) note += "; first bad " + t.first_bad;
      if (!t.finite) note += "; the gradient has a non-finite element";
      // A gradient below the noise everywhere (a key bias, which shifts a softmax row uniformly)
      // checks only that the differences vanish too.
      std::fprintf(out,
                   "  %-26s %-10s max|grad| %.2e, %d elements: |adgen - fd| / |fd| <= %.1e, beyond noise %.1e; "
                   "|fd(h) - fd(h/2)| <= %.1e  %s%s\n",
                   name.c_str(), p.shape().str().c_str(), t.max_grad, t.elements, t.worst_rel, t.worst_excess,
                   t.truncation, t.ok ? "ok" : "FAIL", note.c_str());
    }
    report.tensors.push_back(std::move(t));
  });
  if (out)
    std::fprintf(out, "gradient check: %d of %d parameter tensors %s\n",
                 static_cast<int>(report.tensors.size()) - report.failed(), static_cast<int>(report.tensors.size()),
                 report.failed() == 0 ? "match" : "match; the others do NOT");
  return report;
}

}  // namespace llmcc
