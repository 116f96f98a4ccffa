// attention: fast kernel vs reference (Kernel), reference backward vs finite differences in
// double (Grad), front-end validation, pullback contract and arena use (Api).
#include "llmcc/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

struct Case {
  int B, T, NH, NKV, HS;
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " NKV=" + std::to_string(NKV) + " HS=" + std::to_string(HS);
  }
  std::size_t nq() const { return std::size_t(B) * T * NH * HS; }    // q, out: (B, T, NH*HS)
  std::size_t nkv() const { return std::size_t(B) * T * NKV * HS; }  // k, v: (B, T, NKV*HS)
  std::size_t nlse() const { return std::size_t(B) * NH * T; }       // lse: (B, NH, T)
};

// Packs dense q (B, T, NH*HS), k and v (B, T, NKV*HS) into qkv (B, T, (NH + 2*NKV) * HS), rows
// laid out [q heads | k heads | v heads], and back.
template <class Real>
std::vector<Real> pack_qkv(const Case& c, const std::vector<Real>& q, const std::vector<Real>& k,
                           const std::vector<Real>& v) {
  const std::size_t Cq = std::size_t(c.NH) * c.HS, Ckv = std::size_t(c.NKV) * c.HS, W = Cq + 2 * Ckv;
  std::vector<Real> qkv(std::size_t(c.B) * c.T * W);
  for (std::size_t r = 0; r < std::size_t(c.B) * c.T; ++r) {
    std::copy_n(&q[r * Cq], Cq, &qkv[r * W]);
    std::copy_n(&k[r * Ckv], Ckv, &qkv[r * W + Cq]);
    std::copy_n(&v[r * Ckv], Ckv, &qkv[r * W + Cq + Ckv]);
  }
  return qkv;
}
template <class Real>
void unpack_qkv(const Case& c, const std::vector<Real>& qkv, std::vector<Real>* q, std::vector<Real>* k,
                std::vector<Real>* v) {
  const std::size_t Cq = std::size_t(c.NH) * c.HS, Ckv = std::size_t(c.NKV) * c.HS, W = Cq + 2 * Ckv;
  q->resize(c.nq());
  k->resize(c.nkv());
  v->resize(c.nkv());
  for (std::size_t r = 0; r < std::size_t(c.B) * c.T; ++r) {
    std::copy_n(&qkv[r * W], Cq, &(*q)[r * Cq]);
    std::copy_n(&qkv[r * W + Cq], Ckv, &(*k)[r * Ckv]);
    std::copy_n(&qkv[r * W + Cq + Ckv], Ckv, &(*v)[r * Ckv]);
  }
}

enum class Layout { Dense, Packed };

// Fast forward and backward on float, with 1 and 2 threads, against the reference run in double
// on dense copies of the same inputs. With Layout::Packed the fast kernels read q, k, v from one
// packed qkv buffer and accumulate into one packed d_qkv (row strides, GPT-2's c_attn layout).
void expect_fast_matches_reference(const Case& c, Layout layout = Layout::Dense) {
  SCOPED_TRACE(c.str() + (layout == Layout::Packed ? " packed" : " dense"));
  const auto q = test::random_vector<float>(c.nq(), 1, -2.0, 2.0);   // (B, T, NH*HS)
  const auto k = test::random_vector<float>(c.nkv(), 2, -2.0, 2.0);  // (B, T, NKV*HS)
  const auto v = test::random_vector<float>(c.nkv(), 3);             // (B, T, NKV*HS)
  const auto d_out = test::random_vector<float>(c.nq(), 4);          // (B, T, NH*HS)
  const auto qd = test::cast_vector<double>(q), kd = test::cast_vector<double>(k), vd = test::cast_vector<double>(v),
             dod = test::cast_vector<double>(d_out);
  const AttentionLayout dense = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);

  std::vector<double> out_ref(c.nq()), lse_ref(c.nlse());
  ref::attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), dense);
  // Adjoints start non-zero: the kernels must accumulate.
  const auto d_q0 = test::random_vector<float>(c.nq(), 5);   // (B, T, NH*HS)
  const auto d_k0 = test::random_vector<float>(c.nkv(), 6);  // (B, T, NKV*HS)
  const auto d_v0 = test::random_vector<float>(c.nkv(), 7);  // (B, T, NKV*HS)
  auto d_q_ref = test::cast_vector<double>(d_q0), d_k_ref = test::cast_vector<double>(d_k0),
       d_v_ref = test::cast_vector<double>(d_v0);
  ref::attention_backward(d_q_ref.data(), d_k_ref.data(), d_v_ref.data(), dod.data(), qd.data(), kd.data(), vd.data(),
                          out_ref.data(), lse_ref.data(), dense);

  test::for_each_thread_count([&](int) {  // the reference is computed once, outside
    std::vector<float> out(c.nq()), lse(c.nlse());
    std::vector<float> d_q = d_q0, d_k = d_k0, d_v = d_v0;
    if (layout == Layout::Dense) {
      cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), dense);
      cpu::attention_backward(d_q.data(), d_k.data(), d_v.data(), d_out.data(), q.data(), k.data(), v.data(),
                              out.data(), lse.data(), dense);
    } else {
      const AttentionLayout L = AttentionLayout::packed(c.B, c.T, c.NH, c.NKV, c.HS);
      const auto qkv = pack_qkv(c, q, k, v);  // (B, T, (NH + 2*NKV) * HS)
      auto d_qkv = pack_qkv(c, d_q0, d_k0, d_v0);
      const float* p = qkv.data();
      float* d = d_qkv.data();
      cpu::attention_forward(out.data(), lse.data(), p, p + L.packed_k_offset(), p + L.packed_v_offset(), L);
      cpu::attention_backward(d, d + L.packed_k_offset(), d + L.packed_v_offset(), d_out.data(), p,
                              p + L.packed_k_offset(), p + L.packed_v_offset(), out.data(), lse.data(), L);
      unpack_qkv(c, d_qkv, &d_q, &d_k, &d_v);
    }
    EXPECT_TRUE(all_close("out", out, out_ref, 2e-6, 2e-5));
    EXPECT_TRUE(all_close("lse", lse, lse_ref, 2e-6, 2e-6));
    EXPECT_TRUE(all_close("d_q", d_q, d_q_ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close("d_k", d_k, d_k_ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close("d_v", d_v, d_v_ref, 1e-5, 1e-4));
  });
}

