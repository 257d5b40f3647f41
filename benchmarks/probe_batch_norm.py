"""CUDA: batch normalization's kernels (forward + backward) at ResNet-18 CIFAR shapes, against the
host algorithm over CuPy they replace and against torch's F.batch_norm (cuDNN), one process.

    python benchmarks/probe_batch_norm.py
"""

from __future__ import annotations

import numpy as np


def main():
    import cupy
    import torch

    from torchlean.kernels import get_kernels
    from torchlean.kernels.host import norm as host
    from torchlean.testing.timing import paired_event_median_ms

    K = get_kernels("cuda")
    rng = np.random.default_rng(0)
    print(f"{'shape (N, C, S)':<20} {'native ms':>10} {'host-on-cupy':>13} {'torch':>8} {'native/torch':>13} "
          f"{'max |dy|':>9} {'max |ddx|':>9}")
    for shape in ((128, 64, 1024), (128, 128, 256), (128, 256, 64), (128, 512, 16)):
        x = cupy.asarray(rng.standard_normal(shape, dtype=np.float32) * 3 + 1)
        g = cupy.asarray(rng.standard_normal(shape, dtype=np.float32))
        gamma = cupy.asarray(rng.standard_normal(shape[1], dtype=np.float32))
        beta = cupy.asarray(rng.standard_normal(shape[1], dtype=np.float32))

        def native():
            y, m, r = K.batch_norm_fwd(x, gamma, beta, 1e-5)
            return y, K.batch_norm_bwd(x, gamma, m, r, g)

        def old():
            y, m, r = host.batch_norm_fwd(x, gamma, beta, 1e-5, xp=cupy)
            return y, host.batch_norm_bwd(x, gamma, m, r, g, xp=cupy)

        tx = torch.from_dlpack(x).view(shape[0], shape[1], -1, 1).clone().requires_grad_(True)
        tg = torch.from_dlpack(g).view(shape[0], shape[1], -1, 1).clone()
        tw = torch.from_dlpack(gamma).clone().requires_grad_(True)
        tb = torch.from_dlpack(beta).clone().requires_grad_(True)

        def ref():
            y = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5)
            y.backward(tg)

        (y1, (dx1, _, _)), (y0, (dx0, _, _)) = native(), old()
        dy = float(cupy.abs(y1 - y0).max())
        ddx = float(cupy.abs(dx1 - dx0).max())
        t_new, t_old, t_ref = paired_event_median_ms([native, old, ref], 20, 3,
                                                     [cupy.cuda.Device().synchronize, cupy.cuda.Device().synchronize,
                                                      torch.cuda.synchronize])
        print(f"{str(shape):<20} {t_new:10.3f} {t_old:13.3f} {t_ref:8.3f} {t_new / t_ref:13.2f} {dy:9.2e} {ddx:9.2e}",
              flush=True)


if __name__ == "__main__":
    main()
