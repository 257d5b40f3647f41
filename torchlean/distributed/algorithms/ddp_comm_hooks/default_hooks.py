"""torch's default DDP communication hooks: ``hook(state, bucket) -> Future`` of the bucket's averaged
gradients, ``state`` the process group (None: the default group).

* ``allreduce_hook``: the average, as DDP without a hook;
* ``fp16_compress_hook`` / ``bf16_compress_hook``: the bucket cast to float16 / bfloat16 (divided by
  the world size first), all-reduced in that dtype, cast back; ``fp16_compress_wrapper`` /
  ``bf16_compress_wrapper`` put the same casts around another hook.

bfloat16 buckets need a backend that reduces bfloat16: the CPU backend does (with ml_dtypes), the
nccl one here does not and raises.
"""

from __future__ import annotations

from ... import all_reduce, get_world_size

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper",
           "bf16_compress_wrapper"]


def _future(t):
    from ....futures import Future
    return Future.completed(t)


def allreduce_hook(process_group, bucket):
    t = bucket.buffer() / get_world_size(process_group)
    all_reduce(t, group=process_group)
    return _future(t)


def _compress_hook(dtype, process_group, bucket):
    buf = bucket.buffer()
    low = (buf / get_world_size(process_group)).to(dtype)
    all_reduce(low, group=process_group)
    return _future(low.to(buf.dtype))


def fp16_compress_hook(process_group, bucket):
    from .... import float16
    return _compress_hook(float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    from .... import bfloat16
    return _compress_hook(bfloat16, process_group, bucket)


def _wrapper(dtype_name, hook):
    def wrapped(state, bucket):
        from .... import bfloat16, float16
        from ... import GradBucket
        dtype = float16 if dtype_name == "float16" else bfloat16
        buf = bucket.buffer()
        inner = GradBucket(bucket.index(), buf.to(dtype), bucket.parameters(), bucket.is_last())
        return hook(state, inner).then(lambda f: (f.value()[0] if isinstance(f.value(), list) else f.value())
                                       .to(buf.dtype))
    return wrapped


def fp16_compress_wrapper(hook):
    return _wrapper("float16", hook)


def bf16_compress_wrapper(hook):
    return _wrapper("bfloat16", hook)
