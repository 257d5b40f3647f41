"""torch.autograd.functional: Jacobians, Hessians and their products, from reverse-mode passes.

``jacobian`` takes one reverse pass per output entry; ``hessian`` is the Jacobian of the gradient
(computed with ``create_graph=True``); ``jvp`` and ``hvp`` use the double-backward identity
(the VJP of a VJP is a JVP), so every product costs a few reverse passes and no Jacobian.

    >>> import torchlean as tl
    >>> from torchlean.autograd.functional import jacobian, hessian
    >>> jacobian(lambda x: x * x, tl.tensor([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    >>> hessian(lambda x: (x ** 3).sum(), tl.tensor([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
"""

from __future__ import annotations

from ..dtypes import is_float_np
from ..errors import AutogradError, DTypeError
from ..kernels import get_kernels
from .dispatch import device_of
from .record import Variable, enable_grad, grad, record, wrap


def _as_tuple(x):
    return (x,) if isinstance(x, Variable) else tuple(x)


def _leaves(inputs, op):
    out = []
    for k, x in enumerate(_as_tuple(inputs)):
        if not isinstance(x, Variable):
            raise AutogradError(f"{op}: inputs[{k}] is a {type(x).__name__}, expected a tensor")
        if not is_float_np(x._value.dtype):
            raise DTypeError(f"{op}: inputs[{k}] must be floating point, got {x._value.dtype}")
        leaf = wrap(x._value)
        leaf.requires_grad = True
        out.append(leaf)
    return tuple(out)


def _zeros_like(x):
    return wrap(get_kernels(device_of(x._value)).zeros(tuple(x._value.shape), x._value.dtype))


def _grads(outputs, inputs, seeds, create_graph):
    """The VJP of ``outputs`` seeded by ``seeds``: zeros for inputs the outputs do not use."""
    gs = grad(outputs, inputs, seeds, retain_graph=True, create_graph=create_graph, allow_unused=True)
    return tuple(_zeros_like(x) if g is None else g for x, g in zip(inputs, gs))


def _call(func, xs, op):
    with enable_grad():
        out = func(*xs)
    outs = _as_tuple(out)
    for k, o in enumerate(outs):
        if not isinstance(o, Variable):
            raise AutogradError(f"{op}: output {k} of the function is a {type(o).__name__}, expected a tensor")
    return out, outs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``; ``v`` may be omitted for a one-element output."""
    xs = _leaves(inputs, "vjp")
    out, outs = _call(func, xs, "vjp")
    vs = [None] * len(outs) if v is None else list(_as_tuple(v))
    live = [(o, s) for o, s in zip(outs, vs) if o.requires_grad]
    if not live:
        res = tuple(_zeros_like(x) for x in xs)
    else:
        res = _grads([o for o, _ in live], xs, [s for _, s in live], create_graph)
    return out, res[0] if isinstance(inputs, Variable) else res


def _fill(like, value):
    return wrap(get_kernels(device_of(like._value)).full(tuple(like._value.shape), value, like._value.dtype))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-backward identity: J v = d/du (u^T J) v."""
    xs = _leaves(inputs, "jvp")
    out, outs = _call(func, xs, "jvp")
    vs = [_fill(x, 1.0) for x in xs] if v is None else list(_as_tuple(v))
    us = []
    for o in outs:
        u = _fill(o, 0.0)
        u.requires_grad = True
        us.append(u)
    res = []
    g = _grads(list(outs), xs, us, True)
    total = None
    for gi, vi in zip(g, vs):
        term = record("sum", (record("mul", (gi, vi), {}),), {})
        total = term if total is None else record("add", (total, term), {})
    jv = grad(total, us, retain_graph=create_graph, create_graph=create_graph, allow_unused=True)
    res = tuple(_zeros_like(o) if j is None else j for o, j in zip(outs, jv))
    return out, res[0] if isinstance(out, Variable) else res


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d func / d inputs: for one input and one output a tensor of shape ``out.shape + in.shape``;
    tuples of those for tuples (indexed ``[output][input]``)."""
    if strategy != "reverse-mode":
        raise AutogradError(f"jacobian: strategy {strategy!r} is not supported (reverse-mode only)")
    xs = _leaves(inputs, "jacobian")
    out, outs = _call(func, xs, "jacobian")
    rows = []
    for o in outs:
        n = int(o._value.size)
        per_input = [[] for _ in xs]
        K = get_kernels(device_of(o._value))
        for j in range(n):
            seed = K.zeros((n,), o._value.dtype)
            seed[j] = 1
            if not o.requires_grad:
                gs = tuple(_zeros_like(x) for x in xs)
            else:
                gs = _grads([o], xs, [wrap(seed.reshape(tuple(o._value.shape)))], create_graph)
            for k, gk in enumerate(gs):
                per_input[k].append(gk)
        blocks = []
        for k, x in enumerate(xs):
            shape = tuple(o._value.shape) + tuple(x._value.shape)
            if n == 0:
                blocks.append(wrap(K.zeros(shape, x._value.dtype)))
                continue
            stacked = record("stack", tuple(per_input[k]), {"axis": 0})
            blocks.append(record("reshape", (stacked,), {"shape": shape}))
        rows.append(blocks)
    single_in, single_out = isinstance(inputs, Variable), isinstance(out, Variable)
    if single_in and single_out:
        return rows[0][0]
    if single_out:
        return tuple(rows[0])
    if single_in:
        return tuple(r[0] for r in rows)
    return tuple(tuple(r) for r in rows)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with a one-element output: the Jacobian of its gradient."""
    single = isinstance(inputs, Variable)

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Variable) or out._value.size != 1:
            raise AutogradError("hessian: the function must return a tensor with a single element")
        gs = _grads([out], xs, [None], True)
        return gs[0] if single else gs

    return jacobian(gradient, inputs, create_graph=create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a function with a one-element output."""
    xs = _leaves(inputs, "vhp")
    out, _ = _call(func, xs, "vhp")
    if out._value.size != 1:
        raise AutogradError("vhp: the function must return a tensor with a single element")
    gs = _grads([out], xs, [None], True)
    vs = list(_as_tuple(v)) if v is not None else [_fill(x, 1.0) for x in xs]
    total = None
    for g, vi in zip(gs, vs):
        term = record("sum", (record("mul", (g, vi), {}),), {})
        total = term if total is None else record("add", (total, term), {})
    res = _grads([total], xs, [None], create_graph)
    return out, res[0] if isinstance(inputs, Variable) else res


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``: the Hessian is symmetric, so this is :func:`vhp`."""
    return vhp(func, inputs, v, create_graph, strict)
