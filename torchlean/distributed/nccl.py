"""The GPU backend (``backend="nccl"``): NCCL through CuPy (``cupy.cuda.nccl``), one GPU per process.

At a group's first collective, rank 0 draws NCCL's unique id and publishes it in the job's store;
every rank builds its communicator from it, on its GPU of that moment. Collectives are enqueued on
the current CUDA stream, in order with the compute around them, on the tensors' own buffers; a
watchdog thread turns a collective that does not complete within the timeout into DistributedError.
"""

from __future__ import annotations

import _thread
import collections
import signal
import threading
import time
import weakref

from ..errors import DistributedError


def _nccl():
    try:
        from cupy.cuda import nccl
    except ImportError as e:
        raise DistributedError(f"init_process_group: the nccl backend needs CuPy with NCCL ({e}); install it with: "
                               f"pip install \"torchlean[cuda]\"") from None
    if not getattr(nccl, "available", True):
        raise DistributedError("init_process_group: CuPy was built without NCCL; install nvidia-nccl-cu13")
    return nccl


def available() -> bool:
    try:
        _nccl()
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no NCCL, no driver: not available
        return False


class NcclGroup:
    """One process group's NCCL communicator (the interface of :class:`~torchlean.distributed.cpu.ShmGroup`).

    The communicator is made at the group's first collective, on the GPU that is then this process's
    (torch's order: ``init_process_group`` may come before ``torch.cuda.set_device``). Each collective
    records an event after it on its stream; a watchdog thread publishes in the store how many
    collectives this rank has issued, and when one has not completed within the group's timeout it
    reads the other ranks' counts, aborts the communicator (which ends the waiting kernels) and raises
    DistributedError in the main thread, naming the collective and the ranks that never issued it."""

    backend = "nccl"

    def __init__(self, store, uid: str, gid: int, ranks, rank: int, timeout: float):
        import cupy
        self._cupy, self._n = cupy, _nccl()
        self.store, self.gid, self.ranks, self.rank, self.timeout = store, gid, list(ranks), rank, timeout
        self.size = len(self.ranks)
        self.comm = None
        self._seq = 0                 # collectives issued by this rank
        self._pending = collections.deque()   # (seq, name, event, monotonic time issued)
        self._error = None
        self._stop = threading.Event()
        self._watchdog = None
        n = self._n
        self._types = {"float32": n.NCCL_FLOAT32, "float64": n.NCCL_FLOAT64, "float16": n.NCCL_FLOAT16,
                       "int32": n.NCCL_INT32, "int64": n.NCCL_INT64, "int8": n.NCCL_INT8, "uint8": n.NCCL_UINT8}
        self._ops = {"sum": n.NCCL_SUM, "avg": n.NCCL_SUM, "product": n.NCCL_PROD, "min": n.NCCL_MIN,
                     "max": n.NCCL_MAX}

    # -- the communicator and its watchdog --------------------------------------------------------
    def _comm(self):
        if self._error is not None:
            _deliver(self._error)
        if self.comm is None:
            nccl = self._n
            key = f"g{self.gid}/nccl_unique_id"
            if self.rank == 0:   # CuPy 14 gives the id as bytes, earlier versions as a tuple of signed chars
                ident = nccl.get_unique_id()
                self.store.set(key, bytes(ident) if isinstance(ident, (bytes, bytearray))
                               else bytes(v & 0xFF for v in ident))
            raw = self.store.get(key, self.timeout)
            try:
                self.comm = nccl.NcclCommunicator(self.size, raw, self.rank)
            except TypeError:
                self.comm = nccl.NcclCommunicator(self.size, tuple(b - 256 if b > 127 else b for b in raw), self.rank)
            self._device = self._cupy.cuda.runtime.getDevice()
            _install_interrupt()
            from ..kernels.cuda.memory import WAIT_HOOKS
            if _wait_for_device not in WAIT_HOOKS:
                WAIT_HOOKS.append(_wait_for_device)
            _M.groups.add(self)
            self._watchdog = threading.Thread(target=self._watch, name=f"torchlean-nccl-watchdog-g{self.gid}",
                                              daemon=True)
            self._watchdog.start()
        return self.comm

    def _issued(self, name: str) -> None:
        self._seq += 1
        stream = self._cupy.cuda.get_current_stream()
        if stream.is_capturing():   # a collective in a CUDA graph runs at each replay: no watchdog entry
            return
        ev = self._cupy.cuda.Event(disable_timing=True)
        ev.record(stream)
        self._pending.append((self._seq, name, ev, time.monotonic()))

    def _seq_key(self, r: int) -> str:
        return f"g{self.gid}/nccl_issued/{r}"

    def _watch(self) -> None:
        self._cupy.cuda.runtime.setDevice(self._device)
        published = -1
        interval = min(0.5, max(0.01, self.timeout / 20))
        while not self._stop.wait(interval):
            pending = self._pending
            while pending and pending[0][2].done:
                pending.popleft()
            if self._seq != published:
                published = self._seq
                try:
                    self.store.set(self._seq_key(self.rank), str(published))
                except DistributedError:   # the store is gone (rank 0 left): the deadline still holds
                    pass
            if pending and time.monotonic() - pending[0][3] > self.timeout:
                self._expire(*pending[0][:2])
                return

    def _expire(self, seq: int, name: str, interrupt: bool = True) -> None:
        """Abort the communicator for the collective ``seq`` that did not complete in time; the error
        names the ranks that, by the store, never issued it."""
        if self._error is not None:
            return
        try:
            missing = []
            for r in range(self.size):
                if r != self.rank:
                    got = self.store.try_get(self._seq_key(r), 0.0)
                    if got is None or int(got) < seq:
                        missing.append(self.ranks[r])
            who = (f"rank(s) {missing} did not issue it" if missing else
                   "every rank issued it (a rank may have failed inside NCCL)")
        except DistributedError:
            who = "the job's store is gone, so which ranks did not issue it is unknown (rank 0 may have exited)"
        err = self._error = DistributedError(
            f"nccl: {name} (collective {seq} of group {self.gid}) did not complete within {self.timeout:.0f} s; "
            f"{who}. The communicator was aborted.")
        if interrupt:   # published before the abort ends the waiting kernels: no wait returns without it
            _M.pending = err
        try:
            self.comm.abort()
        except Exception:  # noqa: BLE001 - already broken: the error above is what the user needs
            pass
        if interrupt:   # from the watchdog: the main thread may be busy elsewhere
            _raise_in_main(err)

    # -- collectives ------------------------------------------------------------------------------
    def _type(self, arr):
        t = self._types.get(arr.dtype.name)
        if t is None:
            raise DistributedError(f"nccl: tensors of dtype {arr.dtype} are not supported")
        return t

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def all_reduce(self, arr, op, out=None):
        comm = self._comm()
        out = self._cupy.empty_like(arr) if out is None else out
        comm.allReduce(arr.data.ptr, out.data.ptr, arr.size, self._type(arr), self._ops[op], self._stream())
        self._issued("all_reduce")
        return out

    def broadcast(self, arr, src):
        self._comm().broadcast(arr.data.ptr, arr.data.ptr, arr.size, self._type(arr), src, self._stream())
        self._issued("broadcast")

    def all_gather(self, arr):
        comm = self._comm()
        out = self._cupy.empty((self.size,) + arr.shape, arr.dtype)
        comm.allGather(arr.data.ptr, out.data.ptr, arr.size, self._type(arr), self._stream())
        self._issued("all_gather")
        return [out[r] for r in range(self.size)]

    def reduce_scatter(self, arr, op):
        comm = self._comm()
        n = arr.size // self.size
        out = self._cupy.empty(n, arr.dtype)
        comm.reduceScatter(arr.data.ptr, out.data.ptr, n, self._type(arr), self._ops[op], self._stream())
        self._issued("reduce_scatter")
        return out

    def scatter(self, parts, src, like):
        full = self._cupy.concatenate([p.reshape(-1) for p in parts]) if self.rank == src else \
            self._cupy.empty(like.size * self.size, like.dtype)
        self.broadcast(full, src)
        n = like.size
        return full[self.rank * n:(self.rank + 1) * n].reshape(like.shape)

    def barrier(self):
        one = self._cupy.ones(1, self._cupy.float32)
        self.all_reduce(one, "sum", out=one)
        self._wait("barrier")

    def _wait(self, name):
        """Wait for this rank's queued collectives, up to the timeout (the watchdog raises after it)."""
        try:
            ev = self._pending[-1][2]
        except IndexError:   # the watchdog saw everything complete
            return
        end = time.monotonic() + self.timeout + 5.0
        while not ev.done:
            if self._error is not None:
                _deliver(self._error)
            if time.monotonic() > end:   # the watchdog should have fired: do not hang regardless
                self._expire(self._seq, name, interrupt=False)
                _deliver(self._error)
            time.sleep(0.0005)

    def send(self, arr, dst):
        self._comm().send(arr.data.ptr, arr.size, self._type(arr), dst, self._stream())
        self._issued("send")

    def recv(self, arr, src):
        self._comm().recv(arr.data.ptr, arr.size, self._type(arr), src, self._stream())
        self._issued("recv")

    def arrive(self, what):
        self.barrier()

    def close(self):
        """Destroy the communicator once its collectives completed (abort it if they do not within the
        timeout, or after an error: a communicator waiting for a peer that left cannot be destroyed)."""
        self._stop.set()
        if self.comm is not None:
            end = time.monotonic() + self.timeout
            while self._error is None and any(not p[2].done for p in list(self._pending)):
                if time.monotonic() > end:
                    self._expire(self._pending[0][0], self._pending[0][1], interrupt=False)
                    break
                time.sleep(0.001)
            # abort, not destroy: every rank passed the closing barrier, and ncclCommDestroy waits for
            # peers (a rank that left after an error would keep this one waiting)
            if self._error is None:   # after an error the watchdog aborted it already
                self.comm.abort()
            self.comm = None


