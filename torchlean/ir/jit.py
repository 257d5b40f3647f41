"""``tl.compile`` with ``torch.compile``'s contract: a module or function whose calls run compiled.

``tl.compile(model)`` returns an :class:`OptimizedModule` (an ``nn.Module`` holding the original as
``_orig_mod``, as torch's does, so its ``state_dict`` keys carry the ``_orig_mod.`` prefix) and
``tl.compile(fn)`` a function. Nothing happens until the first call. Each call is keyed by what a
trace cannot see through (torch's "guards"): the tensors' shapes, dtypes, devices and
``requires_grad``, every other argument's value, the modules' ``training`` flags and the grad mode.

* A new key traces the call (:func:`~torchlean.ir.trace.trace_call`): the call runs eagerly once,
  and its eager result is what the caller gets, so the first call is exact by construction. The
  graph is checked and compiled by :func:`~torchlean.ir.compile` (with ``mode="reduce-overhead"``
  or ``"max-autotune"`` on CUDA, into CUDA graphs).
* A known key runs the compiled program: one node on the autograd tape whose inputs are the call's
  tensors and the parameters, so ``loss.backward()``, hooks on parameters, gradient accumulation
  and optimizers work unchanged. Parameters and buffers are read at every call (never frozen);
  dropout draws fresh masks from the generator, in the same order as eager execution.
* Where a call cannot be compiled faithfully, that key runs eagerly from then on and one warning
  says why (``fullgraph=True`` raises instead, as torch does): the trace fails or does not check,
  the call updates a buffer (BatchNorm's running statistics in training mode), draws random numbers
  other than dropout's (``randn_like`` would be frozen), or an input does not reach the graph
  through tensor ops (integer indices are attributes of the IR, and values read on the host are
  constants). So do more than 8 keys (torch's recompile limit).

Python control flow follows the path of the traced call; work done on the host inside the call
(``.item()``, ``.tolist()``, comparisons of values) is fixed at its traced value, as in
:func:`~torchlean.ir.trace`. ``docs/differences.md`` lists what torch's ``torch.compile`` does that
this does not.

    >>> import torchlean as tl
    >>> lin = tl.nn.Linear(3, 2)
    >>> fast = tl.compile(lin)
    >>> x = tl.ones(4, 3)
    >>> _ = fast(x); y = fast(x)                   # the second call runs the compiled program
    >>> bool((y - lin(x)).abs().max() < 1e-6), fast.compiled_keys()
    (True, 1)
    >>> y.sum().backward(); lin.weight.grad.shape
    torchlean.Size([2, 3])
"""

from __future__ import annotations

import functools
import warnings
import weakref

import numpy as np

from ..autograd import is_grad_enabled
from ..autograd.function import Function
from ..errors import IRError, TorchLeanError
from ..nn import Module
from ..tensor import Tensor, get_rng_state, next_rng_key
from .compile import compile as _compile
from .trace import compile_module, trace_call

__all__ = ["compile", "OptimizedModule", "CompileWarning", "CACHE_SIZE_LIMIT"]

CACHE_SIZE_LIMIT = 8          # keys per compiled callable, as torch._dynamo's cache_size_limit
_POOL = 8                     # programs per key with a backward still pending
_GRAPH_MODES = ("reduce-overhead", "max-autotune")
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")


class CompileWarning(UserWarning):
    """A compiled callable runs (part of its calls) eagerly; the message says why."""


class _Eager:
    """A key that runs eagerly, and why."""

    def __init__(self, reason):
        self.reason = reason


# ---- arguments as a flat list of tensors plus a hashable structure ----------------------------------


