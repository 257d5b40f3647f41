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
import functools
import threading
import weakref

from ..errors import AutogradError, ShapeError
from ..kernels import get_kernels
from .dispatch import device_of, forward_op
from .rules.registry import INFER
from .node import Released, released, sweep
from .tape import Node, Tape


class Variable:
    """The autograd state of a front-end tensor: its value, the tape and node id it was recorded
    as (None and -1 for a leaf), whether it requires grad, and its accumulated gradient."""

    __slots__ = ("_value", "_tape", "_id", "requires_grad", "_grad", "__weakref__",
                 # Set only when used (reading an unset one means its default): the in-place write count
                 # (0), the (tensor, index) a basic-index result was read from (None), the gradient hooks
                 # of a leaf ([]), and whether the value aliases another tensor's through ``.data`` (False).
                 "_vc", "_base", "_hooks", "_untracked", "_post_hooks")

    def __del__(self):
        # A recorded result nobody holds any more: its node keeps the value only if its backward
        # saved it (what torch's graph keeps), so activations the backward never reads are freed
        # as soon as the forward drops them.
        # (A view of the value in the saved values keeps the buffer alive anyway; only the array itself
        # is looked for, and a backward with create_graph recomputes a dropped value it needs.)
        tape = self._tape
        if tape is None or tape.released or released is None:  # (None: interpreter shutdown)
            return
        i = self._id
        if tape.merged_into is not None:
            tape, i = resolve(self)
        node = tape.nodes[i]
        v = self._value
        if node.value is v and node.rule is not None:
            saved = node.saved
            if saved is v:
                return
            if type(saved) is tuple:
                for a in saved:
                    if a is v:
                        return
            node.value = released(v)


#: The class :func:`record` gives its results (the front end's Tensor, see :func:`set_result_class`).
_RESULT = [Variable]


def set_result_class(cls) -> None:
    """Make :func:`record` return instances of ``cls`` (a subclass of :class:`Variable`)."""
    _RESULT[0] = cls


# ---- grad mode ------------------------------------------------------------------------------

class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        self.tracer = None
        self.tapes = []                  # weak references to the tapes: an in-place write checks what they saved
        self.callbacks = None            # during backward(): functions to call once it has finished


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


class set_grad_enabled(_GradMode):
    """Grad mode ``mode`` inside (context manager and decorator); as a plain call it sets grad mode
    for the thread, as torch's does."""

    def __init__(self, mode: bool):
        self.enabled = bool(mode)
        self._prev = _state.grad_enabled
        _state.grad_enabled = self.enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.grad_enabled = self._prev
        return False


