"""``DistributedDataParallel``: one model replica per process, gradients averaged across the group.

At wrap time the parameters and buffers of rank 0 are broadcast to every rank. The parameters that
require gradients are split into buckets (reverse registration order, the first bucket about 1 MiB
and the others ``bucket_cap_mb``, one dtype per bucket). A backward accumulates each parameter's
``.grad`` as soon as it is complete and then calls its post-accumulate hook: once every parameter
of a bucket has its gradient, the bucket is averaged over the group (each gradient divided by the
world size, then summed, as torch's default communication hook), buckets always in index order so
that every rank issues the same collectives in the same order. On the GPU a bucket's all-reduce
runs on a stream of its own while the backward goes on, and the gradients take the averaged values
once the backward is done (the compute stream waits for that stream then). At the end of the backward, a bucket still waiting
means a parameter received no gradient on this rank: with ``find_unused_parameters=True`` it takes
part with zeros, otherwise DistributedError names the parameters (torch raises at the next forward).
Inside :meth:`no_sync` gradients accumulate locally; the first backward after it averages the
accumulated sums. With ``broadcast_buffers`` every forward first copies rank 0's buffers (batch-norm
running statistics) to all ranks.

    torchlean launch --nproc-per-node 2 train.py    # model = DistributedDataParallel(model)
"""

from __future__ import annotations

import contextlib

import numpy as np

from ... import distributed as dist
from ...autograd import no_grad, queue_callback
from ...errors import DistributedError
from ..module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1 << 20


