#!/usr/bin/env python3
"""Random nested-differentiation programs for adgen: forward mode (jvp functions adgen defines)
inside losses it differentiates in reverse. Each program has a module tree (a network with a vector
of layers, each layer's member function drawn from the ops that have tangent rules, the norms
among them), a function f(net, x, y, s) -> (N, D), its jvp along every argument, its jvp along x,
that jvp's jvp along x (second order), the jvp along x of the jvp along every argument (an outer
jvp that moves fewer arguments than the inner one), and five entries using them: one on the
first-order tangent, one on the second derivative along the same direction (adgen's Taylor
path), one on a mixed second derivative (the general jvp of a jvp), one on the partial one
with dx as both x directions (which must not take the Taylor path) and one calling two to four
of f and its jvps at the same arguments (calls adgen merges into one). The driver
(nested_check.h) checks the tangents against central differences of the function and the
entries' gradients against central differences of the loss.

  gen_nested.py --seed S --count K --out-dir DIR     writes batch.h and batch_main.cpp
"""
import argparse
import os
import random

SCALAR = [
    "tanhf(x)", "x * tanhf(x)", "expf(-0.5f * x * x)", "sinf(x) + 0.5f * x", "x / (1.0f + x * x)",
    "cosf(0.7f * x) * x", "tanhf(x) * tanhf(x) + 0.25f * x", "sqrtf(1.0f + x * x)", "logf(1.0f + x * x)",
    "powf(1.0f + x * x, 0.75f)",
]


