// adgen markers and the small run-time support that generated gradient code uses.
//
// Markers (attributes seen only by Clang, so g++ builds the same code warning-free):
//   LLMCC_ADGEN_ENTRY        on a float-valued function: adgen generates `<name>_grad`, which
//                            returns the value and accumulates the gradient with respect to every
//                            module, Tensor and float argument (Tokens, ints, configs get none);
//                            and `<name>_Entry`, a trainer's trait, when the first argument is the
//                            model and the only one that gets an adjoint.
//   LLMCC_ADGEN_WRT("m, x")  with LLMCC_ADGEN_ENTRY: only these arguments get adjoints (the
//                            others are treated as constants and their pullback work is skipped).
//   LLMCC_ADGEN_CHECKPOINT   on a function: every call of it saves only its inputs and re-runs its
//                            forward inside the backward. For one call site only, wrap the call:
//                            `x = llmcc::adgen::checkpoint(b.forward(x));`
//   LLMCC_ADGEN_RULE("add")  on an operator: `a + b` is the rule `add`; the operator's parameters
//                            are matched to the rule's by name.
//   LLMCC_ADGEN_NAME("weight")  on a module field (`Tensor w LLMCC_ADGEN_NAME("weight");`): its part
//                            of parameter names in the generated parameter list and gradient
//                            store ("h.0.ln_1.weight"); by default the field's name.
//   LLMCC_ADGEN_OPTIONAL     on a std::vector<Module> field that holds at most one module (a part
//                            a configuration may leave out, such as an LM head tied to the
//                            embedding): its module's parameters are named without an index
//                            ("output.weight", not "output.0.weight").
// See docs/adgen.md and docs/adgen-subset.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/profile.h"
#include "llmcc/tensor.h"

#if defined(__clang__)
#define LLMCC_ADGEN_ANNOTATE(what) [[clang::annotate(what)]]
#else
#define LLMCC_ADGEN_ANNOTATE(what)
#endif

#define LLMCC_ADGEN_ENTRY LLMCC_ADGEN_ANNOTATE("llmcc.adgen.entry")
#define LLMCC_ADGEN_WRT(names) LLMCC_ADGEN_ANNOTATE("llmcc.adgen.wrt:" names)
#define LLMCC_ADGEN_CHECKPOINT LLMCC_ADGEN_ANNOTATE("llmcc.adgen.checkpoint")
#define LLMCC_ADGEN_RULE(name) LLMCC_ADGEN_ANNOTATE("llmcc.adgen.rule:" name)
#define LLMCC_ADGEN_NAME(name) LLMCC_ADGEN_ANNOTATE("llmcc.adgen.name:" name)
#define LLMCC_ADGEN_OPTIONAL LLMCC_ADGEN_ANNOTATE("llmcc.adgen.optional")
// On a declaration `Dual f_jvp(<f's parameters>, <one tangent per Tensor or float parameter>)`:
// adgen defines it as the forward-mode derivative of `f` (docs/adgen.md, "Forward mode"); `f`
// may itself be a jvp declaration (its jvp then returns a Dual2).
#define LLMCC_ADGEN_JVP(of) LLMCC_ADGEN_ANNOTATE("llmcc.adgen.jvp:" of)
// The same with tangents for the named arguments only (`LLMCC_ADGEN_JVP_WRT("u_jvp", "x")`).
#define LLMCC_ADGEN_JVP_WRT(of, names) LLMCC_ADGEN_ANNOTATE("llmcc.adgen.jvp:" of "|" names)