class inference_mode(_GradMode):
    """``no_grad`` (context manager and decorator); ``inference_mode(False)`` records as usual. Tensors
    made inside are ordinary tensors here (torch marks them as inference tensors)."""

    def __init__(self, mode: bool = True):
        self.enabled = not mode

    def __call__(self, fn=None):
        if fn is None or not callable(fn):
            return self
        return super().__call__(fn)


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
        self.hooks: dict = {}           # node id -> gradient hooks (array -> array or None)
        self.retained: dict = {}        # node id -> weakref of a non-leaf whose .grad is kept
        self.pinned = False             # True while a differentiable backward walks it (see attach)
        tapes = _state.tapes
        tapes.append(weakref.ref(self))
        if len(tapes) % 256 == 0:  # drop the dead references now and then
            tapes[:] = [r for r in tapes if r() is not None]

    def leaf_id(self, t: Variable) -> int:
        nid = self.leaf_of.get(id(t))
        if nid is None:
            nid = self._push(Node(None, t._value, True))
            self.leaves.append((nid, t))
            self.leaf_of[id(t)] = nid
        return nid

    def release(self) -> None:
        """:meth:`Tape.release`, and every node lets go of its value too: a tensor that outlives its backward (the loss a loop holds) no longer keeps the step's
        activations alive."""
        for n in self.nodes:
            n.rule = n.K = n.saved = n.needs = n._bwd = n.cleanup = n.value = None
        self.released = True

    def absorb(self, other: "GraphTape") -> None:
        """Append ``other``'s nodes (ids shifted by len(self)); ``other`` forwards to self."""
        off = len(self.nodes)
        for n in other.nodes:
            n.parents = tuple(p + off for p in n.parents)
            self.nodes.append(n)
        for nid, t in other.leaves:
            self.leaves.append((nid + off, t))
            self.leaf_of.setdefault(id(t), nid + off)
        for nid, fns in other.hooks.items():
            self.hooks.setdefault(nid + off, []).extend(fns)
        self.retained.update({nid + off: r for nid, r in other.retained.items()})
        other.hooks = {}
        other.retained = {}
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
    st = _state
    if op in INFER and (not st.grad_enabled or not any(t.requires_grad for t in inputs)):
        y, rule, K, saved = forward_op(op, [t._value for t in inputs], attrs, infer=True)
    else:
        y, rule, K, saved = forward_op(op, [t._value for t in inputs], attrs)
    out = wrap(y)
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
            nodes.append(Node(op, y, True, parents, None, None, rule, K, saved, needs, attrs))
            out._tape = tape
            out.requires_grad = True
            return out
    needs = tuple([t.requires_grad for t in inputs])
    if True not in needs or rule is None:
        return out
    return attach(out, inputs, Node(op, y, True, (), None, None, rule, K, saved, needs, attrs))


def attach(out: Variable, inputs, node: Node) -> Variable:
    """Record ``out`` as ``node`` (its parents set here) on the tape of ``inputs``, merging their tapes
    or opening one: the general path of :func:`record`, and how a custom Function records."""
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
                if small.pinned:  # a tape under a differentiable backward keeps its ids
                    big, small = small, big
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
    node.parents = tuple(ids)
    nodes.append(node)
    out._tape = target
    out.requires_grad = True
    return out


# ---- in-place writes ------------------------------------------------------------------------

class _Stale:
    """The rule of a node whose saved value was overwritten in place: its backward raises, naming both ops."""

    region = None

    def __init__(self, op, writer, shape):
        self.op, self.writer, self.shape = op, writer, shape

    def backward(self, K, saved, g, needs):
        raise AutogradError(f"backward: one of the tensors needed for the gradient of {self.op} (shape "
                            f"{self.shape}) has been modified by an in-place operation ({self.writer}); "
                            f"clone it before writing, or write under no_grad after backward")


def _refers(saved, v, depth=0) -> bool:
    """Whether ``saved`` (an array, or tuples/lists of them) holds ``v`` or a view of ``v``'s buffer."""
    if saved is None:
        return False
    if isinstance(saved, (tuple, list)):
        return depth < 3 and any(_refers(s, v, depth + 1) for s in saved)
    if saved is v:
        return True
    b = getattr(saved, "base", None)
    return b is not None and (b is v or b is getattr(v, "base", v))


def _detach_saved(saved, v, depth=0):
    """``saved`` with every array that holds ``v``'s buffer replaced by a copy."""
    if isinstance(saved, tuple) and depth < 3:
        return tuple(_detach_saved(s, v, depth + 1) for s in saved)
    if isinstance(saved, list) and depth < 3:
        return [_detach_saved(s, v, depth + 1) for s in saved]
    return saved.copy() if _refers(saved, v) else saved


def mark_written(t: Variable, op: str, writer: Variable | None = None) -> None:
    """Note that ``t``'s buffer is about to be overwritten by in-place op ``op``: its version counter
    goes up, and every live recorded node that saved the buffer for its backward is marked, so that
    a backward through it raises :class:`AutogradError` naming the op instead of using the new values
    (torch's saved-tensor version check). ``writer``, the recorded result the write comes from, keeps
    copies of what it saved instead (``x.mul_(y)`` needs the old ``x`` for ``y``'s gradient)."""
    t._vc = getattr(t, "_vc", 0) + 1
    v = t._value
    own = None
    if writer is not None and writer._tape is not None:
        tape, i = resolve(writer)
        own = tape.nodes[i]
        if own.rule is not None and _refers(own.saved, v):
            own.saved = _detach_saved(own.saved, v)
    for ref in list(_state.tapes):
        tape = ref()
        if tape is None or tape.released or tape.merged_into is not None:
            continue
        for n in tape.nodes:
            if n is not own and n.rule is not None and not isinstance(n.rule, _Stale) and _refers(n.saved, v):
                n.rule = _Stale(n.name, op, tuple(v.shape))


