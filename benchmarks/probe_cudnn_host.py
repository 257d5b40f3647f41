"""Host cost of one cuDNN convolution call, torchlean against torch, on the ResNet-18 (CIFAR, batch
128) shapes: microseconds of host time per call with the GPU idle when the call starts (median of
many), for torchlean's whole call (``cudnn.fprop`` / ``dgrad`` / ``wgrad``: plan lookup, output and
workspace allocation, the frontend's ``execute``), the frontend's ``execute`` alone, and torch's
``conv2d`` / ``convolution_backward``; then the GPU time of each (CUDA events) and the engine
cuDNN's heuristics chose. Not a test; prints one table.

    python benchmarks/probe_cudnn_host.py [--reps 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from probe_host import idle_us  # the same idle-GPU host timing (benchmarks/probe_host.py)

# (name, x shape, w shape, stride, padding)
CASES = [
    ("stem 3->64 32^2", (128, 3, 32, 32), (64, 3, 3, 3), 1, 1),
    ("64->64 32^2", (128, 64, 32, 32), (64, 64, 3, 3), 1, 1),
    ("64->128 s2", (128, 64, 32, 32), (128, 64, 3, 3), 2, 1),
    ("64->128 1x1 s2", (128, 64, 32, 32), (128, 64, 1, 1), 2, 0),
    ("128->128 16^2", (128, 128, 16, 16), (128, 128, 3, 3), 1, 1),
    ("256->256 8^2", (128, 256, 8, 8), (256, 256, 3, 3), 1, 1),
    ("512->512 4^2", (128, 512, 4, 4), (512, 512, 3, 3), 1, 1),
]


def busy_us(fn, sync, busy, reps=20):
    """Host time of one call made while the GPU is still busy with earlier work (a long product):
    a call that waits for the device shows the wait here."""
    ts = []
    for _ in range(reps):
        sync()
        busy()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    sync()
    return statistics.median(ts) * 1e6


def gpu_ms(fn, reps=20):
    import cupy
    fn()
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    e1.synchronize()
    return cupy.cuda.get_elapsed_time(e0, e1) / reps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args(argv)
    import cupy
    import torch
    import torch.nn.functional as F

    from torchlean.kernels.cuda import cudnn

    torch.backends.cudnn.allow_tf32 = False
    sync = cupy.cuda.Device().synchronize
    rng = np.random.default_rng(0)
    print(cudnn.status())
    big = cupy.ones((4096, 4096), dtype=np.float32)
    tbig = torch.ones(4096, 4096, device="cuda")

    def busy():
        for _ in range(3):
            big @ big

    def tbusy():
        for _ in range(3):
            tbig @ tbig
    print(f"{'case':<16} {'part':<6} {'tl call us':>10} {'execute us':>10} {'no handle':>10} {'torch us':>9} {'busy us':>8} {'torch busy':>10} "
          f"{'tl gpu ms':>9} {'torch gpu':>9}  engine")
    for name, xs, ws, s, p in CASES:
        x = cupy.asarray(rng.standard_normal(xs, dtype=np.float32))
        w = cupy.asarray(rng.standard_normal(ws, dtype=np.float32) * 0.1)
        st, pa, di = (s, s), (p, p), (1, 1)
        ys = (xs[0], ws[0]) + tuple((n + 2 * p - k) // s + 1 for n, k in zip(xs[2:], ws[2:]))
        g = cupy.asarray(rng.standard_normal(ys, dtype=np.float32))
        tx, tw, tg = (torch.as_tensor(a, device="cuda") for a in (x, w, g))
        calls = {
            "fprop": (lambda: cudnn.fprop(x, w, ys, pa, st, di, 1), (x, w, ys),
                      lambda: F.conv2d(tx, tw, None, s, p)),
            "dgrad": (lambda: cudnn.dgrad(g, w, xs, pa, st, di, 1), (g, w, xs),
                      lambda: torch.ops.aten.convolution_backward(tg, tx, tw, None, [s, s], [p, p], [1, 1], False,
                                                                  [0, 0], 1, [True, False, False])[0]),
            "wgrad": (lambda: cudnn.wgrad(x, g, ws, pa, st, di, 1), (x, g, ws),
                      lambda: torch.ops.aten.convolution_backward(tg, tx, tw, None, [s, s], [p, p], [1, 1], False,
                                                                  [0, 0], 1, [False, True, False])[1]),
        }
        for kind, (ours, (a, b, out_shape), theirs) in calls.items():
            ours()
            key = next(k for k in cudnn._plans if k[0] == kind and k[1] == tuple(a.shape) and k[2] == tuple(b.shape))
            plan = cudnn._plans[key]
            out = cupy.empty(out_shape, dtype=np.float32)
            wsb = cupy.empty(max(plan.ws, 1), dtype=np.uint8)
            h = cudnn._handle(cudnn._lib)
            pack = {plan.a: a.data.ptr, plan.b: b.data.ptr, plan.out: out.data.ptr}
            raw = {plan.a.get_uid(): a.data.ptr, plan.b.get_uid(): b.data.ptr, plan.out.get_uid(): out.data.ptr}
            t_call = idle_us(ours, sync, args.reps)
            t_exec = idle_us(lambda: plan.graph.execute(pack, wsb.data.ptr, handle=h), sync, args.reps)
            t_raw = idle_us(lambda: plan.graph._execute(raw, wsb.data.ptr, h), sync, args.reps)
            t_torch = idle_us(theirs, lambda: torch.cuda.synchronize(), args.reps)
            t_busy = busy_us(ours, sync, busy)
            t_tbusy = busy_us(theirs, sync, tbusy)
            g_ours = gpu_ms(ours)
            g_torch = gpu_ms(theirs)
            try:
                eng = plan.graph.get_plan_name_at_index(plan.index or 0)
            except Exception as e:  # noqa: BLE001
                eng = f"? {e}"
            print(f"{name:<16} {kind:<6} {t_call:10.1f} {t_exec:10.1f} {t_raw:10.1f} {t_torch:9.1f} {t_busy:8.1f} {t_tbusy:10.1f} "
                  f"{g_ours:9.3f} {g_torch:9.3f}  {eng}", flush=True)


if __name__ == "__main__":
    main()
