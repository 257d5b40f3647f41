"""Collation as torch's ``default_collate`` / ``default_convert``.

A batch is a list of samples; collation recurses into the samples' structure and stacks the leaves
along a new first axis: tensors are stacked, NumPy arrays and NumPy scalars become tensors of their
dtype, Python floats float64, ints int64 (bools bool), strings stay as grouped (a list at the top,
a tuple inside a sequence, as torch); mappings collate key by
key, named tuples field by field, tuples and other sequences element by element (a tuple gives a
list, as torch does).

    >>> import torchlean as tl
    >>> from torchlean.utils.data import default_collate
    >>> b = default_collate([(tl.ones(2), 1, 0.5, "a"), (tl.zeros(2), 2, 1.5, "b")])
    >>> tuple(b[0].shape), b[1].dtype, b[2].dtype, b[3]
    ((2, 2), torchlean.int64, torchlean.float64, ('a', 'b'))
"""

from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from ....errors import DTypeError
from ....ops import as_tensor, stack, tensor
from ....tensor import Tensor
from .errors import CollateShapeError

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """Convert NumPy arrays and scalars inside ``data`` to tensors, keeping the structure (what the
    DataLoader applies to each sample when automatic batching is off, ``batch_size=None``).

        >>> import numpy as np
        >>> from torchlean.utils.data import default_convert
        >>> out = default_convert({"x": np.arange(3), "name": "a"})
        >>> out["x"].dtype, out["name"]
        (torchlean.int64, 'a')
    """
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "bytes_", "string_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({k: default_convert(data[k]) for k in data})
                return clone
            return elem_type({k: default_convert(data[k]) for k in data})
        except TypeError:
            return {k: default_convert(data[k]) for k in data}
    if _is_namedtuple(data):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a list of samples) by structure, with ``collate_fn_map`` (a dict from a type
    or tuple of types to ``fn(batch, *, collate_fn_map)``) handling the leaves: the first sample's
    exact type is looked up first, then each key with ``isinstance`` in the map's order (torch's
    extension point for custom collate functions)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for cls in collate_fn_map:
            if isinstance(elem, cls):
                return collate_fn_map[cls](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem})
                return clone
            return elem_type({k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem})
        except TypeError:
            return {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem}
    if _is_namedtuple(elem):
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        lengths = [len(e) for e in batch]
        if any(k != n for k in lengths):
            bad = next(i for i, k in enumerate(lengths) if k != n)
            raise CollateShapeError(f"default_collate: each element in list of batch should be of equal size; "
                                    f"sample 0 has {n} elements, sample {bad} has {lengths[bad]}")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, s in enumerate(transposed):
                    clone[i] = collate(s, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(s, collate_fn_map=collate_fn_map) for s in transposed])
        except TypeError:
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
    raise DTypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stack tensors of one shape along a new first axis."""
    shape = tuple(batch[0].shape)
    for i, t in enumerate(batch):
        if tuple(t.shape) != shape:
            raise CollateShapeError(f"default_collate: stack expects each tensor to be equal size, but got "
                                    f"{list(shape)} at entry 0 and {list(t.shape)} at entry {i}")
    return stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise DTypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return as_tensor(np.array(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return tensor(batch, dtype="float64")


def collate_int_fn(batch, *, collate_fn_map=None):
    # bools are ints: torch.tensor of bools is a bool tensor, of ints int64.
    return tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    np.memmap: collate_numpy_array_fn,
    (np.bool_, np.number): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Stack a list of samples into a batch, recursing into their structure (torch's rules; see the
    module docstring). Samples whose tensors differ in shape, or whose sequences differ in length,
    raise :class:`CollateShapeError` (a ShapeError and a RuntimeError).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import default_collate
        >>> b = default_collate([{"x": tl.ones(3), "y": 1}, {"x": tl.ones(3), "y": 2}])
        >>> tuple(b["x"].shape), b["y"].tolist()
        ((2, 3), [1, 2])
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
