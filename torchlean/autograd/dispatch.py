"""Dispatch: from an op name and its input values to the output, the rule and what it saved.

:func:`forward_op` is the one place that picks an op's runtime rule and kernels: the tape
(:meth:`~torchlean.autograd.Tape.op`) and the front end's recording
(:func:`~torchlean.autograd.record`) both run every op through it.

* The device is that of the input values (NumPy: ``"cpu"``, CuPy: ``"cuda"``); inputs on two
  devices raise :class:`~torchlean.errors.DeviceError` naming the op.
* The shape rule (``SPEC[op].shape``) runs before any kernel, so a bad input is a
  :class:`~torchlean.errors.TorchLeanError` raised on the host that names the op. A rule that
  ``checks_shapes`` (a compound's) runs its parts' shape rules, each before that part's kernels.
* On the CPU in reference mode (``fast_kernels=False``) the rule is the op's spec
  (:data:`SPEC_RULES`): forward and VJP are the spec functions themselves. With the ``use_gpu``
  hint, CPU ops run on :func:`~torchlean.kernels.routed_host`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..dtypes import BF16_NP as _BF16
from ..errors import DeviceError, DTypeError, ShapeError, TorchLeanError
from ..kernels import HOST, get_kernels, routed_host
from ..options import _current as _OPTS
from ..spec import SPEC
from .rules import RULES
from .rules.registry import Rule

_HOST_TYPES = (np.ndarray, np.generic)


def device_of(x) -> str:
    """"cpu" for NumPy arrays (and scalars), "cuda" for CuPy arrays."""
    return "cpu" if isinstance(x, _HOST_TYPES) else "cuda"


def _spec_rule(op) -> Rule:
    """The spec of ``op`` as a runtime rule: what reference mode runs (its kernels argument unused).

    Spec code may compute in float64; results keep the inputs' dtype (a cast's is its target),
    and cotangents the cotangent's."""
    def forward(K, *xs, **attrs):
        y = np.asarray(op.forward(*xs, **attrs))
        if xs and y.dtype != xs[0].dtype and y.dtype.kind == "f" and op.name != "cast":
            y = y.astype(xs[0].dtype)
        return y, (xs, attrs)

    def backward(K, saved, g, needs):
        xs, attrs = saved
        grads = op.vjp(g, *xs, **attrs)
        return tuple(None if (gr is None or not nd) else np.asarray(gr).astype(g.dtype, copy=False)
                     for gr, nd in zip(grads, needs))

    return Rule(op.name, forward, backward, op.family)


#: Reference mode's rules: every op's spec forward and VJP, run on host values.
SPEC_RULES: dict = {name: _spec_rule(op) for name, op in SPEC.items()}

#: The dispatch cache, the only one of the runtime: ``(op, value type, input shapes[, attributes])``
#: -> ``(rule, kernels, output shape, on the CPU, defined on integers)`` for ops of one to four inputs
#: of one value type whose attributes are plain values (see :func:`_attrs_key`). It is correct
#: because the shape rule is a pure function of the input shapes and the attributes (so its verdict
#: and output shape are those of the first call with equal ones), an op not defined on integers is
#: served from it only for float inputs (others go through the dtype check), and the rule and kernels depend only on the
#: op and the device, which the value type determines. The options that change the rule or the
#: kernels act on the CPU only: a CPU entry serves only under the default options (fast kernels,
#: no use_gpu), and entries are made only then.
DISPATCH: dict = {}
_DISPATCH_MAX = 65536
_PLAIN = frozenset((int, float, bool, str, type(None)))


def _attrs_key(attrs):
    """The attributes as part of a cache key: ``((name, type, value), ...)`` when every value is a
    plain int, float, bool, str or None, or a tuple of ints; otherwise None (not cached). The type
    is part of the key because ``1 == 1.0 == True``: a value the shape rule would refuse must never
    be served from an entry made by one it accepted."""
    out = []
    for k, v in attrs.items():
        t = type(v)
        if t not in _PLAIN:
            if t is not tuple:
                return None
            for e in v:
                if type(e) is not int:
                    return None
        out.append((k, t, v))
    return tuple(out)


def _kernels(dev, opts):
    """The kernels and the table of rules for ``dev`` under the options ``opts``."""
    if dev == "cpu":
        if not opts.fast_kernels:
            return None, SPEC_RULES
        if opts.use_gpu:
            return routed_host(opts.gpu_precision), RULES
        return HOST, RULES
    return get_kernels(dev), RULES


_F32, _F64, _F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)


