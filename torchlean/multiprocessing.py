"""torch.multiprocessing under torchlean: the stdlib :mod:`multiprocessing` plus tensor sharing.

Everything of :mod:`multiprocessing` is re-exported (``Process``, ``Queue``, ``get_context``, ...).
Importing this module registers how tensors cross process boundaries through multiprocessing's
pickler (queues, pipes, ``Process``/``spawn`` arguments): a CPU tensor in shared memory
(:meth:`Tensor.share_memory_`, :meth:`Module.share_memory`) arrives as a view of the same memory, so
in-place updates made by either side are seen by the other (Hogwild training, fork or spawn); any other
CPU tensor arrives as a copy of its values, dtype, shape and ``requires_grad`` (torch instead moves it
into shared memory on the way). CUDA tensors cannot be sent (a clear error). :func:`spawn` runs
``fn(i, *args)`` in ``nprocs`` processes and re-raises a child's failure with its traceback.

    >>> import torchlean as tl
    >>> import torchlean.multiprocessing as mp
    >>> q = mp.get_context("fork").SimpleQueue()
    >>> q.put(tl.tensor([1.0, 2.0], requires_grad=True))
    >>> q.get()
    tensor([1., 2.], requires_grad=True)
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import warnings
from multiprocessing import *
from multiprocessing.reduction import ForkingPickler

import numpy as np

from .errors import AutogradError, DeviceError, TorchLeanError
from .nn.parameter import Buffer, Parameter
from .tensor import Tensor, map_segment, segment_of

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn",
           "start_processes", "ProcessContext", "ProcessException", "ProcessRaisedException",
           "ProcessExitedException"] + list(multiprocessing.__all__)

_ALL_STRATEGIES = {"file_descriptor", "file_system"} if sys.platform.startswith("linux") else {"file_system"}
_strategy = "file_descriptor" if sys.platform.startswith("linux") else "file_system"


class SharingStrategyError(TorchLeanError, AssertionError):
    """An unknown sharing strategy name (torch raises AssertionError)."""


def set_sharing_strategy(new_strategy) -> None:
    """Choose how CPU tensors are shared: one of :func:`get_all_sharing_strategies`. Both names map
    to the same mechanism here (named POSIX shared-memory segments), so the choice has no effect."""
    if new_strategy not in _ALL_STRATEGIES:
        raise SharingStrategyError(f"invalid sharing strategy {new_strategy!r}, expected one of {_ALL_STRATEGIES}")
    global _strategy
    _strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current sharing strategy (``"file_descriptor"`` on Linux)."""
    return _strategy


def get_all_sharing_strategies() -> set:
    """The sharing strategies this system accepts."""
    return set(_ALL_STRATEGIES)


# ---- tensors through multiprocessing's pickler ------------------------------------------------

def _reduce_tensor(t: Tensor):
    if t.device != "cpu":
        raise DeviceError("multiprocessing: sending a CUDA tensor to another process is not supported "
                          "(CUDA IPC is not implemented); send t.cpu() instead")
    if t._tape is not None and t.requires_grad:
        raise AutogradError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
                            "does not support crossing process boundaries.  If you just want to transfer the "
                            "data, call detach() on the tensor before serializing (e.g., putting it on the queue).")
    a = t._value
    extra = getattr(t, "persistent", None) if isinstance(t, Buffer) else None
    seg = segment_of(a)
    if seg is None:
        return _rebuild_tensor, (type(t), np.array(a), bool(t.requires_grad), extra)
    start = np.frombuffer(seg, np.uint8, count=1).__array_interface__["data"][0]
    offset = a.__array_interface__["data"][0] - start
    return _rebuild_shared, (type(t), seg.name, len(seg), offset, a.dtype.str, a.shape, a.strides,
                             bool(t.requires_grad), extra)


def _make(cls, a, requires_grad, extra):
    t = Tensor.__new__(cls)
    Tensor.__init__(t, a, requires_grad=requires_grad)
    if cls is Buffer or isinstance(t, Buffer):
        t.persistent = True if extra is None else extra
    return t


def _rebuild_tensor(cls, a, requires_grad, extra):
    return _make(cls, a, requires_grad, extra)


def _rebuild_shared(cls, name, size, offset, dtype, shape, strides, requires_grad, extra):
    seg, dt = map_segment(name, size), np.dtype(dtype)
    if 0 in shape:
        return _make(cls, np.empty(shape, dt), requires_grad, extra)
    first = np.frombuffer(seg, np.uint8)[offset:offset + dt.itemsize].view(dt)
    a = np.lib.stride_tricks.as_strided(first, shape, strides)
    return _make(cls, a, requires_grad, extra)


for _cls in (Tensor, Parameter, Buffer):
    ForkingPickler.register(_cls, _reduce_tensor)


# ---- spawn ------------------------------------------------------------------------------------

class ProcessException(TorchLeanError):
    """A process started by :func:`spawn` / :func:`start_processes` failed."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A process failed with an exception; the message carries the child's traceback."""


class ProcessExitedException(ProcessException):
    """A process exited with a non-zero code or was killed by a signal."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:  # noqa: BLE001 - any failure of fn is reported to the parent
        import traceback
        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes of one :func:`start_processes` call: :meth:`pids`, :meth:`join`."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list:
        return [int(p.pid) for p in self.processes]

    def _join_procs_with_timeout(self, timeout: float):
        end = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0, end - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait for processes; True once all have exited successfully, False while some still run.
        When one fails, the others are terminated (after ``grace_period``) and
        :class:`ProcessRaisedException` / :class:`ProcessExitedException` is raised for it."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            p = self.processes[index]
            p.join()
            if p.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return not self.sentinels
        if grace_period is not None:
            self._join_procs_with_timeout(grace_period)
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        self._join_procs_with_timeout(30 if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                p.kill()
            p.join()
        failed = self.processes[error_index]
        if not os.access(self.error_files[error_index], os.R_OK):
            code = failed.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<Unknown signal {-code}>"
                raise ProcessExitedException(f"process {error_index:d} terminated with signal {name}",
                                             error_index, failed.pid, code, name)
            raise ProcessExitedException(f"process {error_index:d} terminated with exit code {code:d}",
                                         error_index, failed.pid, code)
        with open(self.error_files[error_index], "rb") as fh:
            trace = pickle.load(fh)
        os.unlink(self.error_files[error_index])
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n" + trace
        raise ProcessRaisedException(msg, error_index, failed.pid)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` with ``start_method`` (``"spawn"``,
    ``"fork"``, ``"forkserver"``); join them (None) or, with ``join=False``, return the
    :class:`ProcessContext`."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        tf = tempfile.NamedTemporaryFile(prefix="torchlean-errorfile-", suffix=".pickle", delete=False)  # noqa: SIM115
        tf.close()
        os.unlink(tf.name)
        p = ctx.Process(target=_wrap, args=(fn, i, args, tf.name), daemon=daemon)
        p.start()
        processes.append(p)
        error_files.append(tf.name)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in a new process (start method
    ``"spawn"``; another ``start_method`` warns, as in torch, and spawn is used). A child's exception
    is re-raised here as :class:`ProcessRaisedException` with its traceback, after the others are
    stopped. ``fn`` must be importable (defined at a module's top level)."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t torch.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
