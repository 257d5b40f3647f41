"""Recording: every op that a front-end call runs goes through :func:`record`.

``record(op, inputs, attrs)`` runs op ``op`` on the values of ``inputs`` (front-end tensors, all
:class:`Variable`) through the dispatch (:func:`~torchlean.autograd.dispatch.forward_op`) and,
when grad mode is on and an input requires grad, records it onto a :class:`GraphTape` (the seeds'
tape with the front end's bookkeeping):

* a computation that starts from leaves opens a new tape;
* an op whose inputs live on two tapes appends the smaller tape onto the larger (ids shift by an
  offset, the tape stays grow-only);
* a tape lives as long as some tensor recorded on it, so an evaluation loop without ``no_grad``
  does not accumulate graphs, and :func:`backward` without ``retain_graph`` releases the tape.

The IR tracer (:func:`tracing`) sees every recorded op, in any grad mode.

    >>> import torchlean as tl
    >>> x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0, 6.0]
"""

from __future__ import annotations

import contextlib
import threading

from ..errors import AutogradError, ShapeError
from ..kernels import get_kernels
from .dispatch import device_of, forward_op
from .tape import Node, Tape


class Variable:
    """The autograd state of a front-end tensor: its value, the tape and node id it was recorded
    as (None and -1 for a leaf), whether it requires grad, and its accumulated gradient."""

    __slots__ = ("_value", "_tape", "_id", "requires_grad", "_grad", "__weakref__")


#: The class :func:`record` gives its results (the front end's Tensor, see :func:`set_result_class`).
_RESULT = [Variable]


def set_result_class(cls) -> None:
    """Make :func:`record` return instances of ``cls`` (a subclass of :class:`Variable`)."""
    _RESULT[0] = cls


# ---- grad mode ------------------------------------------------------------------------------

class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.tracer = None


_state = _State()


def is_grad_enabled() -> bool:
    return _state.grad_enabled


class _GradMode(contextlib.ContextDecorator):
    """Set grad mode to ``enabled`` inside (context manager and decorator); restore it after."""

    enabled = True

    def __enter__(self):
        self._prev = _state.grad_enabled
        _state.grad_enabled = self.enabled
        return self

    def __exit__(self, *exc):
        _state.grad_enabled = self._prev
        return False


class no_grad(_GradMode):
    """Ops inside record nothing (context manager and decorator)."""

    enabled = False


class enable_grad(_GradMode):
    """Ops inside record again, under an outer ``no_grad`` too."""

    enabled = True


@contextlib.contextmanager
def tracing(tracer):
    """Call ``tracer(op, inputs, attrs, out)`` for every op this thread records, in any grad mode."""
    prev = _state.tracer
    _state.tracer = tracer
    try:
        yield tracer
    finally:
        _state.tracer = prev


# ---- the front end's tape -------------------------------------------------------------------

class GraphTape(Tape):
    """A :class:`Tape` that also knows which leaf tensors its leaf nodes stand for."""

    def __init__(self):
        # Tape.__init__ inlined: a tape opens for every computation that starts from leaves.
        self.nodes = []
        self.fast_kernels = None
        self.released = False
        self.leaves: list = []          # (node id, Variable)
        self.leaf_of: dict = {}         # id(Variable) -> node id
        self.merged_into = None
        self.merge_offset = 0

    def leaf_id(self, t: Variable) -> int:
        nid = self.leaf_of.get(id(t))
        if nid is None:
            nid = self._push(Node(None, t._value, True))
            self.leaves.append((nid, t))
            self.leaf_of[id(t)] = nid
        return nid

    def absorb(self, other: "GraphTape") -> None:
        """Append ``other``'s nodes (ids shifted by len(self)); ``other`` forwards to self."""
        off = len(self.nodes)
        for n in other.nodes:
            n.parents = tuple(p + off for p in n.parents)
            self.nodes.append(n)
        for nid, t in other.leaves:
            self.leaves.append((nid + off, t))
            self.leaf_of.setdefault(id(t), nid + off)
        other.nodes = []
        other.leaves = []
        other.leaf_of = {}
        other.merged_into = self
        other.merge_offset = off


def _stale_backward(g):
    raise AutogradError("backward: trying to backward through a graph a second time (or a graph already "
                        "released); pass retain_graph=True to the first backward()")


def resolve(t: Variable):
    """``(tape, node id)`` of ``t`` after the merges of its tape (updated on ``t``)."""
    tape = t._tape
    if tape is not None and tape.merged_into is not None:
        off = 0
        while tape.merged_into is not None:
            off += tape.merge_offset
            tape = tape.merged_into
        t._tape = tape
        t._id += off
    return tape, t._id


def _constant_id(nodes: list, t: Variable) -> int:
    """A node for an input that needs no gradient (its value only)."""
    nodes.append(Node(None, t._value, False))
    return len(nodes) - 1


def wrap(value) -> Variable:
    """A new leaf of the result class holding ``value`` (no copy)."""
    out = Variable.__new__(_RESULT[0])
    out._value = value
    out._tape = None
    out._id = -1
    out._grad = None
    out.requires_grad = False
    return out


# ---- record ---------------------------------------------------------------------------------

