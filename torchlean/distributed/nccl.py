"""The GPU backend (``backend="nccl"``): NCCL through CuPy (``cupy.cuda.nccl``), one GPU per process.

Rank 0 draws NCCL's unique id and publishes it in the job's store; every rank builds its
communicator from it. Collectives are enqueued on the current CUDA stream, in order with the
compute around them, on the tensors' own buffers.
"""

from __future__ import annotations

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
    """One process group's NCCL communicator (the interface of :class:`~torchlean.distributed.cpu.ShmGroup`)."""

    backend = "nccl"

    def __init__(self, store, uid: str, gid: int, ranks, rank: int, timeout: float):
        import cupy
        nccl = _nccl()
        self._cupy, self._n = cupy, nccl
        self.store, self.gid, self.ranks, self.rank, self.timeout = store, gid, list(ranks), rank, timeout
        self.size = len(self.ranks)
        key = f"g{gid}/nccl_unique_id"
        if rank == 0:   # CuPy 14 gives the id as bytes, earlier versions as a tuple of signed chars
            ident = nccl.get_unique_id()
            store.set(key, bytes(ident) if isinstance(ident, (bytes, bytearray)) else bytes(v & 0xFF for v in ident))
        raw = store.get(key, timeout)
        try:
            self.comm = nccl.NcclCommunicator(self.size, raw, rank)
        except TypeError:
            self.comm = nccl.NcclCommunicator(self.size, tuple(b - 256 if b > 127 else b for b in raw), rank)
        self._types = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64, "float16": nccl.NCCL_FLOAT16,
                       "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64, "int8": nccl.NCCL_INT8,
                       "uint8": nccl.NCCL_UINT8}
        self._ops = {"sum": nccl.NCCL_SUM, "avg": nccl.NCCL_SUM, "product": nccl.NCCL_PROD, "min": nccl.NCCL_MIN,
                     "max": nccl.NCCL_MAX}

    def _type(self, arr):
        t = self._types.get(arr.dtype.name)
        if t is None:
            raise DistributedError(f"nccl: tensors of dtype {arr.dtype} are not supported")
        return t

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def all_reduce(self, arr, op):
        out = self._cupy.empty_like(arr)
        self.comm.allReduce(arr.data.ptr, out.data.ptr, arr.size, self._type(arr), self._ops[op], self._stream())
        return out

    def broadcast(self, arr, src):
        self.comm.broadcast(arr.data.ptr, arr.data.ptr, arr.size, self._type(arr), src, self._stream())

    def all_gather(self, arr):
        out = self._cupy.empty((self.size,) + arr.shape, arr.dtype)
        self.comm.allGather(arr.data.ptr, out.data.ptr, arr.size, self._type(arr), self._stream())
        return [out[r] for r in range(self.size)]

    def reduce_scatter(self, arr, op):
        n = arr.size // self.size
        out = self._cupy.empty(n, arr.dtype)
        self.comm.reduceScatter(arr.data.ptr, out.data.ptr, n, self._type(arr), self._ops[op], self._stream())
        return out

    def scatter(self, parts, src, like):
        full = self._cupy.concatenate([p.reshape(-1) for p in parts]) if self.rank == src else \
            self._cupy.empty(like.size * self.size, like.dtype)
        self.broadcast(full, src)
        n = like.size
        return full[self.rank * n:(self.rank + 1) * n].reshape(like.shape)

    def barrier(self):
        one = self._cupy.ones(1, self._cupy.float32)
        self.all_reduce(one, "sum")
        self._cupy.cuda.get_current_stream().synchronize()

    def send(self, arr, dst):
        self.comm.send(arr.data.ptr, arr.size, self._type(arr), dst, self._stream())

    def recv(self, arr, src):
        self.comm.recv(arr.data.ptr, arr.size, self._type(arr), src, self._stream())

    def arrive(self, what):
        self.barrier()

    def close(self):
        self._cupy.cuda.get_current_stream().synchronize()
        self.comm.destroy()
