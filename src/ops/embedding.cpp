// token_embedding and token_position_embedding: front ends, forwards and pullbacks.
#include "llmcc/ops/embedding.h"

#include <string>

#include "kernels/cpu/embedding.h"
#include "kernels/ref/embedding.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "kernels/cpu/bf16.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kTok = "token_embedding";
constexpr const char* kTokPos = "token_position_embedding";

struct Dims {
  std::int64_t B, T, C;
};

// Validates idx (B, T), wte (V, C) and every id; returns B, T, C.
Dims check_tokens(const char* op, const Tokens& idx, const Tensor& wte) {
  check::tokens(op, "idx", idx);
  check::weight_ndim(op, "wte", wte, 2, "(V, C)");
  const std::int64_t V = wte.dim(0), C = wte.dim(1);
  check::that(V > 0 && C > 0, op, [&] { return "wte has shape " + wte.shape().str() + ", expected V > 0 and C > 0"; });
  const std::int32_t* ids = idx.data();
  for (std::int64_t i = 0; i < idx.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      fail(op, "idx[" + std::to_string(i / idx.T()) + ", " + std::to_string(i % idx.T()) + "] is " +
                   std::to_string(ids[i]) + ", expected a token id in [0, " + std::to_string(V) + ") (rows of wte " +
                   wte.shape().str() + ")");
    }
  }
  return {idx.B(), idx.T(), C};
}

// wpe is (maxT, C) with T <= maxT.
void check_positions(const Tensor& wpe, const Dims& d) {
  check::weight_ndim(kTokPos, "wpe", wpe, 2, "(maxT, C)");
  check::dim(kTokPos, "wpe", wpe, 1, d.C, "C, dim 1 of wte");
  check::that(d.T <= wpe.dim(0), kTokPos, [&] {
    return "idx has T = " + std::to_string(d.T) + ", expected T <= maxT = " + std::to_string(wpe.dim(0)) +
           " (rows of wpe " + wpe.shape().str() + ", the longest sequence the model has positions for)";
  });
}

void check_d_out(const char* op, const Tensor& d_out, const Dims& d) {
  check::ndim(op, "d_out", d_out, 3, "(B, T, C)");
  check::dim(op, "d_out", d_out, 0, d.B, "B of idx");
  check::dim(op, "d_out", d_out, 1, d.T, "T of idx");
  check::dim(op, "d_out", d_out, 2, d.C, "C of wte");
}

// A table (V, C) or (maxT, C) read as floats, stored in f32 or bf16 (widened exactly).
struct Table {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  explicit Table(const Tensor& t) {
    if (t.dtype() == DType::BF16)
      bf16 = static_cast<const std::uint16_t*>(t.raw());
    else
      f32 = t.f32();
  }
  float operator[](std::int64_t i) const { return bf16 != nullptr ? cpu::bf16_to_float(bf16[i]) : f32[i]; }
};

// wpe (maxT, C) or null (token_embedding).
Tensor forward(const char* op, const Tokens& idx, const Tensor& wte, const Tensor* wpe, const Dims& d) {
  Tensor out = new_tensor({d.B, d.T, d.C}, op);  // (B, T, C)
  if (wte.dtype() == DType::BF16 || (wpe != nullptr && wpe->dtype() == DType::BF16)) {
    // A frozen table stored in bf16 (a LoRA model's base): each row widened as it is gathered,
    // in both kernel modes. The sum is the f32 kernels' (one add of two floats per element).
    float* o = out.f32();  // (B, T, C)
    const Table te(wte);
    for (std::int64_t i = 0; i < d.B * d.T; ++i) {
      const std::int64_t row = static_cast<std::int64_t>(idx.data()[i]) * d.C;
      for (std::int64_t c = 0; c < d.C; ++c) o[i * d.C + c] = te[row + c];
    }
    if (wpe != nullptr) {
      const Table pe(*wpe);
      for (std::int64_t i = 0; i < d.B * d.T; ++i) {
        const std::int64_t pos = (i % d.T) * d.C;
        for (std::int64_t c = 0; c < d.C; ++c) o[i * d.C + c] += pe[pos + c];
      }
    }
  } else if (kernel_mode() == KernelMode::Reference) {
    ref::embedding_forward(out.f32(), idx.data(), wte.f32(), wpe != nullptr ? wpe->f32() : nullptr, d.B, d.T, d.C);
  } else {
    cpu::embedding_forward(out.f32(), idx.data(), wte.f32(), wpe != nullptr ? wpe->f32() : nullptr, d.B, d.T, d.C);
  }
  return out;
}

void backward(const Tokens& idx, const Tensor& d_out, Tensor* d_wte, Tensor* d_wpe, const Dims& d) {
  float* dte = d_wte ? d_wte->f32() : nullptr;
  float* dpe = d_wpe ? d_wpe->f32() : nullptr;
  if (dte == nullptr && dpe == nullptr) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::embedding_backward(dte, dpe, d_out.f32(), idx.data(), d.B, d.T, d.C);
  } else {
    cpu::embedding_backward(dte, dpe, d_out.f32(), idx.data(), d.B, d.T, d.C);
  }
}

}  // namespace

Tensor token_embedding(const Tokens& idx, const Tensor& wte) {
  LLMCC_PROFILE("token_embedding.fwd");
  const Dims d = check_tokens(kTok, idx, wte);
  return forward(kTok, idx, wte, nullptr, d);
}

void token_embedding_pullback(const Tokens& idx, const Tensor& wte, const Tensor& out, const Tensor& d_out,
                              Tensor* d_wte) {
  LLMCC_PROFILE("token_embedding.bwd");
  (void)out;  // the backward reads idx and d_out only
  const Dims d = check_tokens(kTok, idx, wte);
  check_d_out(kTok, d_out, d);
  check::no_adjoint_of_bf16(kTok, "wte", d_wte, wte);
  check::adjoint(kTok, "d_wte", d_wte, wte);
  backward(idx, d_out, d_wte, nullptr, d);
}

Tensor token_position_embedding(const Tokens& idx, const Tensor& wte, const Tensor& wpe) {
  LLMCC_PROFILE("tok_pos_embedding.fwd");
  const Dims d = check_tokens(kTokPos, idx, wte);
  check_positions(wpe, d);
  return forward(kTokPos, idx, wte, &wpe, d);
}

void token_position_embedding_pullback(const Tokens& idx, const Tensor& wte, const Tensor& wpe, const Tensor& out,
                                       const Tensor& d_out, Tensor* d_wte, Tensor* d_wpe) {
  LLMCC_PROFILE("tok_pos_embedding.bwd");
  (void)out;  // the backward reads idx and d_out only
  const Dims d = check_tokens(kTokPos, idx, wte);
  check_positions(wpe, d);
  check_d_out(kTokPos, d_out, d);
  check::no_adjoint_of_bf16(kTokPos, "wte", d_wte, wte);
  check::no_adjoint_of_bf16(kTokPos, "wpe", d_wpe, wpe);
  check::adjoint(kTokPos, "d_wte", d_wte, wte);
  check::adjoint(kTokPos, "d_wpe", d_wpe, wpe);
  backward(idx, d_out, d_wte, d_wpe, d);
}

}  // namespace llmcc
