"""CUDA: a GPT with GPT-2's vocabulary (50304) captured as a CUDA graph: the embedding gradient is
a scatter-add over every token, which a graph must do without a host sort plan. Eager step vs
captured step (forward, cross-entropy, backward, Adam), median ms; the losses must agree.

    python benchmarks/probe_gpt_vocab_capture.py [--layers 2] [--batch 8] [--seq 256]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    args = ap.parse_args(argv)
    import torchlean as tl
    from torchlean.models import GPT
    tl.manual_seed(0)
    model = GPT(args.vocab, block_size=args.seq, n_layer=args.layers, n_head=args.heads, n_embd=args.width).to("cuda")
    opt = tl.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = tl.tensor(rng.integers(0, args.vocab, (args.batch, args.seq)), device="cuda")
    y = tl.tensor(rng.integers(0, args.vocab, (args.batch, args.seq)), device="cuda")

    def loss_fn(a, b):
        return tl.nn.functional.cross_entropy(model(a).reshape(-1, args.vocab), b.reshape(-1))

    def eager():
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss

    captured = tl.cuda.capture_step(loss_fn, x, y)

    def graph():
        opt.zero_grad()
        loss = captured(x, y)
        opt.step()
        return loss

    def med(fn, n=10):
        for _ in range(3):
            fn()
        tl.cuda.synchronize()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn().item()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e3

    te, tg = med(eager), med(graph)
    print(f"GPT {args.layers} x {args.width}, vocab {args.vocab}, batch {args.batch} x {args.seq}: "
          f"eager {te:.2f} ms, captured {tg:.2f} ms ({te / tg:.2f}x)")


if __name__ == "__main__":
    main()
