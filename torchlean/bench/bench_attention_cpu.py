"""Attention forward + backward on the CPU: torchlean's flash_attention (float32)
against torch's scaled_dot_product_attention in the same process.

    python -m torchlean.bench.bench_attention_cpu.py [--reps 5] [--mask]

Prints the median wall time of each and the ratio torchlean / torch (lower is
better). Sizes are (batch*heads, n, d).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from torchlean.autograd import run_op

SIZES = [(8, 128, 64), (16, 256, 64), (8, 1024, 64), (4, 2048, 64)]


def _median_time(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(b, n, d, reps, masked):
    import torch

    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((b, n, d)).astype(np.float32) for _ in range(4))
    mask = np.tril(np.ones((n, n), bool))[None].repeat(b, 0) if masked else None
    attrs = {"mask": mask, "hard": True} if masked else {}

    def ours():
        y, bwd = run_op("flash_attention", [q, k, v], attrs, fast=True)
        bwd(g, (True, True, True))

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tg = torch.tensor(g)
    tmask = torch.tensor(mask) if masked else None

    def theirs():
        for t in (tq, tk, tv):
            t.grad = None
        y = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
        y.backward(tg)

    a, t = _median_time(ours, reps), _median_time(theirs, reps)
    return a, t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mask", action="store_true", help="causal hard mask (torch: boolean attn_mask)")
    args = ap.parse_args()
    import torch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; float32; fwd+bwd; "
          f"{'causal mask' if args.mask else 'no mask'}")
    print(f"{'batch':>6} {'n':>6} {'d':>4} {'torchlean ms':>13} {'torch ms':>9} {'ratio':>6}")
    for b, n, d in SIZES:
        a, t = bench(b, n, d, args.reps, args.mask)
        print(f"{b:>6} {n:>6} {d:>4} {a * 1e3:>13.2f} {t * 1e3:>9.2f} {a / t:>6.2f}")


if __name__ == "__main__":
    main()
