"""``torchlean.distributed``: torch.distributed's process groups and collectives.

A job is several processes (``torchlean launch``, torchrun's flags and environment), each calling
:func:`init_process_group`; they meet in a :class:`TCPStore` served by rank 0 at
``MASTER_ADDR:MASTER_PORT``. Backends:

* ``"gloo"`` (the CPU backend): processes of one machine, CPU tensors, collectives through shared
  memory (:mod:`torchlean.distributed.cpu` says why and how). Results are the same bits on every
  rank: reductions run in rank order.
* ``"nccl"``: CUDA tensors, one GPU per process, NCCL through CuPy (:mod:`torchlean.distributed.nccl`).
  A collective that never completes is not timed out yet.

    >>> import torchlean.distributed as dist
    >>> dist.is_available(), dist.is_initialized()
    (True, False)

Collectives write their result into the tensor they are given, as torch's do; ``async_op=True``
returns a completed :class:`Work`. A collective that does not complete within the group's timeout
raises :class:`~torchlean.errors.DistributedError` naming it and the ranks that did not arrive.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from enum import Enum

import numpy as np

from ..errors import DistributedError
from .store import DEFAULT_TIMEOUT, TCPStore, _seconds

__all__ = ["init_process_group", "destroy_process_group", "is_available", "is_initialized", "is_gloo_available",
           "is_nccl_available", "is_torchelastic_launched", "get_rank", "get_world_size", "get_backend", "barrier",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce", "gather",
           "scatter",
           "reduce_scatter_tensor", "send", "recv", "new_group", "ReduceOp", "GroupMember", "Work", "TCPStore",
           "ProcessGroup", "get_process_group_ranks", "get_global_rank", "get_group_rank", "Backend",
           "isend", "irecv", "P2POp", "batch_isend_irecv", "all_gather_object", "broadcast_object_list",
           "gather_object", "scatter_object_list", "GradBucket"]


class ReduceOp(Enum):
    """The reductions of :func:`all_reduce` and :func:`reduce_scatter` (``AVG``: the mean over ranks)."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


class Backend(str):
    """torch's ``Backend`` names: ``Backend.GLOO``, ``Backend.NCCL``."""
    GLOO = "gloo"
    NCCL = "nccl"




class ProcessGroup:
    """A group of ranks (global ranks ``ranks``); this process is ``rank()`` in it."""

    def __init__(self, impl, ranks):
        self._impl = impl
        self._ranks = list(ranks)

    def rank(self) -> int:
        return self._impl.rank

    def size(self) -> int:
        return self._impl.size

    def name(self) -> str:
        return self._impl.backend

    def __repr__(self):
        return f"ProcessGroup(backend={self._impl.backend!r}, ranks={self._ranks})"


class GroupMember:
    """``GroupMember.WORLD`` (the default group, once initialized) and ``NON_GROUP_MEMBER`` (what
    :func:`new_group` returns to a process outside the new group)."""
    WORLD = None
    NON_GROUP_MEMBER = object()


class Work:
    """The handle an ``async_op=True`` collective returns; the collective has completed already.
    ``get_future()`` gives a completed :class:`torchlean.futures.Future` of the collective's output
    tensors (for ``all_reduce``, ``[tensor]``)."""

    def __init__(self, result=None):
        self._result = [] if result is None else result

    def get_future(self):
        from ..futures import Future
        return Future.completed(self._result)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class _State:
    world: ProcessGroup | None = None
    store: TCPStore | None = None
    rank = -1
    groups: list = []
    next_gid = 1
    uid = ""
    backend = "gloo"
    timeout = DEFAULT_TIMEOUT.total_seconds()


_S = _State()


# ---- setup ----------------------------------------------------------------------------------------

def is_available() -> bool:
    return True


def is_gloo_available() -> bool:
    return True


def is_nccl_available() -> bool:
    """True when CuPy with NCCL and a GPU are there."""
    from .nccl import available
    return available()


