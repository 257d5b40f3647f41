"""Custom differentiable functions: torch.autograd.Function.

A subclass writes ``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs,
output)``) and ``backward(ctx, *grad_outputs)`` returning one gradient per input of ``forward``
(None for inputs that need none); ``apply`` runs forward without recording and records one node
whose backward is the class's. Several outputs share one joint node, so the tape's single reverse
loop gives the backward every output's gradient at once.

    >>> import torchlean as tl
    >>> class Cube(tl.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 3 * x * x * g
    >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> Cube.apply(x).sum().backward()
    >>> x.grad.tolist()
    [3.0, 12.0]
"""

from __future__ import annotations

from ..dtypes import is_float_np
from ..errors import AutogradError, ShapeError
from ..kernels import get_kernels
from .dispatch import device_of
from .record import Variable, attach, is_grad_enabled, no_grad, wrap
from .tape import Node


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: saved tensors (checked against in-place writes),
    ``needs_input_grad``, and any attribute the function sets."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self.dirty = ()
        self.non_differentiable = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._versions = tuple(getattr(t, "_vc", 0) if isinstance(t, Variable) else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        for k, (t, v) in enumerate(zip(self._saved, self._versions)):
            if v is not None and getattr(t, "_vc", 0) != v:
                raise AutogradError(f"backward: saved tensor {k} (shape {tuple(t._value.shape)}) of a custom "
                                    f"Function was modified by an in-place operation after it was saved")
        return tuple(self._saved)

    def mark_dirty(self, *tensors):
        self.dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = bool(value)


class Function:
    """Base class of custom differentiable functions (see the module docs)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise AutogradError("Function.forward must be overridden by the subclass")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise AutogradError("Function.backward must be overridden by the subclass to differentiate it")

    setup_context = None

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx(tuple(isinstance(a, Variable) and a.requires_grad for a in args))
        with no_grad():
            if cls.setup_context is not None:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        if not (is_grad_enabled() and any(ctx.needs_input_grad)):
            return out
        single = isinstance(out, Variable)
        outs = (out,) if single else tuple(out)
        inputs = [a for a in args if isinstance(a, Variable)]
        positions = [k for k, a in enumerate(args) if isinstance(a, Variable)]
        nondiff = {id(t) for t in ctx.non_differentiable}
        diff = [k for k, o in enumerate(outs) if isinstance(o, Variable) and is_float_np(o._value.dtype)
                and id(o) not in nondiff]
        fresh = []
        for o in outs:  # an input returned as is becomes a new tensor over the same values
            fresh.append(wrap(o._value) if isinstance(o, Variable) and any(o is a for a in inputs) else o)
        name = cls.__name__

        def run_backward(grads):
            with no_grad():
                res = cls.backward(ctx, *[None if g is None else wrap(g) for g in grads])
            res = res if isinstance(res, tuple) else (res,)
            if len(res) < len(args):
                res = res + (None,) * (len(args) - len(res))
            contribs = []
            for k in positions:
                r = res[k]
                if r is None or not ctx.needs_input_grad[k]:
                    contribs.append(None)
                    continue
                v = r._value if isinstance(r, Variable) else get_kernels(device_of(args[k]._value)).from_host(
                    r, args[k]._value.dtype)
                if tuple(v.shape) != tuple(args[k]._value.shape):
                    raise ShapeError(f"{name}.backward: gradient {k} has shape {tuple(v.shape)}, expected "
                                     f"{tuple(args[k]._value.shape)}")
                contribs.append(v)
            return tuple(contribs)

        if len(diff) == 1 and len(outs) == 1:
            o = fresh[0]
            attach(o, inputs, Node(name, o._value, True, (), lambda g: run_backward([g])))
            return o if single else type(out)(fresh)
        # Several outputs: a joint node holds their gradients side by side (flat), each output node
        # places its own there; the joint node's backward calls the Function's once with all of them.
        K = get_kernels(device_of(fresh[diff[0]]._value))
        sizes = [int(fresh[k]._value.size) for k in diff]
        dtype = fresh[diff[0]]._value.dtype
        joint = wrap(K.zeros((sum(sizes),), dtype))

        def joint_backward(gflat):
            grads, off = [None] * len(outs), 0
            for k, n in zip(diff, sizes):
                grads[k] = gflat[off:off + n].reshape(fresh[k]._value.shape).astype(fresh[k]._value.dtype)
                off += n
            for k, o in enumerate(fresh):
                if grads[k] is None and ctx.materialize_grads and isinstance(o, Variable):
                    grads[k] = K.zeros(tuple(o._value.shape), o._value.dtype)
            return run_backward(grads)

        attach(joint, inputs, Node(name, joint._value, True, (), joint_backward))
        off = 0
        for k, n in zip(diff, sizes):
            o = fresh[k]

            def place(g, off=off, n=n):
                flat = K.zeros((sum(sizes),), dtype)
                flat[off:off + n] = g.reshape(-1)
                return (flat,)
            attach(o, [joint], Node(name, o._value, True, (), place))
            off += n
        return type(out)(fresh) if not hasattr(out, "_fields") else type(out)(*fresh)


class once_differentiable:
    """Decorator accepted on ``backward`` (torch's): backward here is never differentiated again."""

    def __new__(cls, fn):
        return fn
