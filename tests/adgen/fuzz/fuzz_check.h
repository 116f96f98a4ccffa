// Run-time checks of the adgen fuzzer, used by the generated batch_main.cpp (gen_programs.py).
//
// Each generated program P provides (see fuzz_program.py, prog_struct): its needs and WRT set,
// the plain and checkpointed model types, build(m, dims), params(m, f), loss(m, inputs),
// grad(m, inputs, gradbuffer, arg_grads) and record(m, inputs, visit). For two random size sets
// per program, Runner::run<P>() checks:
//   fd        Reference-mode gradients against central differences of the float loss (random
//             directions and single elements per parameter tensor, tensor and float argument)
//   fast      Fast-mode gradients close to Reference-mode ones
//   repeat    a second gradient call in the same arena gives the same bits, and the first call's
//             d_x still holds its values (an adjoint pointing into released scratch memory)
//   ckpt      the checkpointed variant gives the plain variant's loss and gradient bits
//   count     the plain gradient runs each op's forward exactly as often as one primal forward
//             (split reversal), the checkpointed one at least as often
//   alloc     the plain augmented forward allocates exactly the rule outputs and the rules' saved
//             buffers (no tensor data copied), all of them kept in its Saved record
//   final     every gradient call (plain and checkpointed, and a second call accumulating into
//             the same buffer) notifies each parameter gradient exactly once through
//             llmcc::adgen::grad_final, holding its final value when notified; none without WRT m
// A failure prints `FAIL seed=S program=i kind=<check> <detail>`; finish() prints the summary.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "llmcc/tensor.h"

