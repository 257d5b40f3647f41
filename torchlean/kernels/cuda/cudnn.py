"""Convolutions through cuDNN's graph API, by NVIDIA's cuDNN frontend (``nvidia-cudnn-frontend``).

CuPy 14 no longer wraps cuDNN; the frontend's Python graph API works on raw device pointers,
so CuPy's arrays go in as they are. :mod:`.conv` asks here first and runs its own im2col + GEMM
kernels where this module declines (returns None):

* the frontend or the cuDNN library is not installed (``pip install "torchlean[cuda]"`` brings
  both), or ``FLAGS.enabled`` is off (``torchlean.backends.cudnn.enabled = False``);
* dtypes other than float32 (float64 keeps the native kernels, the reference-like path), more
  than three spatial axes, empty or 32-bit-overflowing shapes;
* cuDNN has no engine for the case (``cudnnGraphNotSupportedError`` while planning: remembered
  per case, so it is asked once).

What an engine may do is fixed when the case is planned, so the contract of
:mod:`torchlean.kernels.api` holds whichever engine runs:

* **strict float32**: engines with the ``TENSOR_CORE`` numerical note (TF32 for float32 data)
  are removed unless :func:`torchlean.cuda.set_tf32` allowed TF32, the one switch that also
  covers matrix products;
* **deterministic**: engines with the ``NONDETERMINISTIC`` note (split reductions with atomics)
  are always removed, so the same inputs give the same bits on every run (torch's
  ``backends.cudnn.deterministic=True``);
* **direct sums**: FFT and Winograd engines are removed too (:data:`EXCLUDED_NOTES` says why);
* the first engine of cuDNN's heuristics (mode A, then the fallback list) that passes is used,
  as torch does with ``benchmark=False``; with ``FLAGS.benchmark`` (``backends.cudnn.benchmark =
  True``) every engine that passes is timed once per case and the fastest kept, as torch does.

Each call sets the handle's stream to CuPy's current stream and takes its workspace from the
current allocator (a CUDA-graph capture's private pool inside a capture), so calls record into
CUDA graphs like the native kernels. Plans are cached per (operation, shapes, geometry, dtype,
TF32, device).
"""

from __future__ import annotations

import threading
from math import prod

import cupy
import numpy as np

__all__ = ["available", "fprop", "dgrad", "wgrad", "FLAGS", "status", "version"]

from . import CudnnFlags as FLAGS  # enabled, benchmark: torchlean.backends.cudnn's switches

#: Numerical notes whose engines are never used (TENSOR_CORE joins them while TF32 is off):
#: nondeterministic ones (atomics), and the FFT and Winograd transforms, whose rounding differs
#: from a direct sum of products and whose host cost per call was measured at 130-350 us against
#: 50-75 us for implicit-GEMM engines (ResNet-18 at batch 128 on an H100: 27.4 ms per eager step
#: without them, 31.0 ms with cuDNN's heuristics free to pick them).
EXCLUDED_NOTES = ("NONDETERMINISTIC", "FFT", "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6",
                  "WINOGRAD_TILE_13x13")

_F32 = np.dtype(np.float32)
_INT_LIMIT = 2 ** 31 - 1

_lib = None            # the cudnn module, False once it failed to load
_why = ""              # why it failed, for status()
_lock = threading.Lock()
_local = threading.local()
_plans: dict = {}      # key -> _Plan, or None when cuDNN declined the case


def _load():
    global _lib, _why
    if _lib is None:
        with _lock:
            if _lib is None:
                try:
                    import cudnn
                    cudnn.backend_version()
                    _lib = cudnn
                except Exception as e:  # ImportError, a missing libcudnn, a driver mismatch
                    _why = f"{type(e).__name__}: {e}"
                    _lib = False
    return _lib or None


def available() -> bool:
    """True when the cuDNN frontend and library load (whether or not ``FLAGS.enabled``)."""
    return _load() is not None


