"""The adgen fuzzer's program model: one random program inside adgen's subset, rendered as two
variants (plain and checkpointed) plus the driver code that builds and checks it.

A program is a tree of modules (structs with Tensor fields, nested modules, std::vector of
modules, config ints/bools/floats), each with one const member function mapping activations
(B, T, C) or (N, C) to the same shape, some taking a float argument. The root adds an input stage
(a tensor x, token embeddings, or both), a head to Vp logits (its own linear, or tied to the token
embedding) and the entry `<prefix>loss`, cross_entropy (plus, in some programs, mse_loss terms on
the logits, against a regression-target input y of their shape) followed by float arithmetic.

All sizes are run-time configuration: parameter shapes and config fields are set by the driver's
build function from a fuzz::Dims drawn per run (fuzz_check.h), so one program runs at many sizes.

Two random streams: `rng` draws the structure (identical for both variants), `ck` only the
checkpoint decisions of the checkpointed variant, so the variants differ in nothing else.
"""

import random
import re

from fuzz_names import Scope


class Mod:
    """A module type: fields, its member function text and how callers call it."""

    def __init__(self, key):
        self.key = key            # type name without the variant prefix
        self.fields = []          # (kind, name, info): tensor (shape), child/vec (Use[, count]), int/bool (expr), float
        self.method = "forward"
        self.takes_s = False
        self.text = ""            # member function(s), rendered

    def field_names(self):
        return [f[1] for f in self.fields]


class Use:
    """A module used as a field: the module and the substitution of its shape placeholders."""

    def __init__(self, mod, subst=None):
        self.mod = mod
        self.subst = subst or {}


METHODS = ["forward", "run", "apply", "step", "call"]


