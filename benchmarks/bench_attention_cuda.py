"""CUDA: the flash attention kernels alone, forward and backward timed apart, vs PyTorch's fp32
``scaled_dot_product_attention`` (its memory-efficient kernel) in the same process.

Batch 8 x 16 heads, d 64, n 512 / 2048 / 4096; TF32 off. Prints median ms (CUDA events),
the achieved TFLOP/s (forward 4 b n^2 d flops; the backward counts 7 n^2 d per head, its
recomputed logits included) and the largest difference of the outputs. Not a test.
"""

from __future__ import annotations


def main():
    import cupy
    import numpy as np
    import torch

    from torchlean.kernels import get_kernels
    from torchlean.testing.timing import event_median_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    K = get_kernels("cuda")
    rng = np.random.default_rng(0)
    sync = cupy.cuda.Device().synchronize
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for n in (512, 2048, 4096):
        B, d = 128, 64
        q, k, v, g = (cupy.asarray(rng.standard_normal((B, n, d)).astype(np.float32)) for _ in range(4))
        out, lse = K.flash_attention_fwd(q, k, v, None, 0.125, False)
        tf = event_median_ms(lambda: K.flash_attention_fwd(q, k, v, None, 0.125, False), 10, 2, sync)
        tb = event_median_ms(lambda: K.flash_attention_bwd(q, k, v, None, out, lse, g, 0.125, False), 10, 2, sync)
        qt, kt, vt = (torch.as_tensor(a, device="cuda").reshape(8, 16, n, d).requires_grad_() for a in (q, k, v))
        gt = torch.as_tensor(g, device="cuda").reshape(8, 16, n, d)
        ot = sdpa(qt, kt, vt, scale=0.125)
        tff = event_median_ms(lambda: sdpa(qt, kt, vt, scale=0.125), 10, 2, torch.cuda.synchronize)
        tfb = event_median_ms(lambda: torch.autograd.grad(ot, (qt, kt, vt), gt, retain_graph=True), 10, 2,
                              torch.cuda.synchronize)
        fl = 4 * B * n * n * d
        err = float(cupy.abs(out.reshape(8, 16, n, d) - cupy.asarray(ot.detach())).max())
        print(f"n{n}: fwd {tf:.2f} ms ({fl / tf / 1e9:.1f} TF/s) torch {tff:.2f} ({tf / tff:.2f}x) | "
              f"bwd {tb:.2f} ms ({3.5 * fl / tb / 1e9:.1f} TF/s) torch {tfb:.2f} ({tb / tfb:.2f}x) | "
              f"max err out {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