def is_torchelastic_launched() -> bool:
    """True in a process started by ``torchlean launch`` (or torchrun)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_initialized() -> bool:
    return _S.world is not None


def _env(name, who):
    v = os.environ.get(name)
    if v is None:
        raise DistributedError(f"{who}: environment variable {name} expected, but not set (init_method env:// "
                               f"reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, as torchrun sets them)")
    return v


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the job's default process group (torch's signature).

    ``init_method``: ``"env://"`` (the default: ``MASTER_ADDR``, ``MASTER_PORT``, and ``RANK`` and
    ``WORLD_SIZE`` unless given) or ``"tcp://host:port"`` (with ``rank`` and ``world_size``); or pass a
    ``store`` with ``rank`` and ``world_size``. ``timeout`` (a timedelta, 30 minutes by default)
    bounds every collective of the group."""
    if _S.world is not None:
        raise DistributedError("init_process_group: trying to initialize the default process group twice")
    name = "gloo" if backend is None else str(backend).lower()
    if name in ("cpu:gloo,cuda:nccl", "cpu:gloo"):
        name = "gloo"
    if name not in ("gloo", "cpu", "nccl"):
        raise DistributedError(f"init_process_group: unknown backend {backend!r} (known: 'gloo', 'nccl')")
    if name == "nccl":
        from .nccl import _nccl
        _nccl()   # a clear error before any rendezvous when CuPy or NCCL is missing
    t = _seconds(timeout if timeout is not None else DEFAULT_TIMEOUT)
    if store is None:
        method = init_method or "env://"
        if method.startswith("env://"):
            host, port = _env("MASTER_ADDR", "init_process_group"), int(_env("MASTER_PORT", "init_process_group"))
            rank = int(_env("RANK", "init_process_group")) if rank in (-1, None) else rank
            world_size = int(_env("WORLD_SIZE", "init_process_group")) if world_size in (-1, None) else world_size
        elif method.startswith("tcp://"):
            hostport = method[len("tcp://"):].split("?")[0]
            host, _, port = hostport.rpartition(":")
            if not host or not port.isdigit():
                raise DistributedError(f"init_process_group: init_method {method!r} is not tcp://host:port")
            port = int(port)
        else:
            raise DistributedError(f"init_process_group: init_method {method!r} is not supported "
                                   f"(env:// or tcp://host:port)")
    if rank is None or world_size is None or int(world_size) < 1 or not 0 <= int(rank) < int(world_size):
        raise DistributedError(f"init_process_group: rank {rank} and world_size {world_size} must satisfy "
                               f"0 <= rank < world_size")
    rank, world_size = int(rank), int(world_size)
    if store is None:
        store = TCPStore(host, port, world_size, is_master=(rank == 0), timeout=t)
    if rank == 0:
        store.set("__uid__", secrets.token_hex(4))
    uid = store.get("__uid__", t).decode()
    _S.store, _S.rank, _S.uid, _S.timeout = store, rank, uid, t
    _S.backend = "nccl" if name == "nccl" else "gloo"
    _S.world = ProcessGroup(_impl(_S.backend)(store, uid, 0, range(world_size), rank, t), range(world_size))
    _S.groups = [_S.world]
    _S.next_gid = 1
    GroupMember.WORLD = _S.world


def _impl(backend):
    if backend == "nccl":
        from .nccl import NcclGroup
        return NcclGroup
    from .cpu import ShmGroup
    return ShmGroup