def _acc(old, g):
    """``old + g`` as a Variable: ``g`` an array (a new array: a gradient may be shared between leaves),
    or a recorded Variable (a backward with ``create_graph``: the sum is recorded too)."""
    if isinstance(g, Variable):
        return g if old is None else record("add", (old, g), {})
    return wrap(g) if old is None else wrap(old._value + g)


def accumulate_grad(t: Variable, g) -> None:
    """Add gradient ``g`` (an array, or a recorded Variable) to ``t.grad``, after ``t``'s hooks."""
    for h in getattr(t, "_hooks", ()):
        if isinstance(g, Variable):
            raise AutogradError("backward: tensor hooks with create_graph=True are not supported yet")
        g2 = h(g)
        if g2 is not None:
            g = g2
    t._grad = _acc(t._grad, g)


#: op name -> its VJP written with recorded ops, ``vjp(inputs, output, g, attrs) -> cotangents`` over
#: Variables: what a backward with ``create_graph=True`` runs, so that the gradients it returns are
#: themselves recorded and can be differentiated again. The front end fills it
#: (:mod:`torchlean.ops.higher`); an op missing here raises when a higher-order backward reaches it.
DIFFERENTIABLE_VJPS: dict = {}


def _graph_sweep(tape, grads: dict, start: int, keep) -> None:
    """:func:`~torchlean.autograd.node.sweep` with recorded cotangents: ``grads`` maps node ids to
    Variables, each node's VJP comes from :data:`DIFFERENTIABLE_VJPS` and records onto ``tape``
    (new nodes land after ``start``, so the tape stays a topological order)."""
    if tape.hooks:
        raise AutogradError("backward: tensor hooks with create_graph=True are not supported yet")
    tape.pinned = True
    try:
        _graph_walk(tape, grads, start, keep)
    finally:
        tape.pinned = False


def _graph_walk(tape, grads, start, keep) -> None:
    nodes = tape.nodes
    leaf_var = {nid: v for nid, v in tape.leaves}
    handles = {}

    def handle(p):
        h = handles.get(p)
        if h is None:
            h = leaf_var.get(p)
            if h is None:
                node = nodes[p]
                v = node.value
                if isinstance(v, Released):  # dropped after the forward: run the op again on its inputs
                    v = forward_op(node.name, [handle(q)._value for q in node.parents], node.attrs or {},
                                   infer=True)[0]
                h = wrap(v)
                if node.name is not None and node.requires_grad:  # a recorded result: its node stands for it
                    h._tape, h._id, h.requires_grad = tape, p, True
            handles[p] = h
        return h

    for i in range(start, -1, -1):
        g = grads.get(i)
        if g is None:
            continue
        node = nodes[i]
        if node.requires_grad and node.name is not None and (node.rule is not None or node._bwd is not None):
            if isinstance(node.rule, _Stale):
                node.rule.backward(None, None, None, None)
            vjp = DIFFERENTIABLE_VJPS.get(node.name)
            if vjp is None or node.rule is None:
                raise AutogradError(f"backward: create_graph=True through op {node.name!r}: its differentiable "
                                    f"gradient is not available yet")
            xs = tuple(handle(p) for p in node.parents)
            contribs = vjp(xs, handle(i), g, node.attrs or {})
            for p, c, need in zip(node.parents, contribs, node.needs):
                if c is None or not need or not nodes[p].requires_grad:
                    continue
                if tuple(c._value.shape) != tuple(nodes[p].value.shape):
                    raise ShapeError(f"{node.name}: differentiable gradient for parent {p} has shape "
                                     f"{tuple(c._value.shape)}, expected {tuple(nodes[p].value.shape)}")
                old = grads.get(p)
                grads[p] = c if old is None else record("add", (old, c), {})
        if i not in keep:
            del grads[i]


