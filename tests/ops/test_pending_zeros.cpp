// Adjoints with pending zeros (Tensor::mark_zero_pending, made by adgen::acc): reads fill the
// zeros, adgen::accumulate adds nothing for them, and the pullbacks that overwrite such an
// adjoint (linear, linear_nobias, gelu, swiglu, add, layernorm, cross_entropy, attention) give exactly what they
// give when adding into real zeros, whatever garbage the storage held, in both kernel modes.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"
#include "llmcc/runtime.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::random_vector;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// An adjoint shaped like `like` whose storage holds NaN and whose zeros are pending.
Tensor pending_nan(Arena& arena, const Tensor& like) {
  Tensor t = arena.tensor(like.shape(), "pending adjoint");
  float* p = t.f32();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = kNaN;
  t.mark_zero_pending();
  return t;
}

// Runs `pullback` (which writes the adjoints it is given) twice per kernel mode: once into
// zeroed adjoints, once into pending-NaN ones, and expects the same values, exactly, and no
// pending mark left on the adjoints it wrote.
void expect_pending_matches_zeros(Arena& arena, const std::vector<Tensor>& likes,
                                  const std::function<void(std::vector<Tensor*>&)>& pullback) {
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    set_kernel_mode(mode);
    SCOPED_TRACE(mode == KernelMode::Fast ? "fast kernels" : "reference kernels");
    std::vector<Tensor> zeroed, pending;
    for (const Tensor& like : likes) {
      zeroed.push_back(arena.zeros(like.shape(), "zeroed adjoint"));
      pending.push_back(pending_nan(arena, like));
    }
    std::vector<Tensor*> zeroed_ptrs, pending_ptrs;
    for (Tensor& t : zeroed) zeroed_ptrs.push_back(&t);
    for (Tensor& t : pending) pending_ptrs.push_back(&t);
    pullback(zeroed_ptrs);
    pullback(pending_ptrs);
    for (std::size_t a = 0; a < likes.size(); ++a) {
      SCOPED_TRACE("adjoint " + std::to_string(a));
      EXPECT_FALSE(pending[a].zero_pending());
      const std::vector<float> want = test::to_vector(zeroed[a]), got = test::to_vector(pending[a]);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!(got[i] == want[i]) && mismatches++ < 5) {
          ADD_FAILURE() << "element " << i << ": " << got[i] << ", expected " << want[i];
        }
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
  set_kernel_mode(KernelMode::Fast);
}

TEST(PendingZerosApi, ReadsFillTheZerosOnce) {
  Arena arena(1 << 20);
  Tensor t = arena.tensor({3, 5}, "t");
  for (std::int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = kNaN;
  t.mark_zero_pending();
  EXPECT_TRUE(t.zero_pending());
  const float* p = t.f32();
  EXPECT_FALSE(t.zero_pending());
  for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(p[i], 0.0f) << i;
  t.f32()[2] = 7.0f;  // written data is not zeroed again
  EXPECT_EQ(t.f32()[2], 7.0f);

  Tensor u = arena.tensor({4}, "u");
  u.mark_zero_pending();
  EXPECT_TRUE(u.take_zero_pending());
  EXPECT_FALSE(u.take_zero_pending());
  Tensor undefined;
  undefined.mark_zero_pending();  // no storage: nothing pending
  EXPECT_FALSE(undefined.zero_pending());
}

TEST(PendingZerosApi, AdgenAccumulateTreatsPendingAsZero) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor like = test::tensor_from(arena, {4}, {1, 2, 3, 4});
  Tensor d = test::tensor_from(arena, {4}, {10, 20, 30, 40});

  Tensor adj;  // acc: storage with pending zeros, no zero fill
  ASSERT_EQ(adgen::acc(&adj, like), &adj);
  EXPECT_TRUE(adj.defined());
  EXPECT_TRUE(adj.zero_pending());

  adgen::accumulate(adj, d);  // pending adj + d = d
  EXPECT_FALSE(adj.zero_pending());
  EXPECT_EQ(test::to_vector(adj), (std::vector<float>{10, 20, 30, 40}));

  Tensor zero_contribution = pending_nan(arena, like);
  adgen::accumulate(adj, zero_contribution);  // + pending zeros: unchanged
  EXPECT_EQ(test::to_vector(adj), (std::vector<float>{10, 20, 30, 40}));

  Tensor empty;
  adgen::accumulate(empty, zero_contribution);  // taken over, still pending
  EXPECT_TRUE(empty.zero_pending());
  EXPECT_EQ(test::to_vector(empty), (std::vector<float>{0, 0, 0, 0}));
}

