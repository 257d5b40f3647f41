"""Read PyTorch's own checkpoint files (``torch.save``'s ``.pt`` / ``.pth`` / ``.bin``) without torch.

A ``torch.save`` file is a zip archive: ``<prefix>/data.pkl`` (a pickle of the object tree, whose
tensors refer to storages by key), ``<prefix>/data/<key>`` (each storage's raw bytes) and
``<prefix>/byteorder``. Pickle can run any code a file names, so the pickle is read by
:class:`RestrictedUnpickler`, which resolves only the names torch's own ``weights_only=True``
loader allows: tensor rebuilding (``torch._utils._rebuild_tensor_v2`` and friends), storage and
dtype names, ``torch.Size``, ``torch.device`` and plain containers (``collections.OrderedDict``,
``set``, ``bytes``, ``complex``). Every other name (a function, a custom class) is refused with
:class:`UnpicklingError` naming it, before anything is called. Tensors come back as torchlean
tensors: each view is read with its storage offset and strides, bounds-checked against its storage,
and copied contiguous. The legacy non-zip format (``_use_new_zipfile_serialization=False``) is read
the same way.

Classes a user allowlists (:func:`add_safe_globals`) are rebuilt only when they are plain data
containers that can be built without running their code: instances made by ``object.__new__`` whose
pickled state is written into their ``__dict__`` (``argparse.Namespace``, dataclasses, plain classes
without ``__new__``/``__setstate__``), and namedtuples (``tuple.__new__`` over the pickled fields). No
``__init__``, ``__setstate__`` or ``__reduce__`` callable of a file is ever called; any other allowlisted
name (a function, a class with custom construction) is refused like an unlisted one.

    >>> import io, pickle
    >>> from torchlean.torch_pickle import RestrictedUnpickler, UnpicklingError
    >>> bad = pickle.dumps(print)
    >>> try:
    ...     RestrictedUnpickler(io.BytesIO(bad)).load()
    ... except UnpicklingError as e:
    ...     print("refused")
    refused
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pickle
import pickletools
import zipfile

import numpy as np

from .dtypes import NAMES
from .errors import TorchLeanError
from .shape import Size

__all__ = ["RestrictedUnpickler", "UnpicklingError", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "globals_in_pickle", "is_torch_legacy", "is_torch_zip", "load_torch", "remove_safe_globals"]

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class UnpicklingError(TorchLeanError, pickle.UnpicklingError):
    """A torch checkpoint names something other than tensors and plain containers, or is malformed."""


class _StorageType:
    """What ``torch.FloatStorage`` (and the like) resolves to: the storage's element dtype name."""

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f"torch.{self.name}"


class _Marker:
    """A torch class that only appears as an argument (``torch.Tensor`` in ``_rebuild_from_type_v2``)."""

    def __init__(self, name):
        self.name = name


class _Storage:
    __slots__ = ("data", "dtype", "location")

    def __init__(self, data: np.ndarray, dtype, location: str):
        self.data, self.dtype, self.location = data, dtype, location


