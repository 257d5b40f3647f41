"""CPU timings of conv2d (forward + backward) and max_pool2d against torch, in one process.

    python -m torchlean.bench.bench_conv_cpu.py [--repeat 20] [--batch 8] [--channels 64] [--size 32]

Both sides run float32 on the same threads, on random (never zero) data, after
two warm-up runs; the two sides alternate run by run so that other load on the
machine hits both alike. Medians and the ratio of the minima are printed. torch is
only the yardstick here; it is not a dependency of torchlean.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from torchlean.autograd import Tape  # noqa: E402


def _timings_ms(fns, repeat):
    """Per function: (median, min) in ms; the functions run interleaved so that load hits all alike."""
    for fn in fns:
        fn()
        fn()
    ts = [[] for _ in fns]
    for _ in range(repeat):
        for t, fn in zip(ts, fns):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [(1e3 * statistics.median(t), 1e3 * min(t)) for t in ts]


def _ours_conv(x, w, b, g):
    def run():
        t = Tape()
        ix, iw, ib = t.leaf(x), t.leaf(w), t.leaf(b)
        y = t.op("conv", ix, iw, ib, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        t.backward(y, seed=g)
    return run


def _ours_conv_fwd(x, w, b):
    def run():
        t = Tape()
        ix, iw, ib = t.leaf(x, requires_grad=False), t.leaf(w, requires_grad=False), t.leaf(b, requires_grad=False)
        t.op("conv", ix, iw, ib, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    return run


def _ours_pool(x, g):
    def run():
        t = Tape()
        ix = t.leaf(x)
        y = t.op("max_pool", ix, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1))
        t.backward(y, seed=g)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=32)
    args = ap.parse_args(argv)
    import torch
    F = torch.nn.functional

    rng = np.random.default_rng(0)
    n, c, s = args.batch, args.channels, args.size
    x = rng.standard_normal((n, c, s, s)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    gy = rng.standard_normal((n, c, s, s)).astype(np.float32)
    gp = rng.standard_normal((n, c, s // 2, s // 2)).astype(np.float32)

    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    tgy, tgp = torch.tensor(gy), torch.tensor(gp)

    def torch_conv():
        y = F.conv2d(tx, tw, tb, 1, 1)
        torch.autograd.grad(y, (tx, tw, tb), tgy)

    def torch_conv_fwd():
        with torch.no_grad():
            F.conv2d(tx, tw, tb, 1, 1)

    def torch_pool():
        y = F.max_pool2d(tx, 2, 2)
        torch.autograd.grad(y, (tx,), tgp)

    rows = [
        (f"conv2d fwd      {n}x{c}x{s}x{s} 3x3 pad 1", _ours_conv_fwd(x, w, b), torch_conv_fwd),
        (f"conv2d fwd+bwd  {n}x{c}x{s}x{s} 3x3 pad 1", _ours_conv(x, w, b, gy), torch_conv),
        (f"max_pool2d fwd+bwd {n}x{c}x{s}x{s} 2x2 s2", _ours_pool(x, gp), torch_pool),
    ]
    print(f"torch {torch.__version__} threads {torch.get_num_threads()}, numpy {np.__version__}, "
          f"{args.repeat} interleaved runs; ratio = torchlean / torch of the medians (of the minima)")
    print(f"{'case':44s} {'torchlean ms':>13s} {'torch ms':>10s} {'ratio':>7s} {'min ratio':>9s}")
    for name, ours, theirs in rows:
        (a, amin), (t, tmin) = _timings_ms([ours, theirs], args.repeat)
        print(f"{name:44s} {a:13.2f} {t:10.2f} {a / t:7.2f} {amin / tmin:9.2f}")


if __name__ == "__main__":
    main()
