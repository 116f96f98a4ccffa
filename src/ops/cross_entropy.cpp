// cross_entropy: front end, forward and pullback (the loss rule: fused softmax + NLL over the
// real vocab columns, mean over non-ignored targets), and of its tangent.
#include "llmcc/ops/cross_entropy.h"

#include <string>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/ref/cross_entropy.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "cross_entropy";

struct Rows {
  std::int64_t N, V, Vp;
  std::int64_t count;  // targets that are not ignore_index
};

// Validates logits (B, T, Vp) or (N, Vp) against targets, vocab_size against Vp, and every
// target; returns the sizes and the number of targets that count.
Rows check_inputs(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index) {
  check::defined(kOp, "logits", logits);
  check::tokens(kOp, "targets", targets);
  // "(B, T)" of the targets, for messages. Built with += : GCC 12 gives a false -Wrestrict on
  // `"(" + std::to_string(..)`.
  const auto tshape = [&] {
    std::string s = "(";
    s += std::to_string(targets.B()) + ", " + std::to_string(targets.T()) + ")";
    return s;
  };
  if (logits.ndim() == 3) {
    check::dim(kOp, "logits", logits, 0, targets.B(), [&] { return "B of targets " + tshape(); });
    check::dim(kOp, "logits", logits, 1, targets.T(), [&] { return "T of targets " + tshape(); });
  } else if (logits.ndim() == 2) {
    check::dim(kOp, "logits", logits, 0, targets.numel(), [&] { return "B * T of targets " + tshape(); });
  } else {
    fail(kOp, "logits has shape " + logits.shape().str() + ", expected 3 dims (B, T, Vp) or 2 dims (N, Vp)");
  }
  const std::int64_t Vp = logits.dim(-1);
  check::that(vocab_size >= 1 && vocab_size <= Vp, kOp, [&] {
    return "vocab_size is " + std::to_string(vocab_size) + ", expected 1 <= vocab_size <= Vp = " + std::to_string(Vp) +
           " (last dim of logits " + logits.shape().str() + ")";
  });
  std::int64_t count = 0;
  const std::int32_t* t = targets.data();
  for (std::int64_t n = 0; n < targets.numel(); ++n) {
    if (t[n] == ignore_index) continue;
    if (t[n] < 0 || t[n] >= vocab_size) {
      fail(kOp, "targets[" + std::to_string(n / targets.T()) + ", " + std::to_string(n % targets.T()) + "] (row " +
                    std::to_string(n) + ") is " + std::to_string(t[n]) + ", expected a class in [0, " +
                    std::to_string(vocab_size) + ") or ignore_index " + std::to_string(ignore_index));
    }
    ++count;
  }
  return {targets.numel(), vocab_size, Vp, count};
}

float forward(const Tensor& logits, const Tokens& targets, int ignore_index, const Rows& r, CrossEntropySaved& saved) {
  saved.lse = new_tensor({r.N}, kOp);  // (N)
  std::int64_t count = 0;
  double loss = 0.0;
  if (kernel_mode() == KernelMode::Reference) {
    loss =
        ref::cross_entropy_forward(saved.lse.f32(), &count, logits.f32(), targets.data(), r.N, r.V, r.Vp, ignore_index);
  } else {
    loss =
        cpu::cross_entropy_forward(saved.lse.f32(), &count, logits.f32(), targets.data(), r.N, r.V, r.Vp, ignore_index);
  }
  LLMCC_ASSERT(count == r.count, "the kernel and the front end disagree on ignored targets");
  saved.count = static_cast<int>(count);
  return static_cast<float>(loss);
}

}  // namespace

float cross_entropy(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index) {
  LLMCC_PROFILE("cross_entropy.fwd");
  const Rows r = check_inputs(logits, targets, vocab_size, ignore_index);
  CrossEntropySaved scratch;  // the kernels need lse as a buffer; it dies with the arena
  return forward(logits, targets, ignore_index, r, scratch);
}

float cross_entropy_fwd(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                        CrossEntropySaved& saved) {
  LLMCC_PROFILE("cross_entropy.fwd");
  const Rows r = check_inputs(logits, targets, vocab_size, ignore_index);
  return forward(logits, targets, ignore_index, r, saved);
}