class Gen:
    def __init__(self, rng, ck, prefix, plain, heads, three_d, inject=None):
        self.inject = inject        # (kind "tensor"/"float", site index, helper name): fuzz_outside.py
        self.sites = {"tensor": 0, "float": 0}
        self.rng = rng
        self.ck = ck
        self.prefix = prefix
        self.plain = plain
        self.heads = heads          # attention/rope allowed (C = NH * HS, activations 3-D)
        self.three_d = three_d
        self.decls = []             # struct and function texts, callees first
        self.counter = 0
        self.checkpoints = 0
        self.lins = {}
        self.features = []

    # ---- helpers ---------------------------------------------------------------------------
    def key(self, base):
        self.counter += 1
        return "%s%d" % (base, self.counter)

    def tname(self, mod):
        return self.prefix + mod.key

    def injected(self, kind, expr):
        """Call site `kind` number n; the outside-the-subset generator wraps one in its helper."""
        if self.inject is not None and self.inject[0] == kind and self.inject[1] == self.sites[kind]:
            expr = "%s(%s)" % (self.inject[2], expr)
        self.sites[kind] += 1
        return expr

    def wrap(self, expr):
        """A call of a differentiated function; the checkpointed variant wraps some."""
        expr = self.injected("tensor", expr)
        if self.ck is not None and self.ck.random() < 0.2:
            self.checkpoints += 1
            return "llmcc::adgen::checkpoint(%s)" % expr
        return expr

    def fattr(self):
        if self.ck is not None and self.ck.random() < 0.12:
            self.checkpoints += 1
            return "LLMCC_ADGEN_CHECKPOINT "
        return ""

    def call(self, obj, use, x, s):
        mod = use.mod
        args = x + (", " + s if mod.takes_s else "")
        return self.wrap("%s.%s(%s)" % (obj, mod.method, args))

    def sig(self, mod, sc):
        """Declares mod's member function parameters in scope sc: returns (x, s, signature)."""
        x = sc.pick("x")
        s = sc.pick("s" if self.plain else "_s") if mod.takes_s else None
        params = "const Tensor& %s" % x + (", float %s" % s if s else "")
        return x, s, "%sTensor %s(%s) const" % (self.fattr(), mod.method, params)

    def emit_struct(self, mod, body):
        lines = ["struct %s {" % self.tname(mod)]
        for kind, name, info in mod.fields:
            if kind == "tensor":
                lines.append("  Tensor %s;  // %s" % (name, info))
            elif kind == "child":
                lines.append("  %s %s;" % (self.tname(info.mod), name))
            elif kind == "vec":
                lines.append("  std::vector<%s> %s;" % (self.tname(info[0].mod), name))
            elif kind == "int":
                lines.append("  int %s = 0;  // config" % name)
            elif kind == "bool":
                lines.append("  bool %s = false;  // config" % name)
            elif kind == "float":
                lines.append("  float %s = %s;  // config" % (name, info))
            elif kind == "dropout":
                lines.append("  llmcc::LoraDropout %s{%s};  // config" % (name, info))
        lines.append(body)
        lines.append("};\n")
        mod.text = "\n".join(lines)
        self.decls.append(mod.text)

    def new_mod(self, base, sc):
        mod = Mod(self.key(base))
        mod.method = self.rng.choice(METHODS)
        sc.taken.append(mod.method)
        return mod

    # ---- leaves ----------------------------------------------------------------------------
    def lin(self, kind):
        """The program's shared linear module of one kind: linear, linear_nobias or lora_linear
        (a frozen-looking weight with a rank-2 adapter, half the time with a bias, half the time
        with dropout on the adapter's input: a fixed seed makes its mask a constant; every tensor
        is a parameter here). Placeholders $OC, $IC for its shape."""
        if kind not in self.lins:
            sc = Scope(self.rng, self.plain)
            mod = self.new_mod({"linear": "Lin", "linear_nobias": "LinNb", "lora_linear": "LinLora"}[kind], sc)
            w = sc.pick("w")
            mod.fields.append(("tensor", w, "(OC, IC)"))
            if kind == "linear":
                b = sc.pick("b")
                mod.fields.append(("tensor", b, "(OC)"))
            elif kind == "lora_linear":
                a, b, scale = sc.pick("a"), sc.pick("b"), sc.pick("s")
                mod.fields += [("tensor", a, "(2, IC)"), ("tensor", b, "(OC, 2)"), ("float", scale, "0.75f")]
                drop = lb = None
                if self.rng.random() < 0.5:
                    lb = sc.pick("bias")
                    mod.fields.append(("tensor", lb, "(OC)"))
                if self.rng.random() < 0.5 or lb:
                    drop = sc.pick("drop")
                    p = "0.3f" if self.rng.random() < 0.5 or not lb else "0.0f"
                    mod.fields.append(("dropout", drop, "%s, %d" % (p, self.rng.randrange(1 << 30))))
            x, _, sig = self.sig(mod, sc)
            if kind == "linear":
                call = "llmcc::linear(%s, %s, %s)" % (x, w, b)
            elif kind == "linear_nobias":
                call = "llmcc::linear_nobias(%s, %s)" % (x, w)
            else:
                wb = "%s, %s" % (w, lb) if lb else w
                call = "llmcc::lora_linear(%s, %s, %s, %s, %s%s)" % (x, wb, a, b, scale, ", " + drop if drop else "")
            self.emit_struct(mod, "  %s { return %s; }" % (sig, call))
            self.lins[kind] = mod
        return self.lins[kind]

    def lin_use(self, oc, ic):
        u = self.rng.random()
        self.features.append("linear" if u < 0.5 else "linear_nobias" if u < 0.85 else "lora_linear")
        return Use(self.lin(self.features[-1]), {"OC": oc, "IC": ic})

    def mlp(self, sc):
        mod = self.new_mod("Mlp", sc)
        fc, proj = sc.pick("f"), sc.pick("out")
        fcu, proju = self.lin_use("d.H", "d.C"), self.lin_use("d.C", "d.H")
        mod.fields += [("child", fc, fcu), ("child", proj, proju)]
        x, _, sig = self.sig(mod, sc)
        style = self.rng.randrange(3)
        act = self.rng.choice(["gelu", "silu", "map_unary"])
        self.features.append(act)
        if act == "map_unary":  # an element-wise op from a scalar function adgen differentiates
            act = "adgen::map_unary<%s>" % self.scalar_fn()
            act_call = lambda e: "llmcc::%s(%s, \"act\")" % (act, e)  # noqa: E731
        else:
            act_call = lambda e: "llmcc::%s(%s)" % (act, e)  # noqa: E731
        if style == 0:
            body = "return %s;" % self.call(proj, proju, act_call(self.call(fc, fcu, x, None)), None)
        elif style == 1:
            u = sc.pick("t0")
            body = "Tensor %s = %s;\n    %s = %s;\n    return %s;" % (
                u, self.call(fc, fcu, x, None), u, act_call(u), self.call(proj, proju, u, None))
        else:
            up = sc.pick("grad")
            upu = self.lin_use("d.H", "d.C")
            mod.fields.append(("child", up, upu))
            g = sc.pick("_g")
            if self.rng.random() < 0.5:
                self.features.append("mul")
                body = "Tensor %s = %s;\n    %s = %s * %s;\n    return %s;" % (
                    g, act_call(self.call(fc, fcu, x, None)), g, g, self.call(up, upu, x, None),
                    self.call(proj, proju, g, None))
            else:  # the gated activation as one op: silu(fc x) * up x
                self.features.append("swiglu")
                body = "Tensor %s = llmcc::swiglu(%s, %s);\n    return %s;" % (
                    g, self.call(fc, fcu, x, None), self.call(up, upu, x, None), self.call(proj, proju, g, None))
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, body))
        return Use(mod)

    def norm(self, sc):
        mod = self.new_mod("Norm", sc)
        w = sc.pick("w")
        mod.fields.append(("tensor", w, "(d.C)"))
        if self.rng.random() < 0.5:
            b = sc.pick("b")
            mod.fields.append(("tensor", b, "(d.C)"))
            x, _, sig = self.sig(mod, sc)
            self.features.append("layernorm")
            body = "return llmcc::layernorm(%s, %s, %s);" % (x, w, b)
        else:
            eps = sc.pick("n")
            mod.fields.append(("float", eps, "1e-5f"))
            x, _, sig = self.sig(mod, sc)
            self.features.append("rmsnorm")
            body = "return llmcc::rmsnorm(%s, %s, %s);" % (x, w, eps)
        self.emit_struct(mod, "  %s { %s }" % (sig, body))
        return Use(mod)

    def tied(self, sc):
        """One parameter used twice (weight tying inside a block)."""
        mod = self.new_mod("Tied", sc)
        w = sc.pick("w")
        mod.fields.append(("tensor", w, "(d.C, d.C)"))
        x, _, sig = self.sig(mod, sc)
        self.features.append("tied")
        if self.rng.random() < 0.5:
            body = "return llmcc::linear_nobias(llmcc::gelu(llmcc::linear_nobias(%s, %s)), %s);" % (x, w, w)
        else:
            u = sc.pick("y")
            body = "Tensor %s = llmcc::linear_nobias(%s, %s);\n    return %s + llmcc::linear_nobias(%s, %s);" % (
                u, x, w, u, u, w)
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, body))
        return Use(mod)

    def attn(self, sc):
        mod = self.new_mod("Attn", sc)
        nh, nkv = sc.pick("n"), sc.pick("h")
        mod.fields += [("int", nh, "d.NH"), ("int", nkv, "d.NKV")]
        o = sc.pick("out")
        ou = self.lin_use("d.C", "d.C")
        mod.fields.append(("child", o, ou))
        fused = self.rng.random() < 0.35
        if fused:
            qkv = sc.pick("store")
            qkvu = self.lin_use("(d.NH + 2 * d.NKV) * d.HS", "d.C")
            mod.fields.append(("child", qkv, qkvu))
            x, _, sig = self.sig(mod, sc)
            a = sc.pick("y")
            self.features.append("attention_qkv")
            body = "Tensor %s = llmcc::attention_qkv(%s, %s, %s);\n    return %s;" % (
                a, self.call(qkv, qkvu, x, None), nh, nkv, self.call(o, ou, a, None))
        else:
            q, k, v = sc.pick("w"), sc.pick("b"), sc.pick("saved")
            qu, ku, vu = self.lin_use("d.C", "d.C"), self.lin_use("d.NKV * d.HS", "d.C"), self.lin_use(
                "d.NKV * d.HS", "d.C")
            mod.fields += [("child", q, qu), ("child", k, ku), ("child", v, vu)]
            rope = self.rng.random() < 0.5
            if rope:
                theta = sc.pick("f")
                mod.fields.append(("float", theta, "100.0f"))
            x, _, sig = self.sig(mod, sc)
            tq, tk = sc.pick("t0"), sc.pick("t1")
            lines = ["Tensor %s = %s;" % (tq, self.call(q, qu, x, None)),
                     "Tensor %s = %s;" % (tk, self.call(k, ku, x, None))]
            if rope:
                self.features.append("rope")
                lines += ["%s = llmcc::rope(%s, %s, %s, 0);" % (tq, tq, nh, theta),
                          "%s = llmcc::rope(%s, %s, %s, 0);" % (tk, tk, nkv, theta)]
            self.features.append("attention")
            lines.append("return %s;" % self.call(
                o, ou, "llmcc::attention(%s, %s, %s, %s, %s)" % (tq, tk, self.call(v, vu, x, None), nh, nkv), None))
            body = "\n    ".join(lines)
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, body))
        return Use(mod)

    def battn(self, sc):
        """Non-causal attention: q, k, v from three linears, one tensor for all three, or k = v."""
        mod = self.new_mod("BiAttn", sc)
        nh = sc.pick("n")
        mod.fields.append(("int", nh, self.rng.choice(["d.NH", "d.NH", "d.NKV"])))  # both divide C
        style = self.rng.randrange(4)
        # An output linear, always where nothing else holds a parameter: a struct without tensors
        # is configuration, not a module (docs/adgen-subset.md).
        out = style == 2 or self.rng.random() < 0.6
        if out:
            o = sc.pick("out")
            ou = self.lin_use("d.C", "d.C")
            mod.fields.append(("child", o, ou))
        lins = []
        for prefer in ("w", "b", "saved")[:{0: 3, 1: 1, 2: 0, 3: 1}[style]]:
            name = sc.pick(prefer)
            use = self.lin_use("d.C", "d.C")
            mod.fields.append(("child", name, use))
            lins.append((name, use))
        x, _, sig = self.sig(mod, sc)
        self.features.append("bidirectional_attention%d" % style)
        lines = []
        if style == 0:  # q, k, v from three linears
            qkv = [sc.pick(p) for p in ("t0", "t1", "y")]
            lines += ["Tensor %s = %s;" % (t, self.call(n, u, x, None)) for t, (n, u) in zip(qkv, lins)]
        elif style == 1:  # one tensor for all three
            u = sc.pick("t0")
            lines.append("Tensor %s = %s;" % (u, self.call(lins[0][0], lins[0][1], x, None)))
            qkv = [u, u, u]
        elif style == 2:  # the argument itself for all three
            qkv = [x, x, x]
        else:  # q from a linear, k = v = the argument
            u = sc.pick("t1")
            lines.append("Tensor %s = %s;" % (u, self.call(lins[0][0], lins[0][1], x, None)))
            qkv = [u, x, x]
        a = "llmcc::bidirectional_attention(%s, %s, %s, %s)" % (qkv[0], qkv[1], qkv[2], nh)
        lines.append("return %s;" % (self.call(o, ou, a, None) if out else a))
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, "\n    ".join(lines)))
        return Use(mod)

    def last_dim(self, x):
        return "%s.dim(%s)" % (x, self.rng.choice(["-1", "2" if self.three_d else "1"]))

    def shape_of(self, x):
        """x's shape as a view argument: x.shape() or spelled from its dims."""
        if self.rng.random() < 0.5:
            return "%s.shape()" % x
        return "llmcc::Shape{%s}" % ", ".join("%s.dim(%d)" % (x, k) for k in range(3 if self.three_d else 2))

    def pslice(self, sc):
        """Slices of a (K, C, C) parameter as weights: view of row k in a counted loop."""
        mod = self.new_mod("Rows", sc)
        w = sc.pick("w")
        mod.fields.append(("tensor", w, "(d.K, d.C, d.C)"))
        n = sc.pick("n")
        mod.fields.append(("int", n, "d.K"))
        x, _, sig = self.sig(mod, sc)
        c, y, i = sc.pick("_c"), sc.pick("y"), sc.pick("i")
        cexpr = self.last_dim(x) if self.rng.random() < 0.6 else "%s.dim(1)" % w
        row = self.rng.choice(["%s" % i, "(%s - 1 - %s)" % (n, i)])
        view = "llmcc::view(%s, llmcc::Shape{%s, %s}, %s * %s * %s)" % (w, c, c, row, c, c)
        style = self.rng.randrange(3)
        self.features.append("view_param%d" % style)
        lines = ["const std::int64_t %s = %s;" % (c, cexpr), "Tensor %s = %s;" % (y, x)]
        if style == 0:
            lines.append("for (int %s = 0; %s < %s; ++%s) %s = llmcc::linear_nobias(%s, %s);" % (
                i, i, n, i, y, y, view))
        elif style == 1:  # a residual step
            lines.append("for (int %s = 0; %s < %s; ++%s) %s = %s + llmcc::linear_nobias(%s, %s);" % (
                i, i, n, i, y, y, y, view))
        else:  # the slice in a local first
            r = sc.pick("t0")
            lines += ["for (int %s = 0; %s < %s; ++%s) {" % (i, i, n, i), "  Tensor %s = %s;" % (r, view),
                      "  %s = llmcc::gelu(llmcc::linear_nobias(%s, %s));" % (y, y, r), "}"]
        lines.append("return %s;" % y)
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, "\n    ".join(lines)))
        return Use(mod)

    def affine(self, sc):
        """Broadcast operands: a gain and a bias per channel (row vectors), a learnable scalar (a
        one-element parameter), a gate per row (a column vector from a (1, C) linear)."""
        mod = self.new_mod("Affine", sc)
        style = self.rng.randrange(4)
        self.features.append("affine%d" % style)
        if style in (0, 3):
            g, b = sc.pick("w"), sc.pick("b")
            mod.fields += [("tensor", g, "(d.C)"), ("tensor", b, "(d.C)")]
        elif style == 1:
            a, b = sc.pick("w"), sc.pick("b")
            mod.fields += [("tensor", a, "(1)"), ("tensor", b, "(1, d.C)")]
        else:
            w = sc.pick("w")
            mod.fields.append(("tensor", w, "(1, d.C)"))
        x, _, sig = self.sig(mod, sc)
        if style == 0:
            body = "return %s * %s + %s;" % (x, g, b)
        elif style == 1:
            body = "return %s * %s + %s;" % (a, x, b)
        elif style == 2:
            gate = sc.pick("_g")
            body = "Tensor %s = llmcc::linear_nobias(%s, %s);\n    return %s * %s - %s;" % (gate, x, w, x, gate, gate)
        else:
            body = "return %s - %s * %s;" % (x, b, g)
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, body))
        return Use(mod)

    def leaf(self, sc):
        kinds = ["mlp", "mlp", "norm", "tied", "lin", "pslice", "affine"] + (
            ["attn", "attn", "battn", "battn"] if self.heads else [])
        kind = self.rng.choice(kinds)
        if kind == "mlp":
            return self.mlp(sc)
        if kind == "norm":
            return self.norm(sc)
        if kind == "tied":
            return self.tied(sc)
        if kind == "attn":
            return self.attn(sc)
        if kind == "battn":
            return self.battn(sc)
        if kind == "pslice":
            return self.pslice(sc)
        if kind == "affine":
            return self.affine(sc)
        return self.lin_use("d.C", "d.C")

    # ---- composites --------------------------------------------------------------------------
    def block(self, depth):
        """A module mapping activations to activations."""
        sc = Scope(self.rng, self.plain)
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(sc)
        kind = self.rng.choice(["res", "res", "stepper", "stack", "stack", "branch", "seq", "scaled", "fanout",
                                "free", "pool", "pool", "chunks", "reshape", "pen"])
        return getattr(self, "c_" + kind)(depth, sc)

    def children(self, mod, sc, depth, count, prefer=("b", "h", "self", "m")):
        uses = []
        for k in range(count):
            use = self.block(depth - 1)
            name = sc.pick(prefer[k % len(prefer)])
            mod.fields.append(("child", name, use))
            uses.append((name, use))
        mod.takes_s = mod.takes_s or any(u.mod.takes_s for _, u in uses)
        return uses

    def finish(self, mod, sig, lines):
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, "\n    ".join(lines)))
        return Use(mod)

    def c_res(self, depth, sc):
        mod = self.new_mod("Res", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        style = self.rng.randrange(6)
        if style == 1:
            nrm = sc.pick("self")
            nu = self.norm(Scope(self.rng, self.plain))
            mod.fields.append(("child", nrm, nu))
        x, s, sig = self.sig(mod, sc)
        self.features.append("res%d" % style)
        if style == 0:  # pass-through local
            h = sc.pick("h")
            lines = ["Tensor %s = %s;" % (h, x), "%s = %s + %s;" % (h, h, self.call(a, au, h, s)), "return %s;" % h]
        elif style == 1:
            lines = ["return %s + %s;" % (x, self.call(a, au, self.call(nrm, nu, x, s), s))]
        elif style == 2:
            y = sc.pick("y")
            lines = ["Tensor %s = %s;" % (y, self.call(a, au, x, s)), "%s = %s + %s;" % (y, y, x), "return %s;" % y]
        elif style == 3:  # a local returned unchanged
            y = sc.pick("out")
            lines = ["Tensor %s = %s + %s;" % (y, x, self.call(a, au, x, s)), "return %s;" % y]
        elif style == 4:  # a difference (sub)
            lines = ["return %s - %s;" % (x, self.call(a, au, x, s))]
        else:  # a negated child added back (neg), then taken from the input (sub)
            y = sc.pick("y")
            lines = ["Tensor %s = -%s;" % (y, self.call(a, au, x, s)), "return %s - (%s + %s);" % (x, y, x)]
        return self.finish(mod, sig, lines)

    def c_stepper(self, depth, sc):
        """Tensor z = x; for (...) z = step(z); return z; (a member function stepping a local)."""
        mod = self.new_mod("Stepper", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        n = sc.pick("n")
        mod.fields.append(("int", n, "d.steps"))
        x, s, sig = self.sig(mod, sc)
        z, i = sc.pick("y"), sc.pick("i")
        self.features.append("stepper")
        lines = ["Tensor %s = %s;" % (z, x),
                 "for (int %s = 0; %s < %s; ++%s) %s = %s;" % (i, i, n, i, z, self.call(a, au, z, s)),
                 "return %s;" % z]
        return self.finish(mod, sig, lines)

    def c_stack(self, depth, sc):
        mod = self.new_mod("Stack", sc)
        use = self.block(depth - 1)
        mod.takes_s = use.mod.takes_s
        h = sc.pick("h")
        mod.fields.append(("vec", h, (use, "d.L")))
        style = self.rng.randrange(4)
        if style >= 2:
            n = sc.pick("n")
            mod.fields.append(("int", n, "d.L"))
        x, s, sig = self.sig(mod, sc)
        y = sc.pick("y")
        t = self.tname(use.mod)
        lines = ["Tensor %s = %s;" % (y, x)]
        self.features.append("stack%d" % style)
        if style == 0:
            b = sc.pick("b")
            lines.append("for (const %s& %s : %s) %s = %s;" % (t, b, h, y, self.call(b, use, y, s)))
        elif style == 1:
            i = sc.pick("i")
            lines.append("for (int %s = 0; %s < static_cast<int>(%s.size()); ++%s) %s = %s;" % (
                i, i, h, i, y, self.call("%s[%s]" % (h, i), use, y, s)))
        elif style == 2:
            i, b = sc.pick("_i0"), sc.pick("b")
            lines += ["for (int %s = 0; %s < %s; ++%s) {" % (i, i, n, i),
                      "  const %s& %s = %s[%s];" % (t, b, h, i),
                      "  %s = %s;" % (y, self.call(b, use, y, s)), "}"]
        else:  # if/else inside the loop, on the loop counter (configuration)
            i, u = sc.pick("i"), sc.pick("t0")
            lines += ["for (int %s = 0; %s < %s; ++%s) {" % (i, i, n, i),
                      "  if (%s + 1 < %s) {" % (i, n),
                      "    %s = %s;" % (y, self.call("%s[%s]" % (h, i), use, y, s)),
                      "  } else {",
                      "    Tensor %s = %s;" % (u, self.call("%s[%s]" % (h, i), use, y, s)),
                      "    %s = %s + %s;" % (y, y, u), "  }", "}"]
        lines.append("return %s;" % y)
        return self.finish(mod, sig, lines)

    def c_branch(self, depth, sc):
        mod = self.new_mod("Branch", sc)
        (a, au), (b, bu) = self.children(mod, sc, depth, 2)
        style = self.rng.randrange(3)
        if style == 1:
            mode = sc.pick("n")
            mod.fields.append(("int", mode, "static_cast<int>(d.bits % 3u)"))
        else:
            flag = sc.pick("f")
            mod.fields.append(("bool", flag, "(d.bits >> %du & 1u) != 0" % self.rng.randrange(1, 16)))
        gain = sc.pick("_c")
        mod.fields.append(("float", gain, "0.75f"))
        x, s, sig = self.sig(mod, sc)
        self.features.append("branch%d" % style)
        if style == 0:  # a local declared empty, assigned in each branch
            r = sc.pick("_ret")
            lines = ["Tensor %s;" % r, "if (%s) {" % flag, "  %s = %s;" % (r, self.call(a, au, x, s)), "} else {",
                     "  %s = %s * %s;" % (r, x, gain), "  %s = %s + %s;" % (r, r, self.call(b, bu, r, s)), "}",
                     "return %s;" % r]
        elif style == 1:
            r = sc.pick("_r0")
            lines = ["Tensor %s;" % r, "if (%s == 0) {" % mode, "  %s = %s;" % (r, self.call(a, au, x, s)),
                     "} else if (%s == 1) {" % mode, "  %s = %s * %s;" % (r, gain, self.call(b, bu, x, s)),
                     "} else {", "  %s = %s;" % (r, x), "}", "return %s;" % r]
        else:  # a return at the end of each branch of a final if/else
            lines = ["if (%s) {" % flag, "  return %s;" % self.call(a, au, self.call(b, bu, x, s), s), "} else {",
                     "  return %s;" % x, "}"]
        return self.finish(mod, sig, lines)

    def c_seq(self, depth, sc):
        mod = self.new_mod("Seq", sc)
        style = self.rng.randrange(3)
        uses = self.children(mod, sc, depth, 1 if style == 0 else 2)
        x, s, sig = self.sig(mod, sc)
        self.features.append("seq%d" % style)
        a, au = uses[0]
        if style == 0:  # block(block(x))
            lines = ["return %s;" % self.call(a, au, self.call(a, au, x, s), s)]
        elif style == 1:  # block(mlp(x))
            b, bu = uses[1]
            lines = ["return %s;" % self.call(a, au, self.call(b, bu, x, s), s)]
        else:  # a reassigned local
            b, bu = uses[1]
            u = sc.pick("t1")
            lines = ["Tensor %s = %s;" % (u, self.call(a, au, x, s)), "%s = %s;" % (u, self.call(b, bu, u, s)),
                     "return %s;" % u]
        return self.finish(mod, sig, lines)

    def c_scaled(self, depth, sc):
        mod = self.new_mod("Scaled", sc)
        mod.takes_s = True
        (a, au), = self.children(mod, sc, depth, 1)
        x, s, sig = self.sig(mod, sc)
        style = self.rng.randrange(5)
        self.features.append("scaled%d" % style)
        if style == 0:
            lines = ["return %s + %s * %s;" % (x, s, self.call(a, au, x, s))]
        elif style == 1:
            lines = ["return %s;" % self.call(a, au, "%s * %s" % (x, s), s)]
        elif style == 3:  # the scalar minus a tensor (rsub), so s gets rsub's gradient too
            lines = ["return %s + (%s - %s);" % (x, s, self.call(a, au, x, s))]
        elif style == 4:  # a constant minus a tensor, as a gate's 1 - g
            u = sc.pick("g")
            lines = ["Tensor %s = %s;" % (u, self.call(a, au, x, s)),
                     "return %s * (1.0f - %s) + %s * %s;" % (x, u, s, u)]
        else:
            u = sc.pick("grad")
            lines = ["Tensor %s = %s;" % (u, self.call(a, au, x, s)), "return %s * %s + %s;" % (u, s, x)]
        return self.finish(mod, sig, lines)

    def c_fanout(self, depth, sc):
        mod = self.new_mod("Fan", sc)
        style = self.rng.randrange(3)
        uses = self.children(mod, sc, depth, 2 if style == 0 else 1)
        x, s, sig = self.sig(mod, sc)
        a, au = uses[0]
        self.features.append("fanout%d" % style)
        if style == 0:
            b, bu = uses[1]
            lines = ["return %s + %s;" % (self.call(a, au, x, s), self.call(b, bu, x, s))]
        elif style == 1:
            u = sc.pick("y")
            lines = ["Tensor %s = %s;" % (u, self.call(a, au, x, s)), "return %s * %s + %s;" % (u, x, x)]
        else:
            u = sc.pick("t0")
            lines = ["Tensor %s = %s;" % (u, self.call(a, au, x, s)), "return 0.5f * (%s * %s) + %s;" % (x, x, u)]
        return self.finish(mod, sig, lines)

    def c_pool(self, depth, sc):
        """mean_pool feeding later ops: (B, T, C) -> (B, C) -> [op] -> linear to (B, T * C) -> view
        back to the activations' shape, added to them. (N, C) activations are viewed as (B, T, C)."""
        mod = self.new_mod("Pool", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        f = sc.pick("f")
        fu = self.lin_use("d.T * d.C", "d.C")
        mod.fields.append(("child", f, fu))
        post = self.rng.choice(["none", "gelu", "norm", "mul", "silu", "swiglu"])
        if post == "norm":
            nrm = sc.pick("self")
            nu = self.norm(Scope(self.rng, self.plain))
            mod.fields.append(("child", nrm, nu))
            mod.takes_s = mod.takes_s or nu.mod.takes_s
        if not self.three_d:
            nb, nt = sc.pick("n"), sc.pick("_i0")
            mod.fields += [("int", nb, "d.B"), ("int", nt, "d.T")]
        x, s, sig = self.sig(mod, sc)
        h, p, q = sc.pick("h"), sc.pick("y"), sc.pick("t0")
        lines = ["Tensor %s = %s;" % (h, self.call(a, au, x, s))]
        if self.three_d:
            lines.append("Tensor %s = llmcc::mean_pool(%s);" % (p, h))
        else:
            lines.append("Tensor %s = llmcc::mean_pool(llmcc::view(%s, llmcc::Shape{%s, %s, %s}, 0));" % (
                p, h, nb, nt, self.last_dim(h)))
        if post in ("gelu", "silu"):
            self.features.append(post)
            lines.append("%s = llmcc::%s(%s);" % (p, post, p))
        elif post == "norm":
            lines.append("%s = %s;" % (p, self.call(nrm, nu, p, s)))
        elif post == "mul":
            self.features.append("mul")
            lines.append("%s = %s * %s;" % (p, p, p))
        elif post == "swiglu":  # one input in both slots: one adjoint receives both terms
            self.features.append("swiglu")
            lines.append("%s = llmcc::swiglu(%s, %s);" % (p, p, p))
        lines.append("Tensor %s = %s;" % (q, self.call(f, fu, p, None)))
        back = "llmcc::view(%s, %s, 0)" % (q, self.shape_of(self.rng.choice([x, h])))
        style = self.rng.randrange(3)
        self.features.append("mean_pool%d" % style)
        if style == 0:
            lines.append("return %s + %s;" % (h, back))
        elif style == 1:
            lines.append("return %s + %s;" % (x, back))
        else:
            self.features.append("mul")
            lines.append("return %s * %s + %s;" % (back, h, x))
        return self.finish(mod, sig, lines)

    def c_chunks(self, depth, sc):
        """A linear to K times the width, read as K slices of the activations' shape at offsets
        k * numel inside a counted loop (row k of a (K, ...) tensor)."""
        mod = self.new_mod("Chunks", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        f = sc.pick("f")
        fu = self.lin_use("d.K * d.C", "d.C")
        mod.fields.append(("child", f, fu))
        n = sc.pick("n")
        mod.fields.append(("int", n, "d.K"))
        x, s, sig = self.sig(mod, sc)
        u, y, i, e = sc.pick("store"), sc.pick("y"), sc.pick("i"), sc.pick("_c")
        numel = self.rng.choice(["%s.numel()" % x, "%s.numel() / %s" % (u, n)])
        row = self.rng.choice([i, "(%s - 1 - %s)" % (n, i)])
        view = "llmcc::view(%s, %s, %s * %s)" % (u, self.shape_of(x), row, e)
        lines = ["Tensor %s = %s;" % (u, self.call(f, fu, x, None)),
                 "const std::int64_t %s = %s;" % (e, numel),
                 "Tensor %s = %s;" % (y, x)]
        style = self.rng.randrange(3)
        self.features.append("view_slice%d" % style)
        if style == 0:  # a child stepping the state, plus slice k
            lines.append("for (int %s = 0; %s < %s; ++%s) %s = %s + %s;" % (
                i, i, n, i, y, self.call(a, au, y, s), view))
        elif style == 1:  # the slice through the child
            v = sc.pick("t1")
            lines += ["for (int %s = 0; %s < %s; ++%s) {" % (i, i, n, i), "  Tensor %s = %s;" % (v, view),
                      "  %s = %s + %s;" % (y, y, self.call(a, au, v, s)), "}"]
        else:  # slices gating the state
            self.features.append("mul")
            lines += ["for (int %s = 0; %s < %s; ++%s) {" % (i, i, n, i),
                      "  %s = %s * %s + %s;" % (y, y, view, y), "}",
                      "%s = %s;" % (y, self.call(a, au, y, s))]
        lines.append("return %s;" % y)
        return self.finish(mod, sig, lines)

    def c_reshape(self, depth, sc):
        """view as a reshape: the activations as (B, T * C) rows, a linear mixing the positions,
        and back (the char-MLP concatenation)."""
        mod = self.new_mod("Mix", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        f = sc.pick("f")
        fu = self.lin_use("d.T * d.C", "d.T * d.C")
        mod.fields.append(("child", f, fu))
        nb = None
        if not self.three_d or self.rng.random() < 0.5:
            nb = sc.pick("n")
            mod.fields.append(("int", nb, "d.B"))
        x, s, sig = self.sig(mod, sc)
        h, r, y = sc.pick("h"), sc.pick("_r0"), sc.pick("y")
        style = self.rng.randrange(4)
        self.features.append("view_reshape%d" % style)
        src = x if style == 2 else h  # style 2: a view of the argument itself
        if nb is not None:
            rows = "llmcc::Shape{%s, %s.numel() / %s}" % (nb, src, nb)
        else:
            rows = "llmcc::Shape{%s.dim(0), %s.dim(1) * %s.dim(2)}" % (src, src, src)
        lines = ["Tensor %s = %s;" % (h, self.call(a, au, x, s)),
                 "Tensor %s = llmcc::view(%s, %s, 0);" % (r, src, rows)]
        back = "llmcc::view(%s, %s, 0)" % (self.call(f, fu, r, None), self.shape_of(x))
        if style == 3:  # the view returned as it is
            lines.append("return %s;" % back)
        else:
            lines.append("Tensor %s = %s;" % (y, back))
            lines.append("return %s + %s;" % ((y, x) if style == 1 else (h, y)))
        return self.finish(mod, sig, lines)

    def fwrap(self, expr):
        """A float-valued call of a differentiated function; the checkpointed variant wraps some."""
        expr = self.injected("float", expr)
        if self.ck is not None and self.ck.random() < 0.2:
            self.checkpoints += 1
            return "llmcc::adgen::checkpoint(%s)" % expr
        return expr

    def c_pen(self, depth, sc):
        """mse_loss inside a block: a float from two model-computed tensors (or one tensor twice)
        scaling the child's output."""
        mod = self.new_mod("Pen", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        x, s, sig = self.sig(mod, sc)
        c, e = sc.pick("h"), sc.pick("_value")
        style = self.rng.randrange(4)
        self.features.append("mse_block%d" % style)
        pair = {0: (c, x), 1: (x, c), 2: (c, c), 3: (c, x)}[style]
        if style == 3:  # through a free float function
            fs = Scope(self.rng, self.plain)
            fname = self.prefix + self.key("pen")
            p1, p2, v = fs.pick("x"), fs.pick("y"), fs.pick("_ret")
            self.decls.append("%sinline float %s(const Tensor& %s, const Tensor& %s) {\n"
                              "  float %s = llmcc::mse_loss(%s, %s);\n  return %s / (1.0f + %s);\n}\n" % (
                                  self.fattr(), fname, p1, p2, v, p1, p2, v, v))
            mse = self.fwrap("%s(%s, %s)" % (fname, c, x))
        else:
            mse = "llmcc::mse_loss(%s, %s)" % pair
        lines = ["Tensor %s = %s;" % (c, self.call(a, au, x, s)), "float %s = %s;" % (e, mse),
                 "return %s + (0.5f / (1.0f + %s)) * %s;" % (x, e, c)]
        return self.finish(mod, sig, lines)

    def c_free(self, depth, sc):
        """Free differentiable functions: one taking a module, one on two tensors (x beside d_x)."""
        mod = self.new_mod("Free", sc)
        (a, au), = self.children(mod, sc, depth, 1)
        fs = Scope(self.rng, self.plain)
        fname = self.prefix + self.key("fn")
        mname = fs.pick("m")
        xn = fs.pick("x")
        sn = fs.pick("_s") if au.mod.takes_s else None
        u = fs.pick("y")
        tt = self.tname(au.mod)
        params = "const %s& %s, const Tensor& %s" % (tt, mname, xn) + (", float %s" % sn if sn else "")
        self.features.append("free")
        self.decls.append("%sinline Tensor %s(%s) {\n  Tensor %s = %s;\n  return %s + %s;\n}\n" % (
            self.fattr(), fname, params, u, self.call(mname, au, xn, sn), u, xn))
        ms = Scope(self.rng, self.plain)
        mix = self.prefix + self.key("mix")
        p1 = ms.pick("x")
        p2 = "d_" + p1 if not self.plain and not p1.startswith("d_") and self.rng.random() < 0.6 else ms.pick("d_x")
        ms.taken.append(p2)
        yy = ms.pick("y")
        self.features.append("mix")
        self.decls.append(
            "%sinline Tensor %s(const Tensor& %s, const Tensor& %s) {\n  Tensor %s = %s + %s;\n"
            "  %s = llmcc::gelu(%s);\n  return %s * %s;\n}\n" % (
                self.fattr(), mix, p1, p2, yy, p1, p2, yy, yy, yy, p1))
        x, s, sig = self.sig(mod, sc)
        inner = self.wrap("%s(%s, %s%s)" % (fname, a, x, (", " + s) if sn else ""))
        if self.rng.random() < 0.5:
            lines = ["return %s;" % self.wrap("%s(%s, %s)" % (mix, x, inner))]
        else:
            lines = ["return %s;" % inner]
        return self.finish(mod, sig, lines)

    # ---- scalar functions on the loss --------------------------------------------------------
    def scalar_fn(self):
        name = self.prefix + self.key("sf")
        sc = Scope(self.rng, self.plain)
        a = sc.pick("x")
        t = sc.pick("t0")

        def expr(depth):
            if depth == 0 or self.rng.random() < 0.3:
                return self.rng.choice([a, a, a, "0.5f", "(%s * %s)" % (a, a)])
            e = expr(depth - 1)
            kind = self.rng.randrange(12)
            if kind == 0:
                return "(%s + %s)" % (e, expr(depth - 1))
            if kind == 1:
                return "(%s - %s)" % (e, expr(depth - 1))
            if kind == 2:
                return "(%s * %s)" % (e, expr(depth - 1))
            if kind == 3:
                return "(%s / (2.0f + %s * %s))" % (e, e, e)
            if kind == 4:
                return "(-%s)" % e
            if kind == 5:
                return "expf(0.25f * tanhf(%s))" % e
            if kind == 6:
                return "tanhf(%s)" % e
            if kind == 7:
                return "logf(1.5f + %s * %s)" % (e, e)
            if kind == 8:
                return "sqrtf(%s * %s + 1.0f)" % (e, e)
            if kind == 9:
                return "sinf(%s)" % e
            if kind == 10:
                return "cosf(%s)" % e
            return "powf(%s * %s + 1.0f, 0.75f)" % (e, e)

        self.features.append("scalar")
        self.decls.append("%sinline float %s(float %s) {\n  float %s = %s;\n  %s += %s;\n  return %s * 0.5f + %s;\n}\n"
                          % (self.fattr(), name, a, t, expr(2), t, expr(2), t, a))
        return name

    # ---- the root and the entry --------------------------------------------------------------
    def root(self, has_x, has_ids, has_s, depth):
        body = self.block(depth)
        sc = Scope(self.rng, self.plain)
        mod = self.new_mod("Model", sc)
        vname = sc.pick("n")
        mod.fields.append(("int", vname, "d.V"))
        emb = None
        if has_ids:
            wte = sc.pick("w")
            mod.fields.append(("tensor", wte, "(d.Vp, d.C)"))
            if self.rng.random() < 0.5:
                wpe = sc.pick("b")
                mod.fields.append(("tensor", wpe, "(d.maxT, d.C)"))
                emb = "llmcc::token_position_embedding(%%s, %s, %s)" % (wte, wpe)
                self.features.append("token_position_embedding")
            else:
                emb = "llmcc::token_embedding(%%s, %s)" % wte
                self.features.append("token_embedding")
        bname = sc.pick("self")
        mod.fields.append(("child", bname, body))
        tied = has_ids and self.rng.random() < 0.5
        if not tied:
            hname = sc.pick("out")
            hu = self.lin_use("d.Vp", "d.C")
            mod.fields.append(("child", hname, hu))
        fnorm = None
        if self.rng.random() < 0.3:
            fnorm = sc.pick("_g")
            fnu = self.norm(Scope(self.rng, self.plain))
            mod.fields.append(("child", fnorm, fnu))
        style = self.rng.randrange(3) if has_x and not has_ids else 0
        mod.takes_s = style > 0 or body.mod.takes_s or (fnorm is not None and fnu.mod.takes_s)
        params = []
        x = sc.pick("x") if has_x else None
        ids = sc.pick("_i0") if has_ids else None
        s = sc.pick("_s") if mod.takes_s else None
        if x:
            params.append("const Tensor& %s" % x)
        if ids:
            params.append("const llmcc::Tokens& %s" % ids)
        if s:
            params.append("float %s" % s)
        h = sc.pick("h")
        lines = []
        if has_x and has_ids:
            lines.append("Tensor %s = %s + %s;" % (h, emb % ids, x))
        elif has_ids:
            lines.append("Tensor %s = %s;" % (h, emb % ids))
        else:
            first = [x, "%s * %s" % (s, x), "%s * %s" % (x, s)][style]
            lines.append("Tensor %s = %s;" % (h, first))
        lines.append("%s = %s;" % (h, self.call(bname, body, h, s)))
        if fnorm:
            lines.append("%s = %s;" % (h, self.call(fnorm, fnu, h, s)))
        if tied:
            self.features.append("tied_head")
            lines.append("return llmcc::linear_nobias(%s, %s);" % (h, wte))
        else:
            lines.append("return %s;" % self.call(hname, hu, h, s))
        sig = "%sTensor %s(%s) const" % (self.fattr(), mod.method, ", ".join(params))
        self.emit_struct(mod, "  %s {\n    %s\n  }" % (sig, "\n    ".join(lines)))
        return mod, vname, body


class Program:
    """One generated program: its two variants' texts and what the driver needs to know."""

    def __init__(self, index):
        self.index = index


def mse_lines(g, names, mse, three_d):
    """mse_loss terms added to the loss `l` on the logits `z` (B, T, Vp) or (N, Vp): against the
    input y, row k of z against row k of y in a counted loop (view at k * row), z against itself,
    or z's first row against its last (two views of one model-computed tensor)."""
    rng, l, z, y, k, c, r = g.rng, names["l"], names["z"], names.get("y"), names["k"], names["c"], names["rr"]
    g.features.append("mse_%s" % mse)
    if mse == "y":
        pair = (z, y) if rng.random() < 0.6 else (y, z)
        return ["%s += 0.5f * llmcc::mse_loss(%s, %s);" % ((l,) + pair)]
    if mse == "same":
        return ["%s = %s + llmcc::mse_loss(%s, %s);" % (l, l, z, z)]
    if mse == "ends":
        return ["const std::int64_t %s = %s.numel() / %s.dim(0);" % (c, z, z),
                "%s += llmcc::mse_loss(llmcc::view(%s, llmcc::Shape{%s}, 0), llmcc::view(%s, llmcc::Shape{%s}, "
                "%s.numel() - %s));" % (l, z, c, z, c, z, c)]
    src = rng.choice([z, y])
    lines = ["const std::int64_t %s = %s.dim(0);" % (r, src)]
    if three_d and rng.random() < 0.5:  # row k of (B, T, Vp) as a (T, Vp) tensor
        shape = "llmcc::Shape{%s.dim(1), %s.dim(2)}" % (src, src)
        lines.append("const std::int64_t %s = %s.dim(1) * %s.dim(2);" % (c, src, src))
    else:
        shape = "llmcc::Shape{%s}" % c
        lines.append("const std::int64_t %s = %s.numel() / %s;" % (c, src, r))
    pair = [z, y] if rng.random() < 0.6 else [y, z]
    views = tuple("llmcc::view(%s, %s, %s * %s)" % (t, shape, k, c) for t in pair)
    lines.append("for (int %s = 0; %s < static_cast<int>(%s); ++%s) %s += 0.25f * llmcc::mse_loss(%s, %s);" % (
        (k, k, r, k, l) + views))
    return lines


def entry_text(g, model, vname, has_x, has_ids, has_s, arg_order, names, wrt, sfn, loss_style, mse, three_d):
    """The entry `<prefix>loss`: cross_entropy on the model's logits, mse_loss terms, then float
    arithmetic."""
    decl = {"m": "const %s& %s", "x": "const Tensor& %s", "ids": "const llmcc::Tokens& %s",
            "tg": "const llmcc::Tokens& %s", "s": "float %s", "y": "const Tensor& %s"}
    params = ", ".join(decl[a] % (g.tname(model) if a == "m" else names[a], names[a]) if a == "m" else
                       decl[a] % names[a] for a in arg_order)
    fargs = ([names["x"]] if has_x else []) + ([names["ids"]] if has_ids else []) + (
        [names["s"] if has_s else "0.5f"] if model.takes_s else [])
    logits = g.wrap("%s.%s(%s)" % (names["m"], model.method, ", ".join(fargs)))
    pre = []
    if mse:
        pre = ["Tensor %s = %s;" % (names["z"], logits)]
        logits = names["z"]
    ce = g.injected("float", "llmcc::cross_entropy(%s, %s, %s.%s, -1)" % (logits, names["tg"], names["m"], vname))
    wrt_text = ' LLMCC_ADGEN_WRT("%s")' % ", ".join(names[a] for a in arg_order if a in wrt) if wrt else ""
    s = names["s"] if has_s else "0.5f"
    l = names["l"]
    lines = pre + ["float %s = %s;" % (l, ce)]
    if mse:
        lines += mse_lines(g, names, mse, three_d)
    if loss_style == 0:
        lines = lines + ["return %s;" % l] if mse else ["return %s;" % ce]
    elif loss_style == 1:
        lines.append("return %s * %s + 0.5f * %s;" % (l, s, l))
    elif loss_style == 2:
        lines.append("return %s(%s);" % (sfn, l))
    elif loss_style == 3:
        lines += ["float %s = %s(%s) * %s;" % (names["r"], sfn, l, s), "%s -= 0.25f * %s;" % (names["r"], l),
                  "return -%s + 2.0f * %s;" % (names["r"], l)]
    else:
        lines.append("return %s / (1.0f + %s * %s);" % (l, s, s))
    return "LLMCC_ADGEN_ENTRY%s inline float %sloss(%s) {\n  %s\n}\n" % (
        wrt_text, g.prefix, params, "\n  ".join(lines))


def render(seed, index, prefix, ck, plain, inject=None):
    rng = random.Random(seed)
    heads = rng.random() < 0.45
    has_ids = rng.random() < 0.4
    has_x = not has_ids or rng.random() < 0.5
    three_d = heads or has_ids or rng.random() < 0.5
    has_s = rng.random() < 0.6
    depth = rng.choice([1, 2, 2, 3])
    g = Gen(rng, ck, prefix, plain, heads, three_d, inject)
    model, vname, _ = g.root(has_x, has_ids, has_s, depth)
    loss_style = rng.randrange(5)
    if has_s and not model.takes_s and loss_style in (0, 2):
        loss_style = rng.choice([1, 3, 4])  # the float argument must be used
    sfn = g.scalar_fn() if loss_style in (2, 3) else None
    # mse_loss terms on the logits: against a regression target y (an input of the logits' shape),
    # row by row through views, against themselves, or first row against last.
    mse = rng.choice(["y", "y", "rows", "rows", "same", "ends"]) if rng.random() < 0.4 else None
    has_y = mse in ("y", "rows")
    es = Scope(rng, plain)
    names = {"m": es.pick("m"), "tg": es.pick("out"), "l": es.pick("_value"), "r": es.pick("_ret")}
    if has_x:
        names["x"] = es.pick("x")
    if has_ids:
        names["ids"] = es.pick("saved")
    names["s"] = es.pick("_s") if has_s else None
    if has_y:
        names["y"] = es.pick("y")
    if mse:
        names.update(z=es.pick("h"), k=es.pick("i"), c=es.pick("n"), rr=es.pick("_r0"))
    arg_order = (["m"] + (["x"] if has_x else []) + (["ids"] if has_ids else []) + ["tg"] + (["s"] if has_s else []) +
                 (["y"] if has_y else []))
    tail = arg_order[1:]
    rng.shuffle(tail)
    arg_order = ["m"] + tail
    diff = ["m"] + (["x"] if has_x else []) + (["s"] if has_s else []) + (["y"] if has_y else [])
    wrt = None
    if rng.random() < 0.35:
        wrt = [a for a in diff if rng.random() < 0.6] or [rng.choice(diff)]
    elif has_y and rng.random() < 0.5:  # y a constant (data), as a regression target usually is
        wrt = [a for a in diff if a != "y" and (a == "m" or rng.random() < 0.6)]
    g.decls.append(entry_text(g, model, vname, has_x, has_ids, has_s, arg_order, names, wrt, sfn, loss_style, mse,
                              three_d))
    info = dict(heads=heads, three_d=three_d, has_x=has_x, has_ids=has_ids, has_s=has_s, has_y=has_y,
                arg_order=arg_order, wrt=wrt if wrt else diff, model=model, features=sorted(set(g.features)))
    return "// ---- program %d%s ----\n" % (index, " (checkpointed)" if ck else "") + "\n".join(g.decls), g, info


def generate(seed, index, plain):
    p = Program(index)
    p.plain_text, gp, p.info = render(seed, index, "p%d_" % index, None, plain)
    for attempt in range(20):
        ck = random.Random(seed * 31 + 7 + attempt)
        p.ckpt_text, gc, _ = render(seed, index, "p%dc_" % index, ck, plain)
        if gc.checkpoints > 0:
            break
    p.checkpoints = gc.checkpoints
    return p


# ---- the driver (batch_main.cpp) ----------------------------------------------------------------

def build_lines(fields, path, subst, depth, out, indent):
    pad = "  " * indent
    for kind, name, info in fields:
        target = "%s.%s" % (path, name)
        if kind == "tensor":
            shape = info.strip("()")
            for k, v in subst.items():
                shape = re.sub(r"\b%s\b" % k, v, shape)
            out.append("%s%s = Tensor(nullptr, {%s});" % (pad, target, shape))
        elif kind == "child":
            build_lines(info.mod.fields, target, info.subst, depth, out, indent)
        elif kind == "vec":
            use, count = info
            e = "e%d" % depth
            out.append("%s%s.resize(static_cast<std::size_t>(%s));" % (pad, target, count))
            out.append("%sfor (auto& %s : %s) {" % (pad, e, target))
            build_lines(use.mod.fields, e, use.subst, depth + 1, out, indent + 1)
            out.append("%s}" % pad)
        elif kind in ("int", "bool"):
            out.append("%s%s = %s;" % (pad, target, info))


def param_lines(fields, path, depth, out, indent):
    pad = "  " * indent
    for kind, name, info in fields:
        target = "%s.%s" % (path, name)
        if kind == "tensor":
            out.append("%sf(%s);" % (pad, target))
        elif kind == "child":
            param_lines(info.mod.fields, target, depth, out, indent)
        elif kind == "vec":
            e = "e%d" % depth
            out.append("%sfor (auto& %s : %s) {" % (pad, e, target))
            param_lines(info[0].mod.fields, e, depth + 1, out, indent + 1)
            out.append("%s}" % pad)


def prog_struct(p):
    i, info = p.index, p.info
    value = {"m": "m", "x": "in.x", "ids": "in.ids", "tg": "in.targets", "s": "in.s", "y": "in.y"}
    args = ", ".join(value[a] for a in info["arg_order"])
    dargs = []
    for a in info["arg_order"]:
        if a in info["wrt"]:
            dargs.append({"m": "g.grad", "x": "&a.dx", "s": "&a.ds", "y": "&a.dy"}[a])
    wrt = info["wrt"]
    build, params = [], []
    build_lines(info["model"].fields, "m", {}, 0, build, 2)
    param_lines(info["model"].fields, "m", 0, params, 2)
    lines = [
        "// Program %d: %s" % (i, " ".join(info["features"])),
        "struct P%d {" % i,
        "  static constexpr int index = %d;" % i,
        "  static constexpr fuzz::Needs needs{%s, %s, %s, %s, %s, %s, %s};" % (tuple(
            "true" if info[k] else "false" for k in ("heads", "three_d", "has_x", "has_ids", "has_s")) +
            ("true" if "layernorm" in info["features"] else "false", "true" if info["has_y"] else "false")),
        "  static constexpr fuzz::Wrt wrt{%s, %s, %s, %s};" % tuple(
            "true" if k in wrt else "false" for k in ("m", "x", "s", "y")),
        "  using Model = fz::p%d_%s;" % (i, info["model"].key),
        "  using ModelC = fz::p%dc_%s;" % (i, info["model"].key),
        "  static void build(auto& m, const fuzz::Dims& d) {",
        "\n".join(build) if build else "    (void)m, (void)d;",
        "  }",
        "  static void params(auto& m, auto&& f) {",
        "\n".join(params) if params else "    (void)m, (void)f;",
        "  }",
    ]
    for variant, suffix in (("Model", "p%d_" % i), ("ModelC", "p%dc_" % i)):
        lines += [
            "  static float loss(const %s& m, const fuzz::Inputs& in) { return fz::%sloss(%s); }" % (
                variant, suffix, args),
            "  template <class G>",
            "  static float grad(const %s& m, const fuzz::Inputs& in, G& %s, fuzz::ArgGrads& %s) {" % (
                variant, "g" if "m" in wrt else "/*g*/", "a" if ("x" in wrt or "s" in wrt or "y" in wrt) else "/*a*/"),
            "    return fz::%sloss_grad(%s);" % (suffix, ", ".join([args] + dargs)),
            "  }",
            "  static void record(const %s& m, const fuzz::Inputs& in, auto&& f) {" % variant,
            "    fz::%sloss_Saved saved;" % suffix,
            "    fz::%sloss_fwd(%s, saved);" % (suffix, args),
            "    saved.visit(f);",
            "  }",
        ]
    lines.append("};\n")
    return "\n".join(lines)


def driver(seed, programs):
    parts = ["// Generated by gen_programs.py --seed %d: runs fuzz_check.h's checks on every program of batch.h.\n"
             % seed,
             "#include \"batch.grad.h\"\n#include \"fuzz_check.h\"\n\nnamespace {\n\nusing llmcc::Tensor;\n\n"]
    for p in programs:
        parts.append(prog_struct(p) + "\n")
    parts.append("}  // namespace\n\nint main() {\n  fuzz::Runner runner(%d);\n" % seed)
    for p in programs:
        parts.append("  runner.run<P%d>();\n" % p.index)
    parts.append("  return runner.finish();\n}\n")
    return "".join(parts)
