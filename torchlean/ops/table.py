"""The front end's table of PyTorch names: each function of :mod:`torchlean.ops` is registered
once, as ``torchlean.<name>`` and, when torch has it, as the method ``Tensor.<name>``.

    @export("cumsum")                    # tl.cumsum(x, dim) and x.cumsum(dim)
    def cumsum(x, dim, *, dtype=None): ...

    @export("t", function=True, method=True)

``install(Tensor)`` sets every registered method on the class (one place, at import of
:mod:`torchlean.ops`); ``FUNCTIONS`` feeds ``torchlean``'s namespace. A name registered twice is a
bug and fails at import, naming it.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ..errors import (
    DimRangeError,
    DomainError,
    DTypeError,
    IndexRangeError,
    ResourceError,
    ShapeError,
    TorchLeanError,
)
from ..amp import autocast_op
from ..tensor import Tensor

FUNCTIONS: dict = {}
METHODS: dict = {}

#: NumPy's keyword names that torch accepts for its own, in every function that has the latter.
_ALIASES = {"axis": "dim", "keepdims": "keepdim"}


def _aliases_of(fn) -> dict:
    """NumPy's keyword names ``fn`` also takes: ``axis=`` for ``dim=`` and ``keepdims=`` for
    ``keepdim=`` (as torch does)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {a: d for a, d in _ALIASES.items() if d in params and a not in params}


def _translated(name, e, args, kwargs):
    """The TorchLeanError that stands for an exception of NumPy or Python that escaped op ``name``,
    or None to let ``e`` through. The class keeps the Python base torch would raise (TypeError,
    ValueError, IndexError, MemoryError), so ``except`` clauses written for torch still match."""
    if isinstance(e, TorchLeanError):
        msg = str(e)
        if type(e) is ShapeError and " out of range for a tensor with " in msg:
            return DimRangeError(msg if msg.startswith(name + ":") else f"{name}: {msg}")  # torch: IndexError
        if msg.startswith((name + ":", name + "(")):
            return None
        try:   # raised by an op this one is built from: name the op the user called first
            return type(e)(f"{name}: {msg}")
        except Exception:  # noqa: BLE001 - a class with its own constructor keeps its message
            return None
    if isinstance(e, AttributeError):
        # A None or other non-tensor where a tensor was expected ('NoneType' has no '_value').
        obj = getattr(e, "obj", None)
        if obj is None and "'NoneType'" not in str(e):
            return None
        if isinstance(obj, Tensor) or not any(a is obj for a in (*args, *kwargs.values())):
            return None
        return DTypeError(f"{name}: expected a Tensor, got {type(obj).__name__}")
    if isinstance(e, np.exceptions.AxisError):
        return DimRangeError(f"{name}: {e}")
    if isinstance(e, ZeroDivisionError):
        return DomainError(f"{name}: division by zero ({e})")
    if isinstance(e, MemoryError):
        return ResourceError(f"{name}: {e}")
    if isinstance(e, TypeError) and type(e).__module__.startswith("numpy"):   # UFuncTypeError, DTypePromotionError
        return DTypeError(f"{name}: {e}")
    if isinstance(e, ValueError) and type(e) is not ValueError:   # NumPy's own ValueError subclasses
        return ShapeError(f"{name}: {e}")
    if isinstance(e, IndexError) and type(e) is not IndexError:
        return IndexRangeError(f"{name}: {e}")
    return None


def _guarded(name, fn):
    """``fn`` taking NumPy's keyword aliases, with NumPy's and Python's internal exceptions turned
    into TorchLeanErrors naming ``name`` (the public contract: no NumPy exception escapes a public
    call). Only the failure path pays: the success path is one extra call frame."""
    names = _aliases_of(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs and names:
            for a, d in names.items():
                if a in kwargs:
                    kwargs[d] = kwargs.pop(a)
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            t = _translated(name, e, args, kwargs)
            if t is None:
                raise
            if isinstance(e, TorchLeanError):
                raise t.with_traceback(e.__traceback__) from None
            raise t from e
    return wrapper


def export(*names, function=True, method=True):
    """Register the decorated function under ``names`` (default: its own name) as a top-level
    function and/or a Tensor method (its first argument is then the tensor)."""
    def deco(fn):
        guard = callable(fn) and not isinstance(fn, type)
        for n in names or (fn.__name__,):
            public = autocast_op(n, _guarded(n, fn)) if guard else fn   # one wrapper per name: errors name what was called
            if function:
                if n in FUNCTIONS:
                    raise RuntimeError(f"torchlean.{n} registered twice")
                FUNCTIONS[n] = public
            if method:
                if n in METHODS:
                    raise RuntimeError(f"Tensor.{n} registered twice")
                METHODS[n] = public
        return fn
    return deco


def install(cls) -> None:
    """Set every registered method on ``cls``."""
    for n, fn in METHODS.items():
        setattr(cls, n, fn)
