"""Compilation and launch of the native kernels in ``src/*.cu`` (NVRTC through CuPy's compiler binding).

Each source is compiled once per process, on the first launch of any of its kernels, with
every template instantiation its family module declared (:func:`declare`) in one NVRTC call. The
compiled module is kept on disk (:func:`cache_dir`), keyed by the full source text, the options,
the GPU architecture and the NVRTC and CuPy versions. ``common.cuh`` is prepended to every source
rather than ``#include``-d, so that an edit to it changes that key.

**Subnormals are kept.** CuPy's ``RawModule`` (and every kernel CuPy compiles for itself) appends
``-ftz=true``: float32 arithmetic then flushes subnormal inputs and results to zero, so
``2**-127 * 2`` gives 0 where NumPy, the spec and torch's CUDA kernels give ``2**-126``, and a
GradScaler at scale ``2**127`` unscales every gradient to 0. The modules here are compiled with
NVRTC's IEEE defaults (``-ftz=false``, correctly rounded division and square root) through CuPy's
``compile_using_nvrtc``, which adds no such option.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import threading
from pathlib import Path

import cupy
import numpy as np

from ...errors import DTypeError

SRC = Path(__file__).parent / "src"
OPTIONS = ("-std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")

FLOATS = ("float", "double")
ELEMS = ("unsigned char", "unsigned short", "unsigned int", "unsigned long long")

#: Per source module (``src/<module>.cu``, a family's name): the template instantiations NVRTC
#: compiles. Each family module of this package declares its own (:func:`declare`) when imported.
NAMES: dict[str, list[str]] = {}


def declare(module: str, names) -> None:
    """Declare the kernels of ``src/<module>.cu``: the name expressions NVRTC instantiates."""
    NAMES[module] = list(names)


def xmacro(module: str, macro: str) -> dict:
    """Opcodes of the X-macro list ``#define <macro>(X) X(A) X(B) ...`` in ``src/<module>.cu``:
    ``{"a": 0, "b": 1, ...}``. The list in the source is the one place an op is numbered; the
    source builds its enum from it and the Python launchers read it here."""
    m = re.search(rf"#define {macro}\(X\)((?:[^\n]*\\\n)*[^\n]*)", (SRC / f"{module}.cu").read_text())
    if m is None:
        raise RuntimeError(f"src/{module}.cu defines no X-macro list {macro}(X)")
    return {op.lower(): i for i, op in enumerate(re.findall(r"X\((\w+)\)", m.group(1)))}


_MODULES: dict = {}   # module -> (cupy.cuda.function.Module, {name expression: mangled name})
_FUNCS: dict[tuple[str, str], object] = {}
_CACHE_FORMAT = 1


def source(module: str) -> str:
    """The full text NVRTC compiles for ``module``: the shared prelude, then ``src/<module>.cu``."""
    return (SRC / "common.cuh").read_text() + "\n" + (SRC / f"{module}.cu").read_text()


def cache_dir() -> Path:
    """Where compiled modules are kept: ``$TORCHLEAN_KERNEL_CACHE``, else ``~/.cache/torchlean/kernels``."""
    env = os.environ.get("TORCHLEAN_KERNEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "torchlean" / "kernels"


def _compile(module: str):
    """``(image, {name expression: mangled name})`` of ``src/<module>.cu``, from the disk cache or NVRTC."""
    from cupy.cuda import compiler
    from cupy_backends.cuda.libs import nvrtc as _nvrtc
    src, names, arch = source(module), NAMES[module], cupy.cuda.Device().compute_capability
    nvrtc = ".".join(map(str, _nvrtc.getVersion()))
    key = hashlib.sha256("\0".join([str(_CACHE_FORMAT), src, *OPTIONS, arch, nvrtc, cupy.__version__, *names])
                         .encode()).hexdigest()
    path = cache_dir() / f"{module}-{key[:32]}.bin"
    try:
        blob = path.read_bytes()
        head, image = blob.split(b"\n", 1)
        mapping = json.loads(head)
        if sorted(mapping) == sorted(names):
            return image, mapping
    except (OSError, ValueError):
        pass
    image, mapping = compiler.compile_using_nvrtc(src, OPTIONS, arch, f"{module}.cu", names)
    if isinstance(image, str):
        image = image.encode()
    mapping = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in mapping.items()}
    try:  # written whole and renamed: a reader never sees half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(mapping).encode() + b"\n" + image)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compile again next process
        pass
    return image, mapping


def function(module: str, name: str):
    """The compiled kernel ``name`` (a name expression of ``NAMES[module]``), cached per process."""
    f = _FUNCS.get((module, name))
    if f is None:
        entry = _MODULES.get(module)
        if entry is None:
            image, mapping = _compile(module)
            mod = cupy.cuda.function.Module()
            mod.load(image)
            entry = _MODULES[module] = (mod, mapping)
        mod, mapping = entry
        f = mod.get_function(mapping[name])
        _FUNCS[(module, name)] = f
    return f


_FLOAT_NAME = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_ELEM_NAME = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def ftype(dtype, op: str) -> str:
    """C type of a float32 / float64 dtype; DTypeError naming ``op`` for any other."""
    t = _FLOAT_NAME.get(np.dtype(dtype))
    if t is None:
        raise DTypeError(f"{op}: CUDA kernel needs float32 or float64, got {np.dtype(dtype)}")
    return t


def etype(dtype) -> str:
    """Unsigned integer C type of the dtype's item size (for kernels that only move data)."""
    return _ELEM_NAME[np.dtype(dtype).itemsize]