class Gen:
    def __init__(self, rng, k):
        self.rng, self.k = rng, k  # names of program k end in k (one namespace per batch)
        self.scalar = None

    def layer_expr(self):
        """A layer's member function body: x (N, C) -> (N, C); w (C, C), b (C), g (C)."""
        r = self.rng
        lin = r.choice(["llmcc::linear(x, w, b)", "llmcc::linear_nobias(x, w)"])
        act = r.choice(["tanh", "map", "none", "silu", "gelu"])
        if act == "map":
            if self.scalar is None:
                self.scalar = r.choice(SCALAR)
            core = "llmcc::adgen::map_unary<act>(%s, \"act\")" % lin
        elif act in ("tanh", "silu", "gelu"):
            core = "llmcc::%s(%s)" % (act, lin)
        else:
            core = lin
        form = r.choice(["plain", "res", "gate", "rsub", "neg", "gain", "scale", "sub_row", "square", "rms", "ln",
                         "center"])
        return {
            "plain": core,
            "res": "x + %s" % core,
            "gate": "x * %s" % core,
            "rsub": "(1.0f - %s) * x" % core,
            "neg": "-%s + 0.5f * x" % core,
            "gain": "%s * g" % core,
            "scale": "%s * %.2ff" % (core, r.choice([0.5, 1.5, -0.75])),
            "sub_row": "%s - g" % core,
            "square": "%s * %s" % (core, core),
            "rms": "x + llmcc::rmsnorm(%s, g, 1e-2f)" % core,
            "ln": "x + llmcc::layernorm(%s, g, b)" % core,
            "center": "%s - llmcc::row_mean(%s)" % (core, lin),
        }[form]

    def f_body(self):
        r = self.rng
        lines = ["  Tensor h = llmcc::linear(x, net.w_in, net.b_in);  // (N, C)"]
        use_y = r.choice(["add", "mul", "scale"])
        lines.append({
            "add": "  h = h + s * y;",
            "mul": "  h = h * (1.0f - y) + llmcc::scale(y, s);",
            "scale": "  h = llmcc::scale(h, s) + y;",
        }[use_y])
        loop = r.choice(["range", "counted"])
        step = r.choice(["h = l.apply(h);", "h = h + l.apply(h);", "h = l.apply(h) * 0.5f + h;"])
        if loop == "range":
            lines.append("  for (const Layer& l : net.layers) %s" % step)
        else:
            lines.append("  for (std::size_t i = 0; i < net.layers.size(); ++i) {")
            lines.append("    const Layer& l = net.layers[i];")
            lines.append("    " + step)
            lines.append("  }")
        if r.random() < 0.5:
            lines.append("  if (net.squash) h = llmcc::tanh(h);")
        lines.append("  return llmcc::linear_nobias(h, net.w_out);  // (N, D)")
        return "\n".join(lines)

    def loss_first(self):
        return self.rng.choice([
            "llmcc::mse_loss(r.tangent * r.value + r.tangent, t)",
            "llmcc::mse_loss(r.tangent, t) + 0.5f * llmcc::mse_loss(r.value, t)",
            "llmcc::mse_loss(r.tangent - 0.3f * r.value * r.value, t)",
        ])

    def loss_shared(self):
        """Two to four calls of f and its jvps at the same (x, y, s), in a random order: adgen merges
        them into one call (its statements once). Returns the body's statements."""
        r = self.rng
        k = self.k
        calls = {
            "plain": "  const Tensor v = f%d(net, x, y, s);" % k,
            "taylor": "  const llmcc::adgen::Dual2 q = f%d_jxx(net, x, y, s, dx, dx);" % k,
            "jx": "  const Tensor e = f%d_jx(net, x, y, s, ex).tangent;" % k,
            "mixed": "  const Tensor m = f%d_jxx(net, x, y, s, dx, ex).tangent.tangent;" % k,
        }
        terms = {"plain": "v", "taylor": "q.tangent.tangent", "jx": "e", "mixed": "m"}
        kinds = list(calls)
        r.shuffle(kinds)
        kinds = kinds[:r.choice([2, 3, 4])]
        if "mixed" not in kinds:  # the entry reads dx and ex
            kinds += [c for c in ("taylor", "jx") if c not in kinds]
        a, b = terms[kinds[0]], terms[kinds[1]]
        rest = " + ".join(terms[c] for c in kinds[2:])
        lines = [calls[c] for c in kinds]
        loss = "llmcc::mse_loss(%s * %s, t)" % (a, b)
        if rest:
            loss += " + 0.5f * llmcc::mse_loss(%s, t)" % rest
        lines.append("  return %s;" % loss)
        return "\n".join(lines)

    def render(self):
        k = self.k
        layer = self.layer_expr()
        f = self.f_body().replace("const Layer&", "const Layer%d&" % k)
        scalar = ("inline float act%d(float x) { return %s; }\n" % (k, self.scalar)) if self.scalar else ""
        layer = layer.replace("map_unary<act>", "map_unary<act%d>" % k)
        return f"""{scalar}struct Layer{k} {{
  Tensor w, b, g;  // (C, C), (C), (C)
  Tensor apply(const Tensor& x) const {{ return {layer}; }}
}};
struct Net{k} {{
  Tensor w_in, b_in;  // (C, 2), (C)
  std::vector<Layer{k}> layers;
  Tensor w_out;       // (D, C)
  bool squash = false;
}};
// f{k}: x (N, 2), y (N, C), s -> (N, D)
inline Tensor f{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s) {{
{f}
}}
LLMCC_ADGEN_JVP("f{k}")
llmcc::adgen::Dual f{k}_jvp(const Net{k}& net, const Tensor& x, const Tensor& y, float s, const Tensor& dx,
                         const Tensor& dy, float ds);
LLMCC_ADGEN_JVP_WRT("f{k}", "x") llmcc::adgen::Dual f{k}_jx(const Net{k}& net, const Tensor& x, const Tensor& y,
                                                          float s, const Tensor& dx);
LLMCC_ADGEN_JVP_WRT("f{k}_jx", "x")
llmcc::adgen::Dual2 f{k}_jxx(const Net{k}& net, const Tensor& x, const Tensor& y, float s, const Tensor& dx,
                          const Tensor& ex);
// The jvp along x of the jvp along every argument: it moves fewer arguments than the inner jvp.
LLMCC_ADGEN_JVP_WRT("f{k}_jvp", "x")
llmcc::adgen::Dual2 f{k}_jvpx(const Net{k}& net, const Tensor& x, const Tensor& y, float s, const Tensor& dx,
                           const Tensor& dy, float ds, const Tensor& ex);
LLMCC_ADGEN_ENTRY inline float loss_first{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s,
                                          const Tensor& dx, const Tensor& dy, const Tensor& t) {{
  const llmcc::adgen::Dual r = f{k}_jvp(net, x, y, s, dx, dy, 0.5f * s);
  return {self.loss_first()};
}}
LLMCC_ADGEN_ENTRY inline float loss_taylor{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s,
                                           const Tensor& dx, const Tensor& t) {{
  const llmcc::adgen::Dual2 q = f{k}_jxx(net, x, y, s, dx, dx);
  return llmcc::mse_loss(q.tangent.tangent + q.value.value * q.value.tangent, t) +
         0.5f * llmcc::mse_loss(q.tangent.value, t);
}}
LLMCC_ADGEN_ENTRY inline float loss_partial{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s,
                                            const Tensor& dx, const Tensor& dy, const Tensor& t) {{
  const llmcc::adgen::Dual2 q = f{k}_jvpx(net, x, y, s, dx, dy, 0.5f * s, dx);
  return llmcc::mse_loss(q.tangent.tangent + q.value.tangent, t);
}}
LLMCC_ADGEN_ENTRY inline float loss_mixed{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s,
                                          const Tensor& dx, const Tensor& ex, const Tensor& t) {{
  const llmcc::adgen::Dual2 q = f{k}_jxx(net, x, y, s, dx, ex);
  return llmcc::mse_loss(q.tangent.tangent * q.value.value, t);
}}
LLMCC_ADGEN_ENTRY inline float loss_shared{k}(const Net{k}& net, const Tensor& x, const Tensor& y, float s,
                                           const Tensor& dx, const Tensor& ex, const Tensor& t) {{
{self.loss_shared()}
}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args()
    ns = "nz%d" % a.seed
    header = ["// Generated by gen_nested.py --seed %d --count %d." % (a.seed, a.count), "#pragma once",
              "#include <cmath>", "#include <cstddef>", "#include <vector>", '#include "llmcc/adgen.h"',
              '#include "llmcc/ops.h"', "", "namespace %s {" % ns, "using llmcc::Tensor;"]
    for i in range(a.count):
        header.append(Gen(random.Random(a.seed * 1000 + i), i).render())
    header.append("}  // namespace %s" % ns)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "batch.h"), "w") as fh:
        fh.write("\n".join(header))
    main_lines = ['#include "batch.grad.h"', '#include "nested_check.h"', "", "int main() {",
                  "  nested::Report report;"]
    for i in range(a.count):
        main_lines.append("  nested::check_program<%s::Net%d>(report, %d, %d, NESTED_FUNCS(%s, %d));" % (
            ns, i, a.seed, i, ns, i))
    main_lines += ["  return report.finish();", "}", ""]
    with open(os.path.join(a.out_dir, "batch_main.cpp"), "w") as fh:
        fh.write("\n".join(main_lines))


if __name__ == "__main__":
    main()
