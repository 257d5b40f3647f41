"""CUDA: where a recurrence's time goes: the eager loop's wall time against the same loop replayed
as one CUDA graph (its GPU time), per kernel of the scan family. Not a test."""

from __future__ import annotations

import time

import numpy as np


def main():
    import cupy
    from torchlean.kernels import get_kernels

    K = get_kernels("cuda")
    rng = np.random.default_rng(0)
    T, N, H = 256, 64, 512

    def arr(*s, scale=1.0):
        return cupy.asarray((rng.standard_normal(s) * scale).astype(np.float32))

    bias = cupy.full(3 * H, 0.1, dtype=np.float32)
    cases = {
        "lstm": (4, lambda gx, w, h0, c0: K.lstm_scan_fwd(gx, w, h0, c0, None),
                 lambda w, h0, c0, s, a, g: K.lstm_scan_bwd(w, h0, c0, None, s, a, g)),
        "gru": (3, lambda gx, w, h0, c0: K.gru_scan_fwd(gx, w, bias, h0, None), None),
        "rnn": (1, lambda gx, w, h0, c0: K.rnn_scan_fwd(gx, w, h0, None, False), None),
    }
    for name, (G, fwd, bwd) in cases.items():
        gx, w, h0, c0 = arr(T, N, G * H), arr(G * H, H, scale=0.05), arr(N, H), arr(N, H)
        for _ in range(2):
            fwd(gx, w, h0, c0)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            out = fwd(gx, w, h0, c0)
        cupy.cuda.Device().synchronize()
        wall = (time.perf_counter() - t0) / 5 * 1e3
        t0 = time.perf_counter()
        for _ in range(5):
            out = fwd(gx, w, h0, c0)
        host = (time.perf_counter() - t0) / 5 * 1e3
        cupy.cuda.Device().synchronize()
        cap = K.graph_capture()
        with cap.scope():
            fwd(gx, w, h0, c0)
            graph = cap.capture(lambda: fwd(gx, w, h0, c0))
        cupy.cuda.Device().synchronize()
        ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()
        ev0.record()
        for _ in range(5):
            graph.launch()
        ev1.record()
        ev1.synchronize()
        gpu = cupy.cuda.get_elapsed_time(ev0, ev1) / 5
        print(f"{name} fwd T{T} N{N} H{H}: eager wall {wall:7.2f} ms, host enqueue {host:7.2f} ms, "
              f"graph replay (GPU) {gpu:7.2f} ms", flush=True)
        if bwd is not None:
            s, a = out
            g = arr(*s.shape)
            bwd(w, h0, c0, s, a, g)
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(5):
                bwd(w, h0, c0, s, a, g)
            cupy.cuda.Device().synchronize()
            wall = (time.perf_counter() - t0) / 5 * 1e3
            with cap.scope():
                graph = cap.capture(lambda: bwd(w, h0, c0, s, a, g))
            ev0.record()
            for _ in range(5):
                graph.launch()
            ev1.record()
            ev1.synchronize()
            gpu = cupy.cuda.get_elapsed_time(ev0, ev1) / 5
            print(f"{name} bwd: eager wall {wall:7.2f} ms, graph replay (GPU) {gpu:7.2f} ms", flush=True)


def host_costs():
    """Host microseconds per call of a loop's pieces, and GPU microseconds of one step's product
    through cublasSgemm and through cublasSgemmBatched (pointer arrays, count 1)."""
    import cupy
    from torchlean.kernels.cuda import gemm

    N, G, H = 64, 2048, 512
    w = cupy.asarray(np.random.default_rng(0).standard_normal((G, H)).astype(np.float32))
    h = cupy.zeros((N, H), np.float32)
    out = cupy.zeros((N, G), np.float32)
    ptrs = cupy.asarray(np.array([w.data.ptr, h.data.ptr, out.data.ptr], dtype=np.uint64))
    mm, hd, one, zero = gemm.gemm_loop(w.dtype)
    mb, hd2, _, _ = gemm.gemm_loop(w.dtype, arrays=True)
    calls = {
        "cublasSgemm": lambda: mm(hd, 1, 0, G, N, H, one, w.data.ptr, H, h.data.ptr, H, one, out.data.ptr, G),
        "cublasSgemmBatched": lambda: mb(hd2, 1, 0, G, N, H, one, ptrs.data.ptr, H, ptrs.data.ptr + 8, H, one,
                                         ptrs.data.ptr + 16, G, 1),
    }
    ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()
    for name, fn in calls.items():
        for _ in range(50):
            fn()
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        ev0.record()
        for _ in range(500):
            fn()
        ev1.record()
        host = (time.perf_counter() - t0) / 500 * 1e6
        ev1.synchronize()
        gpu = cupy.cuda.get_elapsed_time(ev0, ev1) / 500 * 1e3
        print(f"{name} {N}x{G}x{H}: host {host:.2f} us per call, stream time {gpu:.2f} us per call", flush=True)


if __name__ == "__main__":
    host_costs()
    main()
