"""Runtime rules of the shape ops (see :mod:`torchlean.spec.shape` for the meaning).

reshape, flatten, squeeze and unsqueeze return views of their (contiguous)
input: they share its buffer, the node does not own it (DESIGN.md). Every other
op returns a row-major contiguous value. Broadcasting and swap_adjacent run
through the seeds' kernels (``broadcast_to`` / ``reduce_from_broadcast_to``,
``swap_adjacent_at_depth``); the rest through the shape family's data movement
(``permute``, ``concat``, ``stack``, ``basic_index`` and its adjoint).
"""

from __future__ import annotations

from ...shape import broadcast_plan, norm_axis
from ...spec.shape import (along, axis_of, check_same_dtype, flatten_shape, flip_axes, inverse_permutation,
                               normalize_index, permutation, select_plan, shape_arg, slice_plan,
                               squeeze_shape, swap_depth, transpose_perm, unsqueeze_shape)
from .registry import defrule


def _view(K, x, shape):
    # Values are contiguous, so reshape never copies here.
    return K.ascontiguous(x).reshape(shape)


def _view_rule(name, out_shape):
    def fwd(K, x, **attrs):
        return _view(K, x, out_shape(x.shape, **attrs)), x.shape

    def bwd(K, shape, g, n):
        return (_view(K, g, shape),)

    defrule(name, fwd, bwd)


_view_rule("reshape", lambda s, *, shape: shape_arg("reshape", shape))
_view_rule("flatten", lambda s, *, start_dim=0, end_dim=-1: flatten_shape(s, start_dim, end_dim))
_view_rule("unsqueeze", lambda s, *, dim: unsqueeze_shape("unsqueeze", s, dim))
_view_rule("squeeze", lambda s, *, dim=None: squeeze_shape("squeeze", s, dim))


def _permuted(K, x, p):
    if x.ndim < 2 or p == tuple(range(x.ndim)):
        return K.copy(x)
    return K.permute(x, p)


def _transpose_fwd(K, x, *, dim0, dim1):
    p = transpose_perm("transpose", x.ndim, dim0, dim1)
    return _permuted(K, x, p), p


def _permute_fwd(K, x, *, dims):
    p = permutation("permute", dims, x.ndim)
    return _permuted(K, x, p), inverse_permutation(p)


defrule("transpose", _transpose_fwd, lambda K, p, g, n: (_permuted(K, g, p),))
defrule("permute", _permute_fwd, lambda K, p, g, n: (_permuted(K, g, p),))


def _swap_fwd(K, x, *, depth):
    d = swap_depth("swap_adjacent", depth, x.ndim)
    if d is None:
        return K.copy(x), None
    y = K.swap_adjacent_at_depth(x, x.shape, d)
    return y, (y.shape, d)


def _swap_bwd(K, s, g, n):
    if s is None:
        return (g,)
    shape, d = s
    return (K.swap_adjacent_at_depth(g, shape, d),)


defrule("swap_adjacent", _swap_fwd, _swap_bwd)


def _broadcast_fwd(K, x, *, shape):
    plan = broadcast_plan(tuple(x.shape), shape_arg("broadcast_to", shape), "broadcast_to")
    # 0-d in or out: the kernels' contiguous copies would give shape (1,), so take the direct route.
    y = K.copy(x) if not plan[1] else K.broadcast_to(x, *plan)
    return y, plan


def _broadcast_bwd(K, plan, g, n):
    if not plan[0]:
        return (K.sum(g, None, False),)
    return (K.reduce_from_broadcast_to(g, *plan),)


defrule("broadcast_to", _broadcast_fwd, _broadcast_bwd)


def _concat_fwd(K, *xs, axis=0):
    check_same_dtype("concat", xs)
    a = axis_of("concat", axis, xs[0].ndim)
    offs = [0]
    for x in xs:
        offs.append(offs[-1] + x.shape[a])
    return K.concat(xs, a), (a, offs)


def _concat_bwd(K, s, g, needs):
    a, offs = s
    return tuple(K.basic_index(g, along(a, slice(offs[i], offs[i + 1]))) if nd else None
                 for i, nd in enumerate(needs))


defrule("concat", _concat_fwd, _concat_bwd)


def _stack_fwd(K, *xs, axis=0):
    check_same_dtype("stack", xs)
    a = norm_axis(axis, xs[0].ndim + 1, "stack")
    return K.stack(xs, a), a


def _stack_bwd(K, a, g, needs):
    return tuple(K.basic_index(g, along(a, i)) if nd else None for i, nd in enumerate(needs))


defrule("stack", _stack_fwd, _stack_bwd)


def _slice_fwd(K, x, *, axis, start=None, stop=None, step=1):
    a, s = slice_plan("slice", x.shape, axis, start, stop, step)
    key = along(a, s)
    return K.basic_index(x, key), (x.shape, key)


def _select_fwd(K, x, *, axis, index):
    a, i = select_plan("select", x.shape, axis, index)
    key = along(a, i)
    return K.basic_index(x, key), (x.shape, key)


def _region(saved):
    return saved  # (input shape, key)


defrule("slice", _slice_fwd, lambda K, s, g, n: (K.basic_index_bwd(g, *s),), region=_region)
defrule("select", _select_fwd, lambda K, s, g, n: (K.basic_index_bwd(g, *s),), region=_region)


def _getitem_fwd(K, x, *, index):
    key, out_shape, view_shape = normalize_index("getitem", x.shape, index)
    # The trailing Ellipsis keeps a full integer index an array (NumPy would return a scalar).
    key = key + (Ellipsis,)
    return K.basic_index(x, key).reshape(out_shape), (x.shape, key, view_shape)


def _getitem_bwd(K, s, g, n):
    shape, key, view_shape = s
    return (K.basic_index_bwd(K.ascontiguous(g).reshape(view_shape), shape, key),)


defrule("getitem", _getitem_fwd, _getitem_bwd)

def _flip_fwd(K, x, *, dims):
    axes = flip_axes("flip", dims, x.ndim)
    return K.flip(x, axes), axes


defrule("flip", _flip_fwd, lambda K, axes, g, n: (K.flip(g, axes),))

# detach shares its input's buffer (like torch.Tensor.detach) and passes nothing back.
defrule("detach", lambda K, x: (x, None), lambda K, s, g, n: (None,))
