"""CUDA: the model layers' forward + backward at the shapes the model-layers issue names, vs PyTorch.

Attention (batch 8, heads 16, d 64, n 512 / 2048 / 4096; PyTorch's fp32
scaled_dot_product_attention), spectral convolution (batch 32, grid 4096, width 64,
modes 32; the usual rfft / einsum / irfft formulation), selective scan (batch 8, L 4096,
state 1536x16 flattened; a PyTorch loop over time), conv2d (batch 64, 64 channels,
56x56, 3x3, cuDNN). fp32, TF32 off. Prints median ms (the two frameworks timed in turns,
one call each per round), the ratio torchlean / torch and torchlean's peak device memory
over one step. Not a test.
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated subset: attention,spectral,scan,conv")
    args = ap.parse_args(argv)
    import torch
    import torchlean as tl
    from torchlean.nn import functional as F
    from torchlean.testing.timing import paired_event_median_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = tl.cuda.synchronize
    only = set(filter(None, args.only.split(",")))
    rng = np.random.default_rng(0)
    rows = []

    def pair(name, make_tl, make_torch, reps=None, warmup=5):
        fn_tl, fn_t = make_tl(), make_torch()
        fn_tl()
        sync()
        tl.cuda.reset_peak_memory_stats()
        fn_tl()
        sync()
        peak = tl.cuda.memory_stats()["peak_bytes"] / 2 ** 20
        t1, t2 = paired_event_median_ms([fn_tl, fn_t], reps or args.reps, warmup, [sync, torch.cuda.synchronize])
        rows.append((name, t1, t2, peak))
        print(f"{name:44s} {t1:9.3f} ms {t2:9.3f} ms {t1 / t2:6.2f}x  peak {peak:8.1f} MiB", flush=True)

    def arr(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    if not only or "attention" in only:
        for n in (512, 2048, 4096):
            q, k, v, g = (arr(8, 16, n, 64) for _ in range(4))

            def make_tl(q=q, k=k, v=v, g=g):
                ts = [tl.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
                gt = tl.tensor(g, device="cuda")

                def step():
                    F.scaled_dot_product_attention(*ts).backward(gt)
                return step

            def make_torch(q=q, k=k, v=v, g=g):
                ts = [torch.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
                gt = torch.tensor(g, device="cuda")

                def step():
                    torch.nn.functional.scaled_dot_product_attention(*ts).backward(gt)
                return step
            pair(f"attention fwd+bwd b8 h16 n{n} d64", make_tl, make_torch)

    if not only or "spectral" in only:
        x, wr, wi = arr(32, 4096, 64), arr(32, 64, 64, scale=0.1), arr(32, 64, 64, scale=0.1)
        g = arr(32, 4096, 64)

        def make_tl():
            ts = [tl.tensor(a, device="cuda", requires_grad=True) for a in (x, wr, wi)]
            gt = tl.tensor(g, device="cuda")

            def step():
                F.spectral_conv1d(*ts).backward(gt)
            return step

        def make_torch():
            xt, wrt, wit = (torch.tensor(a, device="cuda", requires_grad=True) for a in (x, wr, wi))
            gt = torch.tensor(g, device="cuda")

            def step():
                X = torch.fft.rfft(xt, dim=1)[:, :32]
                W = torch.complex(wrt, wit)
                Y = torch.einsum("bki,kio->bko", X, W)
                out = torch.zeros(32, 4096 // 2 + 1, 64, dtype=Y.dtype, device="cuda")
                out[:, :32] = Y
                torch.fft.irfft(out, n=4096, dim=1).backward(gt)
            return step
        pair("spectral conv fwd+bwd b32 grid4096 w64 m32", make_tl, make_torch)

    if not only or "scan" in only:
        S = 1536 * 16
        x, a, b, g = arr(8, 4096, S), rng.uniform(0.5, 0.99, S).astype(np.float32), arr(S), arr(8, 4096, S)

        def make_tl():
            ts = [tl.tensor(v, device="cuda", requires_grad=True) for v in (x, a, b)]
            gt = tl.tensor(g, device="cuda")

            def step():
                F.selective_scan(*ts).backward(gt)
            return step

        def make_torch():
            xt, at, bt = (torch.tensor(v, device="cuda", requires_grad=True) for v in (x, a, b))
            gt = torch.tensor(g, device="cuda")

            def step():
                h = torch.zeros(8, S, device="cuda")
                hs = []
                for t in range(4096):
                    h = at * h + bt * xt[:, t]
                    hs.append(h)
                torch.stack(hs, 1).backward(gt)
            return step
        # torch's loop over time takes about 17 s a call: three rounds (the ratio is near 1/1400)
        pair("selective scan fwd+bwd b8 L4096 S24576", make_tl, make_torch, reps=3, warmup=1)

    if not only or "conv" in only:
        x, w, g = arr(64, 64, 56, 56), arr(64, 64, 3, 3, scale=0.05), arr(64, 64, 56, 56)

        def make_tl():
            xt, wt = (tl.tensor(v, device="cuda", requires_grad=True) for v in (x, w))
            gt = tl.tensor(g, device="cuda")

            def step():
                F.conv2d(xt, wt, padding=1).backward(gt)
            return step

        def make_torch():
            xt, wt = (torch.tensor(v, device="cuda", requires_grad=True) for v in (x, w))
            gt = torch.tensor(g, device="cuda")

            def step():
                torch.nn.functional.conv2d(xt, wt, padding=1).backward(gt)
            return step
        pair("conv2d fwd+bwd b64 c64 56x56 3x3", make_tl, make_torch)


if __name__ == "__main__":
    main()
