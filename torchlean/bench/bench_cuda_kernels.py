"""CUDA kernel surface vs PyTorch (same process, same GPU), timed with CUDA events.

    python -m torchlean.bench.bench_cuda_kernels.py [--n 67108864] [--reps 50] [--only reduce,tiny]

Method: random inputs (never zeros), a warm-up (which also compiles our NVRTC kernels), then
the median of many event-timed runs. Memory-bound kernels are reported as achieved bandwidth
(bytes each input read once plus each output written once) and as a fraction of the measured
device-to-device copy bandwidth; matrix products as TFLOP/s. TF32 is off on both sides.
"ratio" is PyTorch's time over ours: above 1, ours is faster.
"""

from __future__ import annotations

import argparse
import time

import cupy
import numpy as np
import torch

from torchlean.kernels import get_kernels
from torchlean.testing.timing import event_median_ms


def timed(fn, reps, warmup=3):
    """Median milliseconds of ``fn()`` between two CUDA events (after ``warmup`` calls)."""
    def sync():
        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()
    return event_median_ms(fn, reps, warmup, sync)


def t2c(t):
    return cupy.from_dlpack(t)


ROWS = []


def row(name, ms, torch_ms=None, nbytes=None, flops=None, copy_bw=None, note=""):
    gbs = nbytes / ms / 1e6 if nbytes else None
    ROWS.append(dict(name=name, ms=ms, torch_ms=torch_ms,
                     gbs=gbs, frac=(gbs / copy_bw if gbs and copy_bw else None),
                     tflops=(flops / ms / 1e9 if flops else None),
                     ratio=(torch_ms / ms if torch_ms else None), note=note))


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64 * 1024 * 1024, help="elements of the memory-bound inputs")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--only", default="", help="comma-separated sections to run (elementwise, reduce, softmax, "
                    "layers, rng, matmul, adam, tiny); default all")
    args = ap.parse_args()
    n, reps = args.n, args.reps
    only = {w.strip() for w in args.only.split(",") if w.strip()}

    def want(section):
        return not only or section in only

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    K = get_kernels("cuda")
    import torchlean.cuda as tc
    assert not tc.tf32_enabled()
    print(f"device: {tc.device_name()}; torch {torch.__version__}, cupy {cupy.__version__}; n = {n}; "
          f"median of {reps}")

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, lo=-3.0, hi=3.0):
        return torch.rand(*shape, generator=g, device=dev) * (hi - lo) + lo

    # ---- the bandwidth ceiling: device-to-device copy (bytes read + bytes written)
    src_t = rnd(n)
    dst_t = torch.empty_like(src_t)
    src, dst = t2c(src_t), t2c(dst_t)
    copy_cupy = timed(lambda: cupy.copyto(dst, src), reps)
    copy_torch = timed(lambda: dst_t.copy_(src_t), reps)
    copy_bw = 8 * n / min(copy_cupy, copy_torch) / 1e6
    print(f"device-to-device copy: {8 * n / copy_cupy / 1e6:.0f} GB/s (cupy), "
          f"{8 * n / copy_torch / 1e6:.0f} GB/s (torch) -> ceiling {copy_bw:.0f} GB/s")
    del dst_t, dst

    x_t = src_t
    x = src
    g_t = rnd(n)
    gg = t2c(g_t)
    y01_t = torch.sigmoid(x_t)
    y01 = t2c(y01_t)
    b_t = rnd(n)
    b = t2c(b_t)

    # ---- elementwise (fused kernels): bytes = inputs read + outputs written
    ew = [
        ("sigmoid", lambda: K.sigmoid(x), lambda: torch.sigmoid(x_t), 8),
        ("silu", lambda: K.silu(x), lambda: torch.nn.functional.silu(x_t), 8),
        ("gelu (erf)", lambda: K.gelu(x), lambda: torch.nn.functional.gelu(x_t), 8),
        ("gelu (tanh)", lambda: K.gelu(x, "tanh"), lambda: torch.nn.functional.gelu(x_t, approximate="tanh"), 8),
        ("softplus", lambda: K.softplus(x), lambda: torch.nn.functional.softplus(x_t), 8),
        ("relu", lambda: K.relu(x), lambda: torch.relu(x_t), 8),
        ("clamp", lambda: K.clamp(x, -1.0, 1.0), lambda: torch.clamp(x_t, -1.0, 1.0), 8),
        ("relu_bwd", lambda: K.relu_bwd(x, gg), lambda: torch.ops.aten.threshold_backward(g_t, x_t, 0.0), 12),
        ("sigmoid_bwd", lambda: K.sigmoid_bwd(y01, gg), lambda: torch.ops.aten.sigmoid_backward(g_t, y01_t), 12),
        ("silu_bwd", lambda: K.silu_bwd(x, gg), lambda: torch.ops.aten.silu_backward(g_t, x_t), 12),
        ("gelu_bwd (erf)", lambda: K.gelu_bwd(x, gg), lambda: torch.ops.aten.gelu_backward(g_t, x_t), 12),
        ("minmax_bwd", lambda: K.minmax_bwd(x, b, gg, True), None, 20),
        ("add (CuPy ufunc)", lambda: K.add(x, b), lambda: torch.add(x_t, b_t), 12),
        ("mul (CuPy ufunc)", lambda: K.mul(x, b), lambda: torch.mul(x_t, b_t), 12),
    ]
    for name, ours, theirs, bpe in (ew if want("elementwise") else ()):
        ms = timed(ours, reps)
        tm = timed(theirs, reps) if theirs else None
        row(name, ms, tm, nbytes=bpe * n, copy_bw=copy_bw)

    # ---- reductions (bytes = the input read once)
    side = int(round(n ** 0.5))
    m_t = x_t[: side * side].view(side, side)
    m = t2c(m_t)
    red = [
        ("sum (all)", lambda: K.sum(x), lambda: x_t.sum(), n),
        ("mean (all)", lambda: K.mean(x), lambda: x_t.mean(), n),
        (f"reduce_sum_axis0 {side}x{side}", lambda: K.reduce_sum_axis0(m), lambda: m_t.sum(0), side * side),
        (f"reduce_sum_axis1 {side}x{side}", lambda: K.reduce_sum_axis1(m), lambda: m_t.sum(1), side * side),
        (f"reduce_max_axis0 {side}x{side}", lambda: K.reduce_max_axis0(m), lambda: m_t.amax(0), side * side),
        (f"reduce_max_axis1 {side}x{side}", lambda: K.reduce_max_axis1(m), lambda: m_t.amax(1), side * side),
    ]
    tall_t = x_t.view(n // 16, 16)
    tall = t2c(tall_t)
    red.append((f"reduce_sum_axis0 {n // 16}x16", lambda: K.reduce_sum_axis0(tall), lambda: tall_t.sum(0), n))
    red.append((f"reduce_sum_axis1 {n // 16}x16", lambda: K.reduce_sum_axis1(tall), lambda: tall_t.sum(1), n))
    for name, ours, theirs, elems in (red if want("reduce") else ()):
        row(name, timed(ours, reps), timed(theirs, reps), nbytes=4 * elems, copy_bw=copy_bw)

    # ---- softmax rows (read x, write y; backward reads y and g, writes dx)
    for cols in ((1024, 32768) if want("softmax") else ()):
        rows = n // cols
        s_t = x_t[: rows * cols].view(rows, cols)
        s = t2c(s_t)
        sg_t = g_t[: rows * cols].view(rows, cols)
        sg = t2c(sg_t)
        sy_t = torch.softmax(s_t, -1)
        sy = t2c(sy_t)
        row(f"softmax {rows}x{cols}", timed(lambda: K.softmax(s), reps), timed(lambda: torch.softmax(s_t, -1), reps),
            nbytes=8 * rows * cols, copy_bw=copy_bw)
        row(f"log_softmax {rows}x{cols}", timed(lambda: K.log_softmax(s), reps),
            timed(lambda: torch.log_softmax(s_t, -1), reps), nbytes=8 * rows * cols, copy_bw=copy_bw)
        row(f"softmax_bwd {rows}x{cols}", timed(lambda: K.softmax_bwd(sy, sg), reps),
            timed(lambda: torch.ops.aten._softmax_backward_data(sg_t, sy_t, -1, torch.float32), reps),
            nbytes=12 * rows * cols, copy_bw=copy_bw)
    if want("softmax"):
        del sy_t, sy

    # ---- layer kernels: layer norm (native row kernel) and the selective scan (native, vs the
    # host module's loop over time run on CuPy)
    if want("layers"):
        ln_t = x_t[: 65536 * 1024].view(65536, 1024)
        ln = t2c(ln_t)
        lg_t, lb_t = rnd(1024), rnd(1024)
        lg, lb = t2c(lg_t), t2c(lb_t)
        row("layer_norm_fwd 65536x1024", timed(lambda: K.layer_norm_fwd(ln, lg, lb, 1e-5), reps),
            timed(lambda: torch.nn.functional.layer_norm(ln_t, (1024,), lg_t, lb_t, 1e-5), reps),
            nbytes=8 * 65536 * 1024, copy_bw=copy_bw)
        from torchlean.kernels.host import scan as host_scan
        sa_t, sb_t, sx_t, sh_t = rnd(256, lo=-0.9, hi=0.9), rnd(256), rnd(16, 512, 256), rnd(16, 256)
        sa, sb, sx, sh = (t2c(t) for t in (sa_t, sb_t, sx_t, sh_t))
        t_native = timed(lambda: K.selective_scan_diag_fwd(sa, sb, sx, sh), reps)
        t_loop = timed(lambda: host_scan.selective_scan_diag_fwd(sa, sb, sx, sh, xp=cupy), 5)
        row("selective_scan_fwd 16x512x256", t_native, None, nbytes=8 * 16 * 512 * 256, copy_bw=copy_bw,
            note=f"host code on CuPy: {t_loop:.3f} ms ({t_loop / t_native:.0f}x slower)")

    # ---- RNG and layout
    if want("rng"):
        row("rand_uniform (float32)", timed(lambda: K.rand_uniform((n,), 1, 2, np.float32), reps),
            timed(lambda: torch.rand(n, device=dev), reps), nbytes=4 * n, copy_bw=copy_bw)
        row("randn (float32)", timed(lambda: K.randn((n,), 1, 2, np.float32), reps),
            timed(lambda: torch.randn(n, device=dev), reps), nbytes=4 * n, copy_bw=copy_bw)
        row(f"transpose2d {side}x{side}", timed(lambda: K.transpose2d(m), reps),
            timed(lambda: m_t.t().contiguous(), reps), nbytes=8 * side * side, copy_bw=copy_bw)
        idx = np.random.default_rng(0).integers(0, side, side)
        idx_t = torch.from_numpy(idx).to(dev)
        row(f"gather_rows {side} of {side}x{side}", timed(lambda: K.gather_rows(m, idx), reps),
            timed(lambda: m_t[torch.from_numpy(idx).to(dev)], reps), nbytes=8 * side * side, copy_bw=copy_bw,
            note="incl. host index check + upload")
        vals_t = rnd(side, side)
        vals = t2c(vals_t)
        row(f"scatter_add_rows {side} into {side}x{side}", timed(lambda: K.scatter_add_rows(m, vals, idx), reps),
            timed(lambda: m_t.index_add(0, idx_t, vals_t), reps), nbytes=16 * side * side, copy_bw=copy_bw)
        del vals_t, vals

    # ---- matrix products (cuBLAS, strict float32)
    if want("matmul"):
        for (bt, mm, kk, nn) in ((1, 4096, 4096, 4096), (64, 512, 512, 512), (256, 128, 64, 128)):
            a_t, b2_t = rnd(bt, mm, kk), rnd(bt, kk, nn)
            a, b2 = t2c(a_t), t2c(b2_t)
            flops = 2.0 * bt * mm * kk * nn
            ours = timed(lambda: K.bmm(a, b2), reps)
            direct = timed(lambda: cupy.matmul(a, b2), reps)
            row(f"bmm {bt}x{mm}x{kk}x{nn}", ours, timed(lambda: torch.bmm(a_t, b2_t), reps), flops=flops,
                note=f"vs cupy.matmul: {direct / ours:.3f}x")
        a_t, b2_t = rnd(4096, 4096), rnd(4096, 4096)
        a, b2 = t2c(a_t), t2c(b2_t)
        ours = timed(lambda: K.matmul(a, b2), reps)
        row("matmul 4096^3", ours, timed(lambda: a_t @ b2_t, reps), flops=2.0 * 4096 ** 3,
            note=f"vs cupy.matmul: {timed(lambda: cupy.matmul(a, b2), reps) / ours:.3f}x")
        xl_t, wl_t, bl_t = rnd(8192, 4096), rnd(4096, 4096), rnd(4096)
        xl, wl, bl = t2c(xl_t), t2c(wl_t), t2c(bl_t)
        row("linear 8192x4096 -> 4096 (+bias)", timed(lambda: K.linear(xl, wl, bl), reps),
            timed(lambda: torch.nn.functional.linear(xl_t, wl_t, bl_t), reps), flops=2.0 * 8192 * 4096 * 4096)
        del a_t, b2_t, a, b2, xl_t, wl_t, bl_t, xl, wl, bl

    # ---- adam_step over many parameters (one launch per parameter)
    if want("adam"):
        rs = np.random.default_rng(1)
        sizes = [int(s) for s in rs.integers(1 << 10, 1 << 20, 200)]
        ps_t = [rnd(s) for s in sizes]
        gs_t = [rnd(s) for s in sizes]
        ms_t = [torch.zeros(s, device=dev) for s in sizes]
        vs_t = [torch.rand(s, device=dev, generator=g) for s in sizes]
        ps, gs, ms, vs = ([t2c(t) for t in ts] for ts in (ps_t, gs_t, ms_t, vs_t))
        total = sum(sizes)

        def ours_adam():
            for p, gr, m1, v1 in zip(ps, gs, ms, vs):
                K.adam_step(p, gr, m1, v1, 3, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)

        t_ours = timed(ours_adam, max(reps // 5, 5))
        notes = []
        res = {}
        for label, kw in (("foreach=False", dict(foreach=False)), ("foreach=True", dict(foreach=True)),
                          ("fused=True", dict(fused=True))):
            params = [torch.nn.Parameter(t.clone()) for t in ps_t]
            for p, gr in zip(params, gs_t):
                p.grad = gr
            opt = torch.optim.Adam(params, lr=1e-3, **kw)
            opt.step()
            res[label] = timed(opt.step, max(reps // 5, 5))
            notes.append(f"{label}: {res[label] / t_ours:.2f}x")
            del opt, params
        # bytes: read p, g, m, v and write p, m, v
        row(f"adam_step x{len(sizes)} params ({total / 1e6:.0f}M)", t_ours, res["foreach=True"], nbytes=28 * total,
            copy_bw=copy_bw, note="torch " + ", ".join(notes))

    # ---- per-call cost of a tiny op (host clock, launches queued back to back)
    if want("tiny"):
        tiny_t = rnd(1024)
        tiny = t2c(tiny_t)
        for name, ours, theirs in (("tiny sigmoid (1024)", lambda: K.sigmoid(tiny), lambda: torch.sigmoid(tiny_t)),
                                   ("tiny add (1024)", lambda: K.add(tiny, tiny), lambda: torch.add(tiny_t, tiny_t))):
            us = []
            for f in (ours, theirs):
                for _ in range(100):
                    f()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(2000):
                    f()
                torch.cuda.synchronize()
                us.append((time.perf_counter() - t0) / 2000 * 1e6)
            ROWS.append(dict(name=name, ms=us[0] / 1e3, torch_ms=us[1] / 1e3, gbs=None, frac=None, tflops=None,
                             ratio=us[1] / us[0], note=f"{us[0]:.1f} us vs torch {us[1]:.1f} us per call"))

    print()
    hdr = f"{'kernel':<38} {'ours ms':>9} {'torch ms':>9} {'ratio':>6} {'GB/s':>7} {'of copy':>7} {'TFLOP/s':>8}  note"
    print(hdr)
    print("-" * len(hdr))
    for r in ROWS:
        print(f"{r['name']:<38} {r['ms']:>9.4f} {fmt(r['torch_ms'], '9.4f'):>9} {fmt(r['ratio'], '6.2f'):>6} "
              f"{fmt(r['gbs'], '7.0f'):>7} {fmt(r['frac'] and 100 * r['frac'], '6.1f') + '%' if r['frac'] else '-':>7} "
              f"{fmt(r['tflops'], '8.1f'):>8}  {r['note']}")
    print(f"\nceiling: device-to-device copy {copy_bw:.0f} GB/s; ratio = torch time / our time")


if __name__ == "__main__":
    main()
