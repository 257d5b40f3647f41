"""Host cost of the launch and allocation primitives under a CUDA op, against PyTorch's.

Each primitive is timed two ways, both in microseconds per call:

* ``idle``: the GPU is drained before each call and only the call itself is on the clock
  (median of many): what the host pays when nothing is queued;
* ``queued``: 2000 calls back to back, then one synchronize: what a loop of such calls costs
  once the launch queue is busy (the larger of host cost and GPU time per kernel).

Not a test; prints one table. Run on a GPU machine: ``python3 benchmarks/probe_host.py``.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import struct
import time

import numpy as np


def idle_us(fn, sync, reps=400):
    for _ in range(20):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    sync()
    return statistics.median(ts) * 1e6


def queued_us(fn, sync, reps=2000):
    for _ in range(50):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps * 1e6


EMPTY_SRC = r'''
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void touch_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
'''


def main():
    import cupy
    import torch
    import torchlean as tl
    from torchlean.kernels import get_kernels
    from torchlean.kernels.cuda import alloc as memory
    from torchlean.kernels.cuda import build

    K = get_kernels("cuda")
    sync = cupy.cuda.Device().synchronize
    rows = []

    def row(name, fn):
        rows.append((name, idle_us(fn, sync), queued_us(fn, sync)))

    # calibration: how fast is this host at plain Python?
    def py11(a, b, c, d, e, f, g, h, i, j, k):
        return a
    row("python call, 11 args (calibration)", lambda: py11(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))

    mod = cupy.RawModule(code=EMPTY_SRC)
    empty = mod.get_function("empty_kernel")
    touch = mod.get_function("touch_kernel")
    x = cupy.random.random(16).astype(np.float32)
    y = cupy.empty(16, np.float32)
    from cupy.cuda import driver, stream as cstream
    h_empty = build._handle(empty)
    h_touch = build._handle(touch)
    sptr = cstream.get_current_stream().ptr

    # the driver call alone, everything precomputed (CU_LAUNCH_PARAM_BUFFER_POINTER)
    st = struct.Struct("@PPq")
    buf = np.zeros(st.size, np.uint8)
    size = np.array([st.size], np.uint64)
    extra = np.array([1, buf.ctypes.data, 2, size.ctypes.data, 0], np.uint64)
    st.pack_into(buf, 0, x.data.ptr, y.data.ptr, 16)
    eptr = extra.ctypes.data
    row("driver.launchKernel empty kernel", lambda: driver.launchKernel(h_empty, 1, 1, 1, 32, 1, 1, 0, sptr, 0, 0))
    row("driver.launchKernel touch, extra buffer",
        lambda: driver.launchKernel(h_touch, 1, 1, 1, 32, 1, 1, 0, sptr, 0, eptr))
    # the same through kernelParams (an array of pointers to each argument)
    a0 = ctypes.c_void_p(x.data.ptr)
    a1 = ctypes.c_void_p(y.data.ptr)
    a2 = ctypes.c_longlong(16)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(a0), ctypes.addressof(a1), ctypes.addressof(a2))
    pptr = ctypes.addressof(params)
    row("driver.launchKernel touch, kernelParams",
        lambda: driver.launchKernel(h_touch, 1, 1, 1, 32, 1, 1, 0, sptr, pptr, 0))
    row("driver.launchKernel touch, stream 0 (legacy)",
        lambda: driver.launchKernel(h_touch, 1, 1, 1, 32, 1, 1, 0, 0, pptr, 0))
    # ctypes straight into libcuda
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        f = cuda.cuLaunchKernel
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p,
                                                                ctypes.c_void_p, ctypes.c_void_p]
        row("ctypes cuLaunchKernel touch", lambda: f(h_touch, 1, 1, 1, 32, 1, 1, 0, sptr, pptr, None))
    except OSError as e:
        print("no libcuda via ctypes:", e)
    row("cupy RawKernel __call__ touch", lambda: touch((1,), (32,), (x, y, np.int64(16))))
    row("cstream.get_current_stream().ptr", lambda: cstream.get_current_stream().ptr)
    row("struct pack_into 3 args", lambda: st.pack_into(buf, 0, x.data.ptr, y.data.ptr, 16))

    f_relu = build.function("elementwise", "unary_kernel<float, 0>")
    args = (x, y, np.int64(16), np.float32(0), np.float32(0))
    key = tuple(map(type, args))
    row("build.launch_function relu, no alloc", lambda: build.launch_function(f_relu, (1,), (256,), args, key))

    # allocation
    pool = cupy.get_default_memory_pool()
    row("cupy.empty(16), telemetry allocator", lambda: cupy.empty(16, np.float32))
    nd = cupy.ndarray
    f32 = np.dtype(np.float32)
    row("cupy.ndarray((16,), f32), telemetry", lambda: nd((16,), f32))
    mp = pool.malloc(64)
    row("cupy.ndarray((16,), f32, memptr=mp) no alloc", lambda: nd((16,), f32, mp))
    row("pool.malloc(64)", lambda: pool.malloc(64))
    row("memory._malloc(64)", lambda: memory._malloc(64))
    cupy.cuda.set_allocator(pool.malloc)
    row("cupy.ndarray((16,), f32), plain pool", lambda: nd((16,), f32))
    memory.install()

    # whole kernels of the surface
    row("K.relu(16)", lambda: K.relu(x))
    row("K.add(16)", lambda: K.add(x, x))
    row("K.mul(16)", lambda: K.mul(x, x))
    row("cupy.add ufunc (16)", lambda: cupy.add(x, x))

    # the layers between a Tensor operator and its kernel
    from torchlean.autograd.rules import RULES
    from torchlean.autograd.tape import run_op
    import importlib
    T = importlib.import_module("torchlean.tensor")
    rule = RULES["mul"]
    row("rule mul forward (16)", lambda: rule.forward(K, x, x))
    row("run_op mul (16)", lambda: run_op("mul", [x, x], {}, None, (True, True)))
    a = tl.randn(16, device="cuda", requires_grad=True)
    b = tl.randn(16, device="cuda", requires_grad=True)
    with tl.no_grad():
        row("_apply mul no_grad (16)", lambda: T._apply("mul", (a, b), {}))
    row("Tensor wrap", lambda: T._wrap(x))

    # matrix products at a GPT layer's shapes: host cost of each path
    from torchlean.kernels.cuda import gemm
    from cupy_backends.cuda.libs import cublas as cb
    xm = cupy.random.random((2048, 64)).astype(np.float32)
    wm = cupy.random.random((192, 64)).astype(np.float32)
    bm = cupy.random.random(192).astype(np.float32)
    gm = cupy.random.random((2048, 192)).astype(np.float32)
    row("cupy.matmul (2048,64)@(64,192)^T", lambda: cupy.matmul(xm, wm.T))
    row("gemm.gemm (2048,64)@(64,192)^T", lambda: gemm.gemm(xm, wm.T))
    hb = cb.create()
    cb.setPointerMode(hb, 0)
    cb.setMathMode(hb, 0)
    cb.setStream(hb, 0)
    one = np.ones(1, np.float32)
    zero = np.zeros(1, np.float32)
    om = cupy.empty((2048, 192), np.float32)
    # C^T (192 x 2048) = W (192x64 row-major read as 64x192 col-major, transposed) @ X^T
    row("cublas.sgemm Cython, out preallocated",
        lambda: cb.sgemm(hb, 1, 0, 192, 2048, 64, one.ctypes.data, wm.data.ptr, 64, xm.data.ptr, 64,
                         zero.ctypes.data, om.data.ptr, 192))
    row("K.linear (2048,64)x(192,64)+b", lambda: K.linear(xm, wm, bm))
    row("K.linear_bwd (2048,64)x(192,64)", lambda: K.linear_bwd(xm, wm, gm))
    row("K.reduce_sum_axis0 (2048,192)", lambda: K.reduce_sum_axis0(gm))
    xt_, wt_, bt_, gt_ = (torch.from_dlpack(v) for v in (xm, wm, bm, gm))
    tsync0 = torch.cuda.synchronize
    rows.append(("torch.matmul same", idle_us(lambda: torch.matmul(xt_, wt_.t()), tsync0),
                 queued_us(lambda: torch.matmul(xt_, wt_.t()), tsync0)))
    rows.append(("torch linear same", idle_us(lambda: torch.nn.functional.linear(xt_, wt_, bt_), tsync0),
                 queued_us(lambda: torch.nn.functional.linear(xt_, wt_, bt_), tsync0)))

    def tbwd():
        gt_ @ wt_
        gt_.t() @ xt_
        gt_.sum(0)
    rows.append(("torch linear bwd (3 ops)", idle_us(tbwd, tsync0), queued_us(tbwd, tsync0)))
    rows.append(("torch sum(0) (2048,192)", idle_us(lambda: gt_.sum(0), tsync0), queued_us(lambda: gt_.sum(0), tsync0)))

    # the front end
    row("Tensor a * b, recorded", lambda: a * b)
    row("Tensor a + b, recorded", lambda: a + b)
    row("Tensor a.relu(), recorded", lambda: a.relu())
    with tl.no_grad():
        row("Tensor a * b, no_grad", lambda: a * b)
        gc.disable()
        row("Tensor a * b, no_grad, gc off", lambda: a * b)
        gc.enable()

    # torch, same process
    tt = torch.rand(16, device="cuda")
    ta = torch.rand(16, device="cuda", requires_grad=True)
    tb = torch.rand(16, device="cuda", requires_grad=True)
    tsync = torch.cuda.synchronize
    rows.append(("torch.empty(16)", idle_us(lambda: torch.empty(16, device="cuda"), tsync),
                 queued_us(lambda: torch.empty(16, device="cuda"), tsync)))
    rows.append(("torch.add(16)", idle_us(lambda: torch.add(tt, tt), tsync), queued_us(lambda: torch.add(tt, tt), tsync)))
    rows.append(("torch.relu(16)", idle_us(lambda: torch.relu(tt), tsync), queued_us(lambda: torch.relu(tt), tsync)))
    rows.append(("torch a * b, recorded", idle_us(lambda: ta * tb, tsync), queued_us(lambda: ta * tb, tsync)))
    rows.append(("torch a.relu(), recorded", idle_us(lambda: ta.relu(), tsync), queued_us(lambda: ta.relu(), tsync)))

    # the benchmark's chain (bench_cuda_train.tiny_chain), gc on and off
    from bench_cuda_train import tiny_chain

    def chain_tl():
        return tiny_chain(a, b)

    def chain_t():
        return tiny_chain(ta, tb)
    rows.append(("chain per op, torchlean", idle_us(chain_tl, sync, 100) / 75, queued_us(chain_tl, sync, 200) / 75))
    rows.append(("chain per op, torch", idle_us(chain_t, tsync, 100) / 75, queued_us(chain_t, tsync, 200) / 75))
    gc.disable()
    rows.append(("chain per op, torchlean, gc off", idle_us(chain_tl, sync, 100) / 75,
                 queued_us(chain_tl, sync, 200) / 75))
    gc.enable()

    # what the cyclic collector does during the chain: collections per generation and their time
    stats = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    t_start = [0.0]

    def cb(phase, info):
        if phase == "start":
            t_start[0] = time.perf_counter()
        else:
            s_ = stats[info["generation"]]
            s_[0] += 1
            s_[1] += time.perf_counter() - t_start[0]
    gc.callbacks.append(cb)
    t0 = time.perf_counter()
    for _ in range(200):
        chain_tl()
    sync()
    wall = time.perf_counter() - t0
    gc.callbacks.remove(cb)
    print(f"gc during 200 chains ({wall * 1e3:.1f} ms): " + ", ".join(
        f"gen{g}: {c} collections, {t * 1e3:.2f} ms" for g, (c, t) in stats.items())
        + f"; tracked objects {len(gc.get_objects())}, thresholds {gc.get_threshold()}")
    old_thr = gc.get_threshold()
    gc.set_threshold(10000, 10, 10)
    rows.append(("chain per op, torchlean, gen0 threshold 10000", idle_us(chain_tl, sync, 100) / 75,
                 queued_us(chain_tl, sync, 200) / 75))
    gc.set_threshold(*old_thr)
    gc.freeze()
    rows.append(("chain per op, torchlean, after gc.freeze()", idle_us(chain_tl, sync, 100) / 75,
                 queued_us(chain_tl, sync, 200) / 75))
    gc.unfreeze()

    print(f"\n{'primitive':48s} {'idle us':>9s} {'queued us':>10s}")
    for name, i, q in rows:
        print(f"{name:48s} {i:9.2f} {q:10.2f}")


if __name__ == "__main__":
    main()