TEST(AttentionKernel, FastMatchesReferenceOverAwkwardSizes) {
  const int heads[][2] = {{1, 1}, {4, 4}, {4, 2}, {6, 1}};  // {NH, NKV}: MHA, GQA and MQA
  // T: 1, below, at and past the fast kernel's blocks (32, 48 or 64 queries and keys by ISA).
  for (int T : {1, 3, 7, 49, 64, 65, 197}) {
    for (int HS : {1, 3, 8, 24, 64}) {  // 24: a 16-wide chunk plus a tail
      for (const auto& nh : heads) {
        const int B = T <= 65 ? 2 : 1;  // keeps the double reference fast at T = 197
        expect_fast_matches_reference({B, T, nh[0], nh[1], HS});
      }
    }
  }
}

TEST(AttentionKernel, FastMatchesReferenceOnPackedQkvOverAwkwardSizes) {
  const int heads[][2] = {{1, 1}, {4, 4}, {4, 2}, {6, 1}};  // {NH, NKV}: MHA, GQA and MQA
  for (int T : {1, 3, 7, 49, 64, 65, 197}) {
    for (int HS : {1, 3, 8, 24, 64}) {
      for (const auto& nh : heads) {
        const int B = T <= 65 ? 2 : 1;
        expect_fast_matches_reference({B, T, nh[0], nh[1], HS}, Layout::Packed);
      }
    }
  }
}

TEST(AttentionKernel, FastMatchesReferenceAtLongerSequence) {
  // T = 768 crosses many key tiles, so the running max is rescaled repeatedly.
  expect_fast_matches_reference({1, 768, 2, 1, 8});
}

// ||x - ref|| / ||ref||, and the largest |x_i - ref_i| in units of ref's root mean square.
struct Bf16Error {
  double relative = 0, worst = 0;
};
Bf16Error bf16_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double diff = 0, norm = 0, worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - ref[i];
    diff += d * d, norm += ref[i] * ref[i], worst = std::max(worst, std::abs(d));
  }
  return {std::sqrt(diff / norm), worst / std::sqrt(norm / static_cast<double>(x.size()))};
}

// With bf16 products every product of the forward and backward reads operands rounded to bf16:
// the outputs are the double reference to within bf16's precision (2^-9 relative per rounding;
// 1e-2 of the norm allowed, and 0.1 of the root mean square for any one element), where a lost,
// doubled or misplaced pair (a wrong pad at odd T or HS, a mask edge off by one) puts its
// elements off by a whole term of their sum. Sizes cross the blocks with odd T and odd HS, GQA
// and MQA, dense and packed rows; 1 and 2 threads give the same bits (each output element is one
// task's). Without AVX512_BF16 the request runs as fp32, which the test checks bit for bit.
TEST(AttentionKernel, Bf16ProductsMatchReferenceToBf16Precision) {
  const bool bf16 = cpu::runs_bf16(cpu::AttentionProducts::Bf16);
  if (!bf16) std::printf("note: this build has no AVX512_BF16: bf16 attention runs as fp32, checked as such\n");
  for (const Case c : {Case{2, 2, 2, 1, 8}, Case{2, 7, 4, 2, 3}, Case{1, 65, 4, 2, 24}, Case{1, 197, 2, 1, 64},
                       Case{1, 131, 2, 2, 128}, Case{2, 50, 3, 3, 1}}) {
    for (Layout layout : {Layout::Dense, Layout::Packed}) {
      SCOPED_TRACE(c.str() + (layout == Layout::Packed ? " packed" : " dense"));
      const auto q = test::random_vector<float>(c.nq(), 41, -2.0, 2.0);   // (B, T, NH*HS)
      const auto k = test::random_vector<float>(c.nkv(), 42, -2.0, 2.0);  // (B, T, NKV*HS)
      const auto v = test::random_vector<float>(c.nkv(), 43);             // (B, T, NKV*HS)
      const auto d_out = test::random_vector<float>(c.nq(), 44);          // (B, T, NH*HS)
      const auto qd = test::cast_vector<double>(q), kd = test::cast_vector<double>(k),
                 vd = test::cast_vector<double>(v), dod = test::cast_vector<double>(d_out);
      const AttentionLayout dense = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);
      std::vector<double> ref[5] = {std::vector<double>(c.nq()), std::vector<double>(c.nlse()),
                                    std::vector<double>(c.nq(), 0.0), std::vector<double>(c.nkv(), 0.0),
                                    std::vector<double>(c.nkv(), 0.0)};  // out, lse, d_q, d_k, d_v
      ref::attention_forward(ref[0].data(), ref[1].data(), qd.data(), kd.data(), vd.data(), dense);
      ref::attention_backward(ref[2].data(), ref[3].data(), ref[4].data(), dod.data(), qd.data(), kd.data(), vd.data(),
                              ref[0].data(), ref[1].data(), dense);
      // out, lse, d_q, d_k, d_v of the fast kernels with the given products and thread count.
      const auto run = [&](cpu::AttentionProducts products, int threads) {
        const int before = num_threads();
        set_num_threads(threads);
        std::vector<float> r[5] = {std::vector<float>(c.nq()), std::vector<float>(c.nlse()),
                                   std::vector<float>(c.nq(), 0.0f), std::vector<float>(c.nkv(), 0.0f),
                                   std::vector<float>(c.nkv(), 0.0f)};
        if (layout == Layout::Dense) {
          cpu::attention_forward(r[0].data(), r[1].data(), q.data(), k.data(), v.data(), dense, products);
          cpu::attention_backward(r[2].data(), r[3].data(), r[4].data(), d_out.data(), q.data(), k.data(), v.data(),
                                  r[0].data(), r[1].data(), dense, false, false, false, products);
        } else {
          const AttentionLayout L = AttentionLayout::packed(c.B, c.T, c.NH, c.NKV, c.HS);
          const auto qkv = pack_qkv(c, q, k, v);  // (B, T, (NH + 2*NKV) * HS)
          auto d_qkv = pack_qkv(c, r[2], r[3], r[4]);
          const float* p = qkv.data();
          float* d = d_qkv.data();
          cpu::attention_forward(r[0].data(), r[1].data(), p, p + L.packed_k_offset(), p + L.packed_v_offset(), L,
                                 products);
          cpu::attention_backward(d, d + L.packed_k_offset(), d + L.packed_v_offset(), d_out.data(), p,
                                  p + L.packed_k_offset(), p + L.packed_v_offset(), r[0].data(), r[1].data(), L, false,
                                  false, false, products);
          unpack_qkv(c, d_qkv, &r[2], &r[3], &r[4]);
        }
        set_num_threads(before);
        return std::vector<std::vector<float>>(std::begin(r), std::end(r));
      };
      const auto got = run(cpu::AttentionProducts::Bf16, 1);
      const auto got2 = run(cpu::AttentionProducts::Bf16, 2);
      const char* names[5] = {"out", "lse", "d_q", "d_k", "d_v"};
      for (int i = 0; i < 5; ++i) {
        SCOPED_TRACE(names[i]);
        EXPECT_TRUE(all_close("2 threads", got2[i], got[i], 0.0, 0.0));
        if (!bf16) continue;
        const Bf16Error e = bf16_error(got[i], ref[i]);
        EXPECT_LT(e.relative, 2e-2);
        EXPECT_LT(e.worst, 0.1);
        // Some rounding to bf16 happened: the fp32 kernels are within about 1e-6.
        EXPECT_GT(e.relative, 1e-5) << "looks computed in fp32";
      }
      if (!bf16) {
        const auto fp32 = run(cpu::AttentionProducts::Fp32, 1);
        for (int i = 0; i < 5; ++i) EXPECT_TRUE(all_close(names[i], got[i], fp32[i], 0.0, 0.0));
      }
    }
  }
}

