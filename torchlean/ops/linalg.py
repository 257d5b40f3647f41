"""PyTorch's products and contractions (``mm``, ``matmul``, ``einsum``, ``tensordot``, ``cdist``, ...)
as formulas over the recorded ops ``matmul`` and ``bmm`` and the elementwise, shape and reduce ops,
so each inherits its gradient from its parts.

Matrix products refuse operands of different dtypes, as torch does (``mm`` of float32 and
float64 raises); ``outer`` and ``kron`` promote, as torch's do.

    >>> import torchlean as tl
    >>> tl.einsum("ij,jk->ik", tl.ones(2, 3), tl.ones(3, 4)).tolist()
    [[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

from __future__ import annotations

import math
from collections import namedtuple
from numbers import Number

import numpy as np

from ..errors import DomainError, DTypeError, LinAlgError, ShapeError, fmt_shapes
from ..tensor import Tensor, _as_tensor, _binary, float64, no_grad, record
from .index import where
from .shape import cat
from .table import export

__all__ = ["mm", "mv", "bmm", "matmul", "dot", "vdot", "outer", "addmm", "addmv", "addbmm", "baddbmm",
           "einsum", "tensordot", "kron", "inner", "chain_matmul", "cross", "cdist", "trace", "diag_embed",
           "inv", "det", "slogdet", "logdet", "matrix_power"]


# ---- helpers --------------------------------------------------------------------------------

def _tensors(op, *xs):
    for x in xs:
        if not isinstance(x, Tensor):
            raise DTypeError(f"{op}: expected Tensor arguments, got {type(x).__name__}")


def same_dtype(op, *xs):
    """Raise DTypeError naming ``op`` unless every tensor has one dtype (torch's products do not
    promote)."""
    _tensors(op, *xs)
    dts = [x.dtype for x in xs]
    if any(d != dts[0] for d in dts):
        raise DTypeError(f"{op}: expected operands to have the same dtype, but got "
                         f"{', '.join(d.name for d in dts)}")


def _norm_dim(d, ndim, op):
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise ShapeError(f"{op}: dimension {d} out of range for a tensor with {ndim} axes")
    return d % max(ndim, 1)


def const(a, like: Tensor) -> Tensor:
    """Host array ``a`` as a constant tensor of ``like``'s dtype and device."""
    return _as_tensor(np.asarray(a), like, like.dtype)


def diagonal(x: Tensor) -> Tensor:
    """The main diagonal of the last two axes, ``(..., min(m, n))``: every (n+1)-th entry of the
    flattened matrix (one strided read, no mask)."""
    m, n = x.shape[-2:]
    k = min(m, n)
    flat = x.reshape(x.shape[:-2] + (m * n,))
    return flat[..., ::n + 1][..., :k]


def mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def product(op: str, a: Tensor, b: Tensor) -> Tensor:
    """The recorded product ``op`` ("matmul" or "bmm"). Integer operands are multiplied in float64
    and the result cast back (exact while every partial sum stays below 2**53), since the product
    ops are defined on floats."""
    if a.dtype.kind == "f":
        return record(op, (a, b), {})
    dt = a.dtype
    return record(op, (a.to(dtype=float64), b.to(dtype=float64)), {}).to(dtype=dt)


def _scaled(x: Tensor, c) -> Tensor:
    return x if c == 1 else x * c


def _addmix(op, inp, prod, beta, alpha):
    """``beta * inp + alpha * prod``; with ``beta == 0`` ``inp`` is ignored (nan and inf too)."""
    try:
        fits = np.broadcast_shapes(inp.shape, prod.shape) == prod.shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: input of shape {inp.shape} does not broadcast to the product's "
                         f"shape {prod.shape}")
    out = _scaled(prod, alpha)
    if beta == 0:
        return out
    return out + _scaled(inp, beta)


# ---- products -------------------------------------------------------------------------------

@export("matmul")
def matmul(input, other) -> Tensor:
    """``torch.matmul``: 1-D operands promoted to a row / column, batch axes broadcast."""
    if not isinstance(input, Tensor):
        input = _as_tensor(input, other)
    if not isinstance(other, Tensor):
        other = _as_tensor(other, input)
    same_dtype("matmul", input, other)
    return product("matmul", input, other)


@export("__matmul__", function=False)
def _matmul_op(self, other):
    return matmul(self, other) if isinstance(other, (Tensor, np.ndarray, list)) else NotImplemented


