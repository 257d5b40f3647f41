"""Linear algebra: the reference meaning of matmul, bmm, linear and linear_nobias.

``matmul(a, b)`` is ``torch.matmul``: a 1-D ``a`` is promoted to a row ``(1, n)``
and a 1-D ``b`` to a column ``(n, 1)``, the product is taken over the last two
axes with the leading (batch) axes broadcast like NumPy, and the promoted axes
are removed again (so 1-D @ 1-D is a 0-d dot product). The VJP sums the
cotangent over the batch axes that broadcasting added or stretched.

``linear(w, b, x)`` keeps the seeds' argument order: ``w`` (out, in), ``b``
(out,), ``x`` (..., in), and means ``x @ w.T + b``.

The products are written as explicit index sums (``einsum``), independent of
the BLAS calls that the runtime uses.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> float(SPEC["matmul"].forward(np.array([1.0, 2.0]), np.array([3.0, 4.0])))
    11.0
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shapes
from ..shape import broadcast_shapes
from .elementwise import sum_to_shape
from .registry import defspec


# ---- matmul ---------------------------------------------------------------------------------

def matmul_plan(a: tuple, b: tuple, op: str = "matmul"):
    """Promoted shapes and output shape of ``torch.matmul`` on shapes ``a`` and ``b``.

    Returns ``(a2, b2, full, out)``: ``a2``/``b2`` are the operands with 1-D
    promotion applied, ``full`` the product shape before the promoted axes are
    removed (batch + (m, p)) and ``out`` the result shape.
    """
    a, b = tuple(a), tuple(b)
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: both arguments need at least 1 axis")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: inner dimensions {a2[-1]} and {b2[-2]} differ")
    try:
        batch = broadcast_shapes(a2[:-2], b2[:-2], op=op)
    except ShapeError:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: batch dimensions "
                         f"{fmt_shapes(a2[:-2], b2[:-2])} do not broadcast") from None
    full = batch + (a2[-2], b2[-1])
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return a2, b2, full, out


def _matmul_shape(a, b):
    return matmul_plan(a, b)[3]


def _mm(a, b):
    """Batched product over the last two axes; batch axes already broadcast-compatible."""
    return np.einsum("...ij,...jk->...ik", a, b)


def _matmul(a, b):
    a2, b2, full, out = matmul_plan(a.shape, b.shape)
    return _mm(a.reshape(a2), b.reshape(b2)).reshape(out)


def _matmul_vjp(g, a, b):
    a2, b2, full, _ = matmul_plan(a.shape, b.shape)
    A, B, G = a.reshape(a2), b.reshape(b2), np.asarray(g).reshape(full)
    ga = _mm(G, np.swapaxes(B, -1, -2))   # dL/dA = G B^T, batch-broadcast
    gb = _mm(np.swapaxes(A, -1, -2), G)   # dL/dB = A^T G
    return sum_to_shape(ga, a2).reshape(a.shape), sum_to_shape(gb, b2).reshape(b.shape)


defspec("matmul", _matmul, _matmul_vjp, _matmul_shape, 2)


# ---- bmm ------------------------------------------------------------------------------------

def _bmm_shape(a, b):
    a, b = tuple(a), tuple(b)
    if len(a) != 3 or len(b) != 3:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: both arguments must have 3 axes (batch, m, n)")
    if a[0] != b[0]:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: batch sizes {a[0]} and {b[0]} differ")
    if a[2] != b[1]:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: inner dimensions {a[2]} and {b[1]} differ")
    return (a[0], a[1], b[2])


defspec("bmm", _mm,
        lambda g, a, b: (_mm(g, np.swapaxes(b, 1, 2)), _mm(np.swapaxes(a, 1, 2), g)),
        _bmm_shape, 2)


# ---- linear ---------------------------------------------------------------------------------

def linear_shape(w, b, x, op: str = "linear"):
    """Output shape of ``x @ w.T (+ b)``; ``b`` is None for the bias-free form."""
    w, x = tuple(w), tuple(x)
    shapes = (w, x) if b is None else (w, tuple(b), x)
    names = "weight and input" if b is None else "weight, bias and input"
    if len(w) != 2:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: weight must have 2 axes (out, in)")
    if len(x) == 0:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: input must have at least 1 axis (..., in)")
    if x[-1] != w[1]:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: input features {x[-1]} "
                         f"and weight in-features {w[1]} differ")
    if b is not None and tuple(b) != (w[0],):
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: bias must have shape ({w[0]},)")
    return x[:-1] + (w[0],)


def _affine(w, x):
    return np.einsum("...i,oi->...o", x, w)


def _linear_vjp_wx(g, w, x):
    # Leading axes of x are rows of one big product: dL/dw = sum over rows of g_row x_row^T.
    gw = np.einsum("no,ni->oi", np.reshape(g, (-1, w.shape[0])), x.reshape(-1, w.shape[1]))
    gx = np.einsum("...o,oi->...i", g, w)
    return gw, gx


def _linear_vjp(g, w, b, x):
    gw, gx = _linear_vjp_wx(g, w, x)
    gb = np.asarray(g).reshape(-1, w.shape[0]).sum(axis=0)
    return gw, gb, gx


# matmul(x, transpose(w)) + b as one op: one GEMM reading w in PyTorch's (out, in) layout (no
# transposed copy), the bias added in the same pass, dw and db from one pass over g.
_LINEAR_WHY = "one GEMM on w as stored, bias in the same pass, where matmul + transpose + add is three ops"
defspec("linear", lambda w, b, x: _affine(w, x) + b, _linear_vjp,
        lambda w, b, x: linear_shape(w, b, x), 3, why=_LINEAR_WHY)
defspec("linear_nobias", _affine, _linear_vjp_wx,
        lambda w, x: linear_shape(w, None, x, op="linear_nobias"), 2, why=_LINEAR_WHY)

__all__ = ["matmul_plan", "linear_shape"]