# ---- raising a watchdog's error in the main thread ---------------------------------------------------

class _Main:
    """This process's watchdog state: the error not yet raised in the main thread, whether the SIGUSR1
    handler was considered, and the NCCL groups that have a communicator."""

    def __init__(self):
        self.pending = None
        self.handler = False
        self.groups = weakref.WeakSet()


_M = _Main()


def _install_interrupt() -> None:
    """Route SIGUSR1 to a handler that raises the watchdog's error (only when the program left SIGUSR1
    at its default and this is the main thread); otherwise the error is raised at the next collective."""
    if threading.current_thread() is not threading.main_thread() or _M.handler:
        return
    _M.handler = True
    if signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL:
        signal.signal(signal.SIGUSR1, _on_interrupt)


def _on_interrupt(signum, frame):
    err, _M.pending = _M.pending, None
    if err is not None:
        raise err


def _raise_in_main(err: DistributedError) -> None:
    """Interrupt the main thread to raise ``err`` (``_M.pending``) unless it was raised already."""
    if _M.pending is err and signal.getsignal(signal.SIGUSR1) is _on_interrupt:
        _thread.interrupt_main(signal.SIGUSR1)


def _wait_for_device() -> None:
    """While a collective is in flight, wait for the current stream by polling an event (other threads
    keep calling CUDA meanwhile), raising the watchdog's error if it fires during the wait; otherwise
    leave the wait to the blocking copy."""
    err = _M.pending
    if err is not None:
        _deliver(err)
    in_flight = False
    for g in list(_M.groups):
        try:
            in_flight = in_flight or not g._pending[-1][2].done
        except IndexError:
            pass
    if not in_flight:
        return
    import cupy
    ev = cupy.cuda.get_current_stream().record()
    while not ev.done:
        if _M.pending is not None:
            break
        time.sleep(0.00005)
    err = _M.pending     # also when the abort is what ended the wait
    if err is not None:
        _deliver(err)


def _deliver(err: DistributedError):
    """Raise ``err`` here and now (a collective or a wait noticed it first): the interrupt, if still
    pending, then raises nothing."""
    if _M.pending is err:
        _M.pending = None
    raise err