class _UnsupportedDType:
    """A torch dtype torchlean has no storage for (complex, float8, uint16, ...): refused when used."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


_STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
             "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
             "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool"}
_UNSUPPORTED_STORAGES = {"ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
                         "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
                         "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4"}
_UNSUPPORTED = ("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint16", "uint32", "uint64",
                "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
                "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16")


def _np_dtype(dt, what):
    if isinstance(dt, _UnsupportedDType) or dt is None:
        raise UnpicklingError(f"load: {what} has dtype {dt!r}, which torchlean cannot hold")
    try:
        return np.dtype(dt.dtype)
    except TorchLeanError as e:
        raise UnpicklingError(f"load: {what} has dtype {dt!r}: {e}") from e


def _as_shape(v, what):
    if not isinstance(v, (tuple, list)) or not all(isinstance(n, int) and not isinstance(n, bool) for n in v):
        raise UnpicklingError(f"load: bad {what} {v!r} in a tensor record")
    return tuple(v)


def _view(storage, offset, size, stride, dtype=None):
    """The tensor at (offset, size, stride) of ``storage``, bounds-checked, as a contiguous copy."""
    if not isinstance(storage, _Storage):
        raise UnpicklingError(f"load: a tensor record names {type(storage).__name__}, not a storage")
    size, stride = _as_shape(size, "size"), _as_shape(stride, "stride")
    if not isinstance(offset, int) or offset < 0 or len(size) != len(stride) or any(n < 0 for n in size) \
            or any(s < 0 for s in stride):
        raise UnpicklingError(f"load: bad tensor record: offset {offset!r}, size {size}, stride {stride}")
    data = storage.data
    if dtype is not None:          # an untyped (byte) storage viewed as dtype
        npd = _np_dtype(dtype, "a tensor")
        nbytes = data.size - data.size % npd.itemsize
        data = data[:nbytes].view(npd)
    if 0 in size:
        return np.empty(size, dtype=data.dtype)
    end = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if end >= data.size:
        raise UnpicklingError(f"load: tensor of size {size} with offset {offset} and stride {stride} reaches "
                              f"element {end} of a storage of {data.size} elements")
    it = data.itemsize
    return np.lib.stride_tricks.as_strided(data[offset:], size, tuple(s * it for s in stride)).copy()


# ---- user-allowlisted globals (torch.serialization.add_safe_globals) ----------------------------

#: The user's allowlist, an immutable tuple replaced on change (torch keeps a set).
_safe_globals: tuple = ()


def _check_entry(f):
    if isinstance(f, tuple):
        if len(f) != 2:
            raise UnpicklingError(f"add_safe_globals: expected a tuple of length 2 (global, str of its full path), "
                                  f"got a tuple of length {len(f)}")
        if type(f[1]) is not str:
            raise UnpicklingError(f"add_safe_globals: expected the second item to be the str of the global's full "
                                  f"path, got {type(f[1]).__name__}")
    return f


def add_safe_globals(safe_globals) -> None:
    """Allow these classes (or ``(class, "module.Name")`` pairs) in torch checkpoints: see the module docs."""
    global _safe_globals
    _safe_globals = _safe_globals + tuple(_check_entry(f) for f in safe_globals if f not in _safe_globals)


def remove_safe_globals(safe_globals) -> None:
    global _safe_globals
    _safe_globals = tuple(f for f in _safe_globals if f not in set(safe_globals))


def get_safe_globals() -> list:
    """The user's allowlist, as :func:`add_safe_globals` received it."""
    return list(_safe_globals)


def clear_safe_globals() -> None:
    """Empty the user's allowlist."""
    global _safe_globals
    _safe_globals = ()


def user_allowed() -> dict:
    """``{"module.Name": class}`` of the user's allowlist (torch's naming: module and qualified name)."""
    out = {}
    for f in _safe_globals:
        if isinstance(f, tuple):
            out[f[1]] = f[0]
        else:
            out[f"{f.__module__}.{f.__qualname__}"] = f
    return out


def _namedtuple_new(cls):
    """True when ``cls`` is a namedtuple whose ``__new__`` is the one ``collections.namedtuple`` wrote."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        return False
    for c in cls.__mro__:
        if "__new__" in vars(c):
            return "_fields" in vars(c) and "_make" in vars(c)
    return False


def _plain(cls) -> bool:
    """A class rebuilt from its state without running its code: see the module docs."""
    if not isinstance(cls, type) or getattr(cls, "__setstate__", None) is not None:
        return False
    if _namedtuple_new(cls):
        return True
    # BUILD writes a dict state straight into __dict__; a slot state goes through setattr
    return cls.__new__ is object.__new__ and (cls.__setattr__ is object.__setattr__ or
                                              not any("__slots__" in vars(c) for c in cls.__mro__))


def _rebuilder(cls, qualname):
    """What ``find_class`` returns for an allowlisted plain class: a type whose construction (NEWOBJ or
    REDUCE) makes the instance without the class's code; BUILD then fills its ``__dict__``."""
    if _namedtuple_new(cls):
        def new(_proxy, *args):
            if len(args) != len(cls._fields):
                raise UnpicklingError(f"load: {qualname} record has {len(args)} fields, the class {len(cls._fields)}")
            return tuple.__new__(cls, args)
    else:
        def new(_proxy, *args):
            if args:
                raise UnpicklingError(f"load: {qualname} record passes constructor arguments; only plain "
                                      f"state (object.__new__ + __dict__) is rebuilt")
            return object.__new__(cls)
    return type(f"_Rebuild_{cls.__name__}", (), {"__new__": new})


