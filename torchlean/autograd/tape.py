"""The autograd tape of the seeds: grow-only nodes, ids as indices.

Invariants (checked where they can be violated):

* a node's id is its index, and every parent id is smaller: the tape is already a
  topological order, so reverse accumulation is one loop from the output down;
* ``requires_grad`` of a node is the OR of its parents' (leaves choose theirs);
* a backward rule receives the node's cotangent and returns one contribution per
  parent (``None`` where nothing flows); contributions are shape-checked against
  the parent's value, and parents with ``requires_grad=False`` receive nothing;
* unreached nodes get zeros without their rules running (dense backward).

    >>> import numpy as np
    >>> from torchlean.autograd import Tape
    >>> t = Tape()
    >>> x = t.leaf(np.array([1.0, 2.0]))
    >>> y = t.mul(x, x)
    >>> s = t.sum(y)
    >>> t.backward(s)[x].tolist()
    [2.0, 4.0]
"""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float_np
from ..errors import AutogradError, DTypeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..spec import SPEC
from .dispatch import device_of, forward_op
from .node import Node, Released, sweep


def zeros_for(v):
    """The zero gradient of a node whose value is ``v`` (an array or its :class:`Released` stand-in)."""
    dev = v.device if isinstance(v, Released) else device_of(v)
    return get_kernels(dev).zeros(v.shape, v.dtype if is_float_np(v.dtype) else np.float32)


def run_op(name, vals, attrs, fast=None, needs=None):
    """Shape-check and run op ``name`` on values; returns ``(y, backward)``.

    ``backward(g, needs)`` returns one cotangent per input; when ``needs`` is given here,
    ``backward(g)`` uses it. In reference mode (``fast_kernels=False``, CPU only) the spec's
    forward and VJP run (see :func:`~torchlean.autograd.dispatch.forward_op`).
    """
    y, rule, K, saved = forward_op(name, vals, attrs, fast)

    def backward(g, needs=needs, _r=rule, _K=K, _s=saved):
        return (None,) * len(vals) if _r is None else _r.backward(_K, _s, g, needs)
    return y, backward


