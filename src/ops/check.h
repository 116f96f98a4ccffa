// Validation helpers for op front ends. Each throws llmcc::Error "[op] ..." with what was
// expected and what was got. Front ends validate once; kernels assume valid input.
#pragma once

#include <cstdint>
#include <string>

#include "llmcc/error.h"
#include "llmcc/tensor.h"

namespace llmcc::check {

// `t` has storage and dtype f32.
void defined(const char* op, const char* name, const Tensor& t);
// `t` has exactly `ndim` dimensions; `layout` names them for the message, e.g. "(B, T, C)".
void ndim(const char* op, const char* name, const Tensor& t, int ndim, const char* layout);
// Dimension `axis` of `t` equals `expected`; `why` says where the expectation comes from.
void dim(const char* op, const char* name, const Tensor& t, int axis, std::int64_t expected,
         const std::string& why);
// `a` and `b` have the same shape.
void same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                const Tensor& b);
// `tokens` has storage and the given batch shape.
void tokens(const char* op, const char* name, const Tokens& tokens);
// A general condition with a message.
inline void that(bool ok, const char* op, const std::string& message) {
  if (!ok) fail(op, message);
}
// An adjoint pointer given to a pullback is either null or a tensor shaped like its primal.
void adjoint(const char* op, const char* name, const Tensor* d, const Tensor& primal);

}  // namespace llmcc::check