// With few kv heads per thread the backward splits its tasks by query head (partial dK, dV rows
// added after a barrier, in head order): 2 threads then give the bits of 1 thread, which runs
// one task per kv head, for every subset of adjoints, accumulating or overwriting, in fp32 and
// bf16.
TEST(AttentionKernel, BackwardSplitByQueryHeadGivesTheBitsOfOneThread) {
  for (const Case c : {Case{1, 70, 15, 5, 8}, Case{1, 131, 9, 3, 16}, Case{1, 40, 6, 1, 5}, Case{2, 33, 6, 3, 8}}) {
    for (auto products : {cpu::AttentionProducts::Fp32, cpu::AttentionProducts::Bf16}) {
      SCOPED_TRACE(c.str() + (products == cpu::AttentionProducts::Bf16 ? " bf16" : " fp32"));
      const AttentionLayout L = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);
      const auto q = test::random_vector<float>(c.nq(), 51, -2.0, 2.0);   // (B, T, NH*HS)
      const auto k = test::random_vector<float>(c.nkv(), 52, -2.0, 2.0);  // (B, T, NKV*HS)
      const auto v = test::random_vector<float>(c.nkv(), 53);             // (B, T, NKV*HS)
      const auto d_out = test::random_vector<float>(c.nq(), 54);          // (B, T, NH*HS)
      const auto d_q0 = test::random_vector<float>(c.nq(), 55), d_k0 = test::random_vector<float>(c.nkv(), 56),
                 d_v0 = test::random_vector<float>(c.nkv(), 57);
      std::vector<float> out(c.nq()), lse(c.nlse());
      cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), L, products);
      for (int wanted = 1; wanted < 8; ++wanted) {  // bits: d_q, d_k, d_v
        for (bool overwrite : {false, true}) {
          SCOPED_TRACE("adjoints " + std::to_string(wanted) + (overwrite ? " overwritten" : " accumulated"));
          std::vector<float> r[2][3];
          for (int threads = 1; threads <= 2; ++threads) {
            auto& [gq, gk, gv] = r[threads - 1];
            gq = d_q0, gk = d_k0, gv = d_v0;
            const int before = num_threads();
            set_num_threads(threads);
            cpu::attention_backward(wanted & 1 ? gq.data() : nullptr, wanted & 2 ? gk.data() : nullptr,
                                    wanted & 4 ? gv.data() : nullptr, d_out.data(), q.data(), k.data(), v.data(),
                                    out.data(), lse.data(), L, overwrite, overwrite, overwrite, products);
            set_num_threads(before);
          }
          EXPECT_TRUE(all_close("d_q", r[1][0], r[0][0], 0.0, 0.0));
          EXPECT_TRUE(all_close("d_k", r[1][1], r[0][1], 0.0, 0.0));
          EXPECT_TRUE(all_close("d_v", r[1][2], r[0][2], 0.0, 0.0));
          if (!(wanted & 2)) {
            EXPECT_TRUE(all_close("d_k untouched", r[1][1], d_k0, 0.0, 0.0));
          }
        }
      }
    }
  }
}