def _group(group, who) -> ProcessGroup:
    if _S.world is None:
        raise DistributedError(f"{who}: the default process group has not been initialized; call "
                               f"init_process_group first")
    if group is None:
        return _S.world
    if group is GroupMember.NON_GROUP_MEMBER:
        raise DistributedError(f"{who}: this process is not a member of the group")
    if not isinstance(group, ProcessGroup):
        raise DistributedError(f"{who}: group must be a ProcessGroup from new_group, got {type(group).__name__}")
    return group


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of the given global ranks (all by default). Every process of the job calls it, in the
    same order; a process outside ``ranks`` gets ``GroupMember.NON_GROUP_MEMBER``."""
    world = _group(None, "new_group")
    n = world.size()
    ranks = list(range(n)) if ranks is None else sorted(int(r) for r in ranks)
    if not ranks or len(set(ranks)) != len(ranks) or ranks[0] < 0 or ranks[-1] >= n:
        raise DistributedError(f"new_group: ranks {ranks} must be distinct ranks of the world (size {n})")
    gid = _S.next_gid
    _S.next_gid += 1
    if _S.rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    t = _S.timeout if timeout is None else _seconds(timeout)
    g = ProcessGroup(_impl(_S.backend)(_S.store, _S.uid, gid, ranks, ranks.index(_S.rank), t), ranks)
    _S.groups.append(g)
    return g


def destroy_process_group(group=None) -> None:
    """Leave ``group`` (all groups and the job by default). The shared segments are freed once every
    rank of the group reached this call (waiting up to the group's timeout)."""
    if _S.world is None:
        raise DistributedError("destroy_process_group: no process group is initialized")
    groups = list(_S.groups) if group is None or group is _S.world else [_group(group, "destroy_process_group")]
    for g in groups:
        try:
            g._impl.arrive("destroy_process_group")
        except DistributedError:
            pass  # a rank that left early: its segments are gone, ours go now
        g._impl.close()
        if g in _S.groups:
            _S.groups.remove(g)
    if group is None or group is _S.world:
        _S.store.close()
        _S.world = _S.store = None
        _S.rank = -1
        _S.groups = []
        GroupMember.WORLD = None


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (the world by default); -1 outside the group."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group, "get_rank").rank()


def get_world_size(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group, "get_world_size").size()


def get_backend(group=None) -> str:
    return _group(group, "get_backend").name()


def get_process_group_ranks(group) -> list:
    return list(_group(group, "get_process_group_ranks")._ranks)


def get_global_rank(group, group_rank: int) -> int:
    return _group(group, "get_global_rank")._ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    ranks = _group(group, "get_group_rank")._ranks
    if global_rank not in ranks:
        raise DistributedError(f"get_group_rank: global rank {global_rank} is not part of the group {ranks}")
    return ranks.index(global_rank)


# ---- collectives ----------------------------------------------------------------------------------

def _array(t, who, what="tensor", g=None):
    """``t``'s array, on the device of ``g``'s backend (gloo: the CPU, nccl: the GPU)."""
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        raise DistributedError(f"{who}: {what} must be a Tensor, got {type(t).__name__}")
    v = t._value
    backend = (g or _S.world)._impl.backend if (g or _S.world) is not None else "gloo"
    if (backend == "nccl") == isinstance(v, np.ndarray):
        where = "CUDA tensors" if backend == "nccl" else "CPU tensors"
        raise DistributedError(f"{who}: the {backend} backend takes {where}; {what} is on {t.device}")
    return v


def _xp(v):
    if isinstance(v, np.ndarray):
        return np
    import cupy
    return cupy


def _contig(v):
    return _xp(v).ascontiguousarray(v)


def _store_into(t, value) -> None:
    v = t._value
    if not v.flags.c_contiguous:  # (NumPy and CuPy arrays alike)
        raise DistributedError("collective: the result tensor must be contiguous")
    v[...] = value
    t._vc = getattr(t, "_vc", 0) + 1


def _done(async_op, result=None):
    return Work(result) if async_op else None


def _reducer(op, who) -> ReduceOp:
    if isinstance(op, str):
        op = ReduceOp[op.upper()]
    if not isinstance(op, ReduceOp):
        raise DistributedError(f"{who}: unsupported reduce op {op!r}")
    return op


def _root(g, rank, group_rank, who, what):
    """The global rank of a collective's root (``group_rank`` counts in the group), checked to be in it."""
    if group_rank is not None:
        rank = g._ranks[group_rank]
    if rank not in g._ranks:
        raise DistributedError(f"{who}: {what} rank {rank} is not part of the group {g._ranks}")
    return rank


def _rooted(tensor, group, who, rank, group_rank, what):
    """``(group, tensor's array, global root rank)`` of a rooted collective, each checked."""
    g = _group(group, who)
    return g, _array(tensor, who, g=g), _root(g, rank, group_rank, who, what)


def _reduced(g, v, op, who):
    """``v`` reduced with ``op`` over the group, on every rank (the array of the result)."""
    op = _reducer(op, who)
    return _finish(g._impl.all_reduce(_contig(v), op.value), op, g.size(), v.dtype)


def _root_list(g, lst, is_root, who, name, shape, where):
    """The arrays of the list only the root gives (``name``: one per rank, each of ``shape``)."""
    if not is_root:
        if lst:
            raise DistributedError(f"{who}: {name} is only given on the {where} rank")
        return None
    if lst is None or len(lst) != g.size():
        raise DistributedError(f"{who}: the {where} needs a {name} of {g.size()} tensors")
    arrays = [_array(t, who, name, g=g) for t in lst]
    if any(tuple(a.shape) != tuple(shape) for a in arrays):
        raise DistributedError(f"{who}: {name} entries must have the shape {tuple(shape)}")
    return arrays


def _finish(out, op, n, dtype):
    """A reduction's result; ``AVG`` divides the sum by the group size (integers: floor division)."""
    if op is not ReduceOp.AVG:
        return out
    return (out / n).astype(dtype) if dtype.kind == "f" else out // n


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over the group's ranks, in place on every rank (torch's semantics)."""
    g = _group(group, "all_reduce")
    _store_into(tensor, _reduced(g, _array(tensor, "all_reduce", g=g), op, "all_reduce"))
    return _done(async_op, [tensor])


def broadcast(tensor, src, group=None, async_op=False, group_src=None):
    """``tensor`` of global rank ``src`` copied into ``tensor`` on every rank of the group."""
    g, v, src = _rooted(tensor, group, "broadcast", src, group_src, "src")
    buf = _contig(v)
    g._impl.broadcast(buf, g._ranks.index(src))
    if buf is not v:
        _store_into(tensor, buf)
    else:
        tensor._vc = getattr(tensor, "_vc", 0) + 1
    return _done(async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Each rank's ``tensor`` into ``tensor_list[rank]`` on every rank."""
    g = _group(group, "all_gather")
    v = _array(tensor, "all_gather", g=g)
    if len(tensor_list) != g.size():
        raise DistributedError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a group of {g.size()}")
    for t in tensor_list:
        if tuple(_array(t, "all_gather", "tensor_list", g=g).shape) != tuple(v.shape):
            raise DistributedError(f"all_gather: tensor_list entries must have the input's shape {tuple(v.shape)}")
    for t, part in zip(tensor_list, g._impl.all_gather(_contig(v))):
        _store_into(t, part)
    return _done(async_op)