def _flatten(obj, leaves: list, seen=None):
    """A hashable structure of ``obj`` with its tensors replaced by their index in ``leaves`` (one
    entry per distinct tensor: a tensor passed twice is one input, and the key records the aliasing)."""
    seen = {} if seen is None else seen
    if isinstance(obj, Tensor):
        k = seen.get(id(obj))
        if k is None:
            k = seen[id(obj)] = len(leaves)
            leaves.append(obj)
        return ("T", k)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("N", type(obj), tuple(_flatten(x, leaves, seen) for x in obj))
    if type(obj) in (tuple, list):
        return ("S", type(obj), tuple(_flatten(x, leaves, seen) for x in obj))
    if type(obj) is dict:
        return ("D", tuple((k, _flatten(v, leaves, seen)) for k, v in obj.items()))
    hash(obj)  # an unhashable argument cannot key a cache: the caller runs eagerly
    return ("C", type(obj), obj)


def _unflatten(spec, leaves):
    tag = spec[0]
    if tag == "T":
        return leaves[spec[1]]
    if tag == "N":
        return spec[1](*[_unflatten(s, leaves) for s in spec[2]])
    if tag == "S":
        return spec[1](_unflatten(s, leaves) for s in spec[2])
    if tag == "D":
        return {k: _unflatten(s, leaves) for k, s in spec[1]}
    return spec[2]


# ---- one compiled program on the tape -----------------------------------------------------------------


class _Slot:
    """One program of a key, and the call whose backward it still owes (a weak reference)."""

    def __init__(self, program):
        self.program = program
        self.owner = None           # a weak reference to the pending call's context, or None
        self.calls = 0
        self.infer = False          # the pending call will not be differentiated (Program.infer)

    def free(self) -> bool:
        ctx = self.owner() if self.owner is not None else None
        return ctx is None or ctx.done  # dead: the call's outputs are gone, nobody can differentiate it


class _Run(Function):
    """The compiled call as one tape node: inputs are the call's tensors, then the bound tensors."""

    @staticmethod
    def forward(ctx, entry, slot, *tensors):
        ctx.entry, ctx.slot, ctx.done = entry, slot, False
        slot.owner = weakref.ref(ctx)
        slot.calls += 1
        ctx.call = slot.calls
        return entry.run(slot, tensors[:entry.n_inputs], tensors[entry.n_inputs:])

    @staticmethod
    def backward(ctx, *grads):
        entry, slot = ctx.entry, ctx.slot
        if ctx.done or slot.calls != ctx.call:
            raise TorchLeanError("compiled call: its saved values were freed by a backward or another "
                                 "call; differentiate each call once (retain_graph is not supported through "
                                 "a compiled program)")
        res = entry.backward(slot, grads)
        ctx.done = True
        return (None, None) + res


