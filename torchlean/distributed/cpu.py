"""The CPU backend (``backend="gloo"``): collectives between the processes of one machine through
shared memory (the standard library's ``multiprocessing.shared_memory``), synchronised through the
job's :class:`~torchlean.distributed.TCPStore`.

Why this design: the processes of a job are started independently (``torchlean launch``, torchrun's
model), and the maintained CPU engines either need their own launcher (MPI: MPICH's singleton
processes cannot be joined into one communicator afterwards, its ``MPI_Comm_connect`` refuses the
groups as not disjoint) or come only with torch (Gloo). On one machine, shared memory moves the
data once and the store orders the steps.

Each collective of a group has a sequence number ``s``. Every rank writes its data into its own
segment (two per rank, alternating with ``s``), arrives at the group's barrier for ``s`` in the store,
then reads what it needs from the others' segments. The alternation makes one barrier per collective
enough: a rank writes the same segment again at ``s + 2`` only after every rank arrived at ``s + 1``,
that is after they all finished reading ``s``. Reductions run in rank order on every rank, so every
rank gets the same bits (and a result independent of timing). A barrier that does not complete in
the group's timeout raises :class:`~torchlean.errors.DistributedError` naming the collective, its
sequence number and the ranks that did not arrive.
"""

from __future__ import annotations

import mmap
import os
import sys
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from ..errors import DistributedError

_MIN_SEGMENT = 1 << 16
#: reduce op name (``ReduceOp.value``) -> the NumPy function applied in rank order; AVG's division
#: comes after (torchlean.distributed._finish).
_REDUCE = {"sum": np.add, "avg": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}


class _Mapped:
    """A peer's segment mapped read-only, outside the resource tracker (``buf``, ``close``)."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            self._map = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.buf = memoryview(self._map)

    def close(self):
        self.buf.release()
        self._map.close()


def _open_peer(name):
    """Open another rank's segment without registering it with this process's resource tracker:
    a tracker unlinks what it knows of at exit, and processes started by multiprocessing share their
    parent's tracker, where the owner's own registration would be dropped with ours."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name, track=False)
    if os.path.isdir("/dev/shm"):
        return _Mapped(os.path.join("/dev/shm", name))
    seg = shared_memory.SharedMemory(name)
    resource_tracker.unregister(seg._name, "shared_memory")  # noqa: SLF001 - no public way before 3.13
    return seg