TEST(AttentionKernel, FastForwardIsStableForLargeScores) {
  // Scores around 1e3 overflow exp() unless the running max is subtracted. Against the reference
  // in double: float scores near 1250 are spaced 1.2e-4 apart, so even an exact float kernel's
  // probabilities are off by up to ~1e-4 relative (3e-5 measured on the output); a float
  // reference is no closer, and its own rounding differs with the vector width.
  const Case c{1, 70, 2, 2, 4};
  auto q = test::random_vector<float>(c.nq(), 8, 20.0, 30.0);   // (B, T, NH*HS)
  auto k = test::random_vector<float>(c.nkv(), 9, 20.0, 30.0);  // (B, T, NKV*HS)
  auto v = test::random_vector<float>(c.nkv(), 10);             // (B, T, NKV*HS)
  std::vector<float> out(c.nq()), lse(c.nlse());
  std::vector<double> out_ref(c.nq()), lse_ref(c.nlse());
  const AttentionLayout L = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);
  cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), L);
  const auto qd = test::cast_vector<double>(q), kd = test::cast_vector<double>(k), vd = test::cast_vector<double>(v);
  ref::attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), L);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(all_close("out", out, out_ref, 2e-4, 0.0));
  EXPECT_TRUE(all_close("lse", lse, lse_ref, 1e-3, 1e-6));
}

TEST(AttentionGrad, ReferenceBackwardMatchesFiniteDifferencesWithGqa) {
  for (const Case c : {Case{2, 5, 4, 2, 3}, Case{1, 4, 3, 1, 2}, Case{1, 3, 2, 2, 1}}) {
    SCOPED_TRACE(c.str());
    const AttentionLayout L = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);
    auto q = test::random_vector<double>(c.nq(), 21);        // (B, T, NH*HS)
    auto k = test::random_vector<double>(c.nkv(), 22);       // (B, T, NKV*HS)
    auto v = test::random_vector<double>(c.nkv(), 23);       // (B, T, NKV*HS)
    const auto w = test::random_vector<double>(c.nq(), 24);  // adjoint of out
    std::vector<double> out(c.nq()), lse(c.nlse());
    auto loss = [&] {
      ref::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), L);
      return test::weighted_sum(out, w);
    };
    loss();  // out and lse at the unperturbed point, which the backward reads
    std::vector<double> d_q(c.nq(), 0.0), d_k(c.nkv(), 0.0), d_v(c.nkv(), 0.0);
    const auto out0 = out, lse0 = lse;
    ref::attention_backward(d_q.data(), d_k.data(), d_v.data(), w.data(), q.data(), k.data(), v.data(), out0.data(),
                            lse0.data(), L);
    EXPECT_TRUE(test::fd_check(loss, {{"q", &q, &d_q}, {"k", &k, &d_k}, {"v", &v, &d_v}}));
  }
}

TEST(AttentionGrad, ReferenceBackwardOnPackedQkvMatchesFiniteDifferences) {
  // The loss is a function of the one packed tensor qkv; its gradient d_qkv is written through
  // the strided layout, so a wrong stride or offset shows up as a wrong element of d_qkv.
  for (const Case c : {Case{2, 5, 4, 2, 3}, Case{1, 4, 3, 1, 2}, Case{2, 3, 2, 2, 1}}) {
    SCOPED_TRACE(c.str());
    const AttentionLayout L = AttentionLayout::packed(c.B, c.T, c.NH, c.NKV, c.HS);
    const std::size_t W = std::size_t(c.NH + 2 * c.NKV) * c.HS;
    auto qkv = test::random_vector<double>(std::size_t(c.B) * c.T * W, 25);  // (B, T, W)
    const auto w = test::random_vector<double>(c.nq(), 26);                  // adjoint of out
    std::vector<double> out(c.nq()), lse(c.nlse());
    auto loss = [&] {
      const double* p = qkv.data();
      ref::attention_forward(out.data(), lse.data(), p, p + L.packed_k_offset(), p + L.packed_v_offset(), L);
      return test::weighted_sum(out, w);
    };
    loss();
    const auto out0 = out, lse0 = lse;
    std::vector<double> d_qkv(qkv.size(), 0.0);
    const double* p = qkv.data();
    double* d = d_qkv.data();
    ref::attention_backward(d, d + L.packed_k_offset(), d + L.packed_v_offset(), w.data(), p, p + L.packed_k_offset(),
                            p + L.packed_v_offset(), out0.data(), lse0.data(), L);
    EXPECT_TRUE(test::fd_check(loss, {{"qkv", &qkv, &d_qkv}}));
  }
}

// ---- Api -------------------------------------------------------------------------------------

struct Inputs {
  Tensor q, k, v, d_out;
};

Inputs make_inputs(Arena& arena, const Case& c) {
  const Shape sq{c.B, c.T, c.NH * c.HS}, skv{c.B, c.T, c.NKV * c.HS};
  return {test::tensor_from(arena, sq, test::random_vector<float>(c.nq(), 31)),    // q
          test::tensor_from(arena, skv, test::random_vector<float>(c.nkv(), 32)),  // k
          test::tensor_from(arena, skv, test::random_vector<float>(c.nkv(), 33)),  // v
          test::tensor_from(arena, sq, test::random_vector<float>(c.nq(), 34))};   // d_out
}

