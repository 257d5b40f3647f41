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


def _guard(fn, *args):
    """Run one report; a failure in it is printed, not fatal to the others."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - a diagnostics script keeps going
        import traceback
        print(f"[{fn.__name__} failed: {type(e).__name__}: {e}]")
        traceback.print_exc()


def _gpu_events(prof):
    import torch
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _dur_us(e):
    return e.time_range.end - e.time_range.start


def gpu_busy(prof):
    """GPU time of one profiled step: summed durations of its kernels, copies and memsets, the top kernels."""
    evs = _gpu_events(prof)
    total = sum(_dur_us(e) for e in evs)
    span = (max(e.time_range.end for e in evs) - min(e.time_range.start for e in evs)) if evs else 0
    print(f"GPU busy per step: {total / 1e3:.3f} ms summed over {len(evs)} device events "
          f"(first to last: {span / 1e3:.3f} ms)")
    by = collections.defaultdict(lambda: [0, 0.0])
    for e in evs:
        r = by[e.name[:70]]
        r[0] += 1
        r[1] += _dur_us(e)
    print(f"  {'us':>8s} {'n':>4s}  top kernels by GPU time")
    for n, (c, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {us:8.1f} {c:4d}  {n}")


def origins(step, patterns=("DtoH", "HtoD", "DtoD", "Memset", "cupy_", "reduce_cols_v", "copy")):
    """Where some device events come from: the Python frames around the runtime call that issued each.

    The torch profiler's Python tracer records every Python (and builtin) call as a time range on
    the host thread; a device event and its runtime API call share a correlation id, and the
    frames that enclose that call in time are its stack."""
    import json
    import os
    import tempfile

    import torch
    import torchlean as tl
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, with_stack=True) as prof:
        step()
        tl.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    evs = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    dev = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    runtime = {}
    for e in evs:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                runtime[c] = e
    py = sorted((e for e in evs if e.get("cat") == "python_function"), key=lambda e: e["ts"])
    table = collections.defaultdict(collections.Counter)
    for d in dev:
        name = d.get("name", "")
        pat = next((p for p in patterns if p.lower() in name.lower()), None)
        if pat is None:
            continue
        r = runtime.get((d.get("args") or {}).get("correlation"))
        if r is None:
            table[pat]["(no runtime call found)"] += 1
            continue
        t0, t1, tid = r["ts"], r["ts"] + r.get("dur", 0), r.get("tid")
        frames = [e for e in py if e.get("tid") == tid and e["ts"] <= t0 and e["ts"] + e.get("dur", 0) >= t1]
        frames.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        names = [e["name"] for e in frames]
        ours = [n for n in names if "torchlean" in n or "bench" in n]
        tail = [n.split("/")[-1] for n in ours[-4:]] + [n for n in names[-1:] if n not in ours]
        table[pat[:16] + " " + name[:40]][" <- ".join(reversed(tail)) or "?"] += 1
    print("\norigins of device events (innermost frame first), one step:")
    for k, cnt in sorted(table.items()):
        print(f"  {k}: {sum(cnt.values())}")
        for where, c in cnt.most_common(8):
            print(f"     {c:3d}  {where[:200]}")


def record_products(step):
    """The (shape, strides) of both operands of every product of one step (gemm.matmul calls)."""
    from torchlean.kernels.cuda import gemm
    seen = collections.Counter()
    orig = gemm.matmul

    def spy(a, b):
        seen[(a.shape, a.strides, b.shape, b.strides, a.dtype.str)] += 1
        return orig(a, b)
    gemm.matmul = spy
    try:
        step()
    finally:
        gemm.matmul = orig
    return seen


def _like(shape, strides, dtype):
    """A random device array of ``shape`` laid out as ``strides`` (C order, or last two axes swapped)."""
    import cupy
    x = cupy.random.random(shape).astype(dtype) - 0.5
    if len(shape) >= 2 and x.strides != strides:
        t = shape[:-2] + (shape[-1], shape[-2])
        y = cupy.ascontiguousarray((cupy.random.random(t).astype(dtype) - 0.5)).swapaxes(-1, -2)
        if y.strides == strides:
            return y
    return x


def host_us(fn, reps=300):
    """(host us per call before any sync, us per call including the sync at the end)."""
    import cupy
    for _ in range(30):
        fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    cupy.cuda.Device().synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / reps * 1e6, (t2 - t0) / reps * 1e6


def product_table(products, K):
    """Host microseconds per call of each product path at the step's own shapes."""
    import cupy
    import torch
    from torchlean.kernels.cuda import gemm
    print("\nproducts of one step, host us per call (before sync) / with sync:")
    print(f"  {'n':>3s}  {'a shape/strides':34s} {'b shape/strides':34s} {'cupy.matmul':>13s} {'gemm.gemm':>13s}"
          f" {'torch.matmul':>13s}")
    for (sa, ta, sb, tb, dt), n in products.most_common():
        a, b = _like(sa, ta, dt), _like(sb, tb, dt)
        at, bt = torch.from_dlpack(a), torch.from_dlpack(b)
        r = [host_us(lambda: cupy.matmul(a, b)), host_us(lambda: gemm.gemm(a, b)),
             host_us(lambda: torch.matmul(at, bt))]
        cells = " ".join(f"{h:6.1f}/{w:6.1f}" for h, w in r)
        print(f"  {n:3d}  {str(sa) + str(ta):34s} {str(sb) + str(tb):34s} {cells}")
    # K.linear / K.linear_bwd at the shapes of the products whose b operand is a transposed weight.
    rows = set()
    for (sa, ta, sb, tb, dt), _ in products.items():
        isz = np.dtype(dt).itemsize
        if len(sa) == 2 and len(sb) == 2 and tb == (isz, sb[0] * isz) and sb[1] > 1:
            rows.add((sa, (sb[1], sb[0]), dt))
    print(f"\n  {'linear x / w':34s} {'K.linear':>13s} {'K.linear_bwd':>13s} {'torch linear':>13s} {'torch bwd(3)':>13s}")
    for sx, sw, dt in sorted(rows):
        x = cupy.random.random(sx).astype(dt)
        w = cupy.random.random(sw).astype(dt)
        bias = cupy.random.random(sw[0]).astype(dt)
        g = cupy.random.random((sx[0], sw[0])).astype(dt)
        xt, wt, bt_, gt = (torch.from_dlpack(v) for v in (x, w, bias, g))

        def tbwd():
            gt @ wt
            gt.t() @ xt
            gt.sum(0)
        r = [host_us(lambda: K.linear(x, w, bias)), host_us(lambda: K.linear_bwd(x, w, g)),
             host_us(lambda: torch.nn.functional.linear(xt, wt, bt_)), host_us(tbwd)]
        cells = " ".join(f"{h:6.1f}/{w_:6.1f}" for h, w_ in r)
        print(f"  {str(sx) + ' ' + str(sw):34s} {cells}")


