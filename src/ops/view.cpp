// view: front end, forward (a handle into x's storage) and pullback. The pullback's kernels are
// add's: adding d_out into a block of d_x is add_backward on that block.
#include "llmcc/ops/view.h"

#include <cstring>
#include <string>

#include "kernels/cpu/add.h"
#include "kernels/ref/add.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "view";

// The block [offset, offset + numel(shape)) lies inside x.
void check_block(const Tensor& x, const Shape& shape, std::int64_t offset) {
  check::defined(kOp, "x", x);
  check::that(shape.ndim() >= 1 && shape.numel() > 0, kOp,
              [&] { return "shape " + shape.str() + " has no elements, expected at least one dim and numel > 0"; });
  check::that(offset >= 0 && offset <= x.numel() - shape.numel(), kOp, [&] {
    return "offset " + std::to_string(offset) + " + " + std::to_string(shape.numel()) + " elements of shape " +
           shape.str() + " is outside x " + x.shape().str() + " (" + std::to_string(x.numel()) +
           " elements), expected 0 <= offset <= " + std::to_string(x.numel() - shape.numel());
  });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape, std::int64_t offset) {
  check_block(x, shape, offset);
  return Tensor(x.f32() + offset, shape);  // shares x's storage
}

void view_pullback(const Tensor& x, const Shape& shape, std::int64_t offset, const Tensor& out, const Tensor& d_out,
                   Tensor* d_x) {
  LLMCC_PROFILE("view.bwd");
  (void)out;
  check_block(x, shape, offset);
  check::defined(kOp, "d_out", d_out);
  check::that(d_out.shape() == shape, kOp, [&] {
    return "d_out has shape " + d_out.shape().str() + ", expected " + shape.str() + " (the view's shape)";
  });
  check::adjoint(kOp, "d_x", d_x, x);
  if (d_x == nullptr) return;
  const std::int64_t n = shape.numel(), N = x.numel();
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::add_backward(dx + offset, static_cast<float*>(nullptr), d_out.f32(), n);
    return;
  }
  if (overwrite) {  // pending zeros: write the block, zero the rest
    std::memset(dx, 0, static_cast<std::size_t>(offset) * sizeof(float));
    std::memset(dx + offset + n, 0, static_cast<std::size_t>(N - offset - n) * sizeof(float));
  }
  cpu::add_backward(dx + offset, nullptr, d_out.f32(), n, overwrite);
}

}  // namespace llmcc
