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

FUNCTIONS: dict = {}
METHODS: dict = {}


def export(*names, function=True, method=True):
    """Register the decorated function under ``names`` (default: its own name) as a top-level
    function and/or a Tensor method (its first argument is then the tensor)."""
    def deco(fn):
        for n in names or (fn.__name__,):
            if function:
                if n in FUNCTIONS:
                    raise RuntimeError(f"torchlean.{n} registered twice")
                FUNCTIONS[n] = fn
            if method:
                if n in METHODS:
                    raise RuntimeError(f"Tensor.{n} registered twice")
                METHODS[n] = fn
        return fn
    return deco


def install(cls) -> None:
    """Set every registered method on ``cls``."""
    for n, fn in METHODS.items():
        setattr(cls, n, fn)
