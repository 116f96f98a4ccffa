#!/usr/bin/env python3
"""One training step of the Burgers PINN of examples/pinn_burgers in PyTorch: the peer of
bench/bench_pinn_burgers.cpp (same network, points, loss and Adam update), in one of three forms:

  eager    u_x, u_t and u_xx by torch.autograd.grad(..., create_graph=True) (twice), then backward
  func     u_x, u_t and u_xx by torch.func.jvp (nested for u_xx) on the whole batch of points, then
           backward: forward mode inside, as llmcc's generated code does
  compile  the func step under torch.compile (the loss and its backward)

  <torch venv>/bin/python3 bench/pinn_torch.py --variant func [--points N] [--data M] [--threads T]

Prints one JSON line like bench_pinn_burgers: median and best ms per step after warm-up, the loss
before and after, and the process's peak resident size. fp32 throughout.
"""
import argparse
import json
import math
import resource
import time

import torch


def make_batch(n, m, gen):
    p = torch.empty(n, 2)
    p[:, 0] = 2 * torch.rand(n, generator=gen) - 1
    p[:, 1] = torch.rand(n, generator=gen)
    pd = torch.empty(m, 2)
    gd = torch.zeros(m, 1)
    for i in range(m):
        initial = i % 2 == 0
        x = 2 * torch.rand(1, generator=gen).item() - 1 if initial else (-1.0 if i % 4 == 1 else 1.0)
        pd[i, 0] = x
        pd[i, 1] = 0.0 if initial else torch.rand(1, generator=gen).item()
        gd[i, 0] = -math.sin(math.pi * x) if initial else 0.0
    return p, pd, gd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=["eager", "func", "compile"], required=True)
    ap.add_argument("--points", type=int, default=10000)
    ap.add_argument("--data", type=int, default=1000)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(1337)
    torch.manual_seed(1337)
    layers = []
    width = 2
    for _ in range(a.layers):
        layers += [torch.nn.Linear(width, a.hidden), torch.nn.Tanh()]
        width = a.hidden
    layers.append(torch.nn.Linear(width, 1))
    net = torch.nn.Sequential(*layers)
    for mod in net:
        if isinstance(mod, torch.nn.Linear):
            torch.nn.init.xavier_normal_(mod.weight)
            torch.nn.init.zeros_(mod.bias)
    p, pd, gd = make_batch(a.points, a.data, gen)
    ex = torch.zeros_like(p)
    ex[:, 0] = 1
    et = torch.zeros_like(p)
    et[:, 1] = 1
    nu, weight = 0.05, 10.0
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def loss_eager():
        x = p.clone().requires_grad_(True)
        u = net(x)
        g = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        u_x, u_t = g[:, 0:1], g[:, 1:2]
        u_xx = torch.autograd.grad(u_x.sum(), x, create_graph=True)[0][:, 0:1]
        r = u_t + u * u_x - nu * u_xx
        return (r * r).mean() + weight * ((net(pd) - gd) ** 2).mean()

    def loss_func():
        def u_x_of(q):
            return torch.func.jvp(net, (q,), (ex,))[1]

        (u, u_x), (_, u_xx) = torch.func.jvp(lambda q: torch.func.jvp(net, (q,), (ex,)), (p,), (ex,))
        u_t = torch.func.jvp(net, (p,), (et,))[1]
        del u_x_of
        r = u_t + u * u_x - nu * u_xx
        return (r * r).mean() + weight * ((net(pd) - gd) ** 2).mean()

    loss_fn = loss_eager if a.variant == "eager" else loss_func

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss.detach()

    if a.variant == "compile":
        step_fn = torch.compile(step)
    else:
        step_fn = step
    ms = []
    first = last = None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = float(step_fn())
        dt = (time.perf_counter() - t0) * 1e3
        if first is None:
            first = loss
        last = loss
        if i >= a.warmup:
            ms.append(dt)
    ms.sort()
    print(json.dumps({"impl": "torch-" + a.variant, "points": a.points, "data": a.data, "hidden": a.hidden,
                      "layers": a.layers, "threads": a.threads, "steps": a.steps,
                      "median_ms": round(ms[len(ms) // 2], 3), "best_ms": round(ms[0], 3),
                      "loss_first": first, "loss_last": last,
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