namespace fuzz {

using llmcc::Tensor;

// What a program's inputs need (from the generator).
struct Needs {
  bool heads;    // attention/rope: C = NH * HS, HS even
  bool three_d;  // activations (B, T, C); else (N, C)
  bool has_x, has_ids, has_s;
  // layernorm: C >= 2. Over one channel its output is b whatever x is, so the true d_x is 0, but
  // the kernels' d_x is the rounding error of w * d_out (contracted into an FMA in one of two
  // places) times rstd = 1/sqrt(eps): noise a deep enough stack upstream amplifies past any
  // tolerance.
  bool layernorm;
  // y: a regression target of the logits' shape, (B, T, Vp) or (N, Vp) (mse_loss terms).
  bool has_y;
};
// Which differentiable arguments the entry's gradient covers (LLMCC_ADGEN_WRT).
struct Wrt {
  bool m, x, s, y;
};

// Sizes and configuration of one run, drawn at run time.
struct Dims {
  int B, T, N, C, H, V, Vp, NH, NKV, HS, L, steps, maxT;
  unsigned bits;  // config bools and ints of the program's branches
  int K;          // rows of a tensor read as K slices by view (loops over them)
  std::string str() const {
    char buf[176];
    std::snprintf(buf, sizeof buf, "B=%d T=%d C=%d H=%d V=%d Vp=%d NH=%d NKV=%d HS=%d L=%d steps=%d K=%d bits=%u", B,
                  T, C, H, V, Vp, NH, NKV, HS, L, steps, K, bits);
    return buf;
  }
};

inline int pick(std::mt19937& rng, std::initializer_list<int> values) {
  std::uniform_int_distribution<std::size_t> d(0, values.size() - 1);
  return values.begin()[d(rng)];
}

// Awkward sizes: 1, 2, 3, 5, 7, 8, 9, 16, 17.
inline Dims random_dims(std::mt19937& rng, const Needs& n) {
  Dims d{};
  d.B = pick(rng, {1, 2, 3});
  d.T = pick(rng, {1, 2, 3, 5, 7});
  d.N = d.B * d.T;
  if (n.heads) {
    d.NH = pick(rng, {1, 2, 3, 4});
    std::vector<int> divisors;
    for (int k = 1; k <= d.NH; ++k)
      if (d.NH % k == 0) divisors.push_back(k);
    d.NKV = divisors[std::uniform_int_distribution<std::size_t>(0, divisors.size() - 1)(rng)];
    d.HS = pick(rng, {2, 4});
    d.C = d.NH * d.HS;
  } else {
    d.C = n.layernorm ? pick(rng, {2, 3, 5, 7, 8, 9, 16, 17}) : pick(rng, {1, 2, 3, 5, 7, 8, 9, 16, 17});
    d.NH = d.NKV = 1;
    d.HS = d.C;
  }
  d.H = pick(rng, {1, 2, 3, 5, 7, 9, 16});
  d.V = pick(rng, {2, 3, 5, 7, 9});
  d.Vp = d.V + pick(rng, {0, 0, 1, 3});
  d.L = pick(rng, {0, 1, 2, 2, 3});
  d.steps = pick(rng, {0, 1, 2, 3});
  d.maxT = d.T + pick(rng, {0, 1, 4});
  d.bits = static_cast<unsigned>(rng());
  d.K = pick(rng, {1, 2, 2, 3});  // drawn last: the other sizes of a seed stay as they were
  return d;
}

// The entry's arguments: x (B, T, C) or (N, C), token ids (B, T) in [0, V), targets (B, T) in
// [0, V) with about one in ten ignored (-1), a float s in [0.5, 1.5], a regression target y
// (the logits' shape) in [-1, 1].
struct Inputs {
  std::vector<float> xs, ys;
  std::vector<std::int32_t> id_data, tg_data;
  Tensor x, y;
  llmcc::Tokens ids, targets;
  float s = 1.0f;
};

inline void make_inputs(Inputs& in, const Dims& d, const Needs& n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  in.xs.resize(static_cast<std::size_t>(d.N * d.C));
  for (float& v : in.xs) v = u(rng);
  in.x = n.three_d ? Tensor(in.xs.data(), {d.B, d.T, d.C}) : Tensor(in.xs.data(), {d.N, d.C});
  std::uniform_int_distribution<int> tok(0, d.V - 1);
  in.id_data.resize(static_cast<std::size_t>(d.N));
  in.tg_data.resize(static_cast<std::size_t>(d.N));
  for (auto& v : in.id_data) v = tok(rng);
  for (auto& v : in.tg_data) v = rng() % 10 == 0 ? -1 : tok(rng);
  in.ids = llmcc::Tokens(in.id_data.data(), d.B, d.T);
  in.targets = llmcc::Tokens(in.tg_data.data(), d.B, d.T);
  in.s = std::uniform_real_distribution<float>(0.5f, 1.5f)(rng);
  if (n.has_y) {  // drawn last, only for programs with y
    in.ys.resize(static_cast<std::size_t>(d.N * d.Vp));
    for (float& v : in.ys) v = u(rng);
    in.y = n.three_d ? Tensor(in.ys.data(), {d.B, d.T, d.Vp}) : Tensor(in.ys.data(), {d.N, d.Vp});
  }
}

// Adjoints of the entry's tensor and float arguments.
struct ArgGrads {
  Tensor dx, dy;
  float ds = 0.0f;
};
// Stands in for the gradient buffer when the model is not differentiated (WRT without it).
struct NoGrad {};

// Everything a gradient call produced, flattened: parameter gradients in params() order, then
// d_x, then d_s, then d_y.
struct GradOut {
  float loss = 0.0f;
  std::vector<float> flat;
  ArgGrads args;
  std::string final_error;  // what the gradient-final notifications got wrong ("" when right)
};

// Records gradient-final notifications: each notified tensor's address and its value then.
class FinalRecorder : public llmcc::adgen::GradFinalListener {
 public:
  void grad_final(const Tensor& grad) override {
    notes_.push_back({grad.address(), std::vector<float>(grad.f32(), grad.f32() + grad.numel())});
  }
  // Every gradient of `grads` (name, tensor) notified exactly once with its value now, and
  // nothing else; "" when so.
  std::string check(const std::vector<std::pair<std::string, Tensor>>& grads) const {
    std::map<const void*, std::size_t> index;
    for (std::size_t i = 0; i < grads.size(); ++i) index[grads[i].second.address()] = i;
    std::vector<int> seen(grads.size(), 0);
    for (const auto& [address, values] : notes_) {
      const auto it = index.find(address);
      if (it == index.end()) return "a tensor outside the gradient mirror was notified";
      const Tensor& t = grads[it->second].second;
      ++seen[it->second];
      if (values.size() != static_cast<std::size_t>(t.numel()) ||
          std::memcmp(values.data(), t.f32(), values.size() * sizeof(float)) != 0)
        return grads[it->second].first + " changed after it was notified final";
    }
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (seen[i] != 1) return grads[i].first + " notified " + std::to_string(seen[i]) + " times";
    return "";
  }

