"""Where the host time of a small CUDA training step goes: kernels and allocations per step,
a cProfile of the step, and the per-call cost of the launch / allocation primitives.

Not a test; prints tables. Run on a GPU machine: ``python3 benchmarks/profile_cuda_step.py``
(the MLP step of ``bench_cuda_train``), or ``--model NAME`` for the training step of an
example model of ``bench_models`` (gpt, vit, ...).
"""

from __future__ import annotations

import collections
import cProfile
import io
import pstats
import time

import numpy as np


def per_call_us(fn, reps=2000):
    import cupy
    for _ in range(100):
        fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def model_step(name):
    """The training step of example model ``name`` on cuda, as bench_models times it."""
    import bench_models as bm
    import torchlean as tl
    cls, kw, bs = bm.EXAMPLES[name]
    tl.manual_seed(0)
    model = cls(**kw).to(device="cuda")
    xb, yb = bm.make_batch(name, bs)
    x, y = tl.tensor(xb).to(device="cuda"), tl.tensor(yb).to(device="cuda")
    opt = tl.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = bm.loss_ours(name, model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    return step


def main(argv=None):
    import argparse

    import cupy
    import torch
    import torchlean as tl
    from torchlean.kernels import get_kernels
    from torchlean.kernels.cuda import build, memory
    import bench_cuda_train as bt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="an example model of bench_models (default: the MLP step)")
    args = ap.parse_args(argv)
    K = get_kernels("cuda")
    step = model_step(args.model) if args.model else bt.tl_step((784, 1024, 1024, 10), 256)[0]
    for _ in range(5):
        step()
    tl.cuda.synchronize()

    # kernels per step (CUPTI sees every launch of the process, CuPy's ufuncs and cuBLAS too)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        tl.cuda.synchronize()
    names = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            names[e.name[:70]] += 1
    print(f"kernels + copies per step: {sum(names.values())}")
    for n, c in names.most_common(40):
        print(f"  {c:3d}  {n}")
    s0 = memory.stats()["allocations"]
    step()
    print(f"allocations per step: {memory.stats()['allocations'] - s0}")
    if args.model:
        t0 = time.perf_counter()
        for _ in range(20):
            step()
        tl.cuda.synchronize()
        print(f"step: {(time.perf_counter() - t0) / 20 * 1e3:.2f} ms")

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20):
        step()
    tl.cuda.synchronize()
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(28)
    print("\n".join(out.getvalue().splitlines()[:45]))
    if args.model:
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(40)
        print("\n".join(out.getvalue().splitlines()[:60]))
        return

    # primitives, host microseconds per call
    x = cupy.random.random(16).astype(np.float32)
    y = cupy.random.random(16).astype(np.float32)
    pool = cupy.get_default_memory_pool()
    rows = []
    rows.append(("cupy.empty(16), telemetry allocator", per_call_us(lambda: cupy.empty(16, np.float32))))
    cupy.cuda.set_allocator(pool.malloc)
    rows.append(("cupy.empty(16), plain pool", per_call_us(lambda: cupy.empty(16, np.float32))))
    rows.append(("cupy.add ufunc, plain pool", per_call_us(lambda: cupy.add(x, y))))
    rows.append(("K.add raw launch, plain pool", per_call_us(lambda: K.add(x, y))))
    memory.install()
    rows.append(("cupy.add ufunc (16,)", per_call_us(lambda: cupy.add(x, y))))
    rows.append(("K.add raw launch (16,)", per_call_us(lambda: K.add(x, y))))
    rows.append(("K.relu raw launch (16,)", per_call_us(lambda: K.relu(x))))
    rows.append(("K.sigmoid raw launch (16,)", per_call_us(lambda: K.sigmoid(x))))
    f = build.function("elementwise", "unary_kernel<float, 0>")
    out = cupy.empty(16, np.float32)
    args = (x, out, np.int64(16), np.float32(0), np.float32(0))
    rows.append(("CuPy Function call, no alloc", per_call_us(lambda: f((1,), (256,), args))))
    rows.append(("launch_function, no alloc", per_call_us(lambda: build.launch_function(f, (1,), (256,), args))))
    a = tl.randn(16, device="cuda", requires_grad=True)
    b = tl.randn(16, device="cuda", requires_grad=True)
    rows.append(("Tensor mul recorded (16,)", per_call_us(lambda: a * b)))
    rows.append(("Tensor relu recorded (16,)", per_call_us(lambda: a.relu())))
    with tl.no_grad():
        rows.append(("Tensor mul no_grad (16,)", per_call_us(lambda: a * b)))
    tt = torch.rand(1024, device="cuda")
    tc = cupy.from_dlpack(tt)
    rows.append(("K.add tiny (1024) [bench_cuda_kernels row]", per_call_us(lambda: K.add(tc, tc))))
    rows.append(("torch.add tiny (1024)", per_call_us(lambda: torch.add(tt, tt))))
    rows.append(("K.sigmoid tiny (1024)", per_call_us(lambda: K.sigmoid(tc))))
    rows.append(("torch.sigmoid tiny (1024)", per_call_us(lambda: torch.sigmoid(tt))))
    print(f"fast launch active: {build.FAST_LAUNCH}")
    print(f"\n{'primitive':44s} {'us/call':>8s}")
    for n, us in rows:
        print(f"{n:44s} {us:8.2f}")




def sum_bandwidth():
    """sum over 64M float32 as a fraction of device-to-device copy bandwidth (bytes read + written)."""
    import statistics
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    n = 1 << 26
    x = cupy.random.random(n, dtype=np.float32) - 0.5
    y = cupy.empty_like(x)

    def timed(fn, reps=30):
        for _ in range(3):
            fn()
        cupy.cuda.Device().synchronize()
        ts = []
        for _ in range(reps):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(cupy.cuda.get_elapsed_time(a, b))
        return statistics.median(ts)
    copy_bw = 8 * n / timed(lambda: y.__setitem__(Ellipsis, x)) / 1e6
    t = timed(lambda: K.sum(x))
    ref = float(x.astype(cupy.float64).sum())
    print(f"sum 64M: {t * 1e3:.1f} us, {4 * n / t / 1e6:.0f} GB/s = {100 * 4 * n / t / 1e6 / copy_bw:.1f}% of copy "
          f"({copy_bw:.0f} GB/s); |sum - ref| = {abs(float(K.sum(x)) - ref):.3g}")


if __name__ == "__main__":
    import sys
    if "--model" not in sys.argv:
        sum_bandwidth()
    main()