TEST(AttentionApi, ReferenceAndFastModesAgreeThroughTheFrontEnd) {
  Arena arena(16 << 20);
  ArenaScope scope(arena);
  const Case c{2, 33, 4, 2, 16};
  const Inputs in = make_inputs(arena, c);
  std::vector<float> results[2][4];  // [mode][out, d_q, d_k, d_v]
  const KernelMode before = kernel_mode();
  for (int mode = 0; mode < 2; ++mode) {
    set_kernel_mode(mode == 0 ? KernelMode::Reference : KernelMode::Fast);
    AttentionSaved saved;
    Tensor out = attention_fwd(in.q, in.k, in.v, c.NH, c.NKV, saved);  // (B, T, NH*HS)
    ASSERT_EQ(out.shape(), in.q.shape());
    ASSERT_EQ(saved.lse.shape(), (Shape{c.B, c.NH, c.T}));
    Tensor d_q = arena.zeros(in.q.shape(), "d_q"), d_k = arena.zeros(in.k.shape(), "d_k"),
           d_v = arena.zeros(in.v.shape(), "d_v");
    attention_pullback(in.q, in.k, in.v, c.NH, c.NKV, out, saved, in.d_out, &d_q, &d_k, &d_v);
    results[mode][0] = test::to_vector(out);
    results[mode][1] = test::to_vector(d_q);
    results[mode][2] = test::to_vector(d_k);
    results[mode][3] = test::to_vector(d_v);
    // attention() without saved values gives the same output.
    EXPECT_TRUE(all_close("attention()", test::to_vector(attention(in.q, in.k, in.v, c.NH, c.NKV)), results[mode][0],
                          0.0, 0.0));
  }
  set_kernel_mode(before);
  EXPECT_TRUE(all_close("out", results[1][0], results[0][0], 1e-5, 1e-4));
  EXPECT_TRUE(all_close("d_q", results[1][1], results[0][1], 1e-5, 1e-4));
  EXPECT_TRUE(all_close("d_k", results[1][2], results[0][2], 1e-5, 1e-4));
  EXPECT_TRUE(all_close("d_v", results[1][3], results[0][3], 1e-5, 1e-4));
}

// The front ends follow the matrix products' dtype: under bf16 (with AVX512_BF16) both forms run
// the bf16 kernels, so their outputs and gradients are the kernels' bf16 results, bit for bit;
// under fp32 the fp32 kernels'.
TEST(AttentionApi, FrontEndsFollowTheMatmulDtype) {
  struct DtypeGuard {
    ~DtypeGuard() { set_matmul_dtype(MatmulDtype::Fp32); }
  } guard;
  Arena arena(16 << 20);
  ArenaScope scope(arena);
  const Case c{1, 70, 4, 2, 16};
  const Inputs in = make_inputs(arena, c);
  const AttentionLayout L = AttentionLayout::dense(c.B, c.T, c.NH, c.NKV, c.HS);
  for (MatmulDtype dtype : {MatmulDtype::Fp32, MatmulDtype::Bf16}) {
    SCOPED_TRACE(matmul_dtype_name(dtype));
    set_matmul_dtype(dtype);
    const auto products = dtype == MatmulDtype::Bf16 ? cpu::AttentionProducts::Bf16 : cpu::AttentionProducts::Fp32;
    std::vector<float> out(c.nq()), lse(c.nlse()), d_q(c.nq(), 0.0f), d_k(c.nkv(), 0.0f), d_v(c.nkv(), 0.0f);
    cpu::attention_forward(out.data(), lse.data(), in.q.f32(), in.k.f32(), in.v.f32(), L, products);
    cpu::attention_backward(d_q.data(), d_k.data(), d_v.data(), in.d_out.f32(), in.q.f32(), in.k.f32(), in.v.f32(),
                            out.data(), lse.data(), L, false, false, false, products);
    AttentionSaved saved;
    Tensor o = attention_fwd(in.q, in.k, in.v, c.NH, c.NKV, saved);  // (B, T, NH*HS)
    Tensor gq = arena.zeros(in.q.shape(), "d_q"), gk = arena.zeros(in.k.shape(), "d_k"),
           gv = arena.zeros(in.v.shape(), "d_v");
    attention_pullback(in.q, in.k, in.v, c.NH, c.NKV, o, saved, in.d_out, &gq, &gk, &gv);
    EXPECT_TRUE(all_close("out", test::to_vector(o), out, 0.0, 0.0));
    EXPECT_TRUE(all_close("d_q", test::to_vector(gq), d_q, 0.0, 0.0));
    EXPECT_TRUE(all_close("d_k", test::to_vector(gk), d_k, 0.0, 0.0));
    EXPECT_TRUE(all_close("d_v", test::to_vector(gv), d_v, 0.0, 0.0));
    // The packed form too.
    const std::vector<float> q = test::to_vector(in.q), k = test::to_vector(in.k), v = test::to_vector(in.v);
    Tensor qkv = test::tensor_from(arena, {c.B, c.T, (c.NH + 2 * c.NKV) * c.HS}, pack_qkv(c, q, k, v));
    EXPECT_TRUE(all_close("packed out", test::to_vector(attention_qkv(qkv, c.NH, c.NKV)), out, 0.0, 0.0));
  }
  // And bf16 differs from fp32 where it runs.
  set_matmul_dtype(MatmulDtype::Bf16);
  const auto bf16_out = test::to_vector(attention(in.q, in.k, in.v, c.NH, c.NKV));
  set_matmul_dtype(MatmulDtype::Fp32);
  const auto fp32_out = test::to_vector(attention(in.q, in.k, in.v, c.NH, c.NKV));
  if (cpu::runs_bf16(cpu::AttentionProducts::Bf16)) {
    EXPECT_FALSE(all_close("bf16 against fp32", bf16_out, fp32_out, 0.0, 0.0));
  } else {
    std::printf("note: this build has no AVX512_BF16: bf16 attention runs as fp32\n");
    EXPECT_TRUE(all_close("bf16 against fp32", bf16_out, fp32_out, 0.0, 0.0));
  }
}