 private:
  std::vector<std::pair<const void*, std::vector<float>>> notes_;
};

inline void append(std::vector<float>& flat, const Tensor& t, std::int64_t numel) {
  if (!t.defined()) {
    flat.insert(flat.end(), static_cast<std::size_t>(numel), 0.0f);
    return;
  }
  flat.insert(flat.end(), t.f32(), t.f32() + t.numel());
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::string first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return "[" + std::to_string(i) + "] " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  return "";
}

// One gradient call of program P on `model` into a fresh gradient buffer and fresh arg adjoints,
// with its gradient-final notifications checked; with `accumulate`, also a second call into the
// same buffer (its notifications checked; GradOut holds the first call's gradients).
template <class P, class M>
GradOut grad_call(const M& model, const Inputs& in, bool accumulate = false) {
  GradOut out;
  FinalRecorder notes;
  if constexpr (P::wrt.m) {
    auto g = llmcc::adgen::make_grad(model);
    {
      llmcc::adgen::GradFinalScope scope(&notes);
      out.loss = P::grad(model, in, g, out.args);
    }
    std::vector<std::pair<std::string, Tensor>> grads;
    g.grad.for_each_pair(model, "", [&](const std::string& name, const Tensor&, Tensor& t) {
      grads.push_back({name, t});
    });
    out.final_error = notes.check(grads);
    std::map<const void*, Tensor> by_param;
    g.grad.for_each_pair(model, "", [&](const std::string&, const Tensor& p, Tensor& t) { by_param[&p] = t; });
    P::params(model, [&](const Tensor& p) { append(out.flat, by_param.at(&p), p.numel()); });
    if (accumulate && out.final_error.empty()) {
      FinalRecorder again;
      ArgGrads args;
      {
        llmcc::adgen::GradFinalScope scope(&again);
        P::grad(model, in, g, args);
      }
      const std::string e = again.check(grads);
      if (!e.empty()) out.final_error = "accumulating call: " + e;
    }
  } else {
    NoGrad g;
    {
      llmcc::adgen::GradFinalScope scope(&notes);
      out.loss = P::grad(model, in, g, out.args);
    }
    out.final_error = notes.check({});
  }
  if constexpr (P::wrt.x && P::needs.has_x) append(out.flat, out.args.dx, in.x.numel());
  if constexpr (P::wrt.s && P::needs.has_s) out.flat.push_back(out.args.ds);
  if constexpr (P::wrt.y && P::needs.has_y) append(out.flat, out.args.dy, in.y.numel());
  return out;
}

// A differentiable value the gradient covers: where its primal values live and where its
// gradient starts in GradOut::flat.
struct Slot {
  std::string name;
  float* value;
  std::int64_t count;
  std::size_t offset;
};

template <class P, class M>
std::vector<Slot> slots(M& model, Inputs& in) {
  std::vector<Slot> out;
  std::size_t offset = 0;
  if constexpr (P::wrt.m) {
    int k = 0;
    P::params(model, [&](Tensor& p) {
      out.push_back({"param" + std::to_string(k++) + p.shape().str(), p.f32(), p.numel(), offset});
      offset += static_cast<std::size_t>(p.numel());
    });
  }
  if constexpr (P::wrt.x && P::needs.has_x) {
    out.push_back({"x" + in.x.shape().str(), in.xs.data(), in.x.numel(), offset});
    offset += static_cast<std::size_t>(in.x.numel());
  }
  if constexpr (P::wrt.s && P::needs.has_s) {
    out.push_back({"s", &in.s, 1, offset});
    offset += 1;
  }
  if constexpr (P::wrt.y && P::needs.has_y)
    out.push_back({"y" + in.y.shape().str(), in.ys.data(), in.y.numel(), offset});
  return out;
}

// Calls of every op's forward (profile sites "<op>.fwd") since the last profile::reset(), and the
// arena buffers they leave: the output and the rule's saved buffers (cross_entropy: lse only;
// lora_linear: x A^T; mse_loss: none, its output is a float). view has no forward site: it allocates nothing.
struct FwdCount {
  long calls = 0;
  long buffers = 0;
};
inline FwdCount forward_count() {
  static const std::map<std::string, int> kBuffers = {
      {"layernorm.fwd", 3},     {"rmsnorm.fwd", 2},  {"attention.fwd", 2}, {"bidirectional_attention.fwd", 2},
      {"cross_entropy.fwd", 1}, {"mse_loss.fwd", 0},  {"lora_linear.fwd", 2}};
  FwdCount c;
  for (const auto& e : llmcc::profile::snapshot()) {
    const std::string& n = e.name;
    if (n.size() < 4 || n.compare(n.size() - 4, 4, ".fwd") != 0) continue;
    c.calls += e.calls;
    const auto it = kBuffers.find(n);
    c.buffers += e.calls * (it == kBuffers.end() ? 1 : it->second);
  }
  return c;
}

class Runner {
 public:
  // FUZZ_SELFTEST=1 corrupts one gradient element before the finite-difference check, which
  // must then report it (the checker checked). FUZZ_VERBOSE=1 prints each run's sizes and checks.
  explicit Runner(int seed)
      : seed_(seed), selftest_(env_flag("FUZZ_SELFTEST")), verbose_(env_flag("FUZZ_VERBOSE")) {
#ifdef FUZZ_POISON
    llmcc::adgen::set_poison_scratch(true);
#endif
  }