class _Entry:
    """A compiled key: the traced graph, its programs, and what the call returns."""

    def __init__(self, traced, out_spec, n_inputs, device, dtype, cuda_graph, grad_inputs, bound):
        self.traced = traced
        self.out_spec = out_spec
        self.n_inputs = n_inputs
        self.device, self.dtype, self.cuda_graph = device, dtype, cuda_graph
        self.grad_inputs = grad_inputs
        self.bound = bound                   # the distinct bound tensors (parameters, buffers)
        index = {id(t): k for k, t in enumerate(bound)}
        self.keys_of = [[] for _ in bound]   # payload keys of each bound tensor (a tied one has several)
        for key, t in traced.bindings.items():
            self.keys_of[index[id(t)]].append(key)
        self.slots: list = []
        self.random_steps = None

    def slot(self):
        for s in self.slots:
            if s.free():
                return s
        if len(self.slots) >= _POOL:
            return None
        prog = _compile(self.traced.graph, self.traced.payload, device=self.device, dtype=self.dtype,
                        cuda_graph=self.cuda_graph, grad_inputs=self.grad_inputs)
        if self.random_steps is None:
            self.random_steps = [k for k, st in enumerate(prog.steps) if "seed" in st.attrs
                                 and "counter" in st.attrs]
        s = _Slot(prog)
        self.slots.append(s)
        return s

    def run(self, slot, inputs, bound):
        prog = slot.program
        graph_mode = prog._graph_mode is not None
        K = prog.K
        for t, keys in zip(bound, self.keys_of):
            v = t._value
            for key in keys:
                buf = prog.param(key)
                if v is buf:
                    continue
                if graph_mode:
                    buf[...] = v if v.dtype == buf.dtype else K.astype(v, buf.dtype)
                else:
                    prog.bind_param(key, v)
        for k in self.random_steps:  # fresh masks, drawn in the order eager execution draws them
            st = prog.steps[k]
            st.attrs["seed"], st.attrs["counter"] = next_rng_key()
        res = prog.infer(*inputs) if slot.infer else prog(*inputs)
        outs = [res] if len(self.traced.graph.outputs) == 1 else list(res)
        if graph_mode:  # fixed buffers: hand out copies the next call will not overwrite
            outs = [K.copy(y) for y in outs]
        return tuple(Tensor(y) for y in outs)

    def backward(self, slot, grads):
        prog = slot.program
        K = prog.K
        seeds = [None if g is None else g._value for g in grads]
        got = prog.backward(seeds if len(seeds) > 1 else seeds[0])
        if prog._graph_mode is None:
            prog.release_gradients()       # the arrays are ours now: no copy
            own = lambda g: g              # noqa: E731
        else:
            own = K.copy                   # fixed graph buffers: copy out
        res = []
        for k in range(self.n_inputs):
            g = got.get(("input", k))
            res.append(None if g is None else Tensor(own(g)))
        for t, keys in zip(self.bound, self.keys_of):
            acc = None
            for key in keys:
                g = got.get(key)
                if g is not None:
                    acc = own(g) if acc is None else acc + g
            if acc is not None and acc.dtype != t._value.dtype:
                acc = K.astype(acc, t._value.dtype)
            res.append(None if acc is None or not t.requires_grad else Tensor(acc))
        return tuple(res)


# ---- the compiled callable ------------------------------------------------------------------------


