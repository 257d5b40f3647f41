"""``tl.save`` / ``tl.load``: state dicts as safetensors files.

A flat ``{str: Tensor | ndarray}`` (a module's ``state_dict()``) is written as a
plain safetensors file that other tools read as is. Nested dicts and lists of
tensors and plain values (an optimizer's ``state_dict()``, a checkpoint
``{"model": ..., "optim": ..., "step": 10}``) keep their tensors in the file and
their structure and scalars as JSON in the safetensors metadata. Files are written
atomically (a temporary file in the same folder, then ``os.replace``), so an
interrupted save never leaves a truncated checkpoint.

Uses ``safetensors`` (a dependency of torchlean; where it cannot be imported, ``tl.save`` and
``tl.load`` raise :class:`~torchlean.errors.BackendUnavailableError` with the install command).

    >>> import os, tempfile
    >>> import torchlean as tl
    >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> tl.save({"w": tl.ones(2, 3)}, path)
    >>> tl.load(path)["w"].shape
    torchlean.Size([2, 3])
"""

from __future__ import annotations

import json
import os

import numpy as np

from .fileio import atomic_write
from .errors import BackendUnavailableError, TorchLeanError
from .tensor import Tensor, _place

__all__ = ["save", "load"]

_FORMAT = "torchlean.state_dict.v1"


def _safetensors():
    try:
        import safetensors.numpy as stn
    except ImportError as e:
        raise BackendUnavailableError("tl.save / tl.load need the safetensors package: "
                                      "pip install safetensors") from e
    return stn


def _is_array(v) -> bool:
    return isinstance(v, (Tensor, np.ndarray))


def _host(v) -> np.ndarray:
    a = v.numpy() if isinstance(v, Tensor) else np.asarray(v)
    return np.ascontiguousarray(a)


def _encode(obj, path, tensors):
    """JSON skeleton of ``obj``; arrays are moved into ``tensors`` and referenced by name."""
    if _is_array(obj):
        name = "/".join(path) or "tensor"
        base, n = name, 1
        while name in tensors:
            name = f"{base}#{n}"
            n += 1
        tensors[name] = _host(obj)
        return {"__tensor__": name}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TorchLeanError(f"save: dict keys must be str or int, got {k!r} at {'/'.join(path) or 'top'}")
            items.append([k, _encode(v, path + [str(k)], tensors)])
        return {"__dict__": items}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, path + [str(i)], tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, path + [str(i)], tensors) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TorchLeanError(f"save: cannot store a value of type {type(obj).__name__} "
                         f"at {'/'.join(path) or 'top'} (tensors, arrays, numbers, str, dict, list)")


def _decode(node, tensors):
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if isinstance(node, dict):
        if "__tensor__" in node:
            return tensors[node["__tensor__"]]
        if "__tuple__" in node:
            return tuple(_decode(v, tensors) for v in node["__tuple__"])
        return {k: _decode(v, tensors) for k, v in node["__dict__"]}
    return node


def save(obj, path) -> None:
    """Write a state dict (or a nested dict of them) to ``path`` as safetensors, atomically.

    Tensors on any device are copied to the host; their dtype and shape are kept.
    """
    stn = _safetensors()
    if not isinstance(obj, dict):
        raise TorchLeanError(f"save: expected a dict (a state dict), got {type(obj).__name__}")
    flat = all(isinstance(k, str) for k in obj) and all(_is_array(v) for v in obj.values())
    meta = {"format": _FORMAT}
    if flat:
        tensors = {k: _host(v) for k, v in obj.items()}
        meta["order"] = json.dumps(list(obj))
    else:
        tensors = {}
        meta["tree"] = json.dumps(_encode(obj, [], tensors))
    data = stn.save(tensors, metadata=meta)
    atomic_write(path, data)


def load(path, device: str = "cpu"):
    """Read a file written by :func:`save` (or any safetensors file) as Tensors on ``device``.

    A flat state dict comes back as ``{name: Tensor}`` in its saved order; nested
    structures come back as they were saved, with numbers and strings restored.
    """
    stn = _safetensors()
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        arrays = stn.load(data)
        hlen = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + hlen])
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
        raise TorchLeanError(f"load: {path!r} is not a valid safetensors file ({e})") from e
    meta = header.get("__metadata__") or {}
    tensors = {k: _place(np.ascontiguousarray(a), device, False) for k, a in arrays.items()}
    if "tree" in meta:
        return _decode(json.loads(meta["tree"]), tensors)
    order = json.loads(meta["order"]) if "order" in meta else \
        sorted(tensors, key=lambda k: header[k]["data_offsets"][0])
    return {k: tensors[k] for k in order}
