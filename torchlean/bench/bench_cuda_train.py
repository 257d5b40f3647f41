"""CUDA: MLP training steps and eager per-op overhead, torchlean vs PyTorch in one process.

fp32 strict in both (TF32 off). Times are medians of CUDA-event-bracketed runs after a
warm-up, the two frameworks timed in turns (one call each per round); inputs are random
(never zeros). Not a test: prints a table of ratios
(torchlean / torch, lower is better).
"""

from __future__ import annotations

import argparse

import numpy as np


def tiny_chain(x, y, links=25):
    """``links`` rounds of ``x <- relu(x * y + x0)``: 3 recorded ops each (torch or torchlean tensors)."""
    z = x
    for _ in range(links):
        z = (z * y + x).relu()
    return z


def tl_step(sizes, batch):
    import torchlean as tl
    from torchlean import nn, optim
    tl.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    m = nn.Sequential(*layers).to("cuda")
    opt = optim.Adam(m.parameters(), lr=1e-3)
    x = tl.randn(batch, sizes[0], device="cuda")
    y = tl.tensor(np.arange(batch) % sizes[-1], device="cuda")

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return step, m


def torch_step(torch, tl_model, sizes, batch):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    m = torch.nn.Sequential(*layers).cuda()
    m.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in tl_model.state_dict().items()})
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    x = torch.randn(batch, sizes[0], device="cuda")
    y = torch.arange(batch, device="cuda") % sizes[-1]

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args(argv)
    import torch
    import torchlean as tl
    from torchlean.testing.timing import paired_event_median_ms
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = tl.cuda.synchronize
    rows = []
    for name, sizes, batch in (("mlp 784-1024-1024-10 b256", (784, 1024, 1024, 10), 256),
                               ("mlp 6x4096 b1024", (4096,) * 7, 1024)):
        s_tl, m = tl_step(sizes, batch)
        s_t = torch_step(torch, m, sizes, batch)
        t1, t2 = paired_event_median_ms([s_tl, s_t], args.reps, 5, [sync, torch.cuda.synchronize])
        rows.append((name + " train step", t1 * 1e3, t2 * 1e3, "us", "<= 1.2"))
    # eager overhead: a chain of tiny ops with autograd recording (host-bound)
    x = tl.randn(16, device="cuda", requires_grad=True)
    y = tl.randn(16, device="cuda", requires_grad=True)
    tx = torch.randn(16, device="cuda", requires_grad=True)
    ty = torch.randn(16, device="cuda", requires_grad=True)

    t1, t2 = (t / 75 for t in paired_event_median_ms([lambda: tiny_chain(x, y), lambda: tiny_chain(tx, ty)],
                                                       args.reps, 5, [sync, torch.cuda.synchronize]))
    rows.append(("tiny op (16,) recording, per op", t1 * 1e3, t2 * 1e3, "us", "<= 1.5"))
    print(f"{'case':40s} {'torchlean':>12s} {'torch':>12s} {'ratio':>7s}  goal")
    for name, a, b, unit, goal in rows:
        print(f"{name:40s} {a:10.1f}{unit} {b:10.1f}{unit} {a / b:6.2f}x  {goal}")


if __name__ == "__main__":
    main()