class Tape:
    """A grow-only list of :class:`Node`; ids are indices (API.md "Tape").

    ``fast_kernels`` (True or False) overrides the option of that name for this tape's ops.
    """

    def __init__(self, fast_kernels: bool | None = None):
        self.nodes: list[Node] = []
        self.fast_kernels = fast_kernels
        self.released = False

    # -- reading -----------------------------------------------------------------------------
    def __len__(self):
        return len(self.nodes)

    def node(self, i: int) -> Node:
        if not (isinstance(i, (int, np.integer)) and 0 <= i < len(self.nodes)):
            raise TorchLeanError(f"tape: node id {i!r} out of range (tape has {len(self.nodes)} nodes)")
        return self.nodes[i]

    def value(self, i: int):
        return self.node(i).value

    # -- building ----------------------------------------------------------------------------
    def _push(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def leaf(self, value, name=None, requires_grad=True) -> int:
        """Add a leaf; its id is ``len(tape)`` before the call."""
        if not hasattr(value, "shape"):
            value = np.asarray(value)
        if requires_grad and not is_float_np(value.dtype):
            raise DTypeError(f"leaf: only float values can require gradients, got dtype {value.dtype}")
        return self._push(Node(name, value, bool(requires_grad)))

    def _check_parents(self, op, ids):
        n = len(self.nodes)
        for i in ids:
            if not (isinstance(i, (int, np.integer)) and 0 <= i < n):
                raise TorchLeanError(f"{op}: parent id {i!r} is not a node of this tape (size {n})")

    def record(self, name, parents, value, backward, requires_grad=None, cleanup=None) -> int:
        """Append a computed node; ``backward(g) -> tuple`` of one contribution per parent."""
        if requires_grad is None:
            requires_grad = any(self.nodes[p].requires_grad for p in parents)
        return self._push(Node(name, value, requires_grad, tuple(parents),
                               backward if requires_grad else None, cleanup))

    def op(self, name: str, *ids: int, **attrs) -> int:
        """Run registry op ``name`` on the values of nodes ``ids`` and record it."""
        self._check_parents(name, ids)
        vals = [self.nodes[i].value for i in ids]
        y, rule, K, saved = forward_op(name, vals, attrs, self.fast_kernels)
        parents = tuple(ids)
        needs = tuple(self.nodes[p].requires_grad for p in parents)
        if True not in needs or rule is None:  # (rule None: a result that is not a float)
            return self._push(Node(name, y, False, parents))
        return self._push(Node(name, y, True, parents, None, None, rule, K, saved, needs))

    def unary(self, op_name, x_id, forward, backward) -> int:
        """Generic unary op: ``forward(x) -> y``, ``backward(x, dy) -> dx``."""
        self._check_parents(op_name, (x_id,))
        x = self.nodes[x_id].value
        y = forward(x)
        return self.record(op_name, (x_id,), y, lambda g: (backward(x, g),))

    def binary(self, op_name, a_id, b_id, forward, backward) -> int:
        """Generic binary op: ``forward(a, b) -> y``, ``backward(a, b, dy) -> (da, db)``."""
        self._check_parents(op_name, (a_id, b_id))
        a, b = self.nodes[a_id].value, self.nodes[b_id].value
        y = forward(a, b)
        return self.record(op_name, (a_id, b_id), y, lambda g: tuple(backward(a, b, g)))

    # -- reverse accumulation ----------------------------------------------------------------
    def _seed(self, out_id, seed):
        if self.released:
            raise AutogradError("backward: this tape was released; record the computation again")
        self._check_parents("backward", (out_id,))
        y = self.nodes[out_id].value
        if seed is None:
            return get_kernels(device_of(y)).full(y.shape, 1.0, y.dtype)
        if tuple(seed.shape) != tuple(y.shape):
            raise ShapeError(f"backward: seed shape {tuple(seed.shape)} does not match output shape {tuple(y.shape)}")
        return seed

    def backward(self, out_id, seed=None) -> list:
        """Dense reverse accumulation: a gradient for every id, zeros where unreached.

        ``out_id`` is one output's id (``seed`` its cotangent, ones by default), or a dense seed
        list: one entry per node, a cotangent or None, seeding several outputs at once."""
        if isinstance(out_id, (list, tuple)):
            if len(out_id) != len(self.nodes):
                raise ShapeError(f"backward: a dense seed list needs {len(self.nodes)} entries (one per node), "
                                 f"got {len(out_id)}")
            seeded = [i for i, s in enumerate(out_id) if s is not None]
            if not seeded:
                raise AutogradError("backward: the dense seed list seeds no node")
            grads = [None] * len(self.nodes)
            for i in seeded:
                grads[i] = self._seed(i, out_id[i])
            out_id = seeded[-1]
        else:
            grads = [None] * len(self.nodes)
            grads[out_id] = self._seed(out_id, seed)
        sweep(self.nodes, grads, out_id)
        for i, g in enumerate(grads):
            if g is None:
                grads[i] = zeros_for(self.nodes[i].value)
        return grads

    def backward_sparse(self, out_id: int, seed=None, retain=(), fill_zeros=True) -> dict:
        """Reverse accumulation keeping only the gradients of ``retain``.

        Every other gradient is freed as soon as its node's rule has consumed it.
        Unreached retained ids get zeros, or are left out with ``fill_zeros=False``.
        """
        g0 = self._seed(out_id, seed)
        keep = set(int(i) for i in retain)
        self._check_parents("backward_sparse", tuple(keep))
        grads = {out_id: g0}
        sweep(self.nodes, grads, out_id, keep)
        out = {}
        for i in keep:
            g = grads.get(i)
            if g is None and not fill_zeros:
                continue
            if g is None:
                g = zeros_for(self.nodes[i].value)
            out[i] = g
        return out

    def release(self) -> None:
        """Free every node's backward closure and cleanup scratch (the tape cannot backward again)."""
        for n in self.nodes:
            n.backward = None
            n.cleanup = None
        self.released = True


def _make_method(name):
    def method(self, *ids, **attrs):
        return self.op(name, *ids, **attrs)
    method.__name__ = name
    method.__doc__ = f"Record op ``{name}`` (see ``torchlean.spec.SPEC[{name!r}]``); returns the new node id."
    return method


def install_op_methods():
    """One tape method per op of the registry (``t.add(a, b)``, ``t.matmul(a, b)``, ...)."""
    for name in SPEC:
        if not hasattr(Tape, name):
            setattr(Tape, name, _make_method(name))