  template <class P>
  void run() {
    ++programs_;
    const int before = failures_;
    for (int r = 0; r < 2 && failures_ - before < 6; ++r) {
      std::mt19937 rng(static_cast<unsigned>(seed_) * 2654435761u + static_cast<unsigned>(P::index) * 40503u +
                       static_cast<unsigned>(r) * 977u + 1u);
      const Dims d = random_dims(rng, P::needs);
      program_ = P::index;
      where_ = "run=" + std::to_string(r) + " " + d.str();
      try {
        const int fd_before = fd_checks_;
        run_once<P>(d, rng);
        if (verbose_)
          std::printf("program %d %s: %d finite-difference checks\n", P::index, where_.c_str(), fd_checks_ - fd_before);
      } catch (const std::exception& e) {
        fail("exception", e.what());
      }
      llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
      llmcc::profile::enable(false);
      llmcc::adgen::release_scratch();
    }
  }

  int finish() const {
    std::printf("fuzz: %d programs, %d failures, %d finite-difference checks (%d unsettled, in %d rough runs), "
                "%d runs too ill-conditioned to check\n",
                programs_, failures_, fd_checks_, unsettled_, rough_runs_, ill_conditioned_);
    return failures_ == 0 ? 0 : 1;
  }

 private:
  void fail(const char* kind, const std::string& detail) {
    ++failures_;
    std::printf("FAIL seed=%d program=%d kind=%s %s: %s\n", seed_, program_, kind, where_.c_str(), detail.c_str());
    std::fflush(stdout);
  }