class _Compiled:
    """The cache of keys and the call itself, shared by the module and function forms."""

    def __init__(self, fn, module, fullgraph, cuda_graph, name):
        self.fn = fn
        self.module = module
        self.fullgraph = fullgraph
        self.cuda_graph = cuda_graph
        self.name = name
        self.cache: dict = {}
        self.warned: set = set()
        self.mods = None            # the modules whose training flags key a call (listed once)

    def _eager(self, key, reason, args, kwargs, result=None):
        if self.fullgraph:
            raise TorchLeanError(f"compile(fullgraph=True): {self.name} cannot run as one graph: {reason}")
        if key is not None:
            self.cache[key] = _Eager(reason)
        if reason not in self.warned:
            self.warned.add(reason)
            warnings.warn(f"compile: {self.name} runs eagerly: {reason}", CompileWarning, stacklevel=4)
        return self.fn(*args, **kwargs) if result is None else result

    def __call__(self, *args, **kwargs):
        leaves: list = []
        try:
            spec = _flatten((args, kwargs), leaves)
        except TypeError:
            return self._eager(None, "an argument is neither a tensor nor hashable", args, kwargs)
        if self.mods is None:
            self.mods = list(self.module.modules()) if self.module is not None else []
        mods = tuple(m.training for m in self.mods)
        key = (spec, tuple((tuple(t.shape), t.dtype, str(t.device), t.requires_grad) for t in leaves),
               mods, is_grad_enabled())
        entry = self.cache.get(key)
        if entry is None:
            if len(self.cache) >= CACHE_SIZE_LIMIT:
                return self._eager(None, f"more than {CACHE_SIZE_LIMIT} different argument shapes or values "
                                         f"(the recompile limit)", args, kwargs)
            return self._trace(key, spec, leaves, args, kwargs)
        if isinstance(entry, _Eager):
            return self.fn(*args, **kwargs)
        slot = entry.slot()
        if slot is None:
            return self._eager(None, f"{_POOL} calls await their backward at once", args, kwargs)
        slot.infer = not (is_grad_enabled() and any(t.requires_grad for t in (*leaves, *entry.bound)))
        outs = _Run.apply(entry, slot, *leaves, *entry.bound)
        if not isinstance(outs, tuple):
            outs = (outs,)
        return _unflatten(entry.out_spec, outs)

    def _bound(self):
        if self.module is None:
            return None, None
        return (dict(self.module.named_parameters()),
                {n: b for n, b in self.module.named_buffers() if b is not None})

    def _trace(self, key, spec, leaves, args, kwargs):
        params, buffers = self._bound()
        out_spec, got = [], []

        def flat(*ts):
            a, kw = _unflatten(spec, ts)
            res = self.fn(*a, **kw)
            got.append(res)
            outs: list = []
            out_spec.append(_flatten(res, outs))
            return tuple(outs)

        before = [(b, b._value, b._value.copy()) for b in (buffers or {}).values() if b is not None]
        rng = get_rng_state()
        try:
            traced = trace_call(flat, *leaves, params=params, buffers=buffers)
        except (TorchLeanError, TypeError) as e:
            if got:  # the call ran; only its graph is unusable (or its result is not tensors): eager result
                return self._eager(key, _first_line(e), args, kwargs, got[0])
            if isinstance(e, IRError):  # the recorder refused an op inside the call
                return self._eager(key, _first_line(e), args, kwargs)
            raise  # the program's own error, as eager execution raises it
        result = _unflatten(out_spec[0], list(traced.result))
        reason = self._unfaithful(traced, leaves, buffers, before, rng)
        if reason is not None:
            return self._eager(key, reason, args, kwargs, result)
        device, dtype, why = _placement(leaves, traced.bindings.values())
        if why is not None:
            return self._eager(key, why, args, kwargs, result)
        bound, seen = [], set()
        for t in traced.bindings.values():
            if id(t) not in seen:
                seen.add(id(t))
                bound.append(t)
        graph_mode = self.cuda_graph and device == "cuda" and not any(
            "seed" in n.attrs and "counter" in n.attrs for n in traced.graph.nodes)
        grad_inputs = [k for k, t in enumerate(leaves) if t.requires_grad]
        entry = _Entry(traced, out_spec[0], len(leaves), device, dtype, graph_mode, grad_inputs, bound)
        try:
            entry.slot()
        except TorchLeanError as e:
            return self._eager(key, _first_line(e), args, kwargs, result)
        self.cache[key] = entry
        return result

    def _unfaithful(self, traced, leaves, buffers, before, rng):
        """Why the graph would not do what the call did (None: it would)."""
        names = [n for n, b in (buffers or {}).items() if b is not None]
        for name, (b, v, old) in zip(names, before):  # buffers are written in place: compare values
            if b._value is not v or b._value.shape != old.shape or bool((b._value != old).any()):
                return (f"the call updates buffer {name!r} (e.g. BatchNorm's running statistics in training "
                        f"mode), which a graph cannot")
        g = traced.graph
        draws = sum(1 for n in g.nodes if "seed" in n.attrs and "counter" in n.attrs)
        now = get_rng_state()
        if now[0] != rng[0] or now[1] - rng[1] != draws:
            return "the call draws random numbers outside dropout (e.g. randn_like), which a trace would freeze"
        used = {p for n in g.nodes for p in n.parents} | set(g.outputs)
        for n in g.nodes:
            if n.kind == "input" and n.id not in used:
                k = n.attrs["index"]
                what = "integer" if leaves[k].dtype.kind in "iub" else "its"
                return (f"tensor argument {k} ({what} values) does not reach the graph through tensor ops "
                        f"(indices are attributes of the IR; values read on the host are constants)")
        return None