def blocks(n: int, per_block: int) -> int:
    """Blocks to cover ``n`` items at ``per_block`` per block (rounded up: sizes need not divide)."""
    return (n + per_block - 1) // per_block


# Launches go straight to cuLaunchKernel with the arguments packed into one buffer and an
# array of pointers into it (kernelParams): CuPy's generic launch converts every scalar argument
# through a temporary NumPy object, which is most of the host time of a small kernel, and the
# driver reads kernelParams no slower than a packed CU_LAUNCH_PARAM_BUFFER_POINTER buffer
# (0.2 - 1.2 us less per launch on H100 hosts, benchmarks/probe_host.py).
_NDARRAY = cupy.ndarray
_CODES = {_NDARRAY: "P", type(None): "P", np.int64: "q", np.int32: "i", np.uint64: "Q", np.float32: "f",
          np.float64: "d", bytes: None}
_TLS = threading.local()
try:
    from cupy.cuda import driver as _driver
    from cupy.cuda import stream as _stream
    _launch_kernel = _driver.launchKernel
    _current_stream = _stream.get_current_stream
    FAST_LAUNCH = True
except (ImportError, AttributeError):  # a CuPy without the driver binding: its own launch only
    FAST_LAUNCH = False


class _Packer:
    """Argument buffer of one signature: a struct layout (native alignment) and the kernelParams
    array of cuLaunchKernel, one pointer to each argument's place in the buffer."""

    __slots__ = ("st", "buf", "params", "ptr")

    def __init__(self, fmt):
        self.st = struct.Struct("@" + fmt)
        self.buf = np.zeros(max(self.st.size, 8), dtype=np.uint8)
        codes = re.findall(r"\d*[a-zA-Z?]", fmt)
        base = self.buf.ctypes.data
        # an argument's offset: the aligned size of everything up to it, less its own size
        offsets = [struct.calcsize("@" + "".join(codes[:i + 1])) - struct.calcsize("@" + c)
                   for i, c in enumerate(codes)]
        self.params = np.array([base + o for o in offsets] or [0], dtype=np.uint64)
        self.ptr = self.params.ctypes.data


def _packer(key, args):
    """The packer of an argument-type signature (per thread: the buffer is filled, then launched)."""
    cache = getattr(_TLS, "packers", None)
    if cache is None:
        cache = _TLS.packers = {}
    p = cache.get(key)
    if p is None:
        codes = []
        for t, a in zip(key, args):
            c = _CODES.get(t)
            if c is None and t is bytes:
                c = f"{len(a)}s"
            if c is None:
                return None
            codes.append(c)
        p = cache[key] = _Packer("".join(codes))
    return p


_HANDLES: dict = {}


def _handle(f) -> int:
    """The CUfunction of a compiled kernel (CuPy's RawKernel keeps it on its ``kernel``), 0 if unknown."""
    h = _HANDLES.get(id(f))
    if h is None:
        h = getattr(f, "ptr", None)
        if h is None:
            h = getattr(getattr(f, "kernel", None), "ptr", None)
        h = _HANDLES[id(f)] = int(h or 0)
    return h