TEST(AttentionApi, PullbackAccumulatesSkipsNullsAndToleratesAliasing) {
  Arena arena(16 << 20);
  ArenaScope scope(arena);
  // NH == NKV, so q, k, v may be one tensor. T = 197: more than two blocks, so the fast kernel
  // copies its B operands dense (kernels/cpu/attention.cpp, copy_operands), with every subset of
  // adjoints.
  for (const Case c : {Case{2, 9, 3, 3, 4}, Case{1, 197, 2, 2, 8}}) {
    for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
      const KernelMode before = kernel_mode();
      set_kernel_mode(mode);
      SCOPED_TRACE(c.str() + (mode == KernelMode::Fast ? " fast" : " reference"));
      const Inputs in = make_inputs(arena, c);
      AttentionSaved saved;
      Tensor out = attention_fwd(in.q, in.k, in.v, c.NH, c.NKV, saved);
      const auto pullback = [&](Tensor* d_q_, Tensor* d_k_, Tensor* d_v_) {
        attention_pullback(in.q, in.k, in.v, c.NH, c.NKV, out, saved, in.d_out, d_q_, d_k_, d_v_);
      };
      Tensor d_q = arena.zeros(in.q.shape(), "d_q"), d_k = arena.zeros(in.k.shape(), "d_k"),
             d_v = arena.zeros(in.v.shape(), "d_v");
      pullback(&d_q, &d_k, &d_v);
      const auto gq = test::to_vector(d_q), gk = test::to_vector(d_k), gv = test::to_vector(d_v);
      for (float g : gk) ASSERT_TRUE(std::isfinite(g));

      // Pre-filled adjoint: the pullback adds to it. Null d_q and d_v are skipped.
      Tensor d_k2 = test::tensor_from(arena, in.k.shape(), std::vector<float>(c.nkv(), 1.0f));
      pullback(nullptr, &d_k2, nullptr);
      std::vector<float> expect(gk);
      for (float& x : expect) x += 1.0f;
      EXPECT_TRUE(all_close("d_k pre-filled", test::to_vector(d_k2), expect, 1e-6, 1e-6));
      Tensor d_q2 = arena.zeros(in.q.shape(), "d_q2");
      pullback(&d_q2, nullptr, nullptr);
      EXPECT_TRUE(all_close("d_q alone", test::to_vector(d_q2), gq, 0.0, 0.0));
      // d_v alone: the fast kernel skips dP and dS.
      Tensor d_v2 = arena.zeros(in.v.shape(), "d_v2");
      pullback(nullptr, nullptr, &d_v2);
      EXPECT_TRUE(all_close("d_v alone", test::to_vector(d_v2), gv, 0.0, 0.0));

      // One adjoint for all three inputs (as for attention(x, x, x)) receives the sum.
      Tensor d_all = arena.zeros(in.q.shape(), "d_all");
      pullback(&d_all, &d_all, &d_all);
      std::vector<float> sum(c.nq());
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = gq[i] + gk[i] + gv[i];
      EXPECT_TRUE(all_close("aliased adjoints", test::to_vector(d_all), sum, 1e-6, 1e-5));
      set_kernel_mode(before);
    }
  }
}

TEST(AttentionApi, AllocatesOnlyTheOutputAndLseFromTheArena) {
  // A T x T score matrix per head would be B*NH*T*T floats; we allow the output, the lse
  // (B, NH, T) and alignment padding, and nothing at all in the pullback.
  Arena arena(64 << 20);
  ArenaScope scope(arena);
  const Case c{2, 197, 4, 2, 8};
  const Inputs in = make_inputs(arena, c);
  Tensor d_q = arena.zeros(in.q.shape(), "d_q"), d_k = arena.zeros(in.k.shape(), "d_k"),
         d_v = arena.zeros(in.v.shape(), "d_v");
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    const KernelMode before = kernel_mode();
    set_kernel_mode(mode);
    const std::size_t pad = 2 * Arena::kAlignment;
    std::size_t used = arena.used();
    AttentionSaved saved;
    Tensor out = attention_fwd(in.q, in.k, in.v, c.NH, c.NKV, saved);
    EXPECT_LE(arena.used() - used, c.nq() * sizeof(float) + c.nlse() * sizeof(float) + pad);
    used = arena.used();
    attention_pullback(in.q, in.k, in.v, c.NH, c.NKV, out, saved, in.d_out, &d_q, &d_k, &d_v);
    EXPECT_EQ(arena.used(), used);
    used = arena.used();
    (void)attention(in.q, in.k, in.v, c.NH, c.NKV);
    EXPECT_LE(arena.used() - used, c.nq() * sizeof(float) + pad);
    set_kernel_mode(before);
  }
}

TEST(AttentionApi, RejectsBadHeadCountsAndShapes) {
  Arena arena(1 << 20);
  const Tensor q = arena.zeros({2, 5, 12}, "q");  // (B, T, NH*HS) with NH = 4, HS = 3
  const Tensor kv = arena.zeros({2, 5, 6}, "k");  // (B, T, NKV*HS) with NKV = 2
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, kv, 4, 2); }, {"[attention]", "no arena"}));
  ArenaScope scope(arena);
  EXPECT_NO_THROW((void)attention(q, kv, kv, 4, 2));
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, kv, 4, 3); },
                                 {"[attention]", "n_head 4 is not a multiple of n_kv_head 3"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)attention(q, kv, kv, 0, 1); }, {"[attention]", "n_head 0", "expected both >= 1"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, kv, 4, -2); }, {"[attention]", "n_kv_head -2"}));
  // C = 12 is not a multiple of n_head = 8 (nor 5).
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, kv, 8, 4); },
                                 {"[attention]", "q has shape (2, 5, 12)", "positive multiple of n_head 8"}));
  // k's last dim must be n_kv_head * HS = 1 * 3.
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, kv, 4, 1); },
                                 {"[attention]", "k has shape (2, 5, 6): dim 2 is 6, expected 3"}));
  const Tensor kv_b = arena.zeros({1, 5, 6}, "k"), kv_t = arena.zeros({2, 4, 6}, "k");
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv_b, kv_b, 4, 2); },
                                 {"[attention]", "k has shape (1, 5, 6): dim 0 is 1, expected 2 (B of q)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv_t, kv_t, 4, 2); },
                                 {"[attention]", "dim 1 is 4, expected 5 (T of q)"}));
  const Tensor v_other = arena.zeros({2, 5, 3}, "v");
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, kv, v_other, 4, 2); },
                                 {"[attention]", "v has shape (2, 5, 3), expected (2, 5, 6)"}));
  const Tensor q2d = arena.zeros({10, 12}, "q");
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q2d, kv, kv, 4, 2); },
                                 {"[attention]", "q has shape (10, 12), expected 3 dims"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention(q, Tensor(), kv, 4, 2); }, {"[attention]", "k has no storage"}));
}

