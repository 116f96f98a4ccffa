// rope: front end, forward and pullback (rotary position embedding, Meta-Llama convention).
#include "llmcc/ops/rope.h"

#include <cmath>
#include <string>

#include "kernels/cpu/rope.h"
#include "kernels/ref/rope.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "rope";

struct Dims {
  int B, T, NH, HS;
};
// Validates x (B, T, n_head * HS) with HS even, the frequencies and pos_offset.
Dims check_inputs(const Tensor& x, int n_head, const RopeConfig& cfg, int pos_offset) {
  check::ndim(kOp, "x", x, 3, "(B, T, C)");
  const std::int64_t C = x.dim(2);
  check::that(n_head >= 1, kOp, [&] { return "n_head is " + std::to_string(n_head) + ", expected >= 1"; });
  check::that(C % n_head == 0, kOp, [&] {
    return "x has shape " + x.shape().str() + ": C = " + std::to_string(C) +
           " is not divisible by n_head = " + std::to_string(n_head);
  });
  const std::int64_t HS = C / n_head;
  check::that(HS % 2 == 0, kOp, [&] {
    return "head size HS = C / n_head = " + std::to_string(HS) +
           " is odd, expected an even HS (rope rotates pairs x[2i], x[2i+1])";
  });
  check::that(std::isfinite(cfg.theta) && cfg.theta > 0.0f, kOp,
              [&] { return "theta is " + std::to_string(cfg.theta) + ", expected a finite value > 0 (e.g. 10000)"; });
  cfg.scaling.validate(kOp);
  check::that(pos_offset >= 0, kOp, [&] {
    return "pos_offset is " + std::to_string(pos_offset) +
           ", expected >= 0 (the number of positions already in the KV cache)";
  });
  return {static_cast<int>(x.dim(0)), static_cast<int>(x.dim(1)), n_head, static_cast<int>(HS)};
}

}  // namespace

const char* RopeScaling::type_name() const { return type == Type::Llama3 ? "llama3" : "default"; }

RopeScaling::Type RopeScaling::type_from_name(const std::string& name, const std::string& where) {
  if (name == "default") return Type::None;
  if (name == "llama3") return Type::Llama3;
  fail(where, "rope_type '" + name +
                  "' is not supported (expected 'default' or 'llama3'; linear, dynamic, yarn and longrope "
                  "scaling are not implemented)");
}

void RopeScaling::validate(const std::string& where) const {
  if (type == Type::None) return;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) fail(where, std::string("llama3 rope scaling: ") + what);
  };
  need(std::isfinite(factor) && factor >= 1.0f, "factor is " + std::to_string(factor) + ", expected >= 1");
  need(std::isfinite(low_freq_factor) && low_freq_factor > 0.0f,
       "low_freq_factor is " + std::to_string(low_freq_factor) + ", expected > 0");
  need(std::isfinite(high_freq_factor) && high_freq_factor > low_freq_factor,
       "high_freq_factor is " + std::to_string(high_freq_factor) + ", expected > low_freq_factor (" +
           std::to_string(low_freq_factor) + ")");
  need(original_max_position_embeddings > 0,
       "original_max_position_embeddings is " + std::to_string(original_max_position_embeddings) + ", expected > 0");
}

double rope_inv_freq(const RopeConfig& cfg, int i, int HS) { return ref::rope_inv_freq(cfg, i, HS); }

Tensor rope(const Tensor& x, int n_head, const RopeConfig& cfg, int pos_offset) {
  LLMCC_PROFILE("rope.fwd");
  const Dims d = check_inputs(x, n_head, cfg, pos_offset);
  Tensor out = new_tensor(x.shape(), kOp);  // (B, T, C)
  if (kernel_mode() == KernelMode::Reference) {
    ref::rope_forward(out.f32(), x.f32(), d.B, d.T, d.NH, d.HS, cfg, pos_offset);
  } else {
    cpu::rope_forward(out.f32(), x.f32(), d.B, d.T, d.NH, d.HS, cfg, pos_offset);
  }
  return out;
}

void rope_pullback(const Tensor& x, int n_head, const RopeConfig& cfg, int pos_offset, const Tensor& out,
                   const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("rope.bwd");
  (void)out;  // the backward is a rotation of d_out; it reads neither x nor out
  const Dims d = check_inputs(x, n_head, cfg, pos_offset);
  check::same_shape(kOp, "x", x, "d_out", d_out);
  check::adjoint(kOp, "d_x", d_x, x);
  if (d_x == nullptr) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::rope_backward(d_x->f32(), d_out.f32(), d.B, d.T, d.NH, d.HS, cfg, pos_offset);
  } else {
    cpu::rope_backward(d_x->f32(), d_out.f32(), d.B, d.T, d.NH, d.HS, cfg, pos_offset);
  }
}

Tensor rope(const Tensor& x, int n_head, float theta, int pos_offset) {
  return rope(x, n_head, RopeConfig{theta, {}}, pos_offset);
}

void rope_pullback(const Tensor& x, int n_head, float theta, int pos_offset, const Tensor& out, const Tensor& d_out,
                   Tensor* d_x) {
  rope_pullback(x, n_head, RopeConfig{theta, {}}, pos_offset, out, d_out, d_x);
}

}  // namespace llmcc