def main(argv=None):
    import argparse

    import cupy
    import torch
    import torchlean as tl
    from torchlean.kernels import get_kernels
    from torchlean.kernels.cuda import alloc as memory
    from torchlean.kernels.cuda import build
    import bench_cuda_train as bt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="an example model of bench_models (default: the MLP step)")
    ap.add_argument("--gemm-direct", action="store_true", help="route every product through gemm.gemm")
    args = ap.parse_args(argv)
    K = get_kernels("cuda")
    if args.gemm_direct:
        from torchlean.kernels.cuda import gemm
        gemm.ROUTE_ALWAYS = True
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
        _guard(gpu_busy, prof)
        products = record_products(step)
        t0 = time.perf_counter()
        for _ in range(20):
            step()
        host = (time.perf_counter() - t0) / 20 * 1e3
        tl.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 20 * 1e3
        print(f"step: {wall:.2f} ms wall, {host:.2f} ms host (before the final sync)")
        _guard(origins, step)
        _guard(product_table, products, K)

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
    import cupy
    from torchlean.kernels import get_kernels
    from torchlean.testing.timing import event_median_ms
    K = get_kernels("cuda")
    n = 1 << 26
    x = cupy.random.random(n, dtype=np.float32) - 0.5
    y = cupy.empty_like(x)

    def timed(fn, reps=30):
        return event_median_ms(fn, reps, 3)
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
