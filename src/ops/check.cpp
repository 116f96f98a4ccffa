#include "ops/check.h"

namespace llmcc::check {

void defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) fail(op, std::string(name) + " has no storage (an unbound or default Tensor)");
  if (t.dtype() != DType::F32) {
    fail(op, std::string(name) + " has dtype " + dtype_name(t.dtype()) + ", expected f32");
  }
}

void ndim(const char* op, const char* name, const Tensor& t, int n, const char* layout) {
  defined(op, name, t);
  if (t.ndim() != n) {
    fail(op,
         std::string(name) + " has shape " + t.shape().str() + ", expected " + std::to_string(n) + " dims " + layout);
  }
}

void weight_ndim(const char* op, const char* name, const Tensor& t, int n, const char* layout) {
  if (!t.defined()) fail(op, std::string(name) + " has no storage (an unbound or default Tensor)");
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
    fail(op, std::string(name) + " has dtype " + dtype_name(t.dtype()) + ", expected f32 or bf16");
  if (t.ndim() != n) {
    fail(op,
         std::string(name) + " has shape " + t.shape().str() + ", expected " + std::to_string(n) + " dims " + layout);
  }
}

void no_adjoint_of_bf16(const char* op, const char* name, const Tensor* d, const Tensor& t) {
  if (d != nullptr && t.dtype() == DType::BF16)
    fail(op,
         std::string(name) + " is stored in bf16, a frozen weight: it has no gradient (d_" + name + " must be null)");
}

void dim_failed(const char* op, const char* name, const Tensor& t, int axis, std::int64_t expected,
                const std::string& why) {
  fail(op, std::string(name) + " has shape " + t.shape().str() + ": dim " + std::to_string(axis) + " is " +
               std::to_string(t.dim(axis)) + ", expected " + std::to_string(expected) + " (" + why + ")");
}

void same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  defined(op, a_name, a);
  defined(op, b_name, b);
  if (a.shape() != b.shape()) {
    fail(op, std::string(b_name) + " has shape " + b.shape().str() + ", expected " + a.shape().str() +
                 " (the shape of " + a_name + ")");
  }
}

void tokens(const char* op, const char* name, const Tokens& t) {
  if (t.data() == nullptr) fail(op, std::string(name) + " has no storage");
  if (t.B() <= 0 || t.T() <= 0) {
    fail(op, std::string(name) + " has shape (" + std::to_string(t.B()) + ", " + std::to_string(t.T()) +
                 "), expected B > 0 and T > 0");
  }
}

void adjoint(const char* op, const char* name, const Tensor* d, const Tensor& primal) {
  if (d == nullptr) return;
  defined(op, name, *d);
  if (d->shape() != primal.shape()) {
    fail(op, std::string(name) + " has shape " + d->shape().str() + ", expected " + primal.shape().str() +
                 " (the shape of its primal)");
  }
}

}  // namespace llmcc::check