def globals_in_pickle(data: bytes) -> list:
    """The ``module.name`` of every GLOBAL of a pickle, as torch's unpickler maps protocol-2 names, in order
    of first appearance (a static scan: nothing is loaded)."""
    out = []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
            if f"{module}.{name}" not in out:
                out.append(f"{module}.{name}")
    return out


class RestrictedUnpickler(pickle.Unpickler):
    """A ``pickle.Unpickler`` that resolves only the names of torch's ``weights_only=True`` allowlist.

    ``storages(key, nbytes)`` returns a storage's bytes (a zip entry); ``place(array, location,
    requires_grad)`` makes the tensor. Any other global raises :class:`UnpicklingError`.
    """

    def __init__(self, file, storages=None, place=None):
        super().__init__(file, encoding="utf-8")
        self._storages = storages
        self._place = place or (lambda a, loc, rg: a)
        self._memo = {}
        self._allowed = self._allowlist()

    def _allowlist(self):
        allowed = {
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,
            "builtins.set": set, "builtins.frozenset": frozenset, "builtins.bytearray": bytearray,
            "builtins.complex": complex, "_codecs.encode": _encode,
            "torch.Size": lambda *a: Size(*a),
            "torch.device": _device,
            "torch.Tensor": _Marker("Tensor"),
            "torch.nn.parameter.Parameter": _Marker("Parameter"),
            "torch.storage.UntypedStorage": _StorageType("UntypedStorage", NAMES["uint8"]),
            "torch.serialization._get_layout": _layout,
            "torch._utils._rebuild_tensor_v2": self._rebuild_tensor_v2,
            "torch._utils._rebuild_tensor_v3": self._rebuild_tensor_v3,
            "torch._utils._rebuild_tensor": self._rebuild_tensor,
            "torch._utils._rebuild_parameter": _rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
            "torch._tensor._rebuild_from_type_v2": self._rebuild_from_type_v2,
        }
        for s, d in _STORAGES.items():
            allowed["torch." + s] = _StorageType(s, NAMES[d])
        for s, d in _UNSUPPORTED_STORAGES.items():
            allowed["torch." + s] = _StorageType(s, _UnsupportedDType(d))
        for n, d in NAMES.items():
            if n != "bool_":
                allowed["torch." + n] = d
        for n in _UNSUPPORTED:
            allowed["torch." + n] = _UnsupportedDType(n)
        return allowed

    def find_class(self, module, name):
        # protocol 2 (torch's default) names Python 2 modules; pickle maps them the same way
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        obj = self._allowed.get(f"{module}.{name}")
        if obj is None:
            user = user_allowed().get(f"{module}.{name}")
            if user is not None and _plain(user):
                return _rebuilder(user, f"{module}.{name}")
            if user is not None:
                raise UnpicklingError(f"load: refusing to unpickle {module}.{name} although it is allowlisted: "
                                      f"only plain data classes (object.__new__ and __dict__ state, namedtuples) "
                                      f"are rebuilt, since building anything else runs the file's code")
            raise UnpicklingError(f"load: refusing to unpickle {module}.{name}: only tensors, storages, dtypes and "
                                  f"plain containers (torch's weights_only=True allowlist) are read; "
                                  f"the file may run code if loaded with torch.load(weights_only=False)")
        return obj

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise UnpicklingError(f"load: unknown persistent record {pid!r:.80}")
        _, stype, key, location, numel = pid[:5]
        if not isinstance(stype, _StorageType) or not isinstance(numel, int) or numel < 0:
            raise UnpicklingError(f"load: bad storage record {pid!r:.80}")
        key = str(key)
        if key not in self._memo:
            npd = _np_dtype(stype.dtype, f"storage {key}")
            raw = self._storages(key, numel * npd.itemsize)
            data = np.frombuffer(raw, dtype=npd.newbyteorder(self.byteorder), count=numel)
            self._memo[key] = _Storage(data.astype(npd, copy=False), stype.dtype, str(location))
        return self._memo[key]

    byteorder = "<"

    def _rebuild_tensor(self, storage, offset, size, stride):
        return self._rebuild_tensor_v2(storage, offset, size, stride, False, None)

    def _rebuild_tensor_v2(self, storage, offset, size, stride, requires_grad, backward_hooks, metadata=None):
        a = _view(storage, offset, size, stride)
        return self._place(a, storage.location, bool(requires_grad) and a.dtype.kind == "f")

    def _rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
        a = _view(storage, offset, size, stride, dtype)
        return self._place(a, storage.location, bool(requires_grad) and a.dtype.kind == "f")

    def _rebuild_from_type_v2(self, func, new_type, args, state):
        ok = (self._rebuild_tensor_v2, self._rebuild_tensor_v3, self._rebuild_tensor, _rebuild_parameter,
              _rebuild_parameter_with_state)
        if func not in ok or not isinstance(new_type, _Marker) or not isinstance(args, tuple):
            raise UnpicklingError(f"load: a tensor subclass record ({new_type!r:.60}) is not a plain tensor")
        return func(*args)


