"""``tl.save`` / ``tl.load``: checkpoints like torch's, as safetensors files, never pickle.

``tl.save(obj, f)`` takes any nesting of dicts (also ``OrderedDict``, with str, int, float, bool,
None or tuple keys), lists, tuples, ``Size``, sets, tensors, NumPy arrays, numbers, strings, bytes,
None, bools and dtypes: a model's ``state_dict()``, an optimizer's, a checkpoint
``{"model": ..., "optim": ..., "epoch": 3}``. Tensors go into a safetensors file; the structure
and the plain values go, as JSON, into its metadata, with a SHA-256 digest of the whole content so
a damaged file is refused instead of loading wrong values. A flat ``{str: tensor}`` is a plain
safetensors file other tools read as is. Paths are written atomically (a temporary file in the
same folder, then ``os.replace``).

``tl.load(f)`` reads those files and also PyTorch's own ``torch.save`` files (``.pt``, ``.pth``,
``.bin``) through :mod:`torchlean.torch_pickle`'s restricted unpickler: tensors and plain
containers only, no code is run, whatever ``weights_only`` says. :func:`add_safe_globals` /
:class:`safe_globals` allowlist further classes, which are rebuilt only when they are plain data
containers (``argparse.Namespace``, dataclasses, namedtuples: see :mod:`torchlean.torch_pickle`).

    >>> import io
    >>> import torchlean as tl
    >>> buf = io.BytesIO()
    >>> tl.save({"w": tl.ones(2, 3), "step": 10, "betas": (0.9, 0.999)}, buf)
    >>> ckpt = tl.load(io.BytesIO(buf.getvalue()))
    >>> ckpt["w"].shape, ckpt["step"], ckpt["betas"]
    (torchlean.Size([2, 3]), 10, (0.9, 0.999))
"""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import json
import mmap as _mmap
import os
import sys
import zipfile

import numpy as np

from .dtypes import NAMES, DType, dtype_of
from .errors import BackendUnavailableError, DeviceError, SerializationError, TorchLeanError
from .fileio import atomic_write
from .shape import Size
from .tensor import Tensor, _place, device_name
from .torch_pickle import (RestrictedUnpickler, UnpicklingError, add_safe_globals, clear_safe_globals,  # noqa: F401
                           get_safe_globals, globals_in_pickle, is_torch_legacy, is_torch_zip, load_torch,
                           remove_safe_globals, user_allowed)

__all__ = ["UnpicklingError", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "get_unsafe_globals_in_checkpoint", "load", "safe_globals", "save"]

_FORMAT = "torchlean.state_dict.v2"      # v2: a content digest is always present
_FORMAT_V1 = "torchlean.state_dict.v1"   # earlier files, without digest, still load
_OUR_KEYS = ("tree", "order", "tensor_flags", "plain_dict")

# safetensors dtype codes <-> torchlean dtype names
_CODES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
          "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
_CODE_OF = {v: k for k, v in _CODES.items()}


def _safetensors():
    try:
        import safetensors.numpy
    except ImportError as e:
        raise BackendUnavailableError("tl.save needs the safetensors package: pip install safetensors") from e
    return safetensors.numpy


def _is_array(v) -> bool:
    return isinstance(v, (Tensor, np.ndarray))


