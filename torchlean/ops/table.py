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

FUNCTIONS: dict = {}
METHODS: dict = {}

#: NumPy's keyword names that torch accepts for its own, in every function that has the latter.
_ALIASES = {"axis": "dim", "keepdims": "keepdim"}


def _with_aliases(fn):
    """``fn`` also taking ``axis=`` for ``dim=`` and ``keepdims=`` for ``keepdim=`` (as torch does)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    names = {a: d for a, d in _ALIASES.items() if d in params and a not in params}
    if not names:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for a, d in names.items():
                if a in kwargs:
                    kwargs[d] = kwargs.pop(a)
        return fn(*args, **kwargs)
    return wrapper


def export(*names, function=True, method=True):
    """Register the decorated function under ``names`` (default: its own name) as a top-level
    function and/or a Tensor method (its first argument is then the tensor)."""
    def deco(fn):
        public = _with_aliases(fn) if callable(fn) and not isinstance(fn, type) else fn
        for n in names or (fn.__name__,):
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
