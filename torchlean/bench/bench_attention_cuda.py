"""CUDA: the flash attention kernels alone, forward and backward timed apart, vs PyTorch's fp32
``scaled_dot_product_attention`` (its memory-efficient kernel) in the same process.

Batch 8 x 16 heads, d 64, n 512 / 2048 / 4096; TF32 off. Prints median ms (CUDA events),
the achieved TFLOP/s (forward 4 b n^2 d flops; the backward counts 7 n^2 d per head, its
recomputed logits included) and the largest differences from torch of the output and the
gradients, for the tensor-core (3xTF32) kernels and, with ``--fma``, the float32 FMA kernels
too. The tensor-core backward is also timed with its two kernels on one stream. Not a test.
"""

from __future__ import annotations


def main(argv=None):
    import argparse

    import cupy
    import numpy as np
    import torch

    from torchlean.kernels import get_kernels
    from torchlean.kernels.cuda import attention
    from torchlean.testing.timing import event_median_ms

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fma", action="store_true", help="also time the float32 FMA kernels")
    ap.add_argument("--n", default="512,2048,4096", help="sequence lengths (comma-separated)")
    args = ap.parse_args(argv)

    torch.backends.cuda.matmul.allow_tf32 = False
    K = get_kernels("cuda")
    rng = np.random.default_rng(0)
    sync = cupy.cuda.Device().synchronize
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for n in (int(x) for x in args.n.split(",")):
        B, d = 128, 64
        q, k, v, g = (cupy.asarray(rng.standard_normal((B, n, d)).astype(np.float32)) for _ in range(4))
        qt, kt, vt = (torch.as_tensor(a, device="cuda").reshape(8, 16, n, d).requires_grad_() for a in (q, k, v))
        gt = torch.as_tensor(g, device="cuda").reshape(8, 16, n, d)
        ot = sdpa(qt, kt, vt, scale=0.125)
        want = [ot.detach()] + list(torch.autograd.grad(ot, (qt, kt, vt), gt, retain_graph=True))
        tff = event_median_ms(lambda: sdpa(qt, kt, vt, scale=0.125), 10, 2, torch.cuda.synchronize)
        tfb = event_median_ms(lambda: torch.autograd.grad(ot, (qt, kt, vt), gt, retain_graph=True), 10, 2,
                              torch.cuda.synchronize)
        fl = 4 * B * n * n * d
        for force in ((None, False) if args.fma else (None,)):
            attention.FORCE_TENSOR_CORES = force
            out, lse = K.flash_attention_fwd(q, k, v, None, 0.125, False)
            grads = K.flash_attention_bwd(q, k, v, None, out, lse, g, 0.125, False)
            tf = event_median_ms(lambda: K.flash_attention_fwd(q, k, v, None, 0.125, False), 10, 2, sync)
            tb = event_median_ms(lambda: K.flash_attention_bwd(q, k, v, None, out, lse, g, 0.125, False), 10, 2,
                                 sync)
            seq = ""
            if force is None:  # the backward's two kernels one after the other, for comparison
                attention.CONCURRENT_BWD = False
                ts = event_median_ms(lambda: K.flash_attention_bwd(q, k, v, None, out, lse, g, 0.125, False), 10,
                                     2, sync)
                attention.CONCURRENT_BWD = True
                seq = f" (one stream {ts:.2f} ms, {ts / tfb:.2f}x)"
            errs = [float(cupy.abs(a.reshape(8, 16, n, d) - cupy.asarray(w)).max()) / max(float(w.abs().max()), 1e-30)
                    for a, w in zip([out] + list(grads), want)]
            kind = "fma" if force is False else "tc "
            print(f"n{n} {kind}: fwd {tf:.2f} ms ({fl / tf / 1e9:.1f} TF/s) torch {tff:.2f} ({tf / tff:.2f}x) | "
                  f"bwd {tb:.2f} ms ({3.5 * fl / tb / 1e9:.1f} TF/s) torch {tfb:.2f} ({tb / tfb:.2f}x){seq} | "
                  f"max rel err out/dq/dk/dv vs torch " + " ".join(f"{x:.1e}" for x in errs), flush=True)
        attention.FORCE_TENSOR_CORES = None


if __name__ == "__main__":
    main()
