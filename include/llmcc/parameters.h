// ParameterStore: all parameters of a model in one contiguous buffer.
//
// A model declares its parameter tensors with shapes and null data, and lists them in
// for_each_parameter(f) (checkpoint order). bind_parameters() lays them out one after another
// (each 64-byte aligned) in one allocation, so zeroing is one memset, the optimizer one flat
// loop and an allreduce one call. A gradient store of the same layout is made by
// ParameterStore::like() and bound to the model's gradient mirror the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "llmcc/tensor.h"

namespace llmcc {

class ParameterStore {
 public:
  ParameterStore() = default;
  // Lays out tensors of the given shapes (all fp32) and allocates zeroed storage.
  explicit ParameterStore(const std::vector<Shape>& shapes);

  // A store with the same layout, zeroed (for gradients or optimizer moments).
  ParameterStore like() const { return ParameterStore(shapes_); }

  std::size_t count() const { return shapes_.size(); }
  const Shape& shape(std::size_t i) const { return shapes_.at(i); }
  std::size_t offset(std::size_t i) const { return offsets_.at(i); }  // in floats
  Tensor tensor(std::size_t i) const;

  float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }  // floats, including alignment padding
  std::int64_t parameter_count() const;       // elements, without padding
  void zero();

 private:
  struct FreeDeleter { void operator()(float* p) const; };
  std::vector<Shape> shapes_;
  std::vector<std::size_t> offsets_;
  std::unique_ptr<float, FreeDeleter> data_;
  std::size_t size_ = 0;
};

// Binds every tensor that model.for_each_parameter visits to a fresh store, in visiting order.
// Throws llmcc::Error if a tensor has no shape.
template <class Model>
ParameterStore bind_parameters(Model& model) {
  std::vector<Shape> shapes;
  model.for_each_parameter([&](Tensor& t) { shapes.push_back(t.shape()); });
  ParameterStore store(shapes);
  std::size_t i = 0;
  model.for_each_parameter([&](Tensor& t) { t.bind(store.tensor(i++).raw()); });
  return store;
}

}  // namespace llmcc
