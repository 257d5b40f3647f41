"""CUDA graph capture: the one mechanism behind ``tl.cuda.capture_step`` and compiled IR programs
with ``cuda_graph=True``.

A :class:`GraphCapture` owns what a captured graph needs to replay safely:

* **a private memory pool.** CuPy's pool hands a freed block to the next allocation of its size,
  and a graph replays writes into the blocks it was captured with. A block freed after capture
  and then given to other code would be overwritten by every replay, so everything the warm-up
  and the capture allocate comes from a :class:`cupy.cuda.MemoryPool` that nothing else uses,
  kept alive with the capture. Blocks reused *within* the captured work are fine: a replay runs
  in the captured order.
* **a capture stream** (non-blocking), on which the warm-up runs too, so that the capture is
  served from blocks the warm-up left in the pool and compiles nothing.
* **the cuBLAS capture scope** (:func:`.gemm.capture_scope`): CuPy's cuBLAS wrappers refuse to
  run during capture, so matrix products go to direct cuBLAS calls with a workspace taken from
  the pool before capture (cuBLAS then allocates nothing inside the graph).
* **pins**: the device arrays the kernels' caches hold when a graph is captured (uploaded
  indices and masks, broadcast plans, DFT tables), which the graph may read; holding them means
  no cache eviction frees memory the graph still reads.

    >>> import torchlean as tl
    >>> from torchlean.kernels import get_kernels
    >>> if tl.cuda.is_available():
    ...     K = get_kernels("cuda")
    ...     cap = K.graph_capture()
    ...     x = K.zeros((4,), "float32")
    ...     with cap.scope():
    ...         out = K.exp(x)                       # the warm-up, eager
    ...         graph = cap.capture(lambda: K.exp(x))
    ...     graph.launch()
"""

from __future__ import annotations

import contextlib

import cupy

from . import gemm, index, memory, shape, spectral


class GraphCapture:
    """A private pool, a capture stream and the cuBLAS capture scope (see the module docs)."""

    def __init__(self):
        self.pool = cupy.cuda.MemoryPool()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.workspace = None
        self.pins: list = []
        # Arrays written on the legacy stream (parameters, payloads) must be ready before work on
        # a non-blocking stream reads them.
        cupy.cuda.Device().synchronize()

    @contextlib.contextmanager
    def scope(self):
        """Inside: allocations come from the private pool and kernels run on the capture stream,
        with matrix products through direct cuBLAS calls. Run the warm-up and :meth:`capture` here."""
        with cupy.cuda.using_allocator(self.pool.malloc), self.stream, \
                gemm.capture_scope(self.stream) as self.workspace:
            yield self

    def capture(self, fn):
        """Run ``fn()`` once under stream capture and return the CUDA graph of its kernels
        (``graph.launch()`` replays them on the current stream). An exception of ``fn`` or of
        the capture propagates, with the capture ended."""
        s = self.stream
        s.synchronize()
        s.begin_capture()
        try:
            fn()
        except BaseException:
            with contextlib.suppress(Exception):  # the capture is already invalid: report fn's error
                s.end_capture()
            raise
        graph = s.end_capture()
        s.synchronize()
        self.pins += cached_device_arrays()  # every graph captured here keeps what it may read
        return graph


def cached_device_arrays() -> list:
    """Every device array the kernels keep in their caches now (uploaded indices and masks,
    broadcast plans, DFT tables): what a captured graph holds on to (:attr:`GraphCapture.pins`)."""
    out = []
    for cache in (index._INDICES, shape._META, spectral._TABLES, memory.MASKS, memory.CONSTANTS):
        for v in list(cache.values()):
            out.extend(v if isinstance(v, tuple) else (v,))
    return out


def graph_capture() -> GraphCapture:
    return GraphCapture()