  template <class P>
  void run_once(const Dims& d, std::mt19937& rng) {
    typename P::Model m;
    typename P::ModelC mc;
    P::build(m, d);
    P::build(mc, d);
    // Both variants share one parameter storage, filled in [-0.5, 0.5].
    std::size_t total = 0;
    P::params(m, [&](Tensor& t) { total += static_cast<std::size_t>(t.numel()); });
    std::vector<float> storage(total);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (float& v : storage) v = u(rng);
    std::size_t off = 0;
    P::params(m, [&](Tensor& t) {
      t.bind(storage.data() + off);
      off += static_cast<std::size_t>(t.numel());
    });
    off = 0;
    P::params(mc, [&](Tensor& t) {
      t.bind(storage.data() + off);
      off += static_cast<std::size_t>(t.numel());
    });
    Inputs in;
    make_inputs(in, d, P::needs, rng);

    llmcc::Arena arena(std::size_t{64} << 20);
    llmcc::ArenaScope scope(arena);
    GradOut ref;
    for (const auto mode : {llmcc::KernelMode::Reference, llmcc::KernelMode::Fast}) {
      llmcc::set_kernel_mode(mode);
      const char* tag = mode == llmcc::KernelMode::Fast ? "fast" : "reference";
      const float primal = P::loss(m, in);
      if (!std::isfinite(primal)) {  // the program itself overflows at these sizes: nothing to check
        ++ill_conditioned_;
        return;
      }
      GradOut g1 = grad_call<P>(m, in);
      auto values = [](const Tensor& t) {
        return t.defined() ? std::vector<float>(t.f32(), t.f32() + t.numel()) : std::vector<float>();
      };
      const std::vector<float> dx1 = values(g1.args.dx), dy1 = values(g1.args.dy);
      if (!(std::fabs(g1.loss - primal) <= 1e-6f * std::max(1.0f, std::fabs(primal))))
        fail("loss", std::string(tag) + ": _grad returned " + std::to_string(g1.loss) + ", primal " +
                         std::to_string(primal));
      // The same call again in the same arena: the same bits, the first call's d_x and d_y intact.
      const GradOut g2 = grad_call<P>(m, in, true);
      if (!same_bits(g1.flat, g2.flat) || g1.loss != g2.loss)
        fail("repeat", std::string(tag) + ": a second gradient call differs " + first_difference(g1.flat, g2.flat));
      auto intact = [&](const char* name, const Tensor& t, const std::vector<float>& first) {
        const std::vector<float> now = values(t);
        if (!same_bits(first, now))
          fail("repeat", std::string(tag) + ": the first call's " + name + " changed after a second call " +
                             first_difference(first, now));
      };
      intact("d_x", g1.args.dx, dx1);
      intact("d_y", g1.args.dy, dy1);
      // Checkpointing changes memory, never values.
      const GradOut gc = grad_call<P>(mc, in);
      const std::pair<const GradOut*, const char*> calls[] = {
          {&g1, "plain"}, {&g2, "plain, accumulating"}, {&gc, "checkpointed"}};
      for (const auto& [call, what] : calls)
        if (!call->final_error.empty()) fail("final", std::string(tag) + " " + what + ": " + call->final_error);
      if (!same_bits(g1.flat, gc.flat) || g1.loss != gc.loss)
        fail("ckpt", std::string(tag) + ": checkpointed variant differs: loss " + std::to_string(g1.loss) + " vs " +
                         std::to_string(gc.loss) + " " + first_difference(g1.flat, gc.flat));
      if (!std::isfinite(g1.loss)) {
        fail("loss", std::string(tag) + ": the loss is not finite (" + std::to_string(g1.loss) + ")");
        return;
      }
      if (std::fabs(g1.loss) > 1e3f) {  // too ill-conditioned for finite differences in float
        ++ill_conditioned_;
        return;
      }
      if (mode == llmcc::KernelMode::Reference) {
        rough_ = false;
        ref = g1;
        check_counts<P>(m, mc, in, g1);
        if (selftest_ && !g1.flat.empty()) g1.flat[g1.flat.size() / 2] = 1.5f * g1.flat[g1.flat.size() / 2] + 0.1f;
        check_fd<P>(m, in, g1, rng);
      } else if (!rough_) {  // where finite differences could not judge, neither can this
        check_close("fast", ref.flat, g1.flat);
      }
    }
  }