def _first_line(e) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _placement(leaves, bound):
    """(device, float dtype, None) shared by every tensor, or (None, None, why not)."""
    ts = list(leaves) + list(bound)
    devices = {str(t.device) for t in ts}
    if len(devices) > 1:
        return None, None, f"tensors on several devices ({', '.join(sorted(devices))})"
    floats = {t.dtype for t in ts if t.dtype.kind == "f"}
    if len(floats) > 1:
        return None, None, f"several float dtypes ({', '.join(sorted(np.dtype(d).name for d in floats))})"
    device = devices.pop() if devices else "cpu"
    return device.split(":")[0], (floats.pop() if floats else np.float32), None


class OptimizedModule(Module):
    """``tl.compile(module)``: the module's calls run compiled (see the module docs).

    The original is ``self._orig_mod`` (a submodule: ``state_dict`` keys start with ``_orig_mod.``,
    as torch's); attributes the wrapper lacks are looked up there.
    """

    def __init__(self, mod, fullgraph=False, cuda_graph=False):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", _Compiled(mod, mod, fullgraph, cuda_graph, type(mod).__name__))

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def compiled_keys(self) -> int:
        """How many argument keys run compiled (the others run eagerly)."""
        return sum(not isinstance(e, _Eager) for e in self._compiled.cache.values())

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)


def compile(model=None, *example_inputs, fullgraph=False, dynamic=None, backend="inductor",  # noqa: A001
            mode=None, options=None, disable=False, cuda_graph=None, device=None, dtype=None):
    """torch.compile: return ``model`` (a Module or a function) with its calls compiled.

    ``mode="reduce-overhead"`` or ``"max-autotune"``, ``backend="cudagraphs"`` or
    ``options={"triton.cudagraphs": True}`` replay CUDA graphs on CUDA; ``fullgraph=True`` raises
    where the call would run eagerly; ``disable=True`` returns ``model`` itself. ``dynamic`` has no
    effect here: every new shape is traced and compiled for itself, up to :data:`CACHE_SIZE_LIMIT`
    keys. ``model=None`` gives a decorator. ``cuda_graph=True`` (torchlean's name) is
    ``mode="reduce-overhead"``. With ``example_inputs`` (torchlean's own form,
    :func:`~torchlean.ir.compile_module`, which also takes ``device`` and ``dtype``) the call is
    traced at once and the returned :class:`~torchlean.ir.CompiledModule` differentiates with its
    own ``backward()``.
    """
    if mode not in _MODES:
        raise TorchLeanError(f"compile: unknown mode {mode!r}; expected one of "
                             f"{', '.join(repr(m) for m in _MODES)}")
    if callable(backend) or backend not in _BACKENDS:
        raise TorchLeanError(f"compile: backend {backend!r} is not available here; torchlean compiles "
                             f"through its own IR (backends {', '.join(map(repr, _BACKENDS))} are accepted)")
    if options is not None and not isinstance(options, dict):
        raise TorchLeanError(f"compile: options must be a dict, got {type(options).__name__}")
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if not callable(model):
        raise TorchLeanError(f"compile: expected a Module or a function, got {type(model).__name__}")
    cuda_graph = bool(cuda_graph) or mode in _GRAPH_MODES or backend == "cudagraphs" \
        or bool((options or {}).get("triton.cudagraphs"))
    if example_inputs:
        return compile_module(model, *example_inputs, cuda_graph=cuda_graph, device=device, dtype=dtype)
    if device is not None or dtype is not None:
        raise TorchLeanError("compile: device= and dtype= go with example inputs (tl.compile(fn, *inputs, ...)); "
                             "without them each call's tensors decide")
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph, cuda_graph)
    owner = getattr(model, "__self__", None)
    c = _Compiled(model, owner if isinstance(owner, Module) else None, fullgraph, cuda_graph,
                  getattr(model, "__qualname__", type(model).__name__))

    @functools.wraps(model)
    def compiled(*args, **kwargs):
        return c(*args, **kwargs)
    compiled._torchlean_compiled = c
    return compiled