void cross_entropy_pullback(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index, float out,
                            const CrossEntropySaved& saved, float d_out, Tensor* d_logits) {
  LLMCC_PROFILE("cross_entropy.bwd");
  (void)out;  // the backward reads logits and saved.lse only
  const Rows r = check_inputs(logits, targets, vocab_size, ignore_index);
  check::ndim(kOp, "saved.lse", saved.lse, 1, "(N)");
  check::dim(kOp, "saved.lse", saved.lse, 0, r.N, "rows of logits");
  check::that(saved.count == r.count, kOp, [&] {
    return "saved.count is " + std::to_string(saved.count) + ", expected " + std::to_string(r.count) +
           " (targets not equal to ignore_index; was saved filled for other targets?)";
  });
  check::adjoint(kOp, "d_logits", d_logits, logits);
  if (d_logits == nullptr || r.count == 0) return;  // all ignored: no gradient (see header)
  const float scale = d_out / static_cast<float>(r.count);
  bool overwrite = false;
  float* dl = adjoint_data(d_logits, &overwrite);  // shape of logits
  if (kernel_mode() == KernelMode::Reference) {
    ref::cross_entropy_backward(dl, logits.f32(), saved.lse.f32(), targets.data(), scale, r.N, r.V, r.Vp, ignore_index);
  } else {
    cpu::cross_entropy_backward(dl, logits.f32(), saved.lse.f32(), targets.data(), scale, r.N, r.V, r.Vp, ignore_index,
                                overwrite);
  }
}

float cross_entropy_tangent(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                            const Tensor& tangent) {
  LLMCC_PROFILE("cross_entropy_tangent.fwd");
  const Rows r = check_inputs(logits, targets, vocab_size, ignore_index);
  check::same_shape(kOp, "logits", logits, "tangent", tangent);
  std::int64_t count = 0;
  double value = 0.0;
  if (kernel_mode() == KernelMode::Reference) {
    value = ref::cross_entropy_tangent_forward(&count, logits.f32(), tangent.f32(), targets.data(), r.N, r.V, r.Vp,
                                               ignore_index);
  } else {
    auto* terms = static_cast<double*>(current_arena(kOp).allocate(static_cast<std::size_t>(r.N) * sizeof(double),
                                                                   "cross_entropy_tangent row terms"));  // (N)
    value = cpu::cross_entropy_tangent_forward(terms, logits.f32(), tangent.f32(), targets.data(), r.N, r.V, r.Vp,
                                               ignore_index);
  }
  return static_cast<float>(value);
}

void cross_entropy_tangent_pullback(const Tensor& logits, const Tokens& targets, int vocab_size, int ignore_index,
                                    const Tensor& tangent, float out, float d_out, Tensor* d_logits,
                                    Tensor* d_tangent) {
  LLMCC_PROFILE("cross_entropy_tangent.bwd");
  (void)out;
  const Rows r = check_inputs(logits, targets, vocab_size, ignore_index);
  check::same_shape(kOp, "logits", logits, "tangent", tangent);
  check::adjoint(kOp, "d_logits", d_logits, logits);
  check::adjoint(kOp, "d_tangent", d_tangent, tangent);
  if ((d_logits == nullptr && d_tangent == nullptr) || r.count == 0) return;
  const float g = d_out / static_cast<float>(r.count);
  bool overwrite_l = false, overwrite_t = false;
  float* dl = adjoint_data(d_logits, &overwrite_l);   // shape of logits
  float* dt = adjoint_data(d_tangent, &overwrite_t);  // shape of logits
  if (kernel_mode() == KernelMode::Reference) {
    ref::cross_entropy_tangent_backward(dl, dt, logits.f32(), tangent.f32(), targets.data(), g, r.N, r.V, r.Vp,
                                        ignore_index);
  } else {
    cpu::cross_entropy_tangent_backward(dl, dt, logits.f32(), tangent.f32(), targets.data(), g, r.N, r.V, r.Vp,
                                        ignore_index, overwrite_l, overwrite_t);
  }
}

}  // namespace llmcc