  // Split reversal and zero copies, in Reference mode.
  template <class P, class M, class MC>
  void check_counts(const M& m, const MC& mc, const Inputs& in, const GradOut&) {
    llmcc::profile::enable(true);
    llmcc::profile::reset();
    {
      llmcc::Arena a(std::size_t{64} << 20);
      llmcc::ArenaScope s(a);
      P::loss(m, in);
    }
    const long primal = forward_count().calls;
    llmcc::profile::reset();
    {
      llmcc::Arena a(std::size_t{64} << 20);
      llmcc::ArenaScope s(a);
      grad_call<P>(m, in);
    }
    const long plain = forward_count().calls;
    llmcc::profile::reset();
    {
      llmcc::Arena a(std::size_t{64} << 20);
      llmcc::ArenaScope s(a);
      grad_call<P>(mc, in);
    }
    const long ckpt = forward_count().calls;
    if (plain != primal)
      fail("count", "plain gradient ran " + std::to_string(plain) + " op forwards, the primal " +
                        std::to_string(primal));
    if (ckpt < primal)
      fail("count", "checkpointed gradient ran " + std::to_string(ckpt) + " op forwards, fewer than the primal " +
                        std::to_string(primal));
    // The augmented forward's arena holds exactly the buffers its Saved record keeps, one per
    // rule output or rule-saved buffer. A view is a handle inside another rule output's buffer
    // (kept too): handles whose bytes overlap are one buffer.
    llmcc::profile::reset();
    llmcc::Arena a(std::size_t{64} << 20);
    std::map<const unsigned char*, std::size_t> handles;  // start -> bytes
    {
      llmcc::ArenaScope s(a);
      P::record(m, in, [&](const Tensor& t) {
        if (t.defined() && a.owns(t.address())) {
          std::size_t& b = handles[static_cast<const unsigned char*>(t.address())];
          b = std::max(b, t.nbytes());
        }
      });
    }
    const FwdCount fc = forward_count();
    llmcc::profile::enable(false);
    std::vector<std::pair<const unsigned char*, const unsigned char*>> buffers;  // merged [start, end)
    for (const auto& [p, bytes] : handles) {
      if (!buffers.empty() && p < buffers.back().second)
        buffers.back().second = std::max(buffers.back().second, p + bytes);
      else
        buffers.push_back({p, p + bytes});
    }
    std::size_t kept = 0;
    for (const auto& [start, end] : buffers) {
      const auto bytes = static_cast<std::size_t>(end - start);
      kept += (bytes + llmcc::Arena::kAlignment - 1) / llmcc::Arena::kAlignment * llmcc::Arena::kAlignment;
    }
    if (a.used() != kept || static_cast<long>(buffers.size()) != fc.buffers)
      fail("alloc", "augmented forward allocated " + std::to_string(a.used()) + " bytes, its record keeps " +
                        std::to_string(kept) + " bytes in " + std::to_string(buffers.size()) +
                        " buffers; the ops made " + std::to_string(fc.buffers) + " buffers");
  }