class DistributedDataParallel(Module):
    """torch's ``DistributedDataParallel(module, device_ids=None, output_device=None, dim=0,
    broadcast_buffers=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
    check_reduction=False, gradient_as_bucket_view=False, static_graph=False)`` (module docs).

    ``device_ids`` / ``output_device``: None, or the one device of this process; ``dim``,
    ``check_reduction``, ``gradient_as_bucket_view`` and ``static_graph`` have no effect here."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False, **_unused):
        super().__init__()
        if not dist.is_initialized():
            raise DistributedError("DistributedDataParallel: the default process group has not been initialized; "
                                   "call torch.distributed.init_process_group first")
        if device_ids is not None and len(device_ids) > 1:
            raise DistributedError(f"DistributedDataParallel: device_ids={list(device_ids)}: one device per process "
                                   f"(give this process's device only)")
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.bucket_cap_mb = 25 if bucket_cap_mb is None else float(bucket_cap_mb)
        self.require_backward_grad_sync = True
        self._world = dist.get_world_size(process_group)
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._names = {id(p): n for n, p in module.named_parameters()}
        self._buckets = self._bucketize()
        self._bucket_of = {id(p): b for b, bucket in enumerate(self._buckets) for p in bucket}
        self._ready: list = [set() for _ in self._buckets]
        self._next = 0
        self._armed = False
        self._stream = None      # the all-reduce stream (CUDA)
        self._inflight: list = []  # (bucket, flat gradients) whose all-reduce was queued on it
        self._comm_hook = None     # (state, hook) of register_comm_hook
        if init_sync:
            self._broadcast([*module.parameters(), *module.buffers()])
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self._params]

    # -- buckets -------------------------------------------------------------------------------
    def _bucketize(self):
        cap = max(1, int(self.bucket_cap_mb * (1 << 20)))
        buckets, cur, size, dtype = [], [], 0, None
        for p in reversed(self._params):
            nb = p._value.nbytes
            limit = _FIRST_BUCKET_BYTES if not buckets else cap
            if cur and (size + nb > limit or p._value.dtype != dtype):
                buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += nb
            dtype = p._value.dtype
        if cur:
            buckets.append(cur)
        return buckets

    def _on_grad(self, p):
        if not self.require_backward_grad_sync:
            return
        if not self._armed:
            self._armed = True
            queue_callback(self._finish)
        b = self._bucket_of[id(p)]
        self._ready[b].add(id(p))
        self._launch_ready()

    def _launch_ready(self):
        while self._next < len(self._buckets) and len(self._ready[self._next]) == len(self._buckets[self._next]):
            self._reduce(self._buckets[self._next])
            self._next += 1

    def _reduce(self, bucket):
        grads = []
        xp = _xp(bucket[0]._value)
        for p in bucket:
            g = p.grad
            grads.append(xp.zeros(p._value.shape, p._value.dtype) if g is None else self._host(g, "gradient"))
        flat = xp.concatenate([g.reshape(-1) for g in grads])
        if self._comm_hook is not None:
            self._hooked(bucket, flat)
            return
        flat /= self._world      # a Python scalar: no upload (a synchronous copy would stall the host)
        if xp is np:
            t = _wrap(flat)
            dist.all_reduce(t, group=self.process_group)
            self._unflatten(bucket, t._value)
            return
        # On the GPU the all-reduce runs on a stream of its own, after the kernels that made the bucket,
        # while the backward goes on; the gradients take the result at the end of the backward.
        compute = xp.cuda.get_current_stream()
        if self._stream is None:
            self._stream = xp.cuda.Stream(non_blocking=True)
        self._stream.wait_event(compute.record())
        with self._stream:
            dist._group(self.process_group, "DistributedDataParallel")._impl.all_reduce(flat, "sum", out=flat)
        self._inflight.append((bucket, flat))

    def _hooked(self, bucket, flat):
        """The registered communication hook's result for this bucket, in place of the average (run
        in order on the current stream: no overlap with the rest of the backward)."""
        state, hook = self._comm_hook
        b = self._buckets.index(bucket)
        fut = hook(state, dist.GradBucket(b, _wrap(flat), bucket, b == len(self._buckets) - 1))
        if not hasattr(fut, "wait"):
            raise DistributedError(f"DistributedDataParallel: the communication hook returned "
                                   f"{type(fut).__name__}, not a Future")
        out = fut.wait()
        if isinstance(out, (list, tuple)):
            out = out[0]
        if tuple(out.shape) != tuple(flat.shape):
            raise DistributedError(f"DistributedDataParallel: the communication hook's result has shape "
                                   f"{tuple(out.shape)}, the bucket {tuple(flat.shape)}")
        self._unflatten(bucket, self._host(out, "hook result").astype(flat.dtype, copy=False))

    def register_comm_hook(self, state, hook) -> None:
        """Reduce each bucket with ``hook(state, bucket) -> Future`` (of the bucket's reduced, averaged
        gradients) instead of the built-in average: torch's hooks are in
        ``torchlean.distributed.algorithms.ddp_comm_hooks.default_hooks``. Once per model."""
        if self._comm_hook is not None:
            raise DistributedError("DistributedDataParallel: register_comm_hook can only be called once")
        if not callable(hook):
            raise DistributedError(f"DistributedDataParallel: the communication hook must be callable, "
                                   f"got {type(hook).__name__}")
        self._comm_hook = (state, hook)

    def _settle(self):
        """The compute stream waits for the bucket all-reduces, then each gradient takes its part."""
        if not self._inflight:
            return
        import cupy
        cupy.cuda.get_current_stream().wait_event(self._stream.record())
        for bucket, flat in self._inflight:
            self._unflatten(bucket, flat)
        self._inflight = []

    @staticmethod
    def _unflatten(bucket, flat):
        off = 0
        with no_grad():
            for p in bucket:
                n = p._value.size
                part = flat[off:off + n].reshape(p._value.shape)
                off += n
                if p.grad is None:
                    p.grad = _wrap(part.copy())
                else:
                    p.grad._value[...] = part

    def _finish(self):
        self._armed = False
        missing = [p for b in range(self._next, len(self._buckets)) for p in self._buckets[b]
                   if id(p) not in self._ready[b]]
        if missing and not self.find_unused_parameters:
            self._settle()
            self._reset()
            order = {id(p): i for i, p in enumerate(self._params)}
            names = ", ".join(self._names.get(id(p), "?") for p in sorted(missing, key=lambda p: order[id(p)]))
            raise DistributedError(f"DistributedDataParallel: parameters that did not receive a gradient in this "
                                   f"backward: {names}; pass find_unused_parameters=True when the forward "
                                   f"does not use every parameter")
        for b in range(self._next, len(self._buckets)):
            self._reduce(self._buckets[b])
        self._settle()
        self._reset()

    def _reset(self):
        self._ready = [set() for _ in self._buckets]
        self._next = 0
        self._inflight = []

    # -- broadcasts -------------------------------------------------------------------------------
    def _host(self, t, what):
        """``t``'s array, on the device the process group's backend takes."""
        v = t._value
        backend = dist.get_backend(self.process_group)
        if (backend == "nccl") == isinstance(v, np.ndarray):
            where = "CUDA tensors: move the module to the GPU first" if backend == "nccl" else "CPU tensors"
            raise DistributedError(f"DistributedDataParallel: the {what} of a parameter is on {t.device}; the "
                                   f"{backend} backend takes {where}")
        return v

    def _broadcast(self, tensors):
        by_dtype: dict = {}
        for t in tensors:
            by_dtype.setdefault(self._host(t, "value").dtype, []).append(t)
        for dt in sorted(by_dtype, key=str):   # the same order on every rank
            ts = by_dtype[dt]
            flat = _wrap(_xp(ts[0]._value).concatenate([t._value.reshape(-1) for t in ts]))
            dist.broadcast(flat, src=dist.get_global_rank(self.process_group, 0) if self.process_group else 0,
                           group=self.process_group)
            off = 0
            with no_grad():
                for t in ts:
                    n = t._value.size
                    t._value[...] = flat._value[off:off + n].reshape(t._value.shape)
                    off += n

    # -- the module -------------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self._world > 1:
            bufs = list(self.module.buffers())
            if bufs:
                self._broadcast(bufs)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside; the first backward after it averages them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _xp(v):
    if isinstance(v, np.ndarray):
        return np
    import cupy
    return cupy


def _wrap(a):
    from ...tensor import Tensor
    return Tensor(a)
