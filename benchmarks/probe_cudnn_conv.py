"""CUDA: convolution forward, input gradient and weight gradient through cuDNN (the frontend's graph
API) against torchlean's own im2col + GEMM kernels and against torch (cuDNN), one process, float32,
TF32 off. Each row also gives the largest difference of cuDNN's and the native result from a
float64 reference (the native kernels in float64), relative to the reference's largest entry.

    python benchmarks/probe_cudnn_conv.py [--reps 20]

Shapes: ResNet-18 at CIFAR size (batch 128), U-Net-style 2-d layers, a transposed (up-sampling)
convolution, and the depthwise causal conv1d of a Mamba block.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

# (name, x shape, w shape, stride, padding, dilation, groups, transposed)
CASES = [
    ("resnet stem 3->64 3x3", (128, 3, 32, 32), (64, 3, 3, 3), 1, 1, 1, 1, False),
    ("resnet 64->64 3x3 32^2", (128, 64, 32, 32), (64, 64, 3, 3), 1, 1, 1, 1, False),
    ("resnet 64->128 3x3 s2", (128, 64, 32, 32), (128, 64, 3, 3), 2, 1, 1, 1, False),
    ("resnet 64->128 1x1 s2", (128, 64, 32, 32), (128, 64, 1, 1), 2, 0, 1, 1, False),
    ("resnet 128->128 3x3 16^2", (128, 128, 16, 16), (128, 128, 3, 3), 1, 1, 1, 1, False),
    ("resnet 256->256 3x3 8^2", (128, 256, 8, 8), (256, 256, 3, 3), 1, 1, 1, 1, False),
    ("resnet 512->512 3x3 4^2", (128, 512, 4, 4), (512, 512, 3, 3), 1, 1, 1, 1, False),
    ("unet 32->64 3x3 128^2", (8, 32, 128, 128), (64, 32, 3, 3), 1, 1, 1, 1, False),
    ("unet up 128->64 2x2 s2", (8, 128, 32, 32), (128, 64, 2, 2), 2, 0, 1, 1, True),
    ("vit patch 3->384 4x4 s4", (128, 3, 32, 32), (384, 3, 4, 4), 4, 0, 1, 1, False),
    ("mamba depthwise k4 1d", (16, 1536, 1027), (1536, 1, 4), 1, 0, 1, 1536, False),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    import cupy
    import torch
    import torch.nn.functional as F

    from torchlean.kernels import get_kernels
    from torchlean.kernels.cuda import cudnn
    from torchlean.testing.timing import paired_event_median_ms

    K = get_kernels("cuda")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(cudnn.status())
    rng = np.random.default_rng(0)
    sync = cupy.cuda.Device().synchronize
    print(f"{'case':<26} {'part':<6} {'cudnn ms':>9} {'tuned ms':>9} {'native ms':>10} {'torch ms':>9} {'cudnn/torch':>12} "
          f"{'tuned/torch':>10} {'native/torch':>13} {'err cudnn':>10} {'err native':>11}")
    for name, xs, ws, s, p, dil, G, tr in CASES:
        d = len(xs) - 2
        st, pa, di = (s,) * d, (p,) * d, (dil,) * d
        x = cupy.asarray(rng.standard_normal(xs, dtype=np.float32))
        w = cupy.asarray(rng.standard_normal(ws, dtype=np.float32) * 0.1)
        if tr:
            fwd = lambda a, b: K.conv_transpose_forward(a, b, None, st, pa, (0,) * d, di, G)  # noqa: E731
            bwd = lambda a, b, g: K.conv_transpose_backward(a, b, g, st, pa, (0,) * d, di, G, True, True, False)  # noqa: E731
            tf = [None, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][d]
            bwd_x = lambda a, b, g: K.conv_transpose_backward(a, b, g, st, pa, (0,) * d, di, G, True, False, False)  # noqa: E731
            bwd_w = lambda a, b, g: K.conv_transpose_backward(a, b, g, st, pa, (0,) * d, di, G, False, True, False)  # noqa: E731
        else:
            fwd = lambda a, b: K.conv_forward(a, b, None, st, pa, di, G)  # noqa: E731
            bwd = lambda a, b, g: K.conv_backward(a, b, g, st, pa, di, G, True, True, False)  # noqa: E731
            tf = [None, F.conv1d, F.conv2d, F.conv3d][d]
            bwd_x = lambda a, b, g: K.conv_backward(a, b, g, st, pa, di, G, True, False, False)  # noqa: E731
            bwd_w = lambda a, b, g: K.conv_backward(a, b, g, st, pa, di, G, False, True, False)  # noqa: E731
        cudnn.FLAGS.enabled = False
        y64 = fwd(x.astype(np.float64), w.astype(np.float64))
        g = cupy.asarray(rng.standard_normal(y64.shape, dtype=np.float32))
        dx64, dw64, _ = bwd(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64))
        y_n = fwd(x, w)
        dx_n, dw_n, _ = bwd(x, w, g)
        cudnn.FLAGS.enabled = True
        y_c = fwd(x, w)
        dx_c, dw_c, _ = bwd(x, w, g)

        def err(a, ref):
            return float(cupy.abs(a - ref).max() / cupy.abs(ref).max())

        tx, tw, tg = (torch.from_dlpack(v) for v in (x, w, g))
        kw = dict(stride=s, padding=p, dilation=dil, groups=G)
        # torch: aten's convolution_backward, one gradient at a time (what autograd calls)
        tb = torch.ops.aten.convolution_backward

        def torch_part(mask):
            return lambda: tb(tg, tx, tw, None, [s] * d, [p] * d, [dil] * d, tr, [0] * d, G, mask)

        def native(fn):
            def run():
                cudnn.FLAGS.enabled = False
                try:
                    fn()
                finally:
                    cudnn.FLAGS.enabled = True
            return run

        def tuned(fn):
            def run():
                cudnn.FLAGS.benchmark = True
                try:
                    fn()
                finally:
                    cudnn.FLAGS.benchmark = False
            return run

        rows = [("fwd/y", lambda: fwd(x, w), lambda: tf(tx, tw, **kw), (y_c, y_n, y64)),
                ("dx", lambda: bwd_x(x, w, g), torch_part([True, False, False]), (dx_c, dx_n, dx64)),
                ("dw", lambda: bwd_w(x, w, g), torch_part([False, True, False]), (dw_c, dw_n, dw64))]
        def host_us(fn, sync_fn):
            ts = []
            for _ in range(15):
                sync_fn()
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e6)
            sync_fn()
            return sorted(ts)[7]

        print(f"{'':<26} host us per call, fwd: cudnn {host_us(rows[0][1], sync):.0f}, native "
              f"{host_us(native(rows[0][1]), sync):.0f}, torch {host_us(rows[0][2], torch.cuda.synchronize):.0f}")
        for part, ours, theirs, (a_c, a_n, ref) in rows:
            tc, tb_, tn, tt = paired_event_median_ms([ours, tuned(ours), native(ours), theirs], args.reps, 3,
                                                     [sync, sync, sync, torch.cuda.synchronize])
            print(f"{name:<26} {part:<6} {tc:9.3f} {tb_:9.3f} {tn:10.3f} {tt:9.3f} {tc / tt:12.2f} {tb_ / tt:10.2f} "
                  f"{tn / tt:13.2f} {err(a_c, ref):10.1e} {err(a_n, ref):11.1e}", flush=True)

if __name__ == "__main__":
    main()