TEST(PendingZerosApi, LinearOverwritesDx) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int B = 2, T = 37, C = 40, OC = 50;
  Tensor x = test::tensor_from(arena, {B, T, C}, random_vector<float>(B * T * C, 1));
  Tensor w = test::tensor_from(arena, {OC, C}, random_vector<float>(OC * C, 2));
  Tensor b = test::tensor_from(arena, {OC}, random_vector<float>(OC, 3));
  Tensor d_out = test::tensor_from(arena, {B, T, OC}, random_vector<float>(B * T * OC, 4));
  Tensor out = linear(x, w, b);
  expect_pending_matches_zeros(
      arena, {x, w, b}, [&](std::vector<Tensor*>& d) { linear_pullback(x, w, b, out, d_out, d[0], d[1], d[2]); });
  expect_pending_matches_zeros(
      arena, {x}, [&](std::vector<Tensor*>& d) { linear_nobias_pullback(x, w, out, d_out, d[0], nullptr); });
}

TEST(PendingZerosApi, GeluOverwritesDx) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int n = 70001;  // large enough for the parallel path
  Tensor x = test::tensor_from(arena, {n}, random_vector<float>(n, 5, -6.0, 6.0));
  Tensor d_out = test::tensor_from(arena, {n}, random_vector<float>(n, 6));
  Tensor out = gelu(x);
  expect_pending_matches_zeros(arena, {x}, [&](std::vector<Tensor*>& d) { gelu_pullback(x, out, d_out, d[0]); });
}

TEST(PendingZerosApi, SwigluOverwritesEitherAdjoint) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int n = 70001;  // large enough for the parallel path
  Tensor g = test::tensor_from(arena, {n}, random_vector<float>(n, 10, -6.0, 6.0));
  Tensor up = test::tensor_from(arena, {n}, random_vector<float>(n, 11));
  Tensor d_out = test::tensor_from(arena, {n}, random_vector<float>(n, 12));
  Tensor out = swiglu(g, up);
  expect_pending_matches_zeros(arena, {g, up},
                               [&](std::vector<Tensor*>& d) { swiglu_pullback(g, up, out, d_out, d[0], d[1]); });
  expect_pending_matches_zeros(arena, {g},
                               [&](std::vector<Tensor*>& d) { swiglu_pullback(g, up, out, d_out, d[0], nullptr); });
  expect_pending_matches_zeros(arena, {up},
                               [&](std::vector<Tensor*>& d) { swiglu_pullback(g, up, out, d_out, nullptr, d[0]); });
  // swiglu(x, x): one adjoint given twice; the d_up term overwrites, the d_g term adds.
  expect_pending_matches_zeros(arena, {g},
                               [&](std::vector<Tensor*>& d) { swiglu_pullback(g, g, out, d_out, d[0], d[0]); });
}

TEST(PendingZerosApi, AddOverwritesEitherAdjoint) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int n = 70001;
  Tensor a = test::tensor_from(arena, {n}, random_vector<float>(n, 7));
  Tensor b = test::tensor_from(arena, {n}, random_vector<float>(n, 8));
  Tensor d_out = test::tensor_from(arena, {n}, random_vector<float>(n, 9));
  Tensor out = add(a, b);
  expect_pending_matches_zeros(arena, {a, b},
                               [&](std::vector<Tensor*>& d) { add_pullback(a, b, out, d_out, d[0], d[1]); });
  // x + x: one adjoint given twice; the first use overwrites, the second adds.
  expect_pending_matches_zeros(arena, {a},
                               [&](std::vector<Tensor*>& d) { add_pullback(a, a, out, d_out, d[0], d[0]); });
}

