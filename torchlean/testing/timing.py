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


def paired_event_median_ms(fns, reps: int, warmup: int = 5, syncs=None) -> list:
    """Median milliseconds of each of ``fns`` (CUDA events on the current stream), taken in turns:
    every round times each function once, one after the other, so a change in the host's or the
    device's speed during the measurement (frequent on shared machines) falls on all of them
    alike. ``syncs[i]`` (default: the device's synchronize) drains the work of ``fns[i]`` before
    the next function starts."""
    import cupy
    syncs = list(syncs) if syncs is not None else [cupy.cuda.Device().synchronize] * len(fns)
    for _ in range(warmup):
        for fn, sync in zip(fns, syncs):
            fn()
            sync()
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, sync, ts in zip(fns, syncs, times):
            sync()
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            sync()
            ts.append(cupy.cuda.get_elapsed_time(a, b))
    return [statistics.median(ts) for ts in times]