def _seeds(op, outputs, grad_outputs, create_graph=False):
    """``[(output, seed)]`` after torch's checks (one-element outputs may omit their seed): arrays, or
    Variables with ``create_graph`` (a seed that requires grad is then differentiated through too)."""
    out = []
    for k, (t, g) in enumerate(zip(outputs, grad_outputs)):
        shape = tuple(t._value.shape)
        K = get_kernels(device_of(t._value))
        if not t.requires_grad:
            raise AutogradError(f"{op}: element {k} of the outputs does not require grad and has no recorded "
                                f"graph")
        if g is None:
            if t._value.size != 1:
                raise AutogradError(f"{op}: grad can be implicitly created only for scalar outputs; this tensor "
                                    f"has shape {shape} (pass a gradient)")
            seed = K.full(shape, 1.0, t._value.dtype)
        else:
            seed = g._value if isinstance(g, Variable) else K.from_host(g, t._value.dtype)
            if tuple(seed.shape) != shape:
                raise ShapeError(f"{op}: gradient shape {tuple(seed.shape)} does not match output shape {shape}")
            cast = seed.dtype != t._value.dtype   # torch casts a seed to its output's dtype: .grad keeps the leaf's
            if cast:
                seed = K.astype(seed, t._value.dtype)
            if create_graph and isinstance(g, Variable):
                seed = record("cast", (g,), {"dtype": t._value.dtype.name}) if cast else g
        out.append((t, seed))
    return out


def _sweep_from(op, pairs, keep_of, create_graph=False, free=False, ready_of=None):
    """Reverse accumulation from several seeded outputs on one tape. ``keep_of(tape)`` gives the node ids
    whose gradients to return; ``free`` (a backward that does not retain the graph) lets each node's
    saved values go as soon as its backward ran; ``ready_of(tape)`` gives the node ids whose gradient is
    handed to a function as soon as it is complete (see :func:`~torchlean.autograd.node.sweep`).
    Returns ``(tape, {id: gradient})``; a leaf output's gradient is its seed."""
    tapes = []
    for t, _ in pairs:
        if t._tape is not None:
            tape, _ = resolve(t)
            if tape.released:
                _stale_backward(None)
            if tape not in tapes:
                tapes.append(tape)
    while len(tapes) > 1:  # outputs of two computations: one tape, as when an op joins them
        a, b = tapes.pop(), tapes.pop()
        big, small = (a, b) if len(a.nodes) >= len(b.nodes) else (b, a)
        big.absorb(small)
        tapes.append(big)
    if not tapes:
        return None, {}
    tape = tapes[0]
    grads = {}
    for t, seed in pairs:
        if t._tape is None:
            continue
        _, i = resolve(t)
        if create_graph:
            seed = seed if isinstance(seed, Variable) else wrap(seed)
            grads[i] = seed if i not in grads else record("add", (grads[i], seed), {})
        else:
            grads[i] = seed if i not in grads else grads[i] + seed
    keep = keep_of(tape)
    if create_graph:
        _graph_sweep(tape, grads, max(grads), keep)
    else:
        try:
            sweep(tape.nodes, grads, max(grads), keep, hooks=tape.hooks or None, free=free,
                  ready=None if ready_of is None else ready_of(tape))
        except BaseException:
            if free:  # nodes already let go of what they saved: the graph cannot be walked again
                tape.release()
            raise
    return tape, {i: grads[i] for i in keep if i in grads}


def _store_retained(tape, grads) -> None:
    for nid, r in tape.retained.items():
        x = r()
        if x is not None and nid in grads:
            x._grad = _acc(x._grad, grads[nid])