TEST(PendingZerosApi, LayerNormOverwritesDx) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int N = 130, C = 96;
  Tensor x = test::tensor_from(arena, {N, C}, random_vector<float>(N * C, 10));
  Tensor w = test::tensor_from(arena, {C}, random_vector<float>(C, 11));
  Tensor b = test::tensor_from(arena, {C}, random_vector<float>(C, 12));
  Tensor d_out = test::tensor_from(arena, {N, C}, random_vector<float>(N * C, 13));
  LayerNormSaved saved;
  Tensor out = layernorm_fwd(x, w, b, saved);
  expect_pending_matches_zeros(arena, {x, w, b}, [&](std::vector<Tensor*>& d) {
    layernorm_pullback(x, w, b, out, saved, d_out, d[0], d[1], d[2]);
  });
}

TEST(PendingZerosApi, CrossEntropyOverwritesEveryElement) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  // Padded vocab (V 45 of Vp 48) and an ignored target: those elements must be written 0.
  const int B = 2, T = 9, V = 45, Vp = 48, ignore = -100;
  Tensor logits = test::tensor_from(arena, {B, T, Vp}, random_vector<float>(B * T * Vp, 14, -4.0, 4.0));
  std::vector<std::int32_t> ids(B * T);
  for (int i = 0; i < B * T; ++i) ids[i] = (i * 7) % V;
  ids[5] = ignore;
  Tokens targets(ids.data(), B, T);
  CrossEntropySaved saved;
  const float loss = cross_entropy_fwd(logits, targets, V, ignore, saved);
  expect_pending_matches_zeros(arena, {logits}, [&](std::vector<Tensor*>& d) {
    cross_entropy_pullback(logits, targets, V, ignore, loss, saved, 1.0f, d[0]);
  });
}

TEST(PendingZerosApi, AttentionOverwritesEachTasksRows) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  const int B = 2, T = 53, NH = 4, NKV = 2, HS = 16;  // GQA: two query heads per kv head
  Tensor q = test::tensor_from(arena, {B, T, NH * HS}, random_vector<float>(B * T * NH * HS, 15));
  Tensor k = test::tensor_from(arena, {B, T, NKV * HS}, random_vector<float>(B * T * NKV * HS, 16));
  Tensor v = test::tensor_from(arena, {B, T, NKV * HS}, random_vector<float>(B * T * NKV * HS, 17));
  Tensor d_out = test::tensor_from(arena, {B, T, NH * HS}, random_vector<float>(B * T * NH * HS, 18));
  AttentionSaved saved;
  Tensor out = attention_fwd(q, k, v, NH, NKV, saved);
  expect_pending_matches_zeros(arena, {q, k, v}, [&](std::vector<Tensor*>& d) {
    attention_pullback(q, k, v, NH, NKV, out, saved, d_out, d[0], d[1], d[2]);
  });
  // Self-attention on one tensor: one adjoint given three times (first use overwrites).
  AttentionSaved self_saved;
  Tensor self_out = attention_fwd(q, q, q, NH, NH, self_saved);
  expect_pending_matches_zeros(arena, {q}, [&](std::vector<Tensor*>& d) {
    attention_pullback(q, q, q, NH, NH, self_out, self_saved, d_out, d[0], d[0], d[0]);
  });
  // Packed q, k, v (GPT-2's c_attn output).
  const int W = (NH + 2 * NKV) * HS;
  Tensor qkv = test::tensor_from(arena, {B, T, W}, random_vector<float>(B * T * W, 19));
  AttentionSaved qkv_saved;
  Tensor qkv_out = attention_qkv_fwd(qkv, NH, NKV, qkv_saved);
  expect_pending_matches_zeros(arena, {qkv}, [&](std::vector<Tensor*>& d) {
    attention_qkv_pullback(qkv, NH, NKV, qkv_out, qkv_saved, d_out, d[0]);
  });
}

}  // namespace
}  // namespace llmcc
