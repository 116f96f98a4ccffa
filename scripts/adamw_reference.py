#!/usr/bin/env python3
"""Hand-computed AdamW reference values for tests/train/test_adamw.cpp (plain Python floats).

Follows torch.optim.AdamW's update (amsgrad=False) for step t = 1, 2, 3:
    p <- p * (1 - lr * wd)                         (weight decay only on the 2-D tensor)
    m <- beta1 * m + (1 - beta1) * g
    v <- beta2 * v + (1 - beta2) * g * g
    p <- p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
Run it and paste the printed arrays into the test (they are committed there).
"""
import math

lr, beta1, beta2, eps, wd = 0.1, 0.9, 0.95, 1e-8, 0.1
# A (2, 2) weight (decayed) and a (2,) bias (not decayed); one gradient per step.
weight = [0.5, -1.0, 2.0, 0.0]
bias = [0.25, -0.75]
grads_w = [[0.1, -0.2, 0.3, 0.0], [-0.5, 0.4, 0.0, 1.0], [0.05, 0.05, -2.0, 0.3]]
grads_b = [[1.0, -1.0], [0.0, 0.5], [-0.25, 3.0]]


def run(p, grads, decay):
    m = [0.0] * len(p)
    v = [0.0] * len(p)
    out = []
    for t, g in enumerate(grads, start=1):
        bc1 = 1 - beta1 ** t
        bc2 = 1 - beta2 ** t
        for i in range(len(p)):
            if decay:
                p[i] *= 1 - lr * wd
            m[i] = beta1 * m[i] + (1 - beta1) * g[i]
            v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i]
            p[i] -= lr / bc1 * m[i] / (math.sqrt(v[i]) / math.sqrt(bc2) + eps)
        out.append(list(p))
    return out


for name, values in (("weight", run(list(weight), grads_w, True)),
                     ("bias", run(list(bias), grads_b, False))):
    for t, row in enumerate(values, start=1):
        print(f"{name} after step {t}: {{" + ", ".join(f"{x:.9g}" for x in row) + "}")