def version():
    """cuDNN's version as an int (91900 for 9.19.0), or None when it does not load."""
    lib = _load()
    return None if lib is None else int(lib.backend_version())


def status() -> str:
    """One line: the cuDNN version in use, or why cuDNN is not used."""
    lib = _load()
    if lib is None:
        return f"cuDNN not used ({_why}); install it with: pip install \"torchlean[cuda]\""
    state = "used for float32 convolutions" if FLAGS.enabled else "disabled (backends.cudnn.enabled = False)"
    return f"cuDNN {lib.backend_version_string()} (frontend {getattr(lib, '__version__', '?')}): {state}"


def _handle(lib):
    """This thread's handle for the current device, set to CuPy's current stream."""
    hs = getattr(_local, "handles", None)
    if hs is None:
        hs = _local.handles = {}
    dev = cupy.cuda.Device().id
    h = hs.get(dev)
    if h is None:
        h = hs[dev] = [lib.create_handle(), None]
    s = cupy.cuda.get_current_stream().ptr
    if h[1] != s:
        lib.set_stream(handle=h[0], stream=s)
        h[1] = s
    return h[0]


def _strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


class _Plan:
    __slots__ = ("graph", "a", "b", "out", "ws", "index")

    def __init__(self, graph, a, b, out, ws, index=None):
        self.graph, self.a, self.b, self.out, self.ws, self.index = graph, a, b, out, ws, index

    def execute(self, a, b, out, ws, handle):
        pack = {self.a: a.data.ptr, self.b: b.data.ptr, self.out: out.data.ptr}
        if self.index is None:
            self.graph.execute(pack, ws.data.ptr, handle=handle)
        else:
            self.graph.execute_plan_at_index(pack, ws.data.ptr, self.index, handle=handle)


def _fastest(lib, g, a, b, out, shapes, h):
    """``(index, workspace bytes)`` of the fastest built engine on scratch operands (median of 3)."""
    bufs = [cupy.empty(sh, dtype=np.float32) for sh in shapes]
    for buf in bufs:
        buf.fill(0.5)
    pack = {a: bufs[0].data.ptr, b: bufs[1].data.ptr, out: bufs[2].data.ptr}
    best = None
    for i in range(g.get_execution_plan_count()):
        try:
            ws_bytes = int(g.get_workspace_size_plan_at_index(i))
        except RuntimeError:  # an engine of the list that did not build: not a candidate
            continue
        ws = cupy.empty(max(ws_bytes, 1), dtype=np.uint8)
        times = []
        for _ in range(4):
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record()
            g.execute_plan_at_index(pack, ws.data.ptr, i, handle=h)
            e1.record()
            e1.synchronize()
            times.append(cupy.cuda.get_elapsed_time(e0, e1))
        t = sorted(times[1:])[1]
        if best is None or t < best[0]:
            best = (t, i, ws_bytes)
    if best is None:
        raise lib.cudnnGraphNotSupportedError("no engine built")
    return best[1], best[2]