def queue_callback(fn) -> None:
    """Call ``fn()`` once the running :func:`backward` has accumulated every gradient (torch's
    ``Variable._execution_engine.queue_callback``); only valid during a backward, from a hook."""
    if _state.callbacks is None:
        raise AutogradError("queue_callback: only valid while backward() runs (from a gradient hook)")
    _state.callbacks.append(fn)


def _ready_leaf(leaf, early, g) -> None:
    accumulate_grad(leaf, g)
    early.add(id(leaf))
    _post_accumulate((leaf,))


def _post_accumulate(leaves) -> None:
    for leaf in leaves:
        for h in list(leaf._post_hooks):
            h(leaf)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """torch.autograd.backward: accumulate d(tensors)/d(leaf) into every reachable leaf's ``.grad``.

    ``tensors`` is one output or a sequence; ``grad_tensors`` their seeds (Variables or array-likes of
    the outputs' shapes; None for a one-element output). ``inputs`` restricts the accumulation to
    those tensors (leaves or not). Non-leaves that called ``retain_grad()`` get their ``.grad`` too.
    Without ``retain_graph`` (default: ``create_graph``) the tape is released. With ``create_graph``
    the gradients are recorded (see :data:`DIFFERENTIABLE_VJPS`) and can be differentiated again.
    """
    if retain_graph is None:
        retain_graph = create_graph
    single = isinstance(tensors, Variable)
    outs = [tensors] if single else list(tensors)
    if single:
        gos = [grad_tensors]
    else:
        gos = [None] * len(outs) if grad_tensors is None else \
            [grad_tensors] if isinstance(grad_tensors, Variable) else list(grad_tensors)
    if len(gos) != len(outs):
        raise AutogradError(f"backward: got {len(gos)} gradients for {len(outs)} tensors")
    pairs = _seeds("backward", outs, gos, create_graph)
    if isinstance(inputs, Variable):
        inputs = [inputs]
    only = None if inputs is None else {id(x) for x in inputs}

    def keep_of(tape):
        ids = {nid for nid, leaf in tape.leaves if only is None or id(leaf) in only}
        ids.update(nid for nid, r in tape.retained.items() if r() is not None)
        if only is not None:
            for x in inputs:
                if x._tape is not None and resolve(x)[0] is tape:
                    ids.add(x._id)
        return ids

    early = set()   # leaves whose gradient was accumulated (and post-accumulate hooks run) inside the sweep

    def ready_of(tape):
        """A leaf with post-accumulate hooks that stands for one node gets its gradient as soon as the
        sweep has passed its consumers, as torch's engine does (DistributedDataParallel overlaps its
        all-reduce with the rest of the backward this way)."""
        hooked = [] if create_graph else \
            [(nid, leaf) for nid, leaf in tape.leaves if getattr(leaf, "_post_hooks", None)
             and (only is None or id(leaf) in only)]
        if not hooked:
            return None
        count: dict = {}
        for _, leaf in tape.leaves:
            count[id(leaf)] = count.get(id(leaf), 0) + 1
        return {nid: functools.partial(_ready_leaf, leaf, early) for nid, leaf in hooked if count[id(leaf)] == 1}

    outer, _state.callbacks = _state.callbacks, []
    tape = None
    try:
        tape, grads = _sweep_from("backward", pairs, keep_of, create_graph, free=not retain_graph,
                                  ready_of=ready_of)
        posted, seen = [], set()   # leaves with post-accumulate hooks, once each, in tape order
        for o, seed in pairs:
            if o._tape is None and (only is None or id(o) in only):  # a leaf output: d o / d o = seed
                accumulate_grad(o, seed)
                if getattr(o, "_post_hooks", None) and id(o) not in seen:
                    seen.add(id(o))
                    posted.append(o)
        if tape is not None:
            for nid, leaf in tape.leaves:
                g = grads.get(nid)
                if g is not None and (only is None or id(leaf) in only) and id(leaf) not in early:
                    accumulate_grad(leaf, g)
                    if getattr(leaf, "_post_hooks", None) and id(leaf) not in seen:
                        seen.add(id(leaf))
                        posted.append(leaf)
            _store_retained(tape, grads)
            if only is not None:
                for x in inputs:
                    if x._tape is not None and resolve(x)[0] is tape and x._id in grads and x._id not in tape.retained:
                        x._grad = _acc(x._grad, grads[x._id])
        _post_accumulate(posted)
        for fn in _state.callbacks:
            fn()
    finally:
        _state.callbacks = outer
        if tape is not None and not retain_graph:
            tape.release()