def _encode(s, encoding="utf-8"):
    if not isinstance(s, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise UnpicklingError(f"load: _codecs.encode({type(s).__name__}, {encoding!r}) is not a bytes record")
    return s.encode(encoding)


def _device(*args):
    """A torch.device record comes back as its string form (``"cpu"``, ``"cuda:0"``)."""
    if not args or not isinstance(args[0], str):
        raise UnpicklingError(f"load: bad torch.device record {args!r:.60}")
    return args[0] if len(args) == 1 else f"{args[0]}:{args[1]}"


def _layout(name):
    if name != "torch.strided":
        raise UnpicklingError(f"load: tensors of layout {name!r} (sparse, mkldnn, ...) are not read")
    return name


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if isinstance(data, _Placeholder):
        data.requires_grad = bool(requires_grad)
        return data
    if not hasattr(data, "requires_grad") or not hasattr(data, "dtype"):
        raise UnpicklingError(f"load: a Parameter record holds {type(data).__name__}, not a tensor")
    data.requires_grad = bool(requires_grad) and data.dtype.is_floating_point
    return data


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _rebuild_parameter(data, requires_grad, backward_hooks)


def is_torch_zip(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) starts a zip archive, torch.save's default format."""
    return head[:4] == b"PK\x03\x04"


def is_torch_legacy(head: bytes) -> bool:
    """True when ``head`` starts a pickle of torch's legacy magic number (the pre-1.6 format)."""
    return head[:2] == b"\x80\x02" and head[2:3] == b"\x8a"


def load_torch(f, place):
    """The object tree of a torch.save file ``f`` (a binary file object), tensors made by ``place``."""
    head = f.read(16)
    f.seek(-len(head), 1)
    if is_torch_zip(head):
        return _load_zip(f, place)
    if is_torch_legacy(head):
        return _load_legacy(f, place)
    raise UnpicklingError("load: not a torch.save file (neither a zip archive nor torch's legacy format)")


def _load_zip(f, place):
    try:
        zf = zipfile.ZipFile(f)
        names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise UnpicklingError(f"load: a damaged torch.save zip archive ({e})") from e
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") <= 1]
    if len(pkl) != 1:
        raise UnpicklingError(f"load: a zip archive without torch's data.pkl record (entries: {names[:5]})")
    prefix = pkl[0][:-len("data.pkl")]

    def read(name):
        try:
            return zf.read(prefix + name)
        except (KeyError, zipfile.BadZipFile, OSError, ValueError) as e:
            raise UnpicklingError(f"load: torch.save archive record {prefix + name!r} is missing or damaged "
                                  f"({e})") from e

    order = read("byteorder").decode() if prefix + "byteorder" in names else "little"
    if order not in ("little", "big"):
        raise UnpicklingError(f"load: unknown byteorder record {order!r}")

    def storage(key, nbytes):
        raw = read(f"data/{key}")
        if len(raw) < nbytes:
            raise UnpicklingError(f"load: storage {key} holds {len(raw)} bytes, its record says {nbytes}")
        return raw

    u = RestrictedUnpickler(io.BytesIO(read("data.pkl")), storage, place)
    u.byteorder = "<" if order == "little" else ">"
    return _run(u)


def _run(u):
    try:
        return u.load()
    except TorchLeanError:      # refusals, and device errors of map_location, as they are
        raise
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, AttributeError, IndexError, KeyError) as e:
        raise UnpicklingError(f"load: a damaged torch.save pickle ({type(e).__name__}: {e})") from e


