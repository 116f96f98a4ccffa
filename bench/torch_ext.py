"""llmcc_torch against PyTorch on the CPU: the attention operator's forward + backward, and a
GPT-2 124M training step with llmcc's blocks inside a PyTorch model (docs/perf.md, "PyTorch
extension").

    python bench/torch_ext.py [--quick] [--threads 1,2] [--out DIR] [--plot PNG]

Attention: batch 8, sequence T, embedding C, heads nh; the input is the packed qkv (B, T, 3C) a
fused projection makes, the output (B, T, C), timed forward + backward (gradient of qkv) for
  llmcc      llmcc_torch.attention_qkv
  eager      softmax of masked scores written out (nanoGPT's slow path)
  sdpa       F.scaled_dot_product_attention(is_causal=True), PyTorch's fused kernel
  compiled   torch.compile of the eager code (inductor)
The same inputs, interleaved per size; medians of repeated runs. Each thread count is set with
torch.set_num_threads (llmcc follows it).

GPT-2 124M step (B=4, T=128 unless --quick): zero_grad, forward, loss, backward and the
optimizer's step (AdamW, lr 1e-4, weight decay 0.1), for nanoGPT-style GPT-2 with PyTorch's blocks
(eager with torch.optim.AdamW, eager with its fused=True variant, compiled) and with
llmcc_torch.Gpt2Block (alone; with llmcc's linear for the tied LM head and llmcc's fused
cross-entropy; and with llmcc_torch.AdamW as well); rounds interleave the variants, medians over
rounds. The blocks alone (12, forward + backward) are timed against PyTorch's too.
"""
import argparse
import csv
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))
import reference as ref  # noqa: E402