def _plus(a, b):
    if isinstance(a, Variable) or isinstance(b, Variable):
        a = a if isinstance(a, Variable) else wrap(a)
        b = b if isinstance(b, Variable) else wrap(b)
        return record("add", (a, b), {})
    return a + b


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False) -> tuple:
    """torch.autograd.grad: the gradients of ``outputs`` (seeded by ``grad_outputs``) with respect to
    ``inputs`` (leaves or not), returned as a tuple instead of accumulated into ``.grad``. With
    ``create_graph`` the returned gradients are recorded and can be differentiated again (gradient
    penalties, Hessian-vector products); ``retain_graph`` defaults to ``create_graph``."""
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        raise AutogradError("grad: is_grads_batched=True is not supported")
    single_in = isinstance(inputs, Variable)
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    ins = [inputs] if single_in else list(inputs)
    for k, x in enumerate(ins):
        if not isinstance(x, Variable):
            raise AutogradError(f"grad: inputs[{k}] is a {type(x).__name__}, expected a tensor")
        if not x.requires_grad:
            raise AutogradError(f"grad: inputs[{k}] does not require grad")
    gos = [grad_outputs] if isinstance(grad_outputs, Variable) else \
        list(grad_outputs) if grad_outputs is not None else [None] * len(outs)
    if len(gos) != len(outs):
        raise AutogradError(f"grad: got {len(gos)} grad_outputs for {len(outs)} outputs")
    pairs = _seeds("grad", outs, gos, create_graph)

    def input_ids(tape, x):
        """The node ids standing for ``x`` (a leaf has one per computation that opened a tape with it)."""
        if x._tape is not None:
            xt, i = resolve(x)
            return [i] if xt is tape else []
        return [nid for nid, leaf in tape.leaves if leaf is x]

    def keep_of(tape):
        ids = {i for x in ins for i in input_ids(tape, x)}
        ids.update(nid for nid, r in tape.retained.items() if r() is not None)
        return ids

    tape, grads = _sweep_from("grad", pairs, keep_of, create_graph, free=not retain_graph)
    if tape is not None:  # retained non-leaf gradients accumulate here too, as in torch
        _store_retained(tape, grads)
    result = []
    for k, x in enumerate(ins):
        g = None
        for i in (input_ids(tape, x) if tape is not None else ()):
            if i in grads:
                g = grads[i] if g is None else _plus(g, grads[i])
        if g is not None and x._tape is None:
            for h in getattr(x, "_hooks", ()):
                if isinstance(g, Variable):
                    raise AutogradError("grad: tensor hooks with create_graph=True are not supported yet")
                g2 = h(g)
                g = g if g2 is None else g2
        for o, seed in pairs:  # an input that is itself an output
            if o is x:
                g = seed if g is None else _plus(g, seed)
        if g is None:
            if materialize_grads:
                g = get_kernels(device_of(x._value)).zeros(tuple(x._value.shape), x._value.dtype)
            elif not allow_unused:
                raise AutogradError(f"grad: inputs[{k}] (shape {tuple(x._value.shape)}) was not used in the graph "
                                    f"of the outputs; pass allow_unused=True to get None for it")
        result.append(None if g is None else g if isinstance(g, Variable) else wrap(g))
    if tape is not None and not retain_graph:
        tape.release()
    return tuple(result)


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
