"""CUDA: how cuDNN's engine choice moves whole training steps (ResNet-18 and ViT-S of bench_scale):
eager step time with cuDNN's heuristics free to pick FFT and Winograd engines, with them excluded
(the default), with ``backends.cudnn.benchmark = True``, and with cuDNN off, against torch eager, one process.

    python benchmarks/probe_cudnn_choice.py [--models resnet18,vit]
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,vit")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import torch

    import torchlean as tl
    from torchlean.bench.bench_scale import build, time_modes, torch_steps, torchlean_steps
    from torchlean.kernels.cuda import cudnn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    default = cudnn.EXCLUDED_NOTES  # nondeterministic, FFT and Winograd engines excluded
    variants = {"heuristics, FFT/Winograd allowed": (True, False, ("NONDETERMINISTIC",)),
                "default": (True, False, default),
                "benchmark": (True, True, default),
                "cudnn off": (False, False, default)}
    for name in args.models.split(","):
        batch = build(tl, name)[1](np.random.default_rng(0))
        ts, _, state, tpeak = torch_steps(torch, name, batch, False, graph_too=False)
        steps, syncs = dict(ts), {"torch eager": torch.cuda.synchronize}
        for label, (enabled, bench, notes) in variants.items():
            cudnn.FLAGS.enabled, cudnn.FLAGS.benchmark, cudnn.EXCLUDED_NOTES = enabled, bench, notes
            cudnn._plans.clear()
            ls, _, _ = torchlean_steps(tl, name, batch, state, capture_too=False)
            fn = ls["torchlean eager"]

            def run(fn=fn, enabled=enabled, bench=bench, notes=notes):
                cudnn.FLAGS.enabled, cudnn.FLAGS.benchmark, cudnn.EXCLUDED_NOTES = enabled, bench, notes
                fn()
            run()
            steps[label], syncs[label] = run, tl.cuda.synchronize
        ms = time_modes(steps, syncs, args.rounds, 3)
        base = ms["torch eager"]
        print(f"{name}: torch eager {base:.2f} ms; " + ", ".join(
            f"{k} {v:.2f} ms ({base / v:.2f}x)" for k, v in ms.items() if k != "torch eager"), flush=True)
        cudnn.FLAGS.enabled, cudnn.FLAGS.benchmark, cudnn.EXCLUDED_NOTES = True, False, default


if __name__ == "__main__":
    main()
