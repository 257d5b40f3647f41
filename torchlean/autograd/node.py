"""Tape nodes and the one reverse loop (:func:`sweep`) that every backward runs: the tape's,
a compiled IR program's and a compound op's."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shapes


class Node:
    """One recorded step: name, value, requires_grad, parents, backward, cleanup.

    A node recorded from the op registry keeps its rule, the kernels, what the rule's forward
    saved, which parents need gradients and the op's attributes (``rule``, ``K``, ``saved``, ``needs``,
    ``attrs``: what a differentiable backward re-reads) instead of a
    closure over them: no function is built per op on the eager hot path (its backward is
    ``rule.backward(K, saved, g, needs)``). ``backward`` reads as the usual
    ``backward(g) -> contributions`` either way.
    """

    __slots__ = ("name", "value", "requires_grad", "parents", "_bwd", "cleanup", "rule", "K", "saved", "needs",
                 "attrs")

    def __init__(self, name, value, requires_grad, parents=(), backward=None, cleanup=None, rule=None, K=None,
                 saved=None, needs=None, attrs=None):
        self.name = name
        self.value = value
        self.requires_grad = requires_grad
        self.parents = parents
        self._bwd = backward
        self.cleanup = cleanup
        self.rule = rule
        self.K = K
        self.saved = saved
        self.needs = needs
        self.attrs = attrs

    @property
    def backward(self):
        rule = self.rule
        if rule is None:
            return self._bwd
        K, saved, needs = self.K, self.saved, self.needs
        return lambda g: rule.backward(K, saved, g, needs)

    @backward.setter
    def backward(self, fn):
        self._bwd = fn
        self.rule = self.K = self.saved = self.needs = None

    def __repr__(self):
        shape = getattr(self.value, "shape", None)
        return f"Node({self.name!r}, shape={shape}, parents={list(self.parents)}, requires_grad={self.requires_grad})"


class Released:
    """What a node keeps of a value it no longer holds: shape, dtype and device (the reverse loop
    checks contributions against the shape, and a dense backward fills unreached nodes with zeros of
    that shape, dtype and device). The front end drops a recorded result's value once no tensor
    holds it and its op's backward did not save it (see :class:`torchlean.autograd.record.Variable`),
    so the tape keeps what backward needs and nothing more, as torch's graph keeps only its saved
    tensors."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = shape, dtype, device

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Released(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


_HOST = (np.ndarray, np.generic)


def released(value) -> Released:
    """The :class:`Released` stand-in of ``value`` (itself when it is one already)."""
    if isinstance(value, Released):
        return value
    return Released(tuple(value.shape), value.dtype, "cpu" if isinstance(value, _HOST) else "cuda")


def _accumulate(nodes, grads, owned, p, c, op):
    """Add contribution ``c`` to the gradient of node ``p`` (in place once the sum is ours)."""
    if isinstance(c, np.generic):
        c = np.asarray(c)
    pv = nodes[p].value
    if c.shape != pv.shape:
        raise ShapeError(f"{op}: gradient for parent {p} has shape {fmt_shapes(c.shape)}, "
                         f"expected {fmt_shapes(pv.shape)}")
    old = grads.get(p) if isinstance(grads, dict) else grads[p]
    if old is None:
        grads[p] = c
    elif p in owned:
        old += c
    else:
        s = old + c
        grads[p] = np.asarray(s) if isinstance(s, np.generic) else s  # 0-d sums are NumPy scalars
        owned.add(p)


def _accumulate_region(nodes, grads, owned, p, g, region, K, op):
    """Add ``g`` at ``key`` of the gradient of node ``p`` (``region = (shape, key)``, see
    :class:`~torchlean.autograd.rules.registry.Rule`): the first contribution is the zero-padded
    array, later ones are added in place into a gradient that is ours (a copy first otherwise)."""
    shape, key = region
    pv = nodes[p].value
    if tuple(shape) != tuple(pv.shape):
        raise ShapeError(f"{op}: gradient for parent {p} has shape {fmt_shapes(tuple(shape))}, "
                         f"expected {fmt_shapes(pv.shape)}")
    old = grads.get(p) if isinstance(grads, dict) else grads[p]
    if old is None:
        grads[p] = K.basic_index_bwd(g, shape, key)
    else:
        if p not in owned:
            old = grads[p] = K.copy(old)
        K.basic_index_add(old, key, g)
    owned.add(p)


def sweep(nodes, grads, start, keep=(), at=None, hooks=None, free=False, ready=None) -> None:
    """Reverse accumulation over ``nodes[start], ..., nodes[0]``: the one backward loop, of the
    tape and of compiled IR programs.

    ``grads`` (a list, or a dict by node id) holds the seeds on entry and the gradients on exit.
    Every node that consumes a node's value has a larger id than that node (leaves excepted: the
    loop only adds to their gradients), so each node that requires grad and has a gradient runs
    its backward once, after every consumer has added to that gradient. Contributions are
    shape-checked against the parent's value; parents with ``requires_grad=False`` receive
    nothing. With a dict, every gradient not in ``keep`` is freed as soon as its node has
    consumed it. ``at`` (a one-element list), when given, holds the id of the node whose backward
    runs, so that a caller can name the node an error came from. ``hooks`` (node id -> functions of the
    gradient returning a replacement or None) run on a node's gradient once it is complete.
    With ``free``, each node lets go of its rule, what its forward saved and its value (set to None:
    no contribution reaches it any more) as soon as its backward has run (the graph cannot be walked again: the caller marks it released, also
    when the loop raises), so saved activations are freed while the gradients build up.
    ``ready`` (node id -> function of the gradient) is called with a node's gradient as soon as it is
    complete (after its hooks): how a leaf's gradient is accumulated, and its post-accumulate hooks
    run, while the backward goes on (the buckets of DistributedDataParallel start their all-reduce).
    """
    owned = set()
    is_dict = isinstance(grads, dict)
    for i in range(start, -1, -1):
        g = grads.get(i) if is_dict else grads[i]
        if g is None:
            continue
        if hooks is not None and i in hooks:
            for h in hooks[i]:
                g2 = h(g)
                if g2 is not None:
                    g = g2
            grads[i] = g
        if ready is not None and i in ready:
            ready[i](g)
        node = nodes[i]
        if node.requires_grad and (node.rule is not None or node._bwd is not None):
            if at is not None:
                at[0] = i
            rule = node.rule
            if rule is not None and rule.region is not None:
                p = node.parents[0]
                if node.needs[0] and nodes[p].requires_grad:
                    _accumulate_region(nodes, grads, owned, p, g, rule.region(node.saved), node.K, node.name)
            else:
                contribs = rule.backward(node.K, node.saved, g, node.needs) if rule is not None else node._bwd(g)
                for p, c in zip(node.parents, contribs):
                    if c is None or not nodes[p].requires_grad:
                        continue
                    _accumulate(nodes, grads, owned, p, c, node.name or "op")
            if free:
                node.rule = node.K = node.saved = node.needs = node._bwd = node.cleanup = node.value = None
        if is_dict and i not in keep:
            del grads[i]
