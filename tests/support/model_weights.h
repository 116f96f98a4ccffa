// Weights of test models for tests of weight files and name mappings: every parameter element
// distinct (an element that lands in the wrong place, a missing transpose or a swapped tensor,
// changes a compared value instead of hiding among equal ones), and a bitwise comparison of two
// models' parameters. A model's generated parameter list (its *.grad.h) comes before this.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "llmcc/parameters.h"
#include "llmcc/tensor.h"

namespace llmcc::test {

// Element k (counting through for_each_parameter) is 1e-3 k + 0.25 sin(k), except the elements
// is_padding(name, i) names, which are zero (as a loaded model has them).
template <class Model, class IsPadding>
void fill_distinct(Model& m, const IsPadding& is_padding) {
  float k = 0.0f;
  for_each_parameter(m, [&](const std::string& name, Tensor& t) {
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      k += 1.0f;
      t.f32()[i] = is_padding(name, i) ? 0.0f : 1e-3f * k + 0.25f * std::sin(k);
    }
  });
}

template <class Model>
void fill_distinct(Model& m) {
  fill_distinct(m, [](const std::string&, std::int64_t) { return false; });
}

// The two models have the same parameters in for_each_parameter's order: shapes, and values bit
// for bit.
template <class Weights>
bool same_params(Weights& a, Weights& b) {
  std::vector<Tensor*> ta, tb;
  for_each_parameter(a.model, [&](const std::string&, Tensor& t) { ta.push_back(&t); });
  for_each_parameter(b.model, [&](const std::string&, Tensor& t) { tb.push_back(&t); });
  if (ta.size() != tb.size()) return false;
  for (std::size_t i = 0; i < ta.size(); ++i) {
    if (ta[i]->shape() != tb[i]->shape()) return false;
    if (std::memcmp(ta[i]->f32(), tb[i]->f32(), static_cast<std::size_t>(ta[i]->numel()) * 4) != 0) return false;
  }
  return true;
}

}  // namespace llmcc::test