namespace llmcc::adgen {

// What a jvp function returns: the function's value and its directional derivative along the
// tangents passed in (the same shape as the value). A differentiated function may bind one
// (`const Dual r = u_jvp(net, x, dx);`) and read `r.value` and `r.tangent`.
struct Dual {
  Tensor value;
  Tensor tangent;
};
// What the jvp of a jvp returns: the inner Dual and its directional derivative along the outer
// tangents. For u_jvp(net, x, v) differentiated along x in direction w: value = (u, u'v),
// tangent = (u'w, u''[v, w]); with v = w = e_x, tangent.tangent is u_xx.
struct Dual2 {
  Dual value;
  Dual tangent;
};

// Identity at run time; to adgen, "checkpoint this call": save its inputs only and re-run its
// forward in the backward.
template <class T>
inline T checkpoint(T value) {
  return value;
}

// ---- element-wise ops from scalar functions ----------------------------------------------
// `adgen::map_unary<f>(x, "my_act")` in a differentiated function is an element-wise op built
// from a scalar function `float f(float)`: adgen differentiates f itself (its generated
// `f_grad(float x, float* d_x)`) and calls map_unary_pullback<f_grad> in the backward, so the
// user writes neither a pullback nor a declaration. Scalar loops, not a fast kernel: a starting
// point for a new activation. See docs/adgen.md.
template <float (*F)(float)>
Tensor map_unary(const Tensor& x, const char* op) {
  LLMCC_PROFILE("map_unary.fwd");
  Tensor out = new_tensor(x.shape(), op);  // the shape of x
  const float* in = x.f32();
  float* o = out.f32();
  for (std::int64_t i = 0; i < x.numel(); ++i) o[i] = F(in[i]);
  return out;
}
// d_x += d_out * f'(x), with f' from the generated `f_grad`. Also usable in a hand-written rule's
// pullback (`map_unary_pullback<f_grad>(x, d_out, d_x)`).
template <float (*FGrad)(float, float*)>
void map_unary_pullback(const Tensor& x, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("map_unary.bwd");
  if (d_x == nullptr) return;
  const float* in = x.f32();
  const float* g = d_out.f32();
  float* d = d_x->f32();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    float slope = 0.0f;
    FGrad(in[i], &slope);
    d[i] += g[i] * slope;
  }
}
// The rule contract's form (primal arguments, output, d_out, d_x), which generated code calls.
template <float (*FGrad)(float, float*)>
void map_unary_pullback(const Tensor& x, const char* /*op*/, const Tensor& /*out*/, const Tensor& d_out, Tensor* d_x) {
  map_unary_pullback<FGrad>(x, d_out, d_x);
}

// Scalar forms of the library's activations, for adgen's forward mode: the tangent of silu(x) is
// x' * map_unary<f_slope>(x), with the slope (and, nested, its own slope) generated from these.
inline float silu_scalar(float x) { return x / (1.0f + expf(-x)); }
inline float gelu_scalar(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);  // sqrt(2/pi) (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + tanhf(u));
}
// Whether a and b are the same tensor (storage and shape): a jvp of a jvp called with the same
// direction twice takes its Taylor plan.
inline bool same_tensor(const Tensor& a, const Tensor& b) { return a.raw() == b.raw() && a.shape() == b.shape(); }
// 1 / sqrt(v): the norms' tangents apply it to each row's mean square plus eps.
inline float rsqrt_scalar(float v) { return 1.0f / sqrtf(v); }

// ---- used by generated code --------------------------------------------------------------

// The next per-iteration record of a loop: records kept from an earlier step are reused with
// their capacity (the loop then resizes to the count), so a steady-state step allocates nothing.
template <class Record>
Record& next_record(std::vector<Record>& records, std::size_t& count) {
  if (count == records.size()) records.emplace_back();
  return records[count++];
}

// ---- scratch memory: checkpointing and adjoint liveness ------------------------------------
namespace detail {
inline std::size_t& scratch_depth() {
  thread_local std::size_t depth = 0;
  return depth;
}
// One scratch arena per nesting depth (a callee's backward inside a callee's backward, a
// checkpointed call inside a checkpointed call), as large as the arena it stands in for (address
// space; pages are touched only when used).
inline std::vector<std::unique_ptr<Arena>>& scratch_arenas() {
  thread_local std::vector<std::unique_ptr<Arena>> arenas;
  return arenas;
}
inline Arena& scratch_arena(std::size_t depth, std::size_t capacity) {
  std::vector<std::unique_ptr<Arena>>& arenas = scratch_arenas();
  if (arenas.size() <= depth) arenas.resize(depth + 1);
  if (!arenas[depth] || arenas[depth]->capacity() < capacity) arenas[depth] = std::make_unique<Arena>(capacity);
  return *arenas[depth];
}
inline bool poison_default() {
#ifndef NDEBUG
  return true;
#else
  const char* env = std::getenv("LLMCC_ADGEN_POISON");
  return env != nullptr && env[0] == '1';
#endif
}
inline bool& poison_flag() {
  static bool on = poison_default();
  return on;
}
}  // namespace detail