def record(op: str, inputs: tuple, attrs: dict) -> Variable:
    """Run op ``op`` on the values of ``inputs`` and record it when an input requires grad and the
    result is a float (comparisons, indices and integer casts carry no gradient, as in PyTorch).

    The eager hot path: one pass finds the tape to record on (merging tapes when the inputs'
    computations meet), a second gives each input its node id.
    """
    y, rule, K, saved = forward_op(op, [t._value for t in inputs], attrs)
    out = wrap(y)
    st = _state
    if st.tracer is not None:
        st.tracer(op, inputs, attrs, out)
    if not st.grad_enabled:
        return out
    n_in = len(inputs)
    if 0 < n_in <= 2:
        # The common case first: the inputs are on one live tape (or are leaves and constants,
        # which are on none), so no tape is merged or opened.
        a = inputs[0]
        b = inputs[1] if n_in == 2 else None
        tape = a._tape
        if tape is None and b is not None:
            tape = b._tape
        if tape is not None and tape.merged_into is None and not tape.released and \
                (b is None or b._tape is None or b._tape is tape) and (a._tape is None or a._tape is tape):
            ra = a.requires_grad
            rb = b is not None and b.requires_grad
            if not (ra or rb) or rule is None:
                return out
            nodes = tape.nodes
            ia = a._id if a._tape is not None else (tape.leaf_of.get(id(a)) if ra else None)
            if ia is None:
                ia = tape.leaf_id(a) if ra else _constant_id(nodes, a)
            if b is None:
                parents, needs = (ia,), (ra,)
            else:
                ib = b._id if b._tape is not None else (tape.leaf_of.get(id(b)) if rb else None)
                if ib is None:
                    ib = tape.leaf_id(b) if rb else _constant_id(nodes, b)
                parents, needs = (ia, ib), (ra, rb)
            out._id = len(nodes)
            nodes.append(Node(op, y, True, parents, None, None, rule, K, saved, needs))
            out._tape = tape
            out.requires_grad = True
            return out
    needs = tuple([t.requires_grad for t in inputs])
    if True not in needs or rule is None:
        return out
    target = None
    for t in inputs:
        if t.requires_grad:
            tape = t._tape
            if tape is None:
                continue
            if tape.merged_into is not None:
                tape, _ = resolve(t)
            if tape.released:
                continue
            if target is None:
                target = tape
            elif tape is not target:
                big, small = (target, tape) if len(target.nodes) >= len(tape.nodes) else (tape, target)
                big.absorb(small)
                target = big
    if target is None:
        target = GraphTape()
    nodes = target.nodes
    ids = []
    for t in inputs:
        tape = t._tape
        if tape is not None:
            if tape is target:
                i = t._id
            else:
                tape, i = resolve(t)
                if tape is not target:  # recorded on a released tape: backward through it must fail
                    i = len(nodes)
                    nodes.append(Node("released", t._value, True, (), _stale_backward))
        elif t.requires_grad:
            i = target.leaf_of.get(id(t))
            if i is None:
                i = target.leaf_id(t)
        else:
            i = _constant_id(nodes, t)
        ids.append(i)
    out._id = len(nodes)
    nodes.append(Node(op, y, True, tuple(ids), None, None, rule, K, saved, needs))
    out._tape = target
    out.requires_grad = True
    return out


# ---- backward -------------------------------------------------------------------------------

def accumulate_grad(t: Variable, g) -> None:
    """Add gradient array ``g`` to ``t.grad`` (a new array: a gradient may be shared between leaves)."""
    t._grad = wrap(g) if t._grad is None else wrap(t._grad._value + g)


def backward(t: Variable, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(t)/d(leaf) into every reachable leaf's ``.grad`` (PyTorch semantics).

    ``gradient`` is the seed (a Variable or an array-like of ``t``'s shape); None for a
    one-element ``t``. Without ``retain_graph`` the tape is released afterwards.
    """
    shape = tuple(t._value.shape)
    K = get_kernels(device_of(t._value))
    if gradient is None:
        if t._value.size != 1:
            raise AutogradError(f"backward: grad can be implicitly created only for scalar outputs; "
                                f"this tensor has shape {shape} (pass gradient=...)")
        seed = None
    else:
        seed = gradient._value if isinstance(gradient, Variable) else K.from_host(gradient, t._value.dtype)
        if tuple(seed.shape) != shape:
            raise ShapeError(f"backward: gradient shape {tuple(seed.shape)} does not match output shape {shape}")
    if not t.requires_grad:
        raise AutogradError("backward: tensor does not require grad and has no recorded graph")
    if t._tape is None:  # a leaf: d t / d t = seed
        accumulate_grad(t, seed if seed is not None else K.full(shape, 1.0, t._value.dtype))
        return
    tape, i = resolve(t)
    if tape.released:
        _stale_backward(None)
    grads = tape.backward_sparse(i, seed, retain=[nid for nid, _ in tape.leaves], fill_zeros=False)
    for nid, leaf in tape.leaves:
        g = grads.get(nid)
        if g is not None:
            accumulate_grad(leaf, g)
    if not retain_graph:
        tape.release()


def recorded_leaves(t: Variable) -> list:
    """The leaves that ``t``'s recorded computation reaches and that require grad, in tape order
    (each once)."""
    if t._tape is None:
        return [t] if t.requires_grad else []
    tape, _ = resolve(t)
    out, seen = [], set()
    for _, leaf in tape.leaves:
        if leaf.requires_grad and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out