class ShmGroup:
    """One process group's data path: ``size`` ranks (``ranks``: their global ranks), this process
    being group rank ``rank``; the store keys are under ``prefix``."""

    backend = "gloo"

    def __init__(self, store, uid: str, gid: int, ranks, rank: int, timeout: float):
        self.store, self.uid, self.gid = store, uid, gid
        self.ranks = list(ranks)
        self.size = len(self.ranks)
        self.rank = rank
        self.timeout = timeout
        self.prefix = f"g{gid}"
        self.seq = 0
        self._own: dict = {}     # (slot, capacity) -> SharedMemory created here
        self._peer: dict = {}    # (rank, slot, capacity) -> SharedMemory opened here
        self._p2p: dict = {}     # (src, dst) -> messages so far

    # -- synchronisation ---------------------------------------------------------------------
    def arrive(self, what: str) -> int:
        """The group's barrier for the next collective; returns its sequence number."""
        s = self.seq
        self.seq += 1
        k = f"{self.prefix}/{s}"
        st = self.store
        st.set(f"{k}/r{self.rank}", b"1")
        if st.add(f"{k}/n", 1) == self.size:
            st.set(f"{k}/go", b"1")
            if s >= 2:  # every rank is past collective s - 2: its keys can go
                old = f"{self.prefix}/{s - 2}"
                st.delete_key(f"{old}/n")
                st.delete_key(f"{old}/go")
        if st.try_get(f"{k}/go", self.timeout) is None:
            missing = [self.ranks[r] for r in range(self.size) if not st.check(f"{k}/r{r}")]
            raise DistributedError(f"{what}: timed out after {self.timeout:.1f} s at collective #{s} of group "
                                   f"{self.gid} (ranks {self.ranks}); rank(s) {missing} did not arrive")
        if s >= 2:
            st.delete_key(f"{self.prefix}/{s - 2}/r{self.rank}")
        return s

    # -- shared segments ---------------------------------------------------------------------
    def _name(self, rank, slot, cap):
        return f"tl{self.uid}g{self.gid}r{rank}s{slot}c{cap}"

    @staticmethod
    def _capacity(nbytes):
        return max(_MIN_SEGMENT, 1 << max(0, int(nbytes) - 1).bit_length())

    def _write(self, slot, arr: np.ndarray):
        cap = self._capacity(arr.nbytes)
        seg = self._own.get((slot, cap))
        if seg is None:
            seg = self._own[(slot, cap)] = shared_memory.SharedMemory(self._name(self.rank, slot, cap), create=True,
                                                                      size=cap)
        np.frombuffer(seg.buf, dtype=arr.dtype, count=arr.size)[...] = arr.reshape(-1)

    def _read(self, rank, slot, dtype, count, nbytes):
        if rank == self.rank:
            seg = self._own[(slot, self._capacity(nbytes))]
        else:
            cap = self._capacity(nbytes)
            seg = self._peer.get((rank, slot, cap))
            if seg is None:
                try:
                    seg = _open_peer(self._name(rank, slot, cap))
                except FileNotFoundError:
                    raise DistributedError(
                        f"collective #{self.seq - 1} of group {self.gid}: rank {self.ranks[rank]} has no data for "
                        f"it; every rank of a group must call the same collectives, with the same shapes and "
                        f"dtypes, in the same order") from None
                self._peer[(rank, slot, cap)] = seg
        return np.frombuffer(seg.buf, dtype=dtype, count=count)

    # -- collectives on NumPy arrays (results in place) -------------------------------------
    def all_reduce(self, arr, op):
        reduce = _REDUCE[op]
        s = self.seq
        self._write(s % 2, arr)
        self.arrive("all_reduce")
        acc = None
        for r in range(self.size):
            v = self._read(r, s % 2, arr.dtype, arr.size, arr.nbytes)
            acc = v.copy() if acc is None else reduce(acc, v)
        return acc.reshape(arr.shape)

    def broadcast(self, arr, src):
        s = self.seq
        if self.rank == src:
            self._write(s % 2, arr)
        self.arrive("broadcast")
        if self.rank != src:
            arr[...] = self._read(src, s % 2, arr.dtype, arr.size, arr.nbytes).reshape(arr.shape)

    def all_gather(self, arr):
        """Every rank's ``arr`` (same shape and dtype on all), in rank order."""
        s = self.seq
        self._write(s % 2, arr)
        self.arrive("all_gather")
        return [self._read(r, s % 2, arr.dtype, arr.size, arr.nbytes).reshape(arr.shape).copy()
                for r in range(self.size)]

    def reduce_scatter(self, arr, op):
        """Chunk ``rank`` (along axis 0, ``size`` equal chunks) of the reduction of every rank's ``arr``."""
        reduce = _REDUCE[op]
        s = self.seq
        self._write(s % 2, arr)
        self.arrive("reduce_scatter")
        n = arr.size // self.size
        acc = None
        for r in range(self.size):
            v = self._read(r, s % 2, arr.dtype, arr.size, arr.nbytes)[self.rank * n:(self.rank + 1) * n]
            acc = v.copy() if acc is None else reduce(acc, v)
        return acc

    def scatter(self, parts, src, like):
        """Group rank ``src`` holds ``parts`` (one array like ``like`` per rank); each rank gets its own."""
        s = self.seq
        if self.rank == src:
            self._write(s % 2, np.concatenate([p.reshape(-1) for p in parts]))
        self.arrive("scatter")
        n = like.size
        full = self._read(src, s % 2, like.dtype, n * self.size, like.nbytes * self.size)
        return full[self.rank * n:(self.rank + 1) * n].reshape(like.shape).copy()

    def barrier(self):
        self.arrive("barrier")

    # -- point to point, through the store -----------------------------------------------------
    def send(self, arr, dst):
        k = (self.rank, dst)
        n = self._p2p.get(k, 0)
        self._p2p[k] = n + 1
        self.store.set(f"{self.prefix}/p2p/{self.rank}/{dst}/{n}",
                       np.ascontiguousarray(arr).tobytes())

    def recv(self, arr, src):
        k = (src, self.rank)
        n = self._p2p.get(k, 0)
        key = f"{self.prefix}/p2p/{src}/{self.rank}/{n}"
        data = self.store.try_get(key, self.timeout)
        if data is None:
            raise DistributedError(f"recv: timed out after {self.timeout:.1f} s waiting for message #{n} from rank "
                                   f"{self.ranks[src]} (group {self.gid})")
        self._p2p[k] = n + 1
        self.store.delete_key(key)
        got = np.frombuffer(data, dtype=arr.dtype)
        if got.size != arr.size:
            raise DistributedError(f"recv: rank {self.ranks[src]} sent {got.size} elements of {arr.dtype}, the "
                                   f"receiving tensor has {arr.size}")
        arr[...] = got.reshape(arr.shape)

    def close(self):
        for seg in self._peer.values():
            seg.close()
        for seg in self._own.values():
            seg.close()
            try:
                seg.unlink()
            except FileNotFoundError:
                pass
        self._peer.clear()
        self._own.clear()
