"""CUDA max / average pooling: the native kernels (one launch each way) against the host kernels
run on CuPy (one CuPy kernel per window offset, the path before) and torch; checks that both give
the same winners and sums first. Not a test; prints a few lines.

    python benchmarks/probe_pool_native.py
"""
import time

import cupy
import numpy as np
import torch

from torchlean.kernels.host import conv as H
from torchlean.kernels.cuda import conv as C
x = cupy.asarray(np.random.default_rng(0).standard_normal((32, 64, 112, 112), dtype=np.float32))
def t(fn, n=20):
    fn(); cupy.cuda.Device().synchronize(); t0 = time.perf_counter()
    for _ in range(n): fn()
    cupy.cuda.Device().synchronize(); return (time.perf_counter() - t0) / n * 1e3
args = ((3, 3), (2, 2), (1, 1), (1, 1))
y, idx = C.max_pool_forward(x, *args); y0, i0 = H.max_pool_forward(x, *args, xp=cupy)
print("max fwd equal", bool((y == y0).all()), bool((idx == i0).all()))
g = cupy.ones_like(y)
d1 = C.max_pool_backward(g, idx, x.shape, *args); d0 = H.max_pool_backward(g, i0, x.shape, *args, xp=cupy)
print("max bwd equal", bool((d1 == d0).all()))
print("native fwd ms", t(lambda: C.max_pool_forward(x, *args)), "host-on-cupy", t(lambda: H.max_pool_forward(x, *args, xp=cupy)))
print("native bwd ms", t(lambda: C.max_pool_backward(g, idx, x.shape, *args)), "host-on-cupy", t(lambda: H.max_pool_backward(g, i0, x.shape, *args, xp=cupy)))
tx = torch.as_tensor(x, device="cuda").requires_grad_()
def tf():
    yy = torch.nn.functional.max_pool2d(tx, 3, 2, 1); yy.backward(torch.ones_like(yy))
print("torch fwd+bwd ms", t(tf))
a = C.avg_pool_forward(x, (2, 2), (2, 2), (0, 0)); a0 = H.avg_pool_forward(x, (2, 2), (2, 2), (0, 0), xp=cupy)
print("avg fwd maxdiff", float(abs(a - a0).max()))
ga = cupy.ones_like(a); print("avg bwd equal", bool((C.avg_pool_backward(ga, x.shape, (2, 2), (2, 2), (0, 0)) == H.avg_pool_backward(ga, x.shape, (2, 2), (2, 2), (0, 0), xp=cupy)).all()))
