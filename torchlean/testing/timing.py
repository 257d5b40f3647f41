"""Timing helpers shared by the benchmarks (``benchmarks/``): medians, turns, CUDA events."""

from __future__ import annotations

import statistics
import time


def median_times(fns: dict, runs: int, warmup: int, sync=None, blocks: int = 5) -> dict:
    """Median wall time in seconds of each ``fns[name]()`` over ``runs`` calls after ``warmup``.

    The functions take turns in ``blocks`` blocks of consecutive calls, so a change in
    machine load during the measurement affects each alike; within a block one
    framework runs alone (its thread pool's spin-waiting does not slow the other),
    and the first call after a switch is not timed. ``sync`` (e.g. a device
    synchronize) runs after each call, inside the timed region.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    ts = {name: [] for name in fns}
    per_block = max(1, -(-runs // blocks))
    for _ in range(blocks):
        for name, fn in fns.items():
            fn()
            if sync:
                sync()
            for _ in range(per_block):
                t0 = time.perf_counter()
                fn()
                if sync:
                    sync()
                ts[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in ts.items()}


def event_median_ms(fn, reps: int, warmup: int = 5, sync=None) -> float:
    """Median milliseconds of ``fn()`` between two CUDA events recorded on the current stream."""
    import cupy
    for _ in range(warmup):
        fn()
    (sync or cupy.cuda.Device().synchronize)()
    times = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b))
    return statistics.median(times)
