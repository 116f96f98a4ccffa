// ParameterStore: all parameters of a model in one contiguous buffer.
//
// A model declares its parameter tensors with shapes and null data, and lists them in
// for_each_parameter(f), calling f(name, tensor) for each in checkpoint order, with names such as
// "h.3.ln_1.weight". bind_parameters() lays them out one after another
// (each 64-byte aligned) in one allocation, so zeroing is one memset, the optimizer one flat
// loop and an allreduce one call. A gradient store of the same layout is made by
// ParameterStore::like() and bound to the model's gradient mirror the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/tensor.h"

namespace llmcc {

struct ParameterInfo {
  std::string name;
  Shape shape;
};

class ParameterStore {
 public:
  ParameterStore() = default;
  // Lays out tensors of the given shapes (all fp32) and allocates zeroed storage.
  explicit ParameterStore(const std::vector<ParameterInfo>& params);

  // A store with the same layout, zeroed (for gradients or optimizer moments).
  ParameterStore like() const { return ParameterStore(params_); }

  std::size_t count() const { return params_.size(); }
  const std::string& name(std::size_t i) const { return params_.at(i).name; }
  const Shape& shape(std::size_t i) const { return params_.at(i).shape; }
  std::size_t offset(std::size_t i) const { return offsets_.at(i); }  // in floats
  Tensor tensor(std::size_t i) const;

  float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }  // floats, including alignment padding
  std::int64_t parameter_count() const;       // elements, without padding
  void zero();

 private:
  struct FreeDeleter { void operator()(float* p) const; };
  std::vector<ParameterInfo> params_;
  std::vector<std::size_t> offsets_;
  std::unique_ptr<float, FreeDeleter> data_;
  std::size_t size_ = 0;
};

// Binds every tensor that model.for_each_parameter visits to a fresh store, in visiting order.
// Throws llmcc::Error if a tensor has no shape.
template <class Model>
ParameterStore bind_parameters(Model& model) {
  std::vector<ParameterInfo> params;
  model.for_each_parameter(
      [&](const std::string& name, Tensor& t) { params.push_back({name, t.shape()}); });
  ParameterStore store(params);
  std::size_t i = 0;
  model.for_each_parameter([&](const std::string&, Tensor& t) { t.bind(store.tensor(i++).raw()); });
  return store;
}

}  // namespace llmcc