def _whole_and_share(g, who, whole, share, whole_name, share_name):
    """The arrays of a collective between one tensor per rank (``share``) and their concatenation
    (``whole``), checked to hold ``size x`` as many elements."""
    w = _array(whole, who, whole_name, g=g)
    p = _array(share, who, share_name, g=g)
    if w.size != p.size * g.size():
        raise DistributedError(f"{who}: {whole_name} has {w.size} elements, expected {share_name}'s {p.size} "
                               f"x {g.size()} ranks")
    return w, p


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated along dim 0 (or stacked) into ``output_tensor``."""
    g = _group(group, "all_gather_into_tensor")
    o, v = _whole_and_share(g, "all_gather_into_tensor", output_tensor, input_tensor, "output_tensor", "input_tensor")
    _store_into(output_tensor, _xp(v).concatenate([p.reshape(-1) for p in g._impl.all_gather(_contig(v))])
                .reshape(o.shape))
    return _done(async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Chunk ``rank`` of the reduction of every rank's ``input`` (``size`` equal chunks along dim 0)."""
    g = _group(group, "reduce_scatter_tensor")
    v, o = _whole_and_share(g, "reduce_scatter_tensor", input, output, "input", "output")
    op = _reducer(op, "reduce_scatter_tensor")
    out = _finish(g._impl.reduce_scatter(_contig(v).reshape(-1), op.value), op, g.size(), v.dtype)
    _store_into(output, out.reshape(o.shape))
    return _done(async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``input_list[rank]`` reduced over the ranks, into ``output``."""
    g = _group(group, "reduce_scatter")
    o = _array(output, "reduce_scatter", "output", g=g)
    if len(input_list) != g.size():
        raise DistributedError(f"reduce_scatter: input_list has {len(input_list)} tensors for a group of {g.size()}")
    parts = [_array(t, "reduce_scatter", "input_list", g=g) for t in input_list]
    if any(p.shape != o.shape for p in parts):
        raise DistributedError(f"reduce_scatter: input_list entries must have the output's shape {tuple(o.shape)}")
    op = _reducer(op, "reduce_scatter")
    out = _finish(g._impl.reduce_scatter(_xp(o).concatenate([p.reshape(-1) for p in parts]), op.value), op, g.size(),
                  o.dtype)
    _store_into(output, out.reshape(o.shape))
    return _done(async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """The reduction over the group lands in ``tensor`` of global rank ``dst``; the others keep theirs."""
    g, v, dst = _rooted(tensor, group, "reduce", dst, group_dst, "dst")
    out = _reduced(g, v, op, "reduce")
    if _S.rank == dst:
        _store_into(tensor, out)
    return _done(async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    """Every rank's ``tensor`` into ``gather_list`` on global rank ``dst`` (None elsewhere)."""
    g, v, dst = _rooted(tensor, group, "gather", dst, group_dst, "dst")
    _root_list(g, gather_list, _S.rank == dst, "gather", "gather_list", v.shape, "destination")
    parts = g._impl.all_gather(_contig(v))
    if _S.rank == dst:
        for t, part in zip(gather_list, parts):
            _store_into(t, part)
    return _done(async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    """``scatter_list[r]`` of global rank ``src`` into ``tensor`` of group rank ``r``."""
    g, v, src = _rooted(tensor, group, "scatter", src, group_src, "src")
    parts = _root_list(g, scatter_list, _S.rank == src, "scatter", "scatter_list", v.shape, "source")
    if parts is not None:
        parts = [_xp(v).ascontiguousarray(p, dtype=v.dtype) for p in parts]
    _store_into(tensor, g._impl.scatter(parts, g._ranks.index(src), _contig(v)))
    return _done(async_op)


def barrier(group=None, async_op=False, device_ids=None):
    _group(group, "barrier")._impl.barrier()
    return _done(async_op)


def send(tensor, dst, group=None, tag=0, group_dst=None):
    g = _group(group, "send")
    v = _array(tensor, "send", g=g)
    dst = g._ranks[group_dst] if group_dst is not None else dst
    if dst not in g._ranks or dst == _S.rank:
        raise DistributedError(f"send: invalid destination rank {dst} (group {g._ranks}, this rank {_S.rank})")
    g._impl.send(v, g._ranks.index(dst))


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` the next message from ``src``; returns ``src``."""
    g = _group(group, "recv")
    v = _array(tensor, "recv", g=g)
    src = g._ranks[group_src] if group_src is not None else src
    if src is None or src not in g._ranks or src == _S.rank:
        raise DistributedError(f"recv: give the source rank (src={src!r}; group {g._ranks}, this rank {_S.rank})")
    buf = _xp(v).empty_like(v)
    g._impl.recv(buf, g._ranks.index(src))
    _store_into(tensor, buf)
    return src


class GradBucket:
    """One bucket of DDP's gradients, as a communication hook sees it: ``buffer()`` (the flattened
    gradients, not yet averaged), ``gradients()`` (views of it per parameter), ``parameters()``,
    ``index()``, ``is_last()``, ``set_buffer(tensor)``."""

    def __init__(self, index, buffer, parameters, is_last):
        self._index, self._buffer, self._params, self._last = index, buffer, list(parameters), is_last

    def index(self) -> int:
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def parameters(self) -> list:
        return list(self._params)

    def gradients(self) -> list:
        out, off = [], 0
        for p in self._params:
            n = p.numel()
            out.append(self._buffer[off:off + n].reshape(p.shape))
            off += n
        return out

    def is_last(self) -> bool:
        return self._last


class _Deferred(Work):
    """The handle of :func:`irecv`: the receive runs at ``wait()`` (once), so that a rank can post its
    receives, then its sends, then wait, as torch programs do, without blocking at the post."""

    def __init__(self, fn):
        super().__init__()
        self._fn, self._done = fn, False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            self._fn()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done


def isend(tensor, dst, group=None, tag=0, group_dst=None) -> Work:
    """:func:`send`, returning a handle; the message is posted when this returns."""
    send(tensor, dst, group, tag, group_dst)
    return Work()


def irecv(tensor, src=None, group=None, tag=0, group_src=None) -> Work:
    """:func:`recv` into ``tensor``, carried out by the handle's ``wait()`` (read ``tensor`` after it)."""
    _array(tensor, "irecv", g=_group(group, "irecv"))
    return _Deferred(lambda: recv(tensor, src, group, tag, group_src))


class P2POp:
    """One operation of :func:`batch_isend_irecv`: ``P2POp(isend, tensor, peer)`` or ``P2POp(irecv, ...)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise DistributedError("P2POp: op must be torchlean.distributed.isend or irecv")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer


def batch_isend_irecv(p2p_op_list) -> list:
    """Post every send of the list, then the receives: one handle per operation, in the list's order."""
    ops = list(p2p_op_list)
    if not ops or not all(isinstance(o, P2POp) for o in ops):
        raise DistributedError("batch_isend_irecv: expects a non-empty list of P2POp")
    works = {}
    for k, o in enumerate(ops):
        if o.op is isend:
            works[k] = isend(o.tensor, o.peer, o.group, o.tag, o.group_peer)
    for k, o in enumerate(ops):
        if o.op is irecv:
            works[k] = irecv(o.tensor, o.peer, o.group, o.tag, o.group_peer)
    return [works[k] for k in range(len(ops))]


# ---- object collectives: pickled into byte tensors (only between processes that trust each other) ----

def _object_device(g):
    return "cuda" if g._impl.backend == "nccl" else "cpu"


def _to_bytes(obj, device):
    import io
    import pickle

    from ..ops.creation import tensor as _tensor
    buf = io.BytesIO()
    pickle.dump(obj, buf)
    data = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    return _tensor(data.copy(), device=device), data.size


def _from_bytes(t, n):
    import pickle
    return pickle.loads(np.asarray(t[:n].cpu().numpy(), dtype=np.uint8).tobytes())  # noqa: S301 - as torch's


def _gathered_objects(g, obj):
    """Every rank's ``obj``, in group-rank order (two all-gathers: the sizes, then the padded bytes)."""
    from ..ops.creation import tensor as _tensor
    dev = _object_device(g)
    data, n = _to_bytes(obj, dev)
    size = _tensor(np.array([n], dtype=np.int64), device=dev)
    sizes = [_tensor(np.zeros(1, dtype=np.int64), device=dev) for _ in range(g.size())]
    all_gather(sizes, size, group=g)
    sizes = [int(v.item()) for v in sizes]
    width = max(sizes)
    padded = _tensor(np.zeros(width, dtype=np.uint8), device=dev)
    padded[:n] = data
    parts = [_tensor(np.zeros(width, dtype=np.uint8), device=dev) for _ in range(g.size())]
    all_gather(parts, padded, group=g)
    return [_from_bytes(p, k) for p, k in zip(parts, sizes)]


def all_gather_object(object_list, obj, group=None) -> None:
    """Every rank's picklable ``obj`` into ``object_list[rank]`` (a list of the group's size)."""
    g = _group(group, "all_gather_object")
    if len(object_list) != g.size():
        raise DistributedError(f"all_gather_object: object_list has {len(object_list)} entries for a group of "
                               f"{g.size()}")
    object_list[:] = _gathered_objects(g, obj)


def gather_object(obj, object_gather_list=None, dst=0, group=None, group_dst=None) -> None:
    """Every rank's ``obj`` into ``object_gather_list`` on ``dst`` (None elsewhere)."""
    g = _group(group, "gather_object")
    dst = g._ranks[group_dst] if group_dst is not None else dst
    objs = _gathered_objects(g, obj)
    if _S.rank == dst:
        if object_gather_list is None or len(object_gather_list) != g.size():
            raise DistributedError(f"gather_object: the destination needs an object_gather_list of {g.size()} entries")
        object_gather_list[:] = objs


def broadcast_object_list(object_list, src=0, group=None, device=None, group_src=None) -> None:
    """``object_list`` of ``src`` into ``object_list`` on every rank (the lists have one length)."""
    g = _group(group, "broadcast_object_list")
    src = g._ranks[group_src] if group_src is not None else src
    objs = _gathered_objects(g, list(object_list) if _S.rank == src else None)
    got = objs[g._ranks.index(src)]
    if len(got) != len(object_list):
        raise DistributedError(f"broadcast_object_list: rank {src} sent {len(got)} objects, this list holds "
                               f"{len(object_list)}")
    object_list[:] = got


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None,
                        group_src=None) -> None:
    """Entry ``rank`` of ``src``'s ``scatter_object_input_list`` into ``scatter_object_output_list[0]``."""
    g = _group(group, "scatter_object_list")
    src = g._ranks[group_src] if group_src is not None else src
    if not scatter_object_output_list:
        raise DistributedError("scatter_object_list: scatter_object_output_list needs at least one entry")
    mine = list(scatter_object_input_list) if _S.rank == src else None
    if mine is not None and len(mine) != g.size():
        raise DistributedError(f"scatter_object_list: {len(mine)} objects for a group of {g.size()}")
    objs = _gathered_objects(g, mine)[g._ranks.index(src)]
    scatter_object_output_list[0] = objs[g._ranks.index(_S.rank)]


#: torch's default timeout of a process group.
default_pg_timeout = timedelta(minutes=30)
