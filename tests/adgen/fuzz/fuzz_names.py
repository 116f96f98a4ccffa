"""Identifier pools for the adgen fuzzer's generated programs.

COLLIDING holds names that adgen's generated code also uses (its parameters `_s`, `d_out`,
`d_self`, `self`, temporaries `t0`, adjoints `_d_t0`, helpers `_a0`, `_scratch`, ...). A program
whose own names collide with them is still valid C++ inside the subset, so adgen must rename
(or otherwise keep apart) what it generates. With --plain-names only ORDINARY is used.
"""

COLLIDING = ["m", "f", "prefix", "_s", "d_x", "d_out", "d_self", "self", "_g", "_a0", "_c", "_scratch",
             "_value", "_ret", "t0", "t1", "_d_t0", "_r0", "_i0", "out", "saved", "grad", "store", "x", "y",
             "h", "w", "b", "i", "n"]

ORDINARY = ["u", "v", "z", "a", "c", "k", "q", "r", "hid", "tmp", "res", "acc", "cur", "nxt", "lhs", "rhs",
            "inp", "val", "feat", "blk", "lay", "sub", "enc", "dec", "proj", "gate", "up", "down", "e", "p",
            "g", "o", "j", "kk", "mm", "cfg", "wt", "bias", "emb", "pos", "head", "body", "core", "left",
            "right", "top", "step_n", "count", "flag", "mode", "gain", "alpha", "beta", "ids", "tgt", "sc"]


class Scope:
    """Distinct identifiers for one C++ scope (a struct's fields and one member function's
    parameters and locals, or one free function)."""

    def __init__(self, rng, plain, taken=()):
        self.rng = rng
        self.plain = plain
        self.taken = list(taken)

    def child(self):
        return Scope(self.rng, self.plain, self.taken)

    def pick(self, prefer=None):
        """A fresh name; `prefer` (a name from COLLIDING) is taken when allowed and free."""
        if prefer is not None and not self.plain and prefer not in self.taken and self.rng.random() < 0.5:
            self.taken.append(prefer)
            return prefer
        pools = [ORDINARY] if self.plain else [COLLIDING, ORDINARY]
        for _ in range(100):
            pool = pools[0] if len(pools) == 1 or self.rng.random() < 0.6 else pools[1]
            name = self.rng.choice(pool)
            if name not in self.taken:
                self.taken.append(name)
                return name
        name = "v%d" % len(self.taken)
        self.taken.append(name)
        return name
