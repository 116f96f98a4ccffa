// Validation helpers for op front ends. Each throws llmcc::Error "[op] ..." with what was
// expected and what was got. Front ends validate once; kernels assume valid input.
//
// Front ends run on every training step, and a steady-state step allocates nothing
// (tests/models/test_no_alloc_steady_state.cpp), so a message is built only when its check fails:
// messages are string literals, or lambdas returning the std::string to throw with.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <utility>

#include "llmcc/error.h"
#include "llmcc/tensor.h"

namespace llmcc::check {

// `t` has storage and dtype f32.
void defined(const char* op, const char* name, const Tensor& t);
// `t` has exactly `ndim` dimensions; `layout` names them for the message, e.g. "(B, T, C)".
void ndim(const char* op, const char* name, const Tensor& t, int ndim, const char* layout);
// The same for a weight an op also reads in bf16 (a frozen weight stored rounded): dtype f32 or
// bf16.
void weight_ndim(const char* op, const char* name, const Tensor& t, int ndim, const char* layout);
// A bf16 weight is frozen: throws naming `name` when its adjoint `d` is asked for.
void no_adjoint_of_bf16(const char* op, const char* name, const Tensor* d, const Tensor& t);

// Throws "[op] <name> has shape (..): dim <axis> is <got>, expected <expected> (<why>)".
[[noreturn]] void dim_failed(const char* op, const char* name, const Tensor& t, int axis, std::int64_t expected,
                             const std::string& why);
// Dimension `axis` of `t` equals `expected`; `why` says where the expectation comes from.
inline void dim(const char* op, const char* name, const Tensor& t, int axis, std::int64_t expected, const char* why) {
  if (t.dim(axis) != expected) [[unlikely]]
    dim_failed(op, name, t, axis, expected, why);
}
// The same with a `why` that has values in it: a callable returning std::string.
template <std::invocable Why>
void dim(const char* op, const char* name, const Tensor& t, int axis, std::int64_t expected, Why&& why) {
  if (t.dim(axis) != expected) [[unlikely]] {
    dim_failed(op, name, t, axis, expected, std::forward<Why>(why)());
  }
}

// `a` and `b` have the same shape.
void same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b);
// `tokens` has storage and the given batch shape.
void tokens(const char* op, const char* name, const Tokens& tokens);

// A general condition with a fixed message.
inline void that(bool ok, const char* op, const char* message) {
  if (!ok) [[unlikely]]
    fail(op, message);
}
// A general condition whose message has values in it: `message` is a callable returning the
// std::string, called only on failure, e.g.
//   check::that(C > 0, op, [&] { return "x has shape " + x.shape().str() + ", expected C > 0"; });
template <std::invocable Message>
void that(bool ok, const char* op, Message&& message) {
  if (!ok) [[unlikely]]
    fail(op, std::forward<Message>(message)());
}

// An adjoint pointer given to a pullback is either null or a tensor shaped like its primal.
void adjoint(const char* op, const char* name, const Tensor* d, const Tensor& primal);

}  // namespace llmcc::check