def launch_function(f, grid, block, args, key=None, shared_mem: int = 0) -> None:
    """Launch compiled kernel ``f`` on the current stream; ``args`` are arrays (passed as pointers),
    None (a null pointer), NumPy scalars (by value) or ``bytes`` (a struct by value, first argument).
    ``shared_mem`` is the dynamic shared memory of a block in bytes.

    ``key``, when given, is ``tuple(map(type, args))`` (a caller may precompute it)."""
    global FAST_LAUNCH
    if FAST_LAUNCH:
        h = _HANDLES.get(id(f)) or _handle(f)
        if key is None:
            key = tuple(map(type, args))
        try:
            p = _TLS.packers.get(key)
        except AttributeError:
            p = None
        if p is None and h:
            p = _packer(key, args)
        if p is not None and h:
            try:
                p.st.pack_into(p.buf, 0, *[a.data.ptr if type(a) is _NDARRAY else (0 if a is None else a)
                                           for a in args])
                _launch_kernel(h, grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
                               block[0], block[1] if len(block) > 1 else 1, block[2] if len(block) > 2 else 1,
                               shared_mem, _current_stream().ptr, p.ptr, 0)
                return
            except Exception:  # a CuPy whose binding differs: its own launch from now on (it raises real errors)
                FAST_LAUNCH = False
    # CuPy passes a size-one NumPy array by value: the struct argument of the fallback.
    f(grid, block, tuple(np.frombuffer(a, dtype=np.dtype((np.void, len(a)))) if type(a) is bytes else a
                         for a in args), shared_mem=shared_mem)


_get_ident = threading.get_ident
_TYPED = {"P": np.uint64, "q": np.int64, "i": np.int32, "f": np.float32, "d": np.float64}


class Launcher:
    """A compiled kernel with a fixed argument layout, launched on a 1-D grid with its arguments
    given as plain numbers: ``L(n_blocks, threads, x.data.ptr, y.data.ptr, n, ...)``.

    ``fmt`` is a :mod:`struct` format without the byte-order prefix: ``P`` a device pointer (an
    int), ``q``/``i`` int64/int32, ``f``/``d`` float/double. This is the host path of the small
    kernels that every op launches (elementwise, fused backward): nothing is converted or looked
    up per call, which :func:`launch_function` must do for arbitrary arguments. The argument
    buffer belongs to the thread that built the launcher (cuLaunchKernel copies it before it
    returns); another thread takes :func:`launch_function`'s per-thread buffers.
    """

    __slots__ = ("f", "fmt", "h", "p", "st", "buf", "ptr", "tid", "smem")

    def __init__(self, f, fmt: str, shared_mem: int = 0):
        self.f = f
        self.fmt = fmt
        self.smem = shared_mem  # dynamic shared memory of a block, bytes (fixed per launcher)
        self.h = _handle(f) if FAST_LAUNCH else 0
        self.p = _Packer(fmt)  # owns the buffer and the pointer array that ``ptr`` points at
        self.st, self.buf, self.ptr = self.p.st, self.p.buf, self.p.ptr
        self.tid = _get_ident()

    def __call__(self, n_blocks: int, threads: int, *vals) -> None:
        if self.h and _get_ident() == self.tid:
            self.st.pack_into(self.buf, 0, *vals)
            _launch_kernel(self.h, n_blocks, 1, 1, threads, 1, 1, self.smem, _current_stream().ptr, self.ptr, 0)
        else:
            self._typed_launch(n_blocks, threads, vals)

    def _typed_launch(self, n_blocks, threads, vals):
        # Another thread, or no direct launch: the general path with NumPy-typed scalars.
        args = tuple(_TYPED[c](v) for c, v in zip(self.fmt, vals))
        if FAST_LAUNCH and self.h:
            launch_function(self.f, (n_blocks,), (threads,), args, shared_mem=self.smem)
        else:
            self.f((n_blocks,), (threads,), args, shared_mem=self.smem)


def launch(module: str, name: str, n_blocks, threads, args) -> None:
    """Launch unless there is nothing to do (empty inputs never reach the GPU)."""
    grid = n_blocks if isinstance(n_blocks, tuple) else (n_blocks,)
    if grid[0] <= 0:
        return
    block = threads if isinstance(threads, tuple) else (threads,)
    f = _FUNCS.get((module, name))
    if f is None:
        f = function(module, name)
    launch_function(f, grid, block, args)