  // Central differences of the float loss: per slot, two random directions and up to three
  // single elements, each retried with other steps before it counts as a mismatch.
  template <class P, class M>
  void check_fd(const M& m_const, const Inputs& in_const, const GradOut& g, std::mt19937& rng) {
    M& m = const_cast<M&>(m_const);
    Inputs& in = const_cast<Inputs&>(in_const);
    llmcc::Arena arena(std::size_t{64} << 20);
    auto loss = [&]() {
      arena.reset();
      llmcc::ArenaScope s(arena);
      return static_cast<double>(P::loss(m, in));
    };
    const double l0 = loss();
    int reported = 0;
    std::vector<std::string> mismatches;
    for (const Slot& slot : slots<P>(m, in)) {
      std::vector<std::vector<float>> dirs;
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (int k = 0; k < 2; ++k) {
        std::vector<float> v(static_cast<std::size_t>(slot.count));
        for (float& e : v) e = u(rng);
        dirs.push_back(v);
      }
      const int elements = static_cast<int>(std::min<std::int64_t>(3, slot.count));
      for (int k = 0; k < elements; ++k) {
        std::vector<float> v(static_cast<std::size_t>(slot.count), 0.0f);
        v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)] = 1.0f;
        dirs.push_back(v);
      }
      for (std::size_t k = 0; k < dirs.size() && reported < 3; ++k) {
        const std::vector<float>& v = dirs[k];
        double analytic = 0.0;
        for (std::int64_t i = 0; i < slot.count; ++i)
          analytic += static_cast<double>(g.flat[slot.offset + static_cast<std::size_t>(i)]) * v[static_cast<std::size_t>(i)];
        std::vector<float> saved(slot.value, slot.value + slot.count);
        auto numeric = [&](double h) {
          for (std::int64_t i = 0; i < slot.count; ++i) slot.value[i] = saved[i] + static_cast<float>(h * v[i]);
          const double up = loss();
          for (std::int64_t i = 0; i < slot.count; ++i) slot.value[i] = saved[i] - static_cast<float>(h * v[i]);
          const double down = loss();
          std::copy(saved.begin(), saved.end(), slot.value);
          return (up - down) / (2.0 * h);
        };
        // Central differences at several steps, and Richardson's extrapolation (4 n(h/2) - n(h)) / 3
        // of each halving (error O(h^4)): a loss that curves sharply at one scale (layernorm over
        // C = 2) still has a step where the difference quotient has converged.
        bool ok = false;
        double best = 0.0, best_n = 0.0, best_tol = 0.0;
        auto accept = [&](double n, double h, bool first) {
          // float loss resolution divided by the step, plus a relative and a small absolute part
          const double tol = 16.0 * std::fabs(l0) * 1.1920929e-7 / (2.0 * h) +
                             2e-2 * std::max(std::fabs(analytic), std::fabs(n)) + 1e-4;
          const double err = std::fabs(analytic - n);
          if (first || err < best) best = err, best_n = n, best_tol = tol;
          return err <= tol;
        };
        // A mismatch counts only where the differences have settled (two successive steps agree
        // within the tolerance): then the loss is smooth at that scale and the gradient is wrong.
        // Where they never settle, the loss has a feature narrower than the smallest step (a
        // softmax saturated by exploding activations): float differences cannot judge it.
        double previous = 0.0;
        bool settled = false;
        for (const double h : {1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4}) {
          const double n = numeric(h);
          ok = accept(n, h, h == 1e-2) || (h != 1e-2 && accept((4.0 * n - previous) / 3.0, 0.6 * h, false));
          if (ok) break;
          if (h != 1e-2 && std::fabs(n - previous) <= 16.0 * std::fabs(l0) * 1.1920929e-7 / h +
                                                           2e-2 * std::max(std::fabs(n), std::fabs(previous)) + 1e-4)
            settled = true;
          previous = n;
        }
        ++fd_checks_;
        if (!ok && !settled && std::isfinite(analytic)) {
          ++unsettled_;
          rough_ = true;
          continue;
        }
        if (!ok) {
          ++reported;
          const std::string detail = slot.name + (k < 2 ? " direction " : " element ") + std::to_string(k) +
                                     ": adgen " + std::to_string(analytic) + ", numeric " + std::to_string(best_n) +
                                     " (error " + std::to_string(best) + ", tolerance " + std::to_string(best_tol) + ")";
          if (!std::isfinite(analytic))
            fail("fd", detail);
          else
            mismatches.push_back(detail);
        }
      }
    }
    // A run with a loss too rough to judge somewhere is rough everywhere: a difference that
    // happened to settle there proves nothing. A wrong gradient shows in the smooth runs (every
    // program runs at two sizes), so rough runs are counted, not failed.
    if (rough_) {
      ++rough_runs_;
      return;
    }
    for (const std::string& d : mismatches) fail("fd", d);
  }

  void check_close(const char* kind, const std::vector<float>& ref, const std::vector<float>& got) {
    if (ref.size() != got.size()) {
      fail(kind, "gradient sizes differ");
      return;
    }
    double scale = 0.0;
    for (float v : ref) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double tol = 1e-3 * std::max(1.0, scale) + 1e-2 * std::fabs(ref[i]);
      if (!(std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol)) {
        fail(kind, "fast-kernel gradient [" + std::to_string(i) + "] " + std::to_string(got[i]) + ", reference " +
                       std::to_string(ref[i]));
        return;
      }
    }
  }

  static bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] == '1';
  }

  int seed_;
  bool selftest_, verbose_;
  int fd_checks_ = 0;
  int ill_conditioned_ = 0;
  int unsettled_ = 0;    // finite-difference checks whose differences never settled
  bool rough_ = false;   // this run had one
  int rough_runs_ = 0;
  int programs_ = 0;
  int failures_ = 0;
  int program_ = -1;
  std::string where_;
};

}  // namespace fuzz