def _contig(a: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    return a if a.flags.c_contiguous else a.copy(order="C")


def _host(v) -> np.ndarray:
    return _contig(np.asarray(v._host() if isinstance(v, Tensor) else v))


def _where(path):
    return "/".join(path) or "top"


class _Encoder:
    """Turns an object tree into a JSON skeleton, moving arrays into ``tensors`` under unique names.
    The same tensor object referenced twice is stored once and loads as one object, as in torch."""

    def __init__(self):
        self.tensors, self.seen = {}, {}

    def array(self, obj, path):
        if id(obj) in self.seen:
            return {"__tensor__": self.seen[id(obj)][0]}
        name = "/".join(path) or "tensor"
        base, n = name, 1
        while name in self.tensors:
            name = f"{base}#{n}"
            n += 1
        self.tensors[name] = _host(obj)
        self.seen[id(obj)] = (name, obj)      # keep obj alive so its id is not reused
        node = {"__tensor__": name}
        if isinstance(obj, np.ndarray):
            node["numpy"] = True
        else:
            if obj.requires_grad:
                node["requires_grad"] = True
            if obj.device != "cpu":
                node["device"] = obj.device
        return node

    def key(self, k, path):
        if isinstance(k, tuple):
            return {"__tuple__": [self.key(v, path) for v in k]}
        if k is None or isinstance(k, (str, int, float)):
            return k
        raise TorchLeanError(f"save: dict keys must be str, int, float, bool, None or tuples of them, "
                             f"got {type(k).__name__} {k!r:.40} at {_where(path)}")

    def __call__(self, obj, path):
        if _is_array(obj):
            return self.array(obj, path)
        if isinstance(obj, dict):
            items = [[self.key(k, path), self(v, path + [str(k)])] for k, v in obj.items()]
            node = {"__dict__": items}
            if isinstance(obj, collections.OrderedDict):
                node["ordered"] = True
            elif type(obj) is not dict:
                raise TorchLeanError(f"save: cannot store a {type(obj).__name__} at {_where(path)} "
                                     f"(dict and OrderedDict are stored)")
            return node
        if isinstance(obj, Size):
            return {"__size__": list(obj)}
        if type(obj) is tuple:
            return {"__tuple__": [self(v, path + [str(i)]) for i, v in enumerate(obj)]}
        if type(obj) is list:
            return [self(v, path + [str(i)]) for i, v in enumerate(obj)]
        if isinstance(obj, (set, frozenset)) and type(obj) in (set, frozenset):
            return {"__set__": [self.key(v, path) for v in obj], "frozen": type(obj) is frozenset}
        if isinstance(obj, (bytes, bytearray)):
            return {"__bytes__": base64.b64encode(bytes(obj)).decode("ascii"), "mutable": isinstance(obj, bytearray)}
        if isinstance(obj, DType):
            return {"__dtype__": obj.name}
        if isinstance(obj, complex):
            return {"__complex__": [obj.real, obj.imag]}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if obj is None or type(obj) in (bool, int, float, str):
            return obj
        if type(obj).__name__ == "device" and isinstance(getattr(obj, "type", None), str):
            return {"__device__": str(obj)}
        if _is_module_class(type(obj)):
            return self.module(obj, path)
        if callable(obj) and str(getattr(obj, "__module__", "")).startswith("torchlean.") \
                and _resolve(obj.__module__, getattr(obj, "__qualname__", "")) is obj:
            return {"__function__": [obj.__module__, obj.__qualname__]}   # torchlean's own, by name
        raise TorchLeanError(f"save: cannot store a value of type {type(obj).__name__} at {_where(path)} "
                             f"(tensors, arrays, numbers, str, bytes, None, dtypes, dict, list, tuple, set)")


def _is_module_class(cls) -> bool:
    """A subclass of torchlean's ``nn.Module`` (found by its MRO: this layer does not import nn)."""
    return isinstance(cls, type) and any(c.__name__ == "Module" and c.__module__ == "torchlean.nn.module"
                                         for c in cls.__mro__)


def _module_record(self, obj, path):
    """A whole Module (``torch.save(model, f)``): its class by name, and its attributes as data —
    parameters and buffers as tensors, submodules as records, hooks only when there are none."""
    cls = type(obj)
    attrs = []
    for k, v in vars(obj).items():
        if k == "_parameters":
            v = {n: (None if p is None else {"__param__": self.array(p, path + [n])}) for n, p in v.items()}
            attrs.append([k, {"__dict__": [[n, r] for n, r in v.items()]}])
            continue
        if "hooks" in k and isinstance(v, dict):
            if v:
                raise TorchLeanError(f"save: {_where(path)} ({cls.__name__}) has {k}; hooks are code and are "
                                     f"not saved: remove them, or save the state_dict")
        attrs.append([k, self(v, path + [k])])
    return {"__module__": [cls.__module__, cls.__qualname__], "attrs": attrs}


_Encoder.module = _module_record


def _resolve(modname, qualname):
    """The object ``modname.qualname`` among the modules already imported (never importing one)."""
    obj = sys.modules.get(modname)
    for part in str(qualname).split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    return obj


_PARAMS_MADE = ("parameters made by this load",)   # a key no tensor name can equal


def _module_from_record(node, tensors):
    """Rebuild a saved Module without running any of its code: the class must already be imported
    (this never imports a module a file names) and be an ``nn.Module`` subclass; the object is made
    with ``object.__new__`` and given its saved attributes (no ``__init__``, ``__setstate__``)."""
    modname, qualname = node["__module__"]
    cls = _resolve(modname, qualname)
    if cls is None:
        raise SerializationError(f"load: the file holds a whole {modname}.{qualname} module; that class is not "
                             f"imported in this process, and loading never imports code a file names: "
                             f"import {modname} first (or save and load the model's state_dict)")
    if not _is_module_class(cls):
        raise SerializationError(f"load: {modname}.{qualname} is not an nn.Module subclass; refused")
    param_cls = sys.modules["torchlean.nn.parameter"].Parameter
    made = tensors.setdefault(_PARAMS_MADE, {})  # one Parameter per stored tensor: tied weights stay tied
    obj = object.__new__(cls)
    for k, v in node["attrs"]:
        if k == "_parameters":
            params = collections.OrderedDict()
            for n, r in v["__dict__"]:
                if r is None:
                    params[n] = None
                    continue
                name = r["__param__"]["__tensor__"]
                if name not in made:
                    made[name] = param_cls(_decode(r["__param__"], tensors))
                params[n] = made[name]
            val = params
        else:
            val = _decode(v, tensors)
        object.__setattr__(obj, k, val)
    return obj


def _decode(node, tensors):
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        return tensors[node["__tensor__"]]
    if "__dict__" in node:
        out = collections.OrderedDict() if node.get("ordered") else {}
        for k, v in node["__dict__"]:
            out[_decode(k, tensors)] = _decode(v, tensors)
        return out
    if "__tuple__" in node:
        return tuple(_decode(v, tensors) for v in node["__tuple__"])
    if "__size__" in node:
        return Size(node["__size__"])
    if "__set__" in node:
        return (frozenset if node.get("frozen") else set)(_decode(v, tensors) for v in node["__set__"])
    if "__bytes__" in node:
        b = base64.b64decode(node["__bytes__"], validate=True)
        return bytearray(b) if node.get("mutable") else b
    if "__dtype__" in node:
        return NAMES[node["__dtype__"]]
    if "__complex__" in node:
        return complex(*node["__complex__"])
    if "__device__" in node:
        return node["__device__"]
    if "__module__" in node:
        return _module_from_record(node, tensors)
    if "__function__" in node:
        modname, qualname = node["__function__"]
        fn = _resolve(modname, qualname) if str(modname).startswith("torchlean.") else None
        if fn is None or not callable(fn):
            raise SerializationError(f"load: {modname}.{qualname} is not one of torchlean's functions; refused")
        return fn
    raise SerializationError(f"load: unknown record {sorted(node)[:3]} in the checkpoint's structure")


def _digest(meta: dict, entries) -> str:
    """SHA-256 of the metadata (less the digest) and of every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != "sha256"}, sort_keys=True).encode())
    for name, code, shape, data in sorted(entries, key=lambda e: e[0]):
        h.update(json.dumps([name, code, list(shape), len(data)]).encode())
        h.update(data)
    return h.hexdigest()


def _damaged(meta, entries) -> str:
    """Which part of a file whose digest failed changed: the tensors named, or the metadata."""
    try:
        recorded = json.loads(meta.get("tensor_sha256", "null"))
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        return "its content digest does not match"
    bad = [n for n, (_, _, _, d) in entries.items() if recorded.get(n) != hashlib.sha256(d).hexdigest()[:16]]
    bad += [n for n in recorded if n not in entries]
    if bad:
        return f"the bytes of tensor {', '.join(repr(n) for n in bad[:5])} changed after it was saved"
    return "its metadata (the structure record) changed after it was saved"


def _tensor_walk(node, out):
    """Every tensor record of a JSON skeleton (for the per-tensor device, grad and NumPy flags)."""
    if isinstance(node, list):
        for v in node:
            _tensor_walk(v, out)
    elif isinstance(node, dict):
        if "__tensor__" in node:
            out.append(node)
        for v in node.values():
            if isinstance(v, (list, dict)):
                _tensor_walk(v, out)


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Save ``obj`` (nested dicts, lists, tuples of tensors, arrays, numbers, strings, ...) to ``f``.

    ``f`` is a path (written atomically) or a binary file object. The file is safetensors with the
    structure as JSON in its metadata and a SHA-256 content digest; no pickle. ``pickle_module``,
    ``pickle_protocol``, ``_use_new_zipfile_serialization`` and ``_disable_byteorder_record`` are
    torch's pickle options: accepted for compatibility, they have no effect here (nothing is pickled).

        >>> import io
        >>> import torchlean as tl
        >>> buf = io.BytesIO()
        >>> tl.save([tl.tensor(3), None, "a"], buf)
        >>> tl.load(io.BytesIO(buf.getvalue()))
        [tensor(3), None, 'a']
    """
    st = _safetensors()
    flat = isinstance(obj, dict) and type(obj) in (dict, collections.OrderedDict) and len(obj) > 0 \
        and all(isinstance(k, str) for k in obj) and all(isinstance(v, Tensor) for v in obj.values()) \
        and len({id(v) for v in obj.values()}) == len(obj)
    meta = {"format": _FORMAT}
    if flat:
        tensors = {k: _host(v) for k, v in obj.items()}
        meta["order"] = json.dumps(list(obj))
        extra = {k: {**({"requires_grad": True} if v.requires_grad else {}),
                     **({"device": v.device} if v.device != "cpu" else {})} for k, v in obj.items()}
        extra = {k: v for k, v in extra.items() if v}
        if extra:
            meta["tensor_flags"] = json.dumps(extra)
        if type(obj) is dict:
            meta["plain_dict"] = "1"
    else:
        enc = _Encoder()
        meta["tree"] = json.dumps(enc(obj, []))
        tensors = enc.tensors
    entries = []
    for name, a in tensors.items():
        code = _CODE_OF.get(dtype_of(a.dtype).name)
        if code is None:
            raise TorchLeanError(f"save: tensor {name!r} has dtype {a.dtype}, which safetensors cannot store")
        entries.append((name, code, a.shape, a.reshape(-1).view(np.uint8)))   # the bytes, not a copy
    meta["tensor_sha256"] = json.dumps({n: hashlib.sha256(d).hexdigest()[:16] for n, _, _, d in entries})
    meta["sha256"] = _digest(meta, entries)
    data = st.save(tensors, metadata=meta)
    if isinstance(f, (str, os.PathLike)):
        atomic_write(f, data)
    elif hasattr(f, "write"):
        f.write(data)
    else:
        raise TorchLeanError(f"save: f must be a path or a binary file object, got {type(f).__name__}")


def _read_safetensors(buf, where):
    """Header and ``{name: (code, shape, bytes-like)}`` of a safetensors buffer, validated as the
    format requires (header size, JSON, known dtypes, byte ranges that tile the data exactly)."""
    def bad(why):
        return SerializationError(f"load: {where} is not a valid safetensors or torch.save file ({why})")

    if len(buf) < 8:
        raise bad(f"{len(buf)} bytes")
    hlen = int.from_bytes(buf[:8], "little")
    if hlen > len(buf) - 8 or hlen > 100_000_000:
        raise bad(f"header length {hlen} beyond the file's {len(buf)} bytes")
    try:
        header = json.loads(bytes(buf[8:8 + hlen]).decode("utf-8"), object_pairs_hook=_unique)
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("metadata is not a map of strings")
    start, spans, out = 8 + hlen, [], {}
    for name, info in header.items():
        try:
            code, shape, (a, b) = info["dtype"], [int(n) for n in info["shape"]], info["data_offsets"]
            npd = np.dtype(NAMES[_CODES[code]].dtype)
        except (KeyError, TypeError, ValueError) as e:
            raise bad(f"tensor {name!r}: bad record {info!r:.80}") from e
        if not (isinstance(a, int) and isinstance(b, int)) or min(shape, default=0) < 0 \
                or b - a != int(np.prod(shape)) * npd.itemsize:
            raise bad(f"tensor {name!r}: byte range {a}..{b} does not fit dtype {code} and shape {shape}")
        spans.append((a, b))
        out[name] = (code, shape, npd, a, b)
    end = 0
    for a, b in sorted(spans):
        if a != end:
            raise bad(f"tensor byte ranges overlap or leave a gap at {end}")
        end = b
    if start + end != len(buf):
        raise bad(f"data is {len(buf) - start} bytes, the header accounts for {end}")
    return meta, {n: (c, s, npd, buf[start + a:start + b])
                  for n, (c, s, npd, a, b) in sorted(out.items(), key=lambda e: e[1][3])}


def _unique(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("a key appears twice")
    return d


def _target(map_location, saved: str):
    """The device a tensor saved on ``saved`` loads onto (torch's map_location rules); a callable
    map_location is handled by the caller."""
    if map_location is None:
        return saved
    if isinstance(map_location, dict):
        return map_location.get(saved, saved)
    return map_location


def _placer(map_location):
    def place(a, location, requires_grad):
        a = _contig(a)
        if callable(map_location) and not isinstance(map_location, (str, dict)) \
                and not hasattr(map_location, "type"):
            t = Tensor(a)
            out = map_location(t, location)
            if out is None:
                out = t
            if not isinstance(out, Tensor):
                raise TorchLeanError(f"load: map_location returned {type(out).__name__}, expected a tensor")
            out.requires_grad = bool(requires_grad)
            return out
        target = _target(map_location, location)
        try:
            dev = device_name(target)
        except DeviceError as e:
            raise DeviceError(f"load: map_location {map_location!r} for a tensor saved on {location!r}: {e}") from e
        try:
            return _place(a, dev, requires_grad)
        except TorchLeanError as e:
            hint = "; pass map_location='cpu'" if map_location is None else ""
            raise type(e)(f"load: a tensor saved on {location!r} cannot be placed on {dev!r} ({e}){hint}") from e
    return place


def _open(f, mmap):
    if isinstance(f, (str, os.PathLike)):
        where = repr(os.fspath(f))
        fh = open(f, "rb")  # noqa: SIM115 - closed by load's finally
        if mmap:
            try:
                return _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_READ), where, fh
            except ValueError:          # an empty file cannot be mapped
                return b"", where, fh
        return fh, where, fh
    if mmap:
        raise TorchLeanError("load: mmap=True needs f to be a path, not a file object (as in torch)")
    if not hasattr(f, "read"):
        raise TorchLeanError(f"load: f must be a path or a binary file object, got {type(f).__name__}")
    return f, "the file object", None


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Read a checkpoint written by :func:`save`, any safetensors file, or a ``torch.save`` file.

    ``map_location`` follows torch: None (each tensor on the device it was saved from), a device
    string or object, a dict ``{saved: target}``, or a callable ``(tensor, location) -> tensor``.
    Nothing in a file is ever run: torch files are read by a restricted unpickler that accepts
    tensors and plain containers only, for every ``weights_only`` value (torch's ``weights_only=False``
    would run a file's code; here it changes nothing). ``mmap=True`` (paths only) maps the file
    instead of reading it into memory first; tensors are still copied out. ``pickle_module`` and
    ``pickle_load_args`` are accepted for torch compatibility and have no effect.

        >>> import io
        >>> import torchlean as tl
        >>> buf = io.BytesIO()
        >>> tl.save({"w": tl.zeros(2, dtype=tl.int64)}, buf)
        >>> tl.load(io.BytesIO(buf.getvalue()), map_location="cpu")["w"]
        tensor([0, 0])
    """
    if weights_only not in (None, True, False):
        raise TorchLeanError(f"load: weights_only must be True, False or None, got {weights_only!r}")
    fobj, where, owned = _open(f, mmap)
    try:
        place = _placer(map_location)
        if isinstance(fobj, _mmap.mmap):
            head = fobj[:4]
        else:
            if not fobj.seekable():
                fobj = io.BytesIO(fobj.read())
            head = fobj.read(4)
            fobj.seek(-len(head), 1)
        if is_torch_zip(head) or is_torch_legacy(head):
            # zipfile wants a file object: a BytesIO over the map reads storages from it as needed
            return load_torch(io.BufferedReader(_MapReader(fobj)) if isinstance(fobj, _mmap.mmap) else fobj, place)
        buf = fobj if isinstance(fobj, _mmap.mmap) else memoryview(fobj.read())
        return _load_safetensors(buf, where, place)
    finally:
        if isinstance(fobj, _mmap.mmap):
            fobj.close()
        if owned is not None:
            owned.close()


class _MapReader(io.RawIOBase):
    """A read-only, seekable raw file over a memory map (what zipfile needs)."""

    def __init__(self, m):
        self.m = m

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        return self.m.seek(pos, whence) or self.m.tell()

    def tell(self):
        return self.m.tell()

    def readinto(self, b):
        data = self.m.read(len(b))
        b[:len(data)] = data
        return len(data)


def _load_safetensors(buf, where, place):
    meta, entries = _read_safetensors(buf, where)
    if "sha256" in meta:
        got = _digest(meta, [(n, c, s, d) for n, (c, s, _, d) in entries.items()])
        if got != meta["sha256"]:
            raise SerializationError(f"load: {where} is damaged: {_damaged(meta, entries)} (content sha256 "
                                     f"{got[:12]}... != recorded {meta['sha256'][:12]}...)")
        if meta.get("format") != _FORMAT:
            raise SerializationError(f"load: {where}: unknown checkpoint format {meta.get('format')!r}")
    elif meta.get("format") == _FORMAT or (meta.get("format") != _FORMAT_V1 and any(k in meta for k in _OUR_KEYS)):
        raise SerializationError(f"load: {where} is damaged: a torchlean checkpoint without its content digest "
                                 f"(format {meta.get('format')!r})")
    arrays = {n: np.frombuffer(d, dtype=npd).reshape(s) for n, (c, s, npd, d) in entries.items()}
    field = "tree"
    try:
        if "tree" in meta:
            tree = json.loads(meta["tree"])
            records = []
            _tensor_walk(tree, records)
            flags = {}
            for r in records:          # a repeated tensor's later records are bare references
                flags.setdefault(r["__tensor__"], r)
            tensors = {}
            for n, a in arrays.items():
                r = flags.get(n, {})
                tensors[n] = a.copy() if r.get("numpy") else \
                    place(a.copy(), r.get("device", "cpu"), bool(r.get("requires_grad")))
            return _decode(tree, tensors)
        field = "tensor_flags"
        flags = json.loads(meta.get("tensor_flags", "{}"))
        tensors = {n: place(a.copy(), flags.get(n, {}).get("device", "cpu"),
                            bool(flags.get(n, {}).get("requires_grad"))) for n, a in arrays.items()}
        field = "order"
        order = json.loads(meta["order"]) if "order" in meta else list(tensors)   # else: file order
        out = {} if meta.get("plain_dict") or "format" not in meta else collections.OrderedDict()
        for k in order:
            out[k] = tensors[k]
        return out
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
        if isinstance(e, TorchLeanError):
            raise
        raise SerializationError(f"load: {where}: metadata field {field!r} is malformed ({type(e).__name__}: "
                                 f"{str(e)[:200]})") from None


class safe_globals:
    """Context manager: :func:`add_safe_globals` on entry, those entries removed on exit.

        >>> import argparse, io
        >>> import torchlean as tl
        >>> with tl.serialization.safe_globals([argparse.Namespace]):
        ...     tl.serialization.get_safe_globals()
        [<class 'argparse.Namespace'>]
        >>> tl.serialization.get_safe_globals()
        []
    """

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, type, value, tb):
        remove_safe_globals(self.safe_globals)


class CheckpointFormatError(TorchLeanError, ValueError):
    """Not a ``torch.save`` zip checkpoint (torch raises ValueError)."""


def get_unsafe_globals_in_checkpoint(f) -> list:
    """The ``module.Name`` globals of a ``torch.save`` zip checkpoint's pickle that :func:`load` does not
    allow (neither tensor/container names nor :func:`add_safe_globals` entries); a static scan, as in
    torch (order unspecified there; first appearance here)."""
    fobj, where, owned = _open(f, False)
    try:
        start = fobj.tell()
        if not is_torch_zip(fobj.read(4)):
            raise CheckpointFormatError(f"get_unsafe_globals_in_checkpoint: expected {where} to be a checkpoint "
                                        f"returned by torch.save (a zip archive)")
        fobj.seek(start)
        with zipfile.ZipFile(fobj) as zf:
            pkl = [n for n in zf.namelist() if n.endswith("data.pkl") and n.count("/") <= 1]
            if len(pkl) != 1:
                raise CheckpointFormatError(f"get_unsafe_globals_in_checkpoint: {where} has no torch data.pkl record")
            data = zf.read(pkl[0])
    finally:
        if owned is not None:
            owned.close()
    safe = set(RestrictedUnpickler(io.BytesIO(b""))._allowed) | set(user_allowed())
    return [g for g in globals_in_pickle(data) if g not in safe]