import llmcc_torch  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            flags, model = "", platform.processor()
            for line in f:
                if line.startswith("model name") and model in ("", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = line
                    break
        isa = "AVX-512" + (" + AVX512_BF16" if "avx512_bf16" in flags else "") if "avx512f" in flags else "AVX2"
        return f"{model}, {isa}, {os.cpu_count()} CPUs"
    except OSError:
        return platform.processor()


def median_time(fn, min_reps=3, budget=0.6):
    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    reps = max(min_reps, min(15, int(budget / max(first, 1e-6))))
    times = [first]
    for _ in range(reps - 1):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- attention -------------------------------------------------------------------------------


def attention_variants(n_head):

    def split(qkv):
        C = qkv.shape[-1] // 3
        return qkv.split(C, dim=-1)

    def sdpa(qkv):
        q, k, v = split(qkv)
        return ref.attention(q, k, v, n_head, n_head)

    def eager(qkv):
        return ref.attention_math(*split(qkv), n_head)

    return {
        "llmcc": lambda qkv: llmcc_torch.attention_qkv(qkv, n_head),
        "eager": eager,
        "sdpa": sdpa,
        "compiled": torch.compile(eager, dynamic=False),
    }


def bench_attention(sizes, threads, rows):
    B = 8
    for nthreads in threads:
        torch.set_num_threads(nthreads)
        torch._dynamo.reset()
        for T, C, nh in sizes:
            torch._dynamo.reset()  # a fresh compile per size: dynamo's recompile limit is never reached
            qkv = torch.randn(B, T, 3 * C, requires_grad=True)
            g = torch.randn(B, T, C)
            variants = attention_variants(nh)
            outputs = {}
            for name, fn in variants.items():  # every variant computes the same (checked)
                qkv.grad = None
                y = fn(qkv)
                y.backward(g)
                outputs[name] = (y.detach(), qkv.grad.clone())
            for name, (y, d) in outputs.items():
                torch.testing.assert_close(y, outputs["sdpa"][0], atol=2e-4, rtol=1e-3)
                torch.testing.assert_close(d, outputs["sdpa"][1], atol=2e-4, rtol=1e-3)

            def step(fn):
                qkv.grad = None
                fn(qkv).backward(g)

            ms = {name: 1e3 * median_time(lambda: step(fn)) for name, fn in variants.items()}
            best = min(v for k, v in ms.items() if k != "llmcc")
            row = dict(threads=nthreads, B=B, T=T, C=C, n_head=nh, **{f"{k}_ms": round(v, 3) for k, v in ms.items()},
                       speedup_vs_fastest_torch=round(best / ms["llmcc"], 3))
            rows.append(row)
            print(f"attention threads={nthreads} T={T:4d} C={C:3d} nh={nh:2d}: " +
                  "  ".join(f"{k} {v:8.2f} ms" for k, v in ms.items()) + f"  llmcc vs fastest: {best / ms['llmcc']:.2f}x",
                  flush=True)


# ---- GPT-2 124M's 12 blocks alone ---------------------------------------------------------


def bench_blocks(threads, shapes, rounds, cfg):
    """Forward + backward (input and every parameter gradient) of GPT-2 124M's 12 blocks,
    llmcc's against PyTorch's with the same weights, rounds interleaved."""
    torch.set_num_threads(threads)
    rows = []
    for B, T in shapes:
        theirs = torch.nn.Sequential(*[ref.Block(cfg.n_embd, cfg.n_head) for _ in range(cfg.n_layer)])
        ours = torch.nn.Sequential(*[llmcc_torch.Gpt2Block(cfg.n_embd, cfg.n_head) for _ in range(cfg.n_layer)])
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(B, T, cfg.n_embd, requires_grad=True)
        g = torch.randn(B, T, cfg.n_embd)

        def step(m):
            for p in m.parameters():
                p.grad = None
            x.grad = None
            m(x).backward(g)

        for m in (theirs, ours):
            step(m)
        times = {"pytorch": [], "llmcc": []}
        for _ in range(rounds):
            for name, m in (("pytorch", theirs), ("llmcc", ours)):
                t0 = time.perf_counter()
                step(m)
                times[name].append(time.perf_counter() - t0)
        t_pt, t_ll = statistics.median(times["pytorch"]), statistics.median(times["llmcc"])
        rows.append(dict(threads=threads, B=B, T=T, pytorch_ms=round(1e3 * t_pt, 1), llmcc_ms=round(1e3 * t_ll, 1),
                         speedup=round(t_pt / t_ll, 3)))
        print(f"blocks threads={threads} B={B} T={T}: pytorch {1e3 * t_pt:8.1f} ms  llmcc {1e3 * t_ll:8.1f} ms  "
              f"{t_pt / t_ll:.3f}x", flush=True)
    return rows


# ---- GPT-2 124M training step ----------------------------------------------------------------


def bench_gpt2(threads, B, T, rounds, steps, cfg):
    torch.set_num_threads(threads)
    torch._dynamo.reset()
    torch.manual_seed(0)
    pure = ref.Gpt(cfg)
    state = pure.state_dict()
    llmcc_ce = lambda lg, y: llmcc_torch.cross_entropy(lg, y)  # noqa: E731
    torch_adamw = lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1)  # noqa: E731
    # name: (model, optimizer, compiled)
    variants = {
        "pytorch eager": (pure, torch_adamw, False),
        "pytorch eager, fused AdamW": (ref.Gpt(cfg),
                                       lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, fused=True), False),
        "pytorch compiled": (ref.Gpt(cfg), torch_adamw, True),
        "llmcc blocks": (ref.Gpt(cfg, block=llmcc_torch.Gpt2Block), torch_adamw, False),
        "llmcc blocks, head, cross-entropy": (ref.Gpt(cfg, block=llmcc_torch.Gpt2Block, head=llmcc_torch.linear,
                                                      loss_fn=llmcc_ce), torch_adamw, False),
        "llmcc blocks, head, cross-entropy, AdamW": (ref.Gpt(cfg, block=llmcc_torch.Gpt2Block, head=llmcc_torch.linear,
                                                             loss_fn=llmcc_ce),
                                                     lambda ps: llmcc_torch.AdamW(ps, lr=1e-4, weight_decay=0.1), False),
    }
    runners = {}
    for name, (m, make_opt, compiled) in variants.items():
        m.load_state_dict(state)
        runners[name] = (torch.compile(m) if compiled else m, make_opt(m.parameters()))
    idx = torch.randint(0, cfg.vocab_size, (B, T))
    targets = torch.randint(0, cfg.vocab_size, (B, T))

    def one_step(name):
        fwd, opt = runners[name]
        opt.zero_grad(set_to_none=True)
        loss = fwd(idx, targets)
        loss.backward()
        opt.step()
        return loss.item()

    first = {}
    for name in runners:  # warm-up (compiles) and the first step's loss, which must agree
        t0 = time.perf_counter()
        first[name] = one_step(name)
        print(f"gpt2 threads={threads} {name}: first step {time.perf_counter() - t0:.1f} s, loss {first[name]:.5f}",
              flush=True)
    for name in runners:
        assert abs(first[name] - first["pytorch eager"]) < 1e-3, f"{name}'s first loss differs: {first}"
        one_step(name)
    times = {name: [] for name in runners}
    for _ in range(rounds):
        for name in runners:
            t0 = time.perf_counter()
            for _ in range(steps):
                one_step(name)
            times[name].append((time.perf_counter() - t0) / steps)
    rows = []
    eager = statistics.median(times["pytorch eager"])
    for name, ts in times.items():
        s = statistics.median(ts)
        rows.append(dict(threads=threads, B=B, T=T, variant=name, ms_per_step=round(1e3 * s, 1),
                         tokens_per_s=round(B * T / s, 1), vs_eager=round(eager / s, 3)))
        print(f"gpt2 threads={threads} B={B} T={T} {name:36s} {1e3 * s:8.1f} ms/step {B * T / s:8.1f} tok/s "
              f"{eager / s:.3f}x eager", flush=True)
    return rows


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"torch_ext: matplotlib is not installed, no plot written ({path})")
        return
    threads = sorted({r["threads"] for r in rows})
    fig, axes = plt.subplots(1, len(threads), figsize=(6.5 * len(threads), 4.6), squeeze=False, sharey=True)
    for ax, nt in zip(axes[0], threads):
        rs = [r for r in rows if r["threads"] == nt]
        labels = [f"T={r['T']}\nC={r['C']}/{r['n_head']}" for r in rs]
        x = range(len(rs))
        for name, marker in (("eager", "o"), ("sdpa", "s"), ("compiled", "^")):
            ax.plot(x, [r[f"{name}_ms"] / r["llmcc_ms"] for r in rs], marker=marker, label=f"PyTorch {name}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"{nt} thread{'s' if nt > 1 else ''}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("time / llmcc's time (above 1: llmcc is faster)")
    axes[0][0].legend()
    fig.suptitle(f"Causal attention forward + backward, batch 8 ({cpu_name()})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"torch_ext: wrote {path}")


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"torch_ext: wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few small sizes and a 2-layer GPT-2 (a smoke run)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--gpt2-threads", type=int, default=None, help="threads for the GPT-2 step (default: the most)")
    ap.add_argument("--rounds", type=int, default=5, help="GPT-2 rounds (default 5)")
    ap.add_argument("--skip-gpt2", action="store_true")
    ap.add_argument("--skip-blocks", action="store_true")
    ap.add_argument("--gpt2-seq", type=int, default=128, help="T of the GPT-2 step (default 128; B is 4)")
    ap.add_argument("--skip-attention", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for the CSV files")
    ap.add_argument("--plot", default=None, help="PNG to write the attention plot to")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.out, exist_ok=True)
    print(f"torch_ext: torch {torch.__version__}, {cpu_name()}, llmcc GEMM {llmcc_torch.matmul_kernel_name()}")
    if not args.skip_attention:
        if args.quick:
            sizes = [(16, 64, 4), (64, 128, 4)]
        else:
            sizes = [(T, C, nh) for T in (16, 64, 256, 1024) for C, nh in ((64, 4), (256, 8), (768, 12))]
        rows = []
        bench_attention(sizes, threads, rows)
        write_csv(rows, os.path.join(args.out, "torch_ext_attention.csv"))
        if args.plot:
            plot(rows, args.plot)
    if not args.skip_blocks:
        cfg = ref.GptConfig(n_layer=2, n_head=4, n_embd=128) if args.quick else ref.GptConfig()
        shapes = [(2, 32)] if args.quick else [(4, 64), (4, 128), (8, 256)]
        rows = bench_blocks(args.gpt2_threads or max(threads), shapes, args.rounds, cfg)
        write_csv(rows, os.path.join(args.out, "torch_ext_blocks.csv"))
    if not args.skip_gpt2:
        if args.quick:
            cfg, B, T, steps = ref.GptConfig(n_layer=2, n_head=4, n_embd=128, block_size=64), 2, 32, 1
        else:
            cfg, B, T, steps = ref.GptConfig(), 4, args.gpt2_seq, 1
        rows = bench_gpt2(args.gpt2_threads or max(threads), B, T, args.rounds, steps, cfg)
        write_csv(rows, os.path.join(args.out, "torch_ext_gpt2.csv"))


if __name__ == "__main__":
    main()