def _plan(kind, a_shape, b_shape, out_shape, pad, stride, dil, tf32):
    """The built graph of one case, or None where cuDNN has no engine for it."""
    lib = _load()
    bench = FLAGS.benchmark and not cupy.cuda.get_current_stream().is_capturing()
    key = (kind, a_shape, b_shape, out_shape, pad, stride, dil, tf32, bench, EXCLUDED_NOTES, cupy.cuda.Device().id)
    p = _plans.get(key, False)
    if p is not False:
        return p
    h = _handle(lib)
    F = lib.data_type.FLOAT
    try:
        g = lib.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F, handle=h)
        a = g.tensor(name="a", dim=list(a_shape), stride=_strides(a_shape), data_type=F)
        b = g.tensor(name="b", dim=list(b_shape), stride=_strides(b_shape), data_type=F)
        geo = dict(padding=list(pad), stride=list(stride), dilation=list(dil), compute_data_type=F)
        if kind == "fprop":      # a = x, b = w
            out = g.conv_fprop(image=a, weight=b, **geo)
        elif kind == "dgrad":    # a = dy, b = w
            out = g.conv_dgrad(loss=a, filter=b, **geo)
        else:                    # a = x, b = dy
            out = g.conv_wgrad(image=a, loss=b, **geo)
        out.set_output(True).set_dim(list(out_shape)).set_stride(_strides(out_shape)).set_data_type(F)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([lib.heur_mode.A, lib.heur_mode.FALLBACK])
        names = list(EXCLUDED_NOTES) + ([] if tf32 else ["TENSOR_CORE"])
        notes = [getattr(lib.numerical_note, n) for n in names if hasattr(lib.numerical_note, n)]
        g.deselect_numeric_notes(notes)
        g.check_support()
        if bench:
            g.build_plans(lib.build_plan_policy.ALL)
            index, ws = _fastest(lib, g, a, b, out, (a_shape, b_shape, out_shape), h)
            p = _Plan(g, a, b, out, ws, index)
        else:
            g.build_plans(lib.build_plan_policy.HEURISTICS_CHOICE)
            p = _Plan(g, a, b, out, int(g.get_workspace_size()))
    except lib.cudnnGraphNotSupportedError:
        p = None
    except RuntimeError as e:
        # Planning failures that are not a plain "not supported" (no engine left after the
        # filters, say) also mean: this case runs on the native kernels.
        if "cudnn" not in str(e).lower() and "CUDNN" not in str(e):
            raise
        p = None
    _plans[key] = p
    return p


def _as4(shape, d):
    """cuDNN's tensors have at least two spatial axes: a 1-d case gets a unit axis in front."""
    return tuple(shape[:2]) + (1,) + tuple(shape[2:]) if d == 1 else tuple(shape)


def _geom4(pad, stride, dil, d):
    if d == 1:
        return (0,) + tuple(pad), (1,) + tuple(stride), (1,) + tuple(dil)
    return tuple(pad), tuple(stride), tuple(dil)


def _usable(*arrays) -> bool:
    if not FLAGS.enabled or _load() is None:
        return False
    d = arrays[0].ndim - 2
    if not 1 <= d <= 3:
        return False
    for x in arrays:
        if x.dtype != _F32 or x.size == 0 or x.size > _INT_LIMIT or not x._c_contiguous:
            return False
    return True


def _run(kind, a, b, out_shape, pad, stride, dil):
    from . import tf32_enabled
    d = a.ndim - 2
    p = _plan(kind, _as4(a.shape, d), _as4(b.shape, d), _as4(out_shape, d), *_geom4(pad, stride, dil, d),
              tf32_enabled())
    if p is None:
        return None
    out = cupy.empty(out_shape, dtype=a.dtype)
    ws = cupy.empty(max(p.ws, 1), dtype=np.uint8)
    p.execute(a, b, out, ws, _handle(_lib))
    return out


def fprop(x, w, out_shape, pad, stride, dil, groups):
    """``conv_forward`` without bias through cuDNN, or None where cuDNN declines the case."""
    if not _usable(x, w) or prod(out_shape) > _INT_LIMIT:
        return None
    return _run("fprop", x, w, tuple(out_shape), pad, stride, dil)


def dgrad(g, w, x_shape, pad, stride, dil, groups):
    """The input cotangent of :func:`fprop` for output cotangent ``g``, or None."""
    if not _usable(g, w) or prod(x_shape) > _INT_LIMIT:
        return None
    return _run("dgrad", g, w, tuple(x_shape), pad, stride, dil)


def wgrad(x, g, w_shape, pad, stride, dil, groups):
    """The weight cotangent of :func:`fprop` for output cotangent ``g``, or None."""
    if not _usable(x, g):
        return None
    return _run("wgrad", x, g, tuple(w_shape), pad, stride, dil)
