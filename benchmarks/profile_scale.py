"""Where a scale model's eager training step spends its time, torchlean against torch: torch.profiler
over a few steps of each (it sees CuPy's kernels too), printing wall time per step, GPU kernel time
and kernel count per step, the largest kernels, and a cProfile of torchlean's host side.

    python benchmarks/profile_scale.py --model resnet18 [--steps 5] [--top 15]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    import torchlean as tl
    from torchlean.bench.bench_scale import build, torch_steps, torchlean_steps

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    batch = build(tl, args.model)[1](np.random.default_rng(0))
    ts, _, state, _ = torch_steps(torch, args.model, batch, False, graph_too=False)
    ls, _, _ = torchlean_steps(tl, args.model, batch, state, capture_too=False)
    for label, step, sync in (("torch", ts["torch eager"], torch.cuda.synchronize),
                              ("torchlean", ls["torchlean eager"], tl.cuda.synchronize)):
        for _ in range(3):
            step()
        sync()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        wall = (time.perf_counter() - t0) * 1e3 / args.steps
        host = []
        for _ in range(args.steps):   # host time to enqueue one step, starting from an idle GPU
            sync()
            t0 = time.perf_counter()
            step()
            host.append((time.perf_counter() - t0) * 1e3)
            sync()
        print(f"== {label} {args.model}: host enqueue per step (idle GPU at start) "
              f"median {sorted(host)[len(host) // 2]:.2f} ms, min {min(host):.2f} ms")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                step()
            sync()
        kern = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        gpu = sum(e.device_time for e in kern) / 1e3 / args.steps
        print(f"== {label} {args.model}: wall {wall:.2f} ms/step, GPU kernels {gpu:.2f} ms/step, "
              f"{len(kern) / args.steps:.0f} kernels/step")
        agg = {}
        for e in kern:
            n, t = agg.get(e.name, (0, 0.0))
            agg[e.name] = (n + 1, t + e.device_time)
        for name, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:args.top]:
            print(f"  {t / 1e3 / args.steps:8.3f} ms {n / args.steps:6.1f}x  {name[:110]}")
    pr = cProfile.Profile()
    step = ls["torchlean eager"]
    pr.enable()
    for _ in range(args.steps):
        step()
    tl.cuda.synchronize()
    pr.disable()
    out = io.StringIO()
    stats = pstats.Stats(pr, stream=out)
    stats.sort_stats("tottime").print_stats(args.top + 25)
    stats.sort_stats("cumulative").print_stats(args.top + 40)
    print(out.getvalue())


if __name__ == "__main__":
    main()
