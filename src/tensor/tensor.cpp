#include "llmcc/tensor.h"

#include <cstring>

#include "llmcc/error.h"

namespace llmcc {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::BF16:
      return 2;
  }
  LLMCC_ASSERT(false, "unknown dtype");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
  }
  LLMCC_ASSERT(false, "unknown dtype");
}

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  if (dims.size() > kMaxDims) {
    fail("shape", "has " + std::to_string(dims.size()) + " dims, at most 4 are supported");
  }
  for (std::int64_t d : dims) {
    if (d < 0) fail("shape", "dimension " + std::to_string(d) + " is negative");
    dims_[ndim_++] = d;
  }
}

std::int64_t Shape::operator[](int i) const {
  const int axis = i < 0 ? i + ndim_ : i;
  LLMCC_ASSERT(axis >= 0 && axis < ndim_, "shape index out of range");
  return dims_[axis];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < ndim_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + ")";
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

Tensor::Tensor(void* data, Shape shape, DType dtype) : data_(data), shape_(shape), dtype_(dtype) {}

float* Tensor::f32() const {
  LLMCC_ASSERT(dtype_ == DType::F32, "f32() on a tensor of another dtype");
  if (zero_pending_) fill_pending_zeros();
  return static_cast<float*>(data_);
}

void Tensor::fill_pending_zeros() const {
  std::memset(data_, 0, nbytes());
  zero_pending_ = false;
}

}  // namespace llmcc
