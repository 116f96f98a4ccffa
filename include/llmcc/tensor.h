// Tensor: a cheap handle (data pointer, shape of up to 4 dims, dtype) into memory owned by an
// arena or a parameter store. Copying a Tensor copies the handle, never the data.
// Tokens: the integer counterpart for token ids and targets; never differentiated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace llmcc {

enum class DType : std::uint8_t { F32, BF16 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

// Row-major shape with 0 to 4 dimensions.
class Shape {
 public:
  static constexpr int kMaxDims = 4;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  int ndim() const { return ndim_; }
  // Dimension i; negative i counts from the back (-1 is the last).
  std::int64_t operator[](int i) const;
  std::int64_t numel() const;
  std::string str() const;  // "(4, 64, 768)"

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  int ndim_ = 0;
  std::array<std::int64_t, kMaxDims> dims_{};
};

class Tensor {
 public:
  Tensor() = default;
  // A handle to existing memory; the caller keeps it alive. data may be null for a tensor
  // whose shape is declared before its storage is bound (parameters before allocation).
  Tensor(void* data, Shape shape, DType dtype = DType::F32);

  // Typed access; asserts the dtype. Both fill pending zeros first (see below).
  float* f32() const;
  void* raw() const {
    if (zero_pending_) fill_pending_zeros();
    return data_;
  }

  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  std::int64_t dim(int i) const { return shape_[i]; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  bool defined() const { return data_ != nullptr; }
  // The storage's address without filling pending zeros (for ownership checks, not access).
  const void* address() const { return data_; }

  // Binds storage to a declared tensor (used by ParameterStore).
  void bind(void* data) { data_ = data; }

  // Pending zeros: the tensor reads as zero but its storage is not written yet. adgen gives a
  // fresh adjoint this mark instead of zero-filling it, so the op that makes the first
  // contribution can write it (take_zero_pending) rather than add to zeros it had to read:
  // a memset and a read of the whole adjoint saved per op. Any other access (f32, raw) fills
  // the zeros then. The mark belongs to this handle: copies made while it is set carry it too,
  // so only the handle that holds the adjoint (adgen's, the op's Tensor*) may be written.
  void mark_zero_pending() { zero_pending_ = defined(); }
  bool zero_pending() const { return zero_pending_; }
  // True when the zeros were pending: the caller must then write every element (the storage
  // holds garbage) instead of accumulating. Clears the mark either way.
  bool take_zero_pending() {
    const bool pending = zero_pending_;
    zero_pending_ = false;
    return pending;
  }

 private:
  void fill_pending_zeros() const;

  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  mutable bool zero_pending_ = false;
};

// Token ids (or targets) of a batch: B rows of T ids each, row-major. A handle, like Tensor.
class Tokens {
 public:
  Tokens() = default;
  Tokens(const std::int32_t* data, int B, int T) : data_(data), B_(B), T_(T) {}

  const std::int32_t* data() const { return data_; }
  int B() const { return B_; }
  int T() const { return T_; }
  std::int64_t numel() const { return static_cast<std::int64_t>(B_) * T_; }
  std::int32_t operator()(int b, int t) const { return data_[static_cast<std::int64_t>(b) * T_ + t]; }

 private:
  const std::int32_t* data_ = nullptr;
  int B_ = 0;
  int T_ = 0;
};

}  // namespace llmcc
