"""Host convolutions at few output positions per sample: one GEMM over the batch against per-sample GEMMs,
and torch's CPU convolution in the same process (forward + input and weight gradients).

    python benchmarks/cpu_conv_batched.py

Shapes are ResNet-18's layers on 28 x 28 inputs (batch 64, the pytorch/examples siamese network) and two
larger-image layers where the per-sample form stays (P >= 512).
"""

import time

import numpy as np
import torch

import torchlean as tl
from torchlean.kernels.host import conv as H

SHAPES = [  # (N, C_in, C_out, H = W, stride)
    (64, 64, 64, 7, 1), (64, 64, 128, 7, 2), (64, 128, 128, 4, 1), (64, 128, 256, 4, 2), (64, 256, 256, 2, 1),
    (64, 256, 512, 2, 2), (64, 512, 512, 1, 1), (32, 64, 64, 28, 1), (32, 64, 64, 56, 1)]


def best(fn, n=5):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3


def main():
    torch.set_num_threads(torch.get_num_threads())
    rng = np.random.default_rng(0)
    print("| N, C_in -> C_out, H x W, stride | P | per-sample (ms) | one GEMM (ms) | torch (ms) | one GEMM / torch |")
    print("|---|---|---|---|---|---|")
    orig = H._one_gemm
    for n, ci, co, hw, s in SHAPES:
        x = rng.standard_normal((n, ci, hw, hw), dtype=np.float32)
        w = rng.standard_normal((co, ci, 3, 3), dtype=np.float32) * 0.05

        def ours():
            xt, wt = tl.tensor(x, requires_grad=True), tl.tensor(w, requires_grad=True)
            tl.nn.functional.conv2d(xt, wt, stride=s, padding=1).sum().backward()
            return xt.grad.numpy(), wt.grad.numpy()

        def theirs():
            xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
            torch.nn.functional.conv2d(xt, wt, stride=s, padding=1).sum().backward()
            return xt.grad.numpy(), wt.grad.numpy()

        for a, b in zip(ours(), theirs()):
            assert np.allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(b).max())
        H._one_gemm = lambda *a: False
        per_sample = best(ours)
        H._one_gemm = orig
        one, ref = best(ours), best(theirs)
        p = ((hw + 2 - 3) // s + 1) ** 2
        print(f"| {n}, {ci} -> {co}, {hw} x {hw}, {s} | {p} | {per_sample:.1f} | {one:.1f} | {ref:.1f} | {one / ref:.2f} |")


if __name__ == "__main__":
    main()
