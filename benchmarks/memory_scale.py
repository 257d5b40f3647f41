"""Where a scale model's step holds its memory, torchlean against torch: the peak and the live bytes
after each phase of one eager step (forward + loss, backward, optimizer step), less what was
allocated before the model was built, on the GPU.

    python benchmarks/memory_scale.py [--models gpt2,gpt6,vit,resnet18,mlp,lstm]
"""

from __future__ import annotations

import argparse

import numpy as np


def phases(T, name, batch, state=None):
    """``{phase: (peak MiB, live MiB after)}`` of one eager step of ``T``'s model, and torch's weights."""
    from torchlean.bench.bench_scale import _eager
    MiB = 2 ** 20
    T.cuda.synchronize()
    base = T.cuda.memory_allocated()
    model, loss_fn, x, y, opt, eager, _, state, _ = _eager(T, name, batch, state)
    out = {}
    opt.zero_grad(set_to_none=True)
    T.cuda.synchronize()
    out["start"] = (0.0, (T.cuda.memory_allocated() - base) / MiB)
    for phase, fn in (("forward", lambda: loss_fn(model, x, y)), ("backward", None), ("step", opt.step)):
        T.cuda.reset_peak_memory_stats()
        if phase == "forward":
            loss = fn()
        elif phase == "backward":
            loss.backward()
        else:
            fn()
        T.cuda.synchronize()
        out[phase] = ((T.cuda.max_memory_allocated() - base) / MiB, (T.cuda.memory_allocated() - base) / MiB)
    del loss, model, opt, x, y, eager
    return out, state


def main(argv=None):
    from torchlean.bench.bench_scale import MODELS, build
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    import torch

    import torchlean as tl
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"{'model':10} {'phase':9} {'torch peak':>11} {'tl peak':>9} {'ratio':>6}   {'torch live':>10} {'tl live':>8}")
    for name in args.models.split(","):
        batch = build(tl, name)[1](np.random.default_rng(0))
        tp, state = phases(torch, name, batch)
        lp, _ = phases(tl, name, batch, state)
        for ph in tp:
            (a, la), (b, lb) = tp[ph], lp[ph]
            r = f"{b / a:.2f}" if a else "-"
            print(f"{name:10} {ph:9} {a:11.0f} {b:9.0f} {r:>6}   {la:10.0f} {lb:8.0f}")
        torch.cuda.empty_cache()
        tl.cuda.empty_cache()


if __name__ == "__main__":
    main()