TEST(AttentionApi, PullbackRejectsBadSavedOutputAndAdjoints) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Tensor q = arena.zeros({2, 5, 12}, "q");  // (B, T, NH*HS) with NH = 4, HS = 3
  const Tensor kv = arena.zeros({2, 5, 6}, "k");  // (B, T, NKV*HS) with NKV = 2
  AttentionSaved saved;
  const Tensor out = attention_fwd(q, kv, kv, 4, 2, saved);
  Tensor d_q = arena.zeros(q.shape(), "d_q"), d_kv = arena.zeros(kv.shape(), "d_kv");
  EXPECT_NO_THROW(attention_pullback(q, kv, kv, 4, 2, out, saved, out, &d_q, &d_kv, &d_kv));
  EXPECT_TRUE(test::throws_error(
      [&] { attention_pullback(q, kv, kv, 4, 2, out, AttentionSaved{}, out, &d_q, nullptr, nullptr); },
      {"[attention]", "saved.lse has no storage"}));
  AttentionSaved wrong{arena.zeros({2, 2, 5}, "lse")};
  EXPECT_TRUE(test::throws_error([&] { attention_pullback(q, kv, kv, 4, 2, out, wrong, out, &d_q, nullptr, nullptr); },
                                 {"[attention]", "saved.lse has shape (2, 2, 5): dim 1 is 2, expected 4 (n_head)"}));
  EXPECT_TRUE(test::throws_error([&] { attention_pullback(q, kv, kv, 4, 2, out, saved, d_kv, &d_q, nullptr, nullptr); },
                                 {"[attention]", "d_out has shape (2, 5, 6), expected (2, 5, 12)"}));
  EXPECT_TRUE(test::throws_error([&] { attention_pullback(q, kv, kv, 4, 2, d_kv, saved, out, &d_q, nullptr, nullptr); },
                                 {"[attention]", "out has shape (2, 5, 6)"}));
  EXPECT_TRUE(test::throws_error([&] { attention_pullback(q, kv, kv, 4, 2, out, saved, out, &d_kv, nullptr, nullptr); },
                                 {"[attention]", "d_q has shape (2, 5, 6), expected (2, 5, 12)"}));
  EXPECT_TRUE(test::throws_error([&] { attention_pullback(q, kv, kv, 4, 2, out, saved, out, nullptr, nullptr, &d_q); },
                                 {"[attention]", "d_v has shape (2, 5, 12), expected (2, 5, 6)"}));
}

// ---- Api: attention_qkv (packed q, k, v) ------------------------------------------------------

TEST(AttentionApi, PackedQkvAgreesWithSeparateTensorsInBothModes) {
  Arena arena(16 << 20);
  ArenaScope scope(arena);
  const KernelMode before = kernel_mode();
  for (const Case c : {Case{2, 33, 4, 2, 16}, Case{1, 7, 3, 3, 5}, Case{2, 1, 2, 1, 4}}) {
    for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
      set_kernel_mode(mode);
      SCOPED_TRACE(c.str() + (mode == KernelMode::Fast ? " fast" : " reference"));
      const Inputs in = make_inputs(arena, c);
      const int W = (c.NH + 2 * c.NKV) * c.HS;
      const Tensor qkv = test::tensor_from(  // (B, T, (NH + 2*NKV) * HS)
          arena, {c.B, c.T, W}, pack_qkv(c, test::to_vector(in.q), test::to_vector(in.k), test::to_vector(in.v)));

      AttentionSaved saved, saved_qkv;
      const Tensor out = attention_fwd(in.q, in.k, in.v, c.NH, c.NKV, saved);  // (B, T, NH*HS)
      const Tensor out_qkv = attention_qkv_fwd(qkv, c.NH, c.NKV, saved_qkv);   // (B, T, NH*HS)
      ASSERT_EQ(out_qkv.shape(), (Shape{c.B, c.T, c.NH * c.HS}));
      ASSERT_EQ(saved_qkv.lse.shape(), (Shape{c.B, c.NH, c.T}));
      EXPECT_TRUE(all_close("out", test::to_vector(out_qkv), test::to_vector(out), 1e-6, 1e-6));
      EXPECT_TRUE(all_close("lse", test::to_vector(saved_qkv.lse), test::to_vector(saved.lse), 1e-6, 1e-6));
      EXPECT_TRUE(all_close("attention_qkv()", test::to_vector(attention_qkv(qkv, c.NH, c.NKV)),
                            test::to_vector(out_qkv), 0.0, 0.0));

      // Separate adjoints start at 1; the packed one at 1 too: it must accumulate.
      Tensor d_q = test::tensor_from(arena, in.q.shape(), std::vector<float>(c.nq(), 1.0f));
      Tensor d_k = test::tensor_from(arena, in.k.shape(), std::vector<float>(c.nkv(), 1.0f));
      Tensor d_v = test::tensor_from(arena, in.v.shape(), std::vector<float>(c.nkv(), 1.0f));
      attention_pullback(in.q, in.k, in.v, c.NH, c.NKV, out, saved, in.d_out, &d_q, &d_k, &d_v);
      Tensor d_qkv = test::tensor_from(arena, qkv.shape(), std::vector<float>(std::size_t(qkv.numel()), 1.0f));
      attention_qkv_pullback(qkv, c.NH, c.NKV, out_qkv, saved_qkv, in.d_out, &d_qkv);
      const auto expect = pack_qkv(c, test::to_vector(d_q), test::to_vector(d_k), test::to_vector(d_v));
      EXPECT_TRUE(all_close("d_qkv", test::to_vector(d_qkv), expect, 1e-6, 1e-5));
      EXPECT_NO_THROW(attention_qkv_pullback(qkv, c.NH, c.NKV, out_qkv, saved_qkv, in.d_out, nullptr));
    }
  }
  set_kernel_mode(before);
}

