"""Programs just outside adgen's subset: a random in-subset program (fuzz_program.py) with one
call site routed through a helper that holds exactly one unsupported construct (see
docs/adgen-subset.md and tests/adgen/diag/). Tensor helpers wrap a random module call, float
helpers wrap the loss. Every output is valid C++; adgen must reject it with a located error.
"""

import random

import fuzz_program

# name -> (site kind, helper text); `{f}` is the helper's name, `{p}` the program prefix.
CONSTRUCTS = {
    "while": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = x;
  int k = 0;
  while (k < 2) {
    y = llmcc::gelu(y);
    ++k;
  }
  return y;
}
"""),
    "do-while": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = x;
  int k = 0;
  do {
    y = llmcc::gelu(y);
    ++k;
  } while (k < 2);
  return y;
}
"""),
    "goto": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = llmcc::gelu(x);
  goto done;
done:
  return llmcc::silu(y);
}
"""),
    "switch": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y;
  switch (static_cast<int>(x.dim(0))) {
    case 1:
      y = llmcc::gelu(x);
      break;
    default:
      y = llmcc::silu(x);
  }
  return y;
}
"""),
    "break": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = x;
  for (int k = 0; k < 3; ++k) {
    if (k == 2) break;
    y = llmcc::gelu(y);
  }
  return y;
}
"""),
    "continue": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = x;
  for (int k = 0; k < 3; ++k) {
    if (k == 1) continue;
    y = llmcc::gelu(y);
  }
  return y;
}
"""),
    "early-return": ("tensor", """inline Tensor {f}(const Tensor& x) {
  if (x.dim(0) == 1) return llmcc::gelu(x);
  return llmcc::silu(x);
}
"""),
    "lambda": ("tensor", """inline Tensor {f}(const Tensor& x) {
  auto act = [](const Tensor& t) { return llmcc::gelu(t); };
  return act(x);
}
"""),
    "static-local": ("tensor", """inline Tensor {f}(const Tensor& x) {
  static int calls = 0;
  ++calls;
  return llmcc::gelu(x);
}
"""),
    "conditional-operator": ("tensor", """inline Tensor {f}(const Tensor& x) {
  return x.dim(0) > 1 ? llmcc::gelu(x) : llmcc::silu(x);
}
"""),
    "std-array-of-modules": ("tensor", """struct {p}ALin {
  Tensor w;  // unbound: adgen rejects the program before it could run
  Tensor forward(const Tensor& x) const { return llmcc::linear_nobias(x, w); }
};
struct {p}AStack {
  std::array<{p}ALin, 2> layers;
  Tensor forward(const Tensor& x) const { return layers[1].forward(layers[0].forward(x)); }
};
inline Tensor {f}(const Tensor& x, const {p}AStack& s) { return s.forward(x); }
inline Tensor {f}(const Tensor& x) { return {f}(x, {p}AStack{}); }
"""),
    "virtual-call": ("tensor", """struct {p}VBase {
  virtual Tensor go(const Tensor& x) const { return llmcc::gelu(x); }
  virtual ~{p}VBase() = default;
};
inline Tensor {f}(const Tensor& x) {
  {p}VBase impl;
  const {p}VBase& base = impl;
  return base.go(x);
}
"""),
    "function-pointer": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor (*act)(const Tensor&) = llmcc::gelu;
  return act(x);
}
"""),
    "recursion": ("tensor", """inline Tensor {f}_rec(const Tensor& x, int depth) {
  if (depth == 0) {
    return llmcc::gelu(x);
  } else {
    return {f}_rec(llmcc::silu(x), depth - 1);
  }
}
inline Tensor {f}(const Tensor& x) { return {f}_rec(x, 2); }
"""),
    "template": ("tensor", """template <class T>
T {f}_twice(const T& t) {
  return t + t;
}
inline Tensor {f}(const Tensor& x) { return {f}_twice(x); }
"""),
    "variadic": ("tensor", """inline Tensor {f}_var(const Tensor& x, ...) { return llmcc::gelu(x); }
inline Tensor {f}(const Tensor& x) { return {f}_var(x, 1, 2); }
"""),
    "try": ("tensor", """inline Tensor {f}(const Tensor& x) {
  try {
    return llmcc::gelu(x);
  } catch (...) {
    return llmcc::silu(x);
  }
}
"""),
    "mutation-f32": ("tensor", """inline Tensor {f}(const Tensor& x) {
  Tensor y = llmcc::gelu(x);
  y.f32()[0] = 0.0f;
  return llmcc::silu(y);
}
"""),
    "mutation-ref": ("tensor", """inline void {f}_touch(Tensor& t) { (void)t; }
inline Tensor {f}(const Tensor& x) {
  Tensor y = llmcc::gelu(x);
  {f}_touch(y);
  return llmcc::silu(y);
}
"""),
    "mutation-param": ("tensor", """inline Tensor {f}(Tensor x) {
  x = llmcc::gelu(x);
  return llmcc::silu(x);
}
"""),
    "no-body-no-rule": ("tensor", """Tensor {f}_mystery(const Tensor& x);
inline Tensor {f}(const Tensor& x) { return {f}_mystery(x); }
"""),
    "non-const-member": ("tensor", """struct {p}Mut {
  int calls = 0;
  Tensor go(const Tensor& x) { ++calls; return llmcc::gelu(x); }
};
inline Tensor {f}(const Tensor& x) {
  {p}Mut mut;
  return mut.go(x);
}
"""),
    "double": ("float", """inline float {f}(float v) {
  double d = v;
  d = d * 0.5;
  return static_cast<float>(d);
}
"""),
    "std-max": ("float", """inline float {f}(float v) { return std::max(v, 0.25f); }
"""),
    "std-min": ("float", """inline float {f}(float v) { return std::min(v * 2.0f, v + 1.0f); }
"""),
    "float-while": ("float", """inline float {f}(float v) {
  float r = v;
  while (r > 10.0f) r = r * 0.5f;
  return r;
}
"""),
    "float-early-return": ("float", """inline float {f}(float v) {
  if (v > 5.0f) return v;
  return v * 0.5f;
}
"""),
}

INCLUDES_EXTRA = "#include <algorithm>\n"


def generate(seed, index, plain, includes):
    """Returns (text of o<index>.h, construct name)."""
    rng = random.Random(seed)
    names = sorted(CONSTRUCTS)
    construct = names[rng.randrange(len(names))]
    kind, helper = CONSTRUCTS[construct]
    prefix = "o%d_" % index
    _, probe, _ = fuzz_program.render(seed, index, prefix, None, plain)
    site = rng.randrange(probe.sites[kind])
    fname = prefix + "bad"
    text, _, _ = fuzz_program.render(seed, index, prefix, None, plain, (kind, site, fname))
    helper_text = helper.replace("{f}", fname).replace("{p}", prefix)
    return ("// Generated by gen_programs.py --outside: program %d with one construct outside adgen's subset: %s.\n"
            "\n%s%s\nnamespace fz {\n\nusing llmcc::Tensor;\n\n%s\n%s\n}  // namespace fz\n"
            % (index, construct, INCLUDES_EXTRA, includes, helper_text, text)), construct