def _load_legacy(f, place):
    """torch's pre-1.6 format: magic, protocol, sys info, the object pickle, its storage keys, then each
    storage as an 8-byte element count followed by its bytes, in key order. The storages follow the
    object pickle, so its tensors are placeholders until they are read."""
    def plain():
        return _run(RestrictedUnpickler(f))

    if plain() != _LEGACY_MAGIC or plain() != 1001:
        raise UnpicklingError("load: not a torch legacy file (bad magic number or protocol)")
    info = plain()
    if not isinstance(info, dict) or not info.get("little_endian", True):
        raise UnpicklingError("load: big-endian legacy torch files are not read")
    u = _LegacyUnpickler(f)
    tree = _run(u)
    keys = plain()
    if not isinstance(keys, list) or sorted(map(str, keys)) != sorted(u.storages):
        raise UnpicklingError("load: legacy torch file: storage key list does not match the object pickle")
    for key in map(str, keys):
        stor, numel = u.storages[key]
        it = stor.data.itemsize
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n * it)
        if n != numel or len(raw) != n * it:
            raise UnpicklingError(f"load: legacy torch file truncated or damaged in storage {key}")
        stor.data = np.frombuffer(raw, dtype=stor.data.dtype)
    made = []
    for (stor, offset, size, stride), ph in zip(u.pending, u.placeholders):
        a = _view(stor, offset, size, stride)
        made.append(place(a, stor.location, ph.requires_grad and a.dtype.kind == "f"))
    return _replace(tree, made)


class _LegacyUnpickler(RestrictedUnpickler):
    def __init__(self, f):
        super().__init__(f)
        self.storages, self.pending, self.placeholders = {}, [], []

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" or \
                not isinstance(pid[1], _StorageType) or not isinstance(pid[4], int) or pid[4] < 0:
            raise UnpicklingError(f"load: unknown persistent record {pid!r:.80}")
        if len(pid) > 5 and pid[5] is not None:
            raise UnpicklingError("load: legacy storage views are not read")
        key = str(pid[2])
        if key not in self.storages:
            npd = _np_dtype(pid[1].dtype, f"storage {key}")
            self.storages[key] = (_Storage(np.empty(0, npd), pid[1].dtype, str(pid[3])), pid[4])
        return self.storages[key][0]

    def _rebuild_tensor_v2(self, storage, offset, size, stride, requires_grad, backward_hooks, metadata=None):
        if not isinstance(storage, _Storage):
            raise UnpicklingError(f"load: a tensor record names {type(storage).__name__}, not a storage")
        self.pending.append((storage, offset, size, stride))
        self.placeholders.append(_Placeholder(len(self.pending) - 1, bool(requires_grad)))
        return self.placeholders[-1]

    def _rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
        raise UnpicklingError("load: untyped storages in a legacy torch file are not read")


def _replace(tree, made):
    if isinstance(tree, _Placeholder):
        return made[tree.i]
    if isinstance(tree, dict):
        out = collections.OrderedDict() if isinstance(tree, collections.OrderedDict) else {}
        for k, v in tree.items():
            out[k] = _replace(v, made)
        return out
    if isinstance(tree, list):
        return [_replace(v, made) for v in tree]
    if isinstance(tree, tuple) and not isinstance(tree, Size):
        return tuple(_replace(v, made) for v in tree)
    return tree


class _Placeholder:
    """A tensor of a legacy file whose storage has not been read yet."""

    __slots__ = ("i", "requires_grad")

    def __init__(self, i, requires_grad):
        self.i, self.requires_grad = i, requires_grad