def forward_op(name, vals, attrs, fast=None, infer=False):
    """Shape-check and run op ``name`` on values: ``(y, rule, K, saved)``.

    The backward is ``rule.backward(K, saved, g, needs)``; ``rule`` is None for a result that is
    not a float (nothing to differentiate). ``fast`` (True or False) overrides the
    ``fast_kernels`` option for this call. ``infer``: nothing will differentiate the result, so a
    rule's ``infer`` runs where it has one (``saved`` is then None). This is the eager hot path:
    keep it lean.
    """
    for v in vals:
        d = v.dtype
        if d is _BF16 or (d is _F16 and type(v) is np.ndarray):
            return _forward_low(name, vals, attrs, fast, infer)
    opts = _OPTS[0]
    key = None
    if fast is not None and fast != opts.fast_kernels:
        opts = replace(opts, fast_kernels=fast)
    elif vals:
        a = vals[0]
        ta = type(a)
        n = len(vals)
        if n == 1:
            key = a.shape
        elif n == 2:
            b = vals[1]
            if type(b) is ta:
                key = (a.shape, b.shape)
        elif n <= 4:
            for v in vals:
                if type(v) is not ta:
                    break
            else:
                key = tuple([v.shape for v in vals])
        if key is not None:
            if attrs:
                ak = _attrs_key(attrs)
                key = None if ak is None else (name, ta, key, ak)
            else:
                key = (name, ta, key)
        if key is not None:
            hit = DISPATCH.get(key)
            if hit is not None and not hit[4]:
                # An op not defined on integers is served from the cache for float inputs only
                # (NumPy's builtin dtypes are singletons: identity first, inline on the hot path).
                for v in vals:
                    d = v.dtype
                    if not (d is _F32 or d is _F64 or d.kind == "f"):
                        hit = None
                        break
            if hit is not None and (not hit[3] or (opts.fast_kernels and not opts.use_gpu)):
                rule, K, out_shape, _, _ = hit
                if infer and rule.infer is not None:
                    y, saved = rule.infer(K, *vals, **attrs), None
                else:
                    y, saved = rule.forward(K, *vals, **attrs) if attrs else rule.forward(K, *vals)
                if type(y) is not ta and isinstance(y, np.generic):
                    y = np.asarray(y)  # NumPy turns 0-d results into scalars; the tape holds arrays
                if y.shape != out_shape:
                    raise ShapeError(f"{name}: kernel produced shape {tuple(y.shape)}, shape rule says {out_shape}")
                return y, rule, K, saved
    spec = SPEC.get(name)
    if spec is None:
        raise TorchLeanError(f"unknown op {name!r}")
    if spec.arity >= 0 and len(vals) != spec.arity:
        raise TorchLeanError(f"{name}: expects {spec.arity} array input(s), got {len(vals)}")
    dev = device_of(vals[0]) if vals else "cpu"
    for v in vals:
        if device_of(v) != dev:
            raise DeviceError(f"{name}: inputs on different devices ({dev} and {device_of(v)})")
        if v.dtype.kind != "f" and not spec.ints:
            raise DTypeError(f"{name}: expects floating-point inputs, got dtype {v.dtype} (this op is not defined "
                             f"on integers; convert with .float() first)")
    K, rules = _kernels(dev, opts)
    rule = rules.get(name)
    if rule is None:
        raise TorchLeanError(f"{name}: no runtime rule registered")
    out_shape = None
    if not rule.checks_shapes:
        try:
            out_shape = tuple(spec.shape(*[v.shape for v in vals], **attrs))
        except TypeError as e:
            if isinstance(e, TorchLeanError):
                raise
            raise TorchLeanError(f"{name}: bad arguments {sorted(attrs)}: {e}") from None
    if infer and rule.infer is not None:
        y, saved = rule.infer(K, *vals, **attrs), None
    else:
        y, saved = rule.forward(K, *vals, **attrs)
    if isinstance(y, np.generic):
        y = np.asarray(y)
    if out_shape is None:
        out_shape = tuple(y.shape)
    elif tuple(y.shape) != out_shape:
        raise ShapeError(f"{name}: kernel produced shape {tuple(y.shape)}, shape rule says {out_shape}")
    if y.dtype.kind != "f" and y.dtype is not _BF16:
        # A result that is not a float carries no gradient: no rule to record. Such a result is
        # never cached: the kind of an op's result is fixed by the op, its attributes (in the key)
        # and whether its inputs are floats (the cached path serves float inputs only), so the
        # cached path above needs no such check.
        return y, None, K, saved
    if key is not None and rules is RULES and (dev != "cpu" or K is HOST) and len(DISPATCH) < _DISPATCH_MAX:
        DISPATCH[key] = (rule, K, out_shape, dev == "cpu", spec.ints)
    return y, rule, K, saved


# ---- float16 and bfloat16 on the host: the float32 kernels, rounded once -----------------------------

def _forward_low(name, vals, attrs, fast, infer=False):
    """Op ``name`` on inputs among which some are float16 or bfloat16 (bfloat16 storage through
    ml_dtypes): those are widened to float32, the op runs as for float32 inputs, and a float32 result
    is rounded to the low dtype of the inputs (unless the op names its result dtype: casts). The
    backward does the same through :data:`_LOW_RULE`: the cotangent is widened, the op's own rule runs,
    and the contributions to low-precision inputs are rounded to their dtypes. So every op has its
    half-precision forms at once, defined by its float32 kernels with one rounding per op (torch's
    CPU kernels also compute half-precision ops in float32 inside), and its error against the float64
    meaning is bounded by the unit roundoff of the dtype plus the float32 kernel's own
    (``torchlean check --dtype``)."""
    dts = tuple(v.dtype if v.dtype is _F16 or v.dtype is _BF16 else None for v in vals)
    low = next(d for d in dts if d is not None)
    if low is _BF16 and (attrs.get("device", "cpu") != "cpu" or any(device_of(v) != "cpu" for v in vals)):
        raise DTypeError(f"{name}: bfloat16 tensors are supported on the CPU only for now (issue 20)")
    wide = [v.astype(np.float32) if d is not None else v for v, d in zip(vals, dts)]
    y, rule, K, saved = forward_op(name, wide, attrs, fast, infer)
    if y.dtype == np.float32 and "dtype" not in attrs:
        y = y.astype(low)
    if rule is None:
        return y, None, K, saved
    return y, _LOW_RULE, K, (rule, saved, dts)


def _low_backward(K, saved, g, needs):
    rule, inner, dts = saved
    if g.dtype is _F16 or g.dtype is _BF16:
        g = g.astype(np.float32)
    contribs = rule.backward(K, inner, g, needs)
    return tuple(c.astype(d) if c is not None and d is not None and c.dtype == np.float32 else c
                 for c, d in zip(contribs, dts))


_LOW_RULE = Rule("half_precision", _forward_low, _low_backward, "memory")