// Poisoning: when on, scratch memory is filled with NaN (0xFF bytes) as it is released, so an
// adjoint handle that outlived its memory reads NaN at once instead of values that look right.
// On by default in builds without NDEBUG and with LLMCC_ADGEN_POISON=1; tests turn it on.
inline void set_poison_scratch(bool on) { detail::poison_flag() = on; }
inline bool poison_scratch() { return detail::poison_flag(); }

// Scratch memory: while it lives, ops allocate from a scratch arena that is emptied when it
// ends. Generated backwards run each callee's backward in one, so its internal adjoints are
// freed when it returns (the backward's peak is the saved activations plus one call chain's
// working set); a checkpointed call also runs its forward (and re-run) in one.
class Scratch {
 public:
  Scratch()
      : arena_(detail::scratch_arena(detail::scratch_depth()++, current_arena("adgen checkpoint").capacity())),
        scope_(arena_) {}
  ~Scratch() {
    if (poison_scratch())
      arena_.poison_and_reset();
    else
      arena_.reset();
    --detail::scratch_depth();
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

 private:
  Arena& arena_;
  ArenaScope scope_;
};

// How long the memory at p lives: 0 outside the scratch arenas (the step arena, the user's
// memory), else 1 + the nesting depth of the scratch arena holding it. A deeper scratch arena is
// released sooner: memory of level a outlives memory of level b when a <= b.
inline std::size_t scratch_level(const void* p) {
  const auto& arenas = detail::scratch_arenas();
  for (std::size_t i = 0; i < arenas.size(); ++i)
    if (arenas[i] && arenas[i]->owns(p)) return i + 1;
  return 0;
}

// Whether t's storage lies in the innermost live scratch arena or a deeper one: memory released
// when the function whose backward is running now returns.
inline bool in_current_scratch(const Tensor& t) {
  const std::size_t depth = detail::scratch_depth();
  return depth > 0 && scratch_level(t.address()) >= depth;
}

// Memory the scratch arenas of this thread have used at most (one per nesting depth, all of
// which can be live at once): add it to the step arena's high-water mark for the true peak.
inline std::size_t scratch_high_water() {
  std::size_t bytes = 0;
  for (const auto& a : detail::scratch_arenas())
    if (a) bytes += a->high_water();
  return bytes;
}
// Frees this thread's scratch arenas (and forgets their high-water marks).
inline void release_scratch() { detail::scratch_arenas().clear(); }

// The one copy checkpointing makes: a checkpointed call's output, moved out of scratch memory.
inline Tensor copy_to(Arena& arena, const Tensor& t) {
  Tensor out = arena.tensor(t.shape(), "adgen checkpoint output", t.dtype());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

// The adjoint `*p` ready for a rule's pullback (which accumulates): allocated on the first
// contribution, with its zeros pending (Tensor::mark_zero_pending), so a pullback that can
// overwrite it skips the zero fill and the read of the zeros; any other fills them when it
// reads the data. Null stays null (inactive).
inline Tensor* acc(Tensor* p, const Tensor& like) {
  if (p != nullptr && !p->defined()) {
    *p = new_tensor(like.shape(), "adgen adjoint");
    p->mark_zero_pending();
  }
  return p;
}

namespace detail {
// adj += d into adj's own storage: written when its zeros are pending, else added.
inline void add_into(Tensor& adj, const Tensor& d) {
  if (adj.take_zero_pending()) {
    std::memcpy(adj.raw(), d.raw(), d.nbytes());
    return;
  }
  float* a = adj.f32();
  const float* g = d.f32();
  const std::int64_t n = adj.numel();
  for (std::int64_t i = 0; i < n; ++i) a[i] += g[i];
}
}  // namespace detail

// adj += d for a whole-tensor pass-through into an adjoint of the function running now (a local
// or temporary's `_d_y`). Every such adjoint lives in this function's arena, and d (another of
// its adjoints, or d_out from the caller) lives at least as long, so the first contribution takes
// over d's buffer without touching data (d's holder is dead after this point by construction of
// the reverse sweep); later ones add element-wise. Pending zeros add nothing: a pending d is
// skipped (or taken over, still pending, by an empty adj), and a pending adj is replaced by d.
inline void accumulate(Tensor& adj, const Tensor& d) {
  if (!d.defined()) return;
  if (!adj.defined() || adj.zero_pending()) {
    adj = d;
    return;
  }
  if (d.zero_pending()) return;
  detail::add_into(adj, d);
}
inline void accumulate(Tensor* adj, const Tensor& d) {
  if (adj != nullptr) accumulate(*adj, d);
}

// adj += d for an adjoint a caller owns: a tensor argument's `d_x` reached by a pass-through
// (`return x;`, `Tensor h = x; ... return h;`) or a parameter gradient. The invariant: no adjoint
// handle outlives the memory it points into. Its owner (the caller, or a caller further up that
// passed its pointer down) allocated adj in its own arena before the call; d may live in shorter
// lived scratch memory (this call's, or an intermediate caller's). So adj takes over d's buffer
// only when its zeros are pending and d's memory lives at least as long as adj's (d_out passed
// straight through); otherwise d is copied into adj's storage (pending zeros) or added to it. An
// entry's argument the user left empty takes d over: it then lives in the user's arena, like
// every adjoint `acc` allocates there.
inline void accumulate_to_caller(Tensor* adj, const Tensor& d) {
  if (adj == nullptr || !d.defined()) return;
  if (!adj->defined()) {
    LLMCC_ASSERT(!in_current_scratch(d), "adgen: a callee's argument adjoint was not allocated by its caller");
    *adj = d;
    return;
  }
  if (d.zero_pending()) return;
  if (adj->zero_pending() && scratch_level(d.address()) <= scratch_level(adj->address())) {
    *adj = d;
    return;
  }
  detail::add_into(*adj, d);
}

// ---- gradient-final notifications ----------------------------------------------------------
// A generated backward says when a parameter's gradient is final, so a data-parallel trainer can
// start reducing it while the rest of the backward runs. The entry's `_grad` (and its Entry
// trait's `bwd`) calls listener->grad_final(g) exactly once per parameter gradient g of the gradient
// mirror it was given, as soon as the backward adds nothing more to g: at that moment g holds its
// value for this call. Parameters that get no contribution are notified at the end of the backward
// of the function holding them. See docs/adgen.md ("Gradient-final notifications").
class GradFinalListener {
 public:
  // Called once per parameter gradient per entry `_grad` call, when the running backward will add
  // nothing more to `grad` (the tensor bound in the gradient mirror, i.e. inside the ParameterStore).
  virtual void grad_final(const Tensor& grad) = 0;

 protected:
  ~GradFinalListener() = default;
};

namespace detail {
inline GradFinalListener*& grad_final_listener() {
  thread_local GradFinalListener* listener = nullptr;
  return listener;
}
}  // namespace detail

// Sets the calling thread's listener for the scope's lifetime (restores the previous one after).
// Null turns notifications off for the scope.
class GradFinalScope {
 public:
  explicit GradFinalScope(GradFinalListener* listener) : previous_(detail::grad_final_listener()) {
    detail::grad_final_listener() = listener;
  }
  ~GradFinalScope() { detail::grad_final_listener() = previous_; }
  GradFinalScope(const GradFinalScope&) = delete;
  GradFinalScope& operator=(const GradFinalScope&) = delete;

 private:
  GradFinalListener* previous_;
};

// Called by generated backwards: `grad` (a parameter gradient, a generated mirror or a vector of
// mirrors) is final. Without a listener this is one thread-local load and a branch.
inline void grad_final(const Tensor& grad) {
  if (GradFinalListener* listener = detail::grad_final_listener()) listener->grad_final(grad);
}
template <class Grad>
void grad_final(const Grad& grad) {
  if (GradFinalListener* listener = detail::grad_final_listener())
    grad.for_each_grad([listener](const Tensor& g) { listener->grad_final(g); });
}
template <class Grad>
void grad_final(const std::vector<Grad>& grads) {
  if (detail::grad_final_listener() == nullptr) return;
  for (const Grad& g : grads) grad_final(g);
}

// GradOf<Module> / grad_t<Module> (the generated mirror, specialised by generated code) are
// declared in llmcc/parameters.h, beside llmcc::for_each_parameter, which uses them.

// A gradient mirror whose tensors live in one zeroed contiguous buffer laid out like the
// model's parameters (llmcc::for_each_parameter's order and names: the model's member list when
// it has one, else the generated one). zero() is one memset; parameter gradients accumulate
// across calls.
template <class Grad>
struct GradBuffer {
  Grad grad;
  ParameterStore store;
  void zero() { store.zero(); }
};

template <class Module>
GradBuffer<grad_t<Module>> make_grad(const Module& m) {
  GradBuffer<grad_t<Module>> out;
  out.grad.shape_like(m);
  struct Pair {
    std::string name;
    const Tensor* param;
    Tensor* grad;
    bool placed;
  };
  std::vector<Pair> pairs;
  out.grad.for_each_pair(
      m, "", [&](const std::string& name, const Tensor& p, Tensor& g) { pairs.push_back({name, &p, &g, false}); });
  std::vector<std::size_t> order;
  // The parameter list's names and order, so the gradient store has the parameter store's
  // layout and names (the optimizer and clipping check both). A member list may differ from
  // the field order and names; the generated list gives for_each_pair's.
  llmcc::for_each_parameter(m, [&](const std::string& name, const Tensor& t) {
    for (std::size_t i = 0; i < pairs.size(); ++i)
      if (!pairs[i].placed && pairs[i].param == &t) {
        pairs[i].placed = true;
        pairs[i].name = name;
        order.push_back(i);
        break;
      }
  });
  for (std::size_t i = 0; i < pairs.size(); ++i)
    if (!pairs[i].placed) order.push_back(i);
  std::vector<ParameterInfo> infos;
  for (std::size_t i : order) infos.push_back({pairs[i].name, pairs[i].param->shape()});
  out.store = ParameterStore(infos);
  for (std::size_t k = 0; k < order.size(); ++k)
    *pairs[order[k]].grad = Tensor(out.store.tensor(k).raw(), pairs[order[k]].param->shape());
  return out;
}

// An entry's checks of its gradient arguments (`loss_grad(m, x, d_m, d_x)`): every parameter
// gradient bound to storage with its parameter's shape (as make_grad binds them), and a tensor
// argument's adjoint either empty (the call allocates it) or of the argument's shape.
template <class Grad, class Module>
void check_grad(const Grad& grad, const Module& m, const char* fn, const char* arg) {
  if (grad.bound_like(m)) return;
  std::string first;
  const_cast<Grad&>(grad).for_each_pair(m, "", [&](const std::string& name, const Tensor& p, Tensor& g) {
    if (!first.empty()) return;
    if (!g.defined())
      first = "'" + name + "' is not bound to storage";
    else if (g.shape() != p.shape())
      first = "'" + name + "' has shape " + g.shape().str() + ", its parameter " + p.shape().str();
  });
  if (first.empty()) first = "its module vectors have other lengths than the model's";
  fail(fn, std::string(arg) + ": the gradient " + first +
               "; make it with llmcc::adgen::make_grad(model) (bound to one zeroed buffer)");
}
inline void check_adjoint(const Tensor* adj, const Tensor& x, const char* fn, const char* arg) {
  if (adj != nullptr && adj->defined() && adj->shape() != x.shape())
    fail(fn, std::string(arg) + " has shape " + adj->shape().str() + ", expected " + x.shape().str() +
                 " (the argument's) or an empty Tensor");
}

// Bytes of distinct tensor buffers a Saved struct keeps for the backward (each buffer once).
template <class Saved>
std::size_t saved_bytes(const Saved& s) {
  std::unordered_set<const void*> seen;
  std::size_t bytes = 0;
  s.visit([&](const Tensor& t) {
    if (t.defined() && seen.insert(t.raw()).second) bytes += t.nbytes();
  });
  return bytes;
}

}  // namespace llmcc::adgen
