// ParameterStore: all parameters of a model in one contiguous buffer.
//
// A model declares its parameter tensors with shapes and null data. llmcc::for_each_parameter
// (model, f) calls f(name, tensor) for each in checkpoint order, with names such as
// "h.3.ln_1.weight": the list adgen generates from the model's fields (LLMCC_ADGEN_NAME sets a
// field's part of the name), or the model's own for_each_parameter(f) member when it has one.
// bind_parameters() lays them out one after another (each 64-byte aligned) in one allocation, so
// zeroing is one memset, the optimizer one flat loop and an allreduce one call. A gradient store
// of the same layout is made by ParameterStore::like() and bound to the model's gradient mirror
// the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
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
  // Moves the store to `memory` (size() floats, 64-byte aligned, owned by the caller and alive
  // as long as the store uses it; the values are copied unless copy_values is false), or with
  // null back to memory of the store's own. Tensors bound to the old memory are not rebound: that
  // is the caller's (see DataParallel, which puts a node's weights and gradients in memory its
  // ranks share).
  void relocate(float* memory, bool copy_values = true);
  bool owns_memory() const { return data_.get_deleter().owned; }
  std::size_t size() const { return size_; }  // floats, including alignment padding
  std::int64_t parameter_count() const;       // elements, without padding
  void zero();
  // Gives the memory pages that lie wholly inside tensor i's values back to the system (they read
  // as zero afterwards): for a tensor whose values now live elsewhere (a frozen weight stored in
  // bf16), so that the store stops holding them in RAM.
  void release_values(std::size_t i);

  // The elements that are NaN or infinite (with negative_too, also those below zero): how many,
  // and the first one's tensor and value. A damaged or diverged store has some.
  struct BadValues {
    std::int64_t count = 0;
    std::string first_tensor;
    float first_value = 0.0f;
  };
  BadValues bad_values(bool negative_too = false) const;

 private:
  struct FreeDeleter {
    FreeDeleter() : owned(true) {}
    explicit FreeDeleter(bool owns) : owned(owns) {}
    bool owned;
    void operator()(float* p) const;
  };
  std::vector<ParameterInfo> params_;
  std::vector<std::size_t> offsets_;
  std::unique_ptr<float, FreeDeleter> data_;
  std::size_t size_ = 0;
};

namespace adgen {
// The gradient mirror adgen generates for a module type: its generated header (<model>.grad.h)
// specialises GradOf<Module> { using type = Module_Grad; }, which also holds the module's
// generated parameter list (Module_Grad::for_each_parameter).
template <class Module>
struct GradOf;
template <class Module>
using grad_t = typename GradOf<Module>::type;
}  // namespace adgen

namespace detail {
template <class Model>
concept has_member_parameter_list = requires(Model& m) { m.for_each_parameter([](const std::string&, Tensor&) {}); };
template <class Model>
concept has_generated_parameter_list = requires(Model& m) {
  adgen::grad_t<Model>::for_each_parameter(m, std::string(), [](const std::string&, Tensor&) {});
};
}  // namespace detail

// Calls f(name, tensor) for every parameter of model, in checkpoint order: the model's own
// for_each_parameter(f) member when it has one, else the list adgen generates from its fields
// (field declaration order; include the model's generated header). A const model's tensors
// are passed as const Tensor&.
template <class Model, class F>
void for_each_parameter(Model& model, F&& f) {
  using M = std::remove_const_t<Model>;
  if constexpr (detail::has_member_parameter_list<M>) {
    // The member lists are non-const; for a const model they only see const tensors.
    M& m = const_cast<M&>(model);
    if constexpr (std::is_const_v<Model>)
      m.for_each_parameter([&](const std::string& name, Tensor& t) { f(name, std::as_const(t)); });
    else
      m.for_each_parameter(f);
  } else {
    static_assert(detail::has_generated_parameter_list<M>,
                  "llmcc::for_each_parameter: the model has no for_each_parameter member and no generated "
                  "parameter list here: include its generated header (<model>.grad.h)");
    adgen::grad_t<M>::for_each_parameter(model, std::string(), f);
  }
}

// Binds every tensor that llmcc::for_each_parameter(model, ...) visits to a fresh store, in
// visiting order. Throws llmcc::Error if a tensor has no shape.
template <class Model>
ParameterStore bind_parameters(Model& model) {
  std::vector<ParameterInfo> params;
  llmcc::for_each_parameter(model, [&](const std::string& name, Tensor& t) { params.push_back({name, t.shape()}); });
  ParameterStore store(params);
  std::size_t i = 0;
  llmcc::for_each_parameter(model, [&](const std::string&, Tensor& t) { t.bind(store.tensor(i++).raw()); });
  return store;
}

}  // namespace llmcc