@export("__rmatmul__", function=False)
def _rmatmul_op(self, other):
    return matmul(other, self) if isinstance(other, (np.ndarray, list)) else NotImplemented


@export("mm")
def mm(input, mat2) -> Tensor:
    same_dtype("mm", input, mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: shapes {fmt_shapes(input.shape, mat2.shape)}: both arguments must be matrices")
    if input.shape[1] != mat2.shape[0]:
        raise ShapeError(f"mm: mat1 and mat2 shapes cannot be multiplied "
                         f"({input.shape[0]}x{input.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    return product("matmul", input, mat2)


@export("mv")
def mv(input, vec) -> Tensor:
    same_dtype("mv", input, vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv: shapes {fmt_shapes(input.shape, vec.shape)}: expected a matrix and a vector")
    if input.shape[1] != vec.shape[0]:
        raise ShapeError(f"mv: size mismatch, got input ({input.shape[0]}x{input.shape[1]}) "
                         f"and vec ({vec.shape[0]})")
    return product("matmul", input, vec)


@export("bmm")
def bmm(input, mat2) -> Tensor:
    same_dtype("bmm", input, mat2)
    return product("bmm", input, mat2)


def _vectors(op, a, b):
    same_dtype(op, a, b)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"{op}: 1D tensors expected, but got shapes {fmt_shapes(a.shape, b.shape)}")
    if a.shape != b.shape:
        raise ShapeError(f"{op}: inconsistent tensor size, got {a.shape[0]} and {b.shape[0]} elements")


@export("dot")
def dot(input, tensor) -> Tensor:
    _vectors("dot", input, tensor)
    return product("matmul", input, tensor)


@export("vdot")
def vdot(input, other) -> Tensor:
    """``conj(input) . other``; real tensors only, so it is ``dot``."""
    _vectors("vdot", input, other)
    return product("matmul", input, other)


@export("outer", "ger")
def outer(input, vec2) -> Tensor:
    _tensors("outer", input, vec2)
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: 1D tensors expected, but got shapes {fmt_shapes(input.shape, vec2.shape)}")
    return _binary("mul", input.reshape(-1, 1), vec2)


@export("addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to the product."""
    same_dtype("addmm", input, mat1, mat2)
    return _addmix("addmm", input, mm(mat1, mat2), beta, alpha)


@export("addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1) -> Tensor:
    same_dtype("addmv", input, mat, vec)
    return _addmix("addmv", input, mv(mat, vec), beta, alpha)


def _batches(op, b1, b2):
    same_dtype(op, b1, b2)
    if b1.ndim != 3 or b2.ndim != 3:
        raise ShapeError(f"{op}: batch1 and batch2 must be 3-D, got shapes {fmt_shapes(b1.shape, b2.shape)}")


@export("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    same_dtype("baddbmm", input, batch1, batch2)
    _batches("baddbmm", batch1, batch2)
    return _addmix("baddbmm", input, product("bmm", batch1, batch2), beta, alpha)


@export("addbmm")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``: one product of the batches laid side by side."""
    same_dtype("addbmm", input, batch1, batch2)
    _batches("addbmm", batch1, batch2)
    b, n, k = batch1.shape
    if batch2.shape[0] != b or batch2.shape[1] != k:
        raise ShapeError(f"addbmm: shapes {fmt_shapes(batch1.shape, batch2.shape)} cannot be multiplied")
    p = batch2.shape[2]
    a = batch1.permute(1, 0, 2).reshape(n, b * k)
    prod = product("matmul", a, batch2.reshape(b * k, p))
    return _addmix("addbmm", input, prod, beta, alpha)


@export("chain_matmul", method=False)
def chain_matmul(*matrices) -> Tensor:
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise ShapeError("chain_matmul: expected one or more tensors")
    for m in matrices:
        _tensors("chain_matmul", m)
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul: expected 2-D tensors, got shape {m.shape}")
    same_dtype("chain_matmul", *matrices)
    out = matrices[0]
    for m in matrices[1:]:
        out = mm(out, m)
    return out if len(matrices) > 1 else out.clone()


def multi_dot(tensors) -> Tensor:
    """``torch.linalg.multi_dot``: the first tensor may be 1-D (a row), the last 1-D (a column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ShapeError(f"linalg.multi_dot: expected at least 2 tensors but got {len(tensors)}")
    same_dtype("linalg.multi_dot", *tensors)
    first, last = tensors[0], tensors[-1]
    if first.ndim not in (1, 2) or last.ndim not in (1, 2) or any(t.ndim != 2 for t in tensors[1:-1]):
        raise ShapeError(f"linalg.multi_dot: the first and last tensors must be 1-D or 2-D and the others 2-D, "
                         f"got shapes {fmt_shapes(*(t.shape for t in tensors))}")
    mats = [first.reshape(1, -1) if first.ndim == 1 else first] + tensors[1:-1] + \
           [last.reshape(-1, 1) if last.ndim == 1 else last]
    out = mats[0]
    for m in mats[1:]:
        if out.shape[1] != m.shape[0]:
            raise ShapeError(f"linalg.multi_dot: shapes {fmt_shapes(*(t.shape for t in tensors))} cannot be multiplied")
        out = product("matmul", out, m)
    shape = out.shape
    shape = shape[1:] if first.ndim == 1 else shape
    shape = shape[:-1] if last.ndim == 1 else shape
    return out.reshape(shape)


# ---- einsum ---------------------------------------------------------------------------------

def _parse_term(term, x, op):
    """Labels of one operand: ``ord(letter)`` for letters, ``-k`` for the k-th ellipsis axis from
    the right."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise DomainError(f"{op}: malformed subscript {term!r}")
    head, dots, tail = term.partition("...")
    for c in head + tail:
        if not c.isalpha():
            raise DomainError(f"{op}: invalid subscript {c!r}: only letters and '...' are allowed")
    n_ell = x.ndim - len(head) - len(tail)
    if (not dots and n_ell != 0) or n_ell < 0:
        raise ShapeError(f"{op}: subscript {term!r} does not match an operand with {x.ndim} axes")
    return [ord(c) for c in head] + list(range(-n_ell, 0)) + [ord(c) for c in tail], n_ell


def _take_diagonal(x, labels):
    """Merge repeated labels of one operand (``ii``) into one axis: its diagonal."""
    while len(set(labels)) < len(labels):
        seen = {}
        for i, l in enumerate(labels):
            if l in seen:
                p, q = seen[l], i
                break
            seen[l] = i
        if x.shape[p] != x.shape[q]:
            raise ShapeError(f"einsum: subscript {chr(labels[p]) if labels[p] > 0 else '...'} repeated "
                             f"with sizes {x.shape[p]} and {x.shape[q]}")
        rest = [i for i in range(x.ndim) if i not in (p, q)]
        x = diagonal(x.permute(*rest, p, q))
        labels = [labels[i] for i in rest] + [labels[p]]
    return x, labels


def _sum_out(x, labels, keep):
    drop = [i for i, l in enumerate(labels) if l not in keep]
    if drop:
        x = x.sum(dim=tuple(drop))
        labels = [l for l in labels if l in keep]
    return x, labels


def _contract(a, la, b, lb, keep):
    """Contract two labelled operands through one bmm: batch labels (both, kept), contracted
    labels (both, not kept), left-only and right-only labels."""
    size = {}
    for x, ls in ((a, la), (b, lb)):
        for l, s in zip(ls, x.shape):
            if l in size and size[l] != s and 1 not in (size[l], s):
                raise ShapeError(f"einsum: operands do not broadcast: subscript "
                                 f"{chr(l) if l > 0 else '...'} has sizes {size[l]} and {s}")
            size[l] = s if l not in size or size[l] == 1 else size[l]
    batch = [l for l in la if l in lb and l in keep]
    con = [l for l in la if l in lb and l not in keep]
    left = [l for l in la if l not in lb]
    right = [l for l in lb if l not in la]

    def arrange(x, ls, order):
        x = x.permute(*[ls.index(l) for l in order]) if order != ls else x
        full = tuple(size[l] for l in order)
        return x.broadcast_to(full) if x.shape != full else x

    A = arrange(a, la, batch + left + con)
    B = arrange(b, lb, batch + con + right)
    nb, nl, nc, nr = (math.prod(size[l] for l in g) for g in (batch, left, con, right))
    y = product("bmm", A.reshape(nb, nl, nc), B.reshape(nb, nc, nr))
    out = batch + left + right
    return y.reshape(tuple(size[l] for l in out)), out


@export("einsum", method=False)
def einsum(equation, *operands) -> Tensor:
    """``torch.einsum``: letters and ``...``, any number of operands (or one list of them),
    implicit output (ellipsis axes, then the letters seen once, in ASCII order); size-1 axes
    broadcast. Each pair of operands is contracted by one batched product."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise DTypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise ShapeError("einsum: must provide at least one operand")
    same_dtype("einsum", *operands)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: the equation {equation!r} names {len(terms)} operand(s) but "
                         f"{len(operands)} were given")
    parsed = [_parse_term(t, x, "einsum") for t, x in zip(terms, operands)]
    n_ell = max(e for _, e in parsed)
    counts = {}
    for ls, _ in parsed:
        for l in ls:
            if l > 0:
                counts[l] = counts.get(l, 0) + 1
    if arrow:
        head, dots, tail = rhs.partition("...")
        if "." in head + tail or not all(c.isalpha() for c in head + tail):
            raise DomainError(f"einsum: malformed output subscript {rhs!r}")
        out = [ord(c) for c in head] + (list(range(-n_ell, 0)) if dots else []) + [ord(c) for c in tail]
        for l in out:
            if l > 0 and l not in counts:
                raise ShapeError(f"einsum: output subscript {chr(l)} does not appear in the input")
        if len(set(out)) != len(out):
            raise ShapeError(f"einsum: output subscript repeated in {rhs!r}")
    else:
        out = list(range(-n_ell, 0)) + sorted(l for l, c in counts.items() if c == 1)
    xs, labels = [], []
    for x, (ls, _) in zip(operands, parsed):
        x, ls = _take_diagonal(x, ls)
        xs.append(x)
        labels.append(ls)
    for i in range(len(xs)):
        later = set(out).union(*[set(l) for j, l in enumerate(labels) if j != i])
        xs[i], labels[i] = _sum_out(xs[i], labels[i], later)
    y, ly = xs[0], labels[0]
    for i in range(1, len(xs)):
        keep = set(out).union(*[set(l) for l in labels[i + 1:]])
        y, ly = _sum_out(y, ly, keep | set(labels[i]))
        xs[i], labels[i] = _sum_out(xs[i], labels[i], keep | set(ly))
        y, ly = _contract(y, ly, xs[i], labels[i], keep)
    y, ly = _sum_out(y, ly, set(out))
    if ly != out:
        y = y.permute(*[ly.index(l) for l in out])
    return y if len(xs) > 1 or y is not operands[0] else y.clone()


# ---- tensordot, inner, kron -----------------------------------------------------------------

@export("tensordot", method=False)
def tensordot(a, b, dims=2) -> Tensor:
    """Contract the last ``dims`` axes of ``a`` with the first of ``b``, or the axes named by the
    pair of lists ``dims``, as one matrix product."""
    same_dtype("tensordot", a, b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims {dims} out of range for shapes {fmt_shapes(a.shape, b.shape)}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise ShapeError(f"tensordot: dims must be an int or a pair of lists, got {dims!r}")
        da, db = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
        if len(da) != len(db):
            raise ShapeError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
        da = [_norm_dim(d, a.ndim, "tensordot") for d in da]
        db = [_norm_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: contracted dimensions need to match, but first has size "
                             f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in dim {j}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [j for j in range(b.ndim) if j not in db]
    c = math.prod(a.shape[i] for i in da)
    A = a.permute(*(fa + da)).reshape(math.prod(a.shape[i] for i in fa), c)
    B = b.permute(*(db + fb)).reshape(c, math.prod(b.shape[j] for j in fb))
    y = product("matmul", A, B)
    return y.reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[j] for j in fb))


@export("inner")
def inner(input, other) -> Tensor:
    same_dtype("inner", input, other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: shapes {fmt_shapes(input.shape, other.shape)}: last dimensions "
                         f"{input.shape[-1]} and {other.shape[-1]} differ")
    return tensordot(input, other, ([-1], [-1]))


@export("kron")
def kron(input, other) -> Tensor:
    """Kronecker product: ``out[i*q + k] = a[i] * b[k]`` on every axis (shorter shape padded with
    leading 1s); the operands are promoted, as in torch."""
    _tensors("kron", input, other)
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + input.shape
    sb = (1,) * (n - other.ndim) + other.shape
    a = input.reshape(tuple(s for p in sa for s in (p, 1)))
    b = other.reshape(tuple(s for q in sb for s in (1, q)))
    return _binary("mul", a, b).reshape(tuple(p * q for p, q in zip(sa, sb)))


# ---- cross, cdist, trace, diag_embed --------------------------------------------------------

def linalg_cross(input, other, dim=-1, op="linalg.cross") -> Tensor:
    same_dtype(op, input, other)
    try:
        shape = np.broadcast_shapes(input.shape, other.shape)
    except ValueError:
        raise ShapeError(f"{op}: shapes {fmt_shapes(input.shape, other.shape)} do not broadcast") from None
    d = _norm_dim(dim, len(shape), op)
    if not shape or shape[d] != 3:
        raise ShapeError(f"{op}: inputs dimension {dim} must have length 3, got shapes "
                         f"{fmt_shapes(input.shape, other.shape)}")
    a, b = input.broadcast_to(shape), other.broadcast_to(shape)

    def part(x, i):
        return x[(slice(None),) * d + (slice(i, i + 1),)]

    a0, a1, a2 = (part(a, i) for i in range(3))
    b0, b1, b2 = (part(b, i) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=d)


@export("cross")
def cross(input, other, dim=None) -> Tensor:
    """``torch.cross``: ``dim=None`` takes the first axis of size 3 (torch's deprecated default)."""
    same_dtype("cross", input, other)
    if dim is None:
        shape = np.broadcast_shapes(input.shape, other.shape)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in shapes {fmt_shapes(input.shape, other.shape)}")
    return linalg_cross(input, other, dim, op="cross")


def amax_even(x: Tensor, dim: int, keepdim=False, largest=True) -> Tensor:
    """max (or min) over one axis whose gradient is split evenly between tied entries, as torch's
    ``amax`` and norms do."""
    with_grad = x.requires_grad
    m = record("reduce_max" if largest else "reduce_min", (x.detach() if with_grad else x,),
               {"axis": dim, "keepdim": True})
    if not with_grad:
        return m if keepdim else m.squeeze(dim)
    mask = (x.detach() == m).to(dtype=x.dtype)
    out = (x * mask).sum(dim=dim, keepdim=True) / mask.sum(dim=dim, keepdim=True)
    return out if keepdim else out.squeeze(dim)


def pnorm_last(d: Tensor, p, op) -> Tensor:
    """The p-norm over the last axis (p in [0, inf])."""
    if isinstance(p, bool) or not isinstance(p, Number) or math.isnan(p):
        raise DomainError(f"{op}: p must be a number, got {p!r}")
    if p == 2:
        return (d * d).sum(dim=-1).sqrt()
    if p == 1:
        return d.abs().sum(dim=-1)
    if p == math.inf or p == -math.inf:
        if d.shape[-1] == 0:
            raise ShapeError(f"{op}: cannot compute the {p} norm of an empty dimension")
        return amax_even(d.abs(), -1, largest=p > 0)
    if p == 0:
        return (d != 0).to(dtype=d.dtype).sum(dim=-1)
    return (d.abs() ** p).sum(dim=-1) ** (1.0 / p)


@export("cdist", method=False)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """Pairwise p-norm distances between the rows of ``x1`` (..., P, M) and ``x2`` (..., R, M)."""
    same_dtype("cdist", x1, x2)
    if x1.dtype.kind != "f":
        raise DTypeError(f"cdist: only supports floating-point dtypes, X1 got: {x1.dtype.name}")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist: only supports at least 2D tensors, got shapes {fmt_shapes(x1.shape, x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                         f"X2: {x2.shape[-1]}")
    if isinstance(p, Number) and p < 0:
        raise DomainError(f"cdist: only supports non-negative p values, got {p}")
    try:
        np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except ValueError:
        raise ShapeError(f"cdist: batch shapes {fmt_shapes(x1.shape[:-2], x2.shape[:-2])} do not broadcast") from None
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return pnorm_last(diff, float(p), "cdist")


@export("trace")
def trace(input) -> Tensor:
    _tensors("trace", input)
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


@export("diag_embed")
def diag_embed(input, offset=0, dim1=-2, dim2=-1) -> Tensor:
    """Matrices with ``input``'s last axis on their ``offset`` diagonal, placed at axes
    ``dim1``, ``dim2`` of the result: a contraction with a constant 0/1 tensor."""
    _tensors("diag_embed", input)
    if input.ndim == 0:
        raise ShapeError("diag_embed: input must have at least 1 dimension")
    # Placed by concatenation and reshapes, never multiplied by a 0/1 matrix: NaN and inf stay on
    # the diagonal and the zeros stay exact zeros (0 * inf would be NaN), as torch writes them.
    n, k, lead = input.shape[-1], abs(offset), tuple(input.shape[:-1])
    y = cat([input.unsqueeze(-1), input.new_zeros(lead + (n, n))], -1)              # (..., n, n + 1)
    y = y.reshape(*lead, n * (n + 1))[..., :n * n].reshape(*lead, n, n)            # row i: v[i] at column i
    if k:
        cols, rows = input.new_zeros(lead + (n, k)), input.new_zeros(lead + (k, n + k))
        y = cat([cat([cols, y], -1), rows], -2) if offset > 0 else cat([rows, cat([y, cols], -1)], -2)
    nd = y.ndim
    d1, d2 = _norm_dim(dim1, nd, "diag_embed"), _norm_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ShapeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = list(range(nd - 2))
    order = [None] * nd
    order[d1], order[d2] = nd - 2, nd - 1
    it = iter(rest)
    order = [o if o is not None else next(it) for o in order]
    return y.permute(*order) if order != list(range(nd)) else y


# ---- determinants and inverses (torch.det, torch.inverse, ...; torch.linalg uses the same) ---

_SLOGDET = namedtuple("slogdet", ["sign", "logabsdet"])


def float_only(op, *xs):
    """DTypeError naming ``op`` unless every argument is a floating-point tensor (torch.linalg's rule)."""
    for x in xs:
        if not isinstance(x, Tensor):
            raise DTypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
        if x.dtype.kind != "f":
            raise DTypeError(f"{op}: Expected a floating point or complex tensor as input. Got {x.dtype.name}")


def square(op, a):
    float_only(op, a)
    if a.ndim < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions, got shape {a.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, but they are "
                         f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _finite(x: Tensor) -> bool:
    if x.numel() == 0:
        return True
    with no_grad():
        m = record("reduce_max", (x.detach().abs().reshape(-1),), {"axis": 0})  # NaN propagates
    return math.isfinite(m.item())


def checked(op: str, out: Tensor, inputs, what: str) -> Tensor:
    """``out`` of a factorization, which the kernels leave NaN where LAPACK failed: raise torch's
    LinAlgError naming ``op`` when finite inputs gave a non-finite result."""
    if not _finite(out) and all(_finite(t) for t in inputs):
        raise LinAlgError(f"{op}: {what}")
    return out


SINGULAR = "the solver failed because the input matrix is singular"


def eye(n, like: Tensor) -> Tensor:
    return const(np.eye(n), like)


@export("inverse")
def inv(A) -> Tensor:
    """The inverse, as ``solve(A, I)``; a singular matrix raises naming ``linalg.inv``."""
    square("linalg.inv", A)
    return checked("linalg.inv", record("linalg_solve", (A, eye(A.shape[-1], A)), {}), (A,), SINGULAR)


@export("det")
def det(A) -> Tensor:
    square("linalg.det", A)
    return record("linalg_det", (A,), {})


@export("slogdet")
def slogdet(A):
    """``(sign, logabsdet)``; only logabsdet is differentiable."""
    square("linalg.slogdet", A)
    y = record("linalg_slogdet", (A,), {})
    return _SLOGDET(y[..., 0].detach(), y[..., 1])


@export("logdet")
def logdet(A) -> Tensor:
    """``log(det(A))``: nan where the determinant is negative, -inf where it is 0."""
    square("logdet", A)
    sign, logabs = slogdet(A)
    return where(sign < 0, math.nan, logabs)


@export("matrix_power")
def matrix_power(A, n) -> Tensor:
    """``A`` to the integer power ``n`` by repeated squaring (``n < 0``: of the inverse; ``n = 0``:
    the identity)."""
    _tensors("matrix_power", A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.matrix_power: A must be batches of square matrices, got shape {A.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise DTypeError(f"linalg.matrix_power: n must be an integer, got {n!r}")
    if n == 0:  # the identity, still attached to A's graph (a zero gradient), as in torch
        return where(np.ones(A.shape, dtype=bool), eye(A.shape[-1], A).broadcast_to(A.shape), A)
    if n < 0:
        A, n = inv(A), -n
    out, base = None, A
    while n:
        if n & 1:
            out = base if out is None else product("matmul", out, base)
        n >>= 1
        if n:
            base = product("matmul", base, base)
    return out if out is not A else out.clone()