TEST(AttentionApi, PackedQkvAllocatesOnlyTheOutputAndLse) {
  Arena arena(64 << 20);
  ArenaScope scope(arena);
  const Case c{2, 197, 4, 2, 8};
  const Tensor qkv = test::tensor_from(  // (B, T, (NH + 2*NKV) * HS)
      arena, {c.B, c.T, (c.NH + 2 * c.NKV) * c.HS},
      test::random_vector<float>(std::size_t(c.B) * c.T * (c.NH + 2 * c.NKV) * c.HS, 35));
  const Tensor d_out = test::tensor_from(arena, {c.B, c.T, c.NH * c.HS}, test::random_vector<float>(c.nq(), 36));
  Tensor d_qkv = arena.zeros(qkv.shape(), "d_qkv");
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    const KernelMode before = kernel_mode();
    set_kernel_mode(mode);
    const std::size_t pad = 2 * Arena::kAlignment;
    std::size_t used = arena.used();
    AttentionSaved saved;
    const Tensor out = attention_qkv_fwd(qkv, c.NH, c.NKV, saved);
    EXPECT_LE(arena.used() - used, c.nq() * sizeof(float) + c.nlse() * sizeof(float) + pad);
    used = arena.used();
    attention_qkv_pullback(qkv, c.NH, c.NKV, out, saved, d_out, &d_qkv);
    EXPECT_EQ(arena.used(), used);
    set_kernel_mode(before);
  }
}

TEST(AttentionApi, PackedQkvRejectsBadHeadCountsShapesAndAdjoints) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  // NH = 4, NKV = 2, HS = 3: last dim (4 + 2*2) * 3 = 24.
  const Tensor qkv = arena.zeros({2, 5, 24}, "qkv");
  EXPECT_NO_THROW((void)attention_qkv(qkv, 4, 2));
  EXPECT_NO_THROW((void)attention_qkv(qkv, 2, 2));  // also 6 heads of 4: NH = NKV = 2, HS = 4
  EXPECT_TRUE(test::throws_error([&] { (void)attention_qkv(qkv, 4, 3); },
                                 {"[attention_qkv]", "n_head 4 is not a multiple of n_kv_head 3"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention_qkv(qkv, 0, 1); },
                                 {"[attention_qkv]", "n_head 0", "expected both >= 1"}));
  EXPECT_TRUE(test::throws_error(
      [&] { (void)attention_qkv(qkv, 5, 5); },
      {"[attention_qkv]", "qkv has shape (2, 5, 24): last dim 24", "multiple of n_head + 2 * n_kv_head = 15"}));
  EXPECT_TRUE(test::throws_error([&] { (void)attention_qkv(arena.zeros({10, 24}, "qkv"), 4, 2); },
                                 {"[attention_qkv]", "qkv has shape (10, 24), expected 3 dims"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)attention_qkv(Tensor(), 4, 2); }, {"[attention_qkv]", "qkv has no storage"}));

  AttentionSaved saved;
  const Tensor out = attention_qkv_fwd(qkv, 4, 2, saved);  // (2, 5, 12)
  Tensor d_qkv = arena.zeros(qkv.shape(), "d_qkv");
  EXPECT_NO_THROW(attention_qkv_pullback(qkv, 4, 2, out, saved, out, &d_qkv));
  EXPECT_TRUE(test::throws_error([&] { attention_qkv_pullback(qkv, 4, 2, out, AttentionSaved{}, out, &d_qkv); },
                                 {"[attention_qkv]", "saved.lse has no storage"}));
  AttentionSaved wrong{arena.zeros({2, 2, 5}, "lse")};
  EXPECT_TRUE(
      test::throws_error([&] { attention_qkv_pullback(qkv, 4, 2, out, wrong, out, &d_qkv); },
                         {"[attention_qkv]", "saved.lse has shape (2, 2, 5): dim 1 is 2, expected 4 (n_head)"}));
  Tensor d_small = arena.zeros({2, 5, 12}, "d_qkv");
  EXPECT_TRUE(test::throws_error([&] { attention_qkv_pullback(qkv, 4, 2, out, saved, out, &d_small); },
                                 {"[attention_qkv]", "d_qkv has shape (2, 5, 12), expected (2, 5, 24)"}));
  EXPECT_TRUE(
      test::throws_error([&] { attention_qkv_pullback(qkv, 4, 2, qkv, saved, out, &d_qkv); },
                         {"[attention_qkv]", "out has shape (2, 5, 24): dim 2 is 24, expected 12 (n_head * HS)"}));
  EXPECT_TRUE(test::throws_error([&] { attention_qkv_pullback(qkv, 4, 2, out, saved, qkv, &d_qkv); },
                                 {"[attention_qkv]", "d_out has shape (2, 5, 24), expected (2, 5, 12)"}));
}

}  // namespace
}  // namespace llmcc
