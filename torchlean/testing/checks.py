"""Contract checks driven by the op registry, shared by pytest and ``torchlean check``.

For an op, a sample and a device:

* ``forward``: the device rule in float32 against the spec in float64;
* ``vjp``: the tape's backward (device rule) against the spec VJP, random cotangent;
* ``fd``: the spec VJP against float64 central differences along random directions;
* ``spec_mode``: the tape in reference mode (``fast_kernels=False``) against the spec;
* ``bad``: each bad input raises its documented error, naming the op.

``run_checks`` runs ``forward`` and ``vjp`` on every record's ordinary samples and on its
``edge`` samples (kinks, ties, x100 and near-overflow magnitudes: rows ``edge forward`` /
``edge vjp``), so the documented subgradient conventions and the stability tricks are part of
the contract, and on the subnormal samples of the ops that have them (rows ``tiny forward`` /
``tiny vjp``), so a kernel that flushes subnormals to zero fails. ``run_optimizer_checks`` runs each fused optimizer-step kernel for a few steps
against PyTorch's update rule written out in float64 (rows ``optim step``).

Each returns a :class:`Result` (max abs error, max relative error, passed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..autograd.dispatch import forward_op
from ..autograd.rules.registry import INFER
from ..autograd.tape import Tape, run_op
from ..dtypes import BF16_NP, UNIT_ROUNDOFF
from ..errors import DTypeError, TorchLeanError
from ..kernels import get_kernels
from ..spec import SPEC
from .opinfo import DEVICE_TOL, OPINFOS, OpInfo, Sample
from .opinfo.edge import SUBNORMAL_SPACING, TINY_FORWARD_ONLY, tiny


@dataclass
class Result:
    op: str
    check: str
    device: str
    abs_err: float
    rel_err: float
    passed: bool
    detail: str = ""


def _err(dev_val, ref) -> tuple[float, float]:
    dev_val = np.asarray(dev_val, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if dev_val.shape != ref.shape:
        return float("inf"), float("inf")
    if ref.size == 0:
        return 0.0, 0.0
    both_nan = np.isnan(dev_val) & np.isnan(ref)
    d = np.where(both_nan, 0.0, np.abs(dev_val - ref))
    if np.isnan(d).any():
        return float("nan"), float("nan")
    a = float(d.max())
    scale = float(np.abs(np.where(both_nan, 0.0, ref)).max())
    return a, a / scale if scale > 0 else a


def _ok(a, r, device, info: OpInfo, scale_of_ref, atol=None) -> bool:
    """Within the device's allowance; ``atol`` replaces its absolute part (the subnormal pass)."""
    atol_d, rtol = DEVICE_TOL[device]
    atol = atol_d * info.tol_scale if atol is None else atol
    rtol *= info.tol_scale
    return bool(np.isfinite(a)) and a <= atol + rtol * scale_of_ref


def _to_device(x, device, dtype=np.float32):
    """A sample input on ``device``: floats as ``dtype``, integer inputs (an index) as they are."""
    K = get_kernels(device)
    x = np.asarray(x)
    return K.from_host(x, dtype if x.dtype.kind == "f" else x.dtype)


def _attrs_to_device(attrs, device):
    return attrs  # rules upload array attrs themselves (host index sequences stay on the host)


def cotangent(rng, shape):
    return rng.standard_normal(shape)


def check_forward(info: OpInfo, s: Sample, device: str, atol=None) -> Result:
    spec = SPEC[info.name]
    ref = spec.forward(*s.inputs, **s.attrs)
    vals = [_to_device(x, device) for x in s.inputs]
    y, _ = run_op(info.name, vals, s.attrs, fast=True)
    y = get_kernels(device).to_host(y)
    a, r = _err(y, ref)
    scale = float(np.abs(ref).max()) if np.size(ref) else 0.0
    return Result(info.name, "forward", device, a, r, _ok(a, r, device, info, scale, atol), s.desc)


def check_infer(info: OpInfo, s: Sample, device: str) -> Result:
    """An op whose rule has an inference form (:data:`~torchlean.autograd.rules.registry.INFER`): its
    value equals the forward's bit for bit (NaN where NaN); the error columns are the largest
    difference."""
    vals = [_to_device(x, device) for x in s.inputs]
    K = get_kernels(device)
    y = np.asarray(K.to_host(forward_op(info.name, vals, s.attrs, True)[0]))
    yi = np.asarray(K.to_host(forward_op(info.name, vals, s.attrs, True, infer=True)[0]))
    same = y.shape == yi.shape and y.dtype == yi.dtype and np.array_equal(y, yi, equal_nan=True)
    a = 0.0 if same or y.shape != yi.shape else float(np.nanmax(np.abs(y.astype(np.float64) - yi)))
    return Result(info.name, "infer", device, a, a, bool(same), s.desc)


def check_vjp(info: OpInfo, s: Sample, device: str, rng, fast=True, atol=None) -> Result:
    spec = SPEC[info.name]
    ref_y = np.asarray(spec.forward(*s.inputs, **s.attrs))
    g = cotangent(rng, ref_y.shape)
    ref = spec.vjp(g, *s.inputs, **s.attrs)
    diff = info.differentiable(len(s.inputs))
    t = Tape(fast_kernels=fast)
    ids = [t.leaf(_to_device(x, device), requires_grad=(i in diff)) for i, x in enumerate(s.inputs)]
    out = t.op(info.name, *ids, **s.attrs)
    grads = t.backward(out, seed=_to_device(g, device))
    K = get_kernels(device)
    worst_a, worst_r, ok = 0.0, 0.0, True
    for i in diff:
        got = K.to_host(grads[ids[i]])
        if ref[i] is None:  # not differentiable here (an integer or bool result): nothing flows back
            a = float(np.abs(got).max()) if got.size else 0.0
            ok &= a == 0.0
            worst_a = max(worst_a, a)
            continue
        a, r = _err(got, ref[i])
        scale = float(np.abs(ref[i]).max()) if np.size(ref[i]) else 0.0
        ok &= _ok(a, r, device, info, scale, atol)
        worst_a, worst_r = max(worst_a, a), max(worst_r, r)
    return Result(info.name, "vjp" if fast else "spec_mode", device, worst_a, worst_r, ok, s.desc)


def check_fd(info: OpInfo, s: Sample, rng, eps=1e-6, directions=3) -> Result:
    """<g, J d> by central differences vs <vjp(g), d>, float64, random g and d."""
    spec = SPEC[info.name]
    xs = [np.asarray(x, dtype=np.float64) if np.asarray(x).dtype.kind == "f" else np.asarray(x) for x in s.inputs]
    y = np.asarray(spec.forward(*xs, **s.attrs))
    g = cotangent(rng, y.shape)
    vj = spec.vjp(g, *xs, **s.attrs)
    worst_a = worst_r = 0.0
    ok = True
    for i in info.differentiable(len(xs)):
        for _ in range(directions):
            d = rng.standard_normal(xs[i].shape)
            xp = list(xs)
            xm = list(xs)
            xp[i] = xs[i] + eps * d
            xm[i] = xs[i] - eps * d
            num = float(np.sum(g * (np.asarray(spec.forward(*xp, **s.attrs))
                                    - np.asarray(spec.forward(*xm, **s.attrs))))) / (2 * eps)
            ana = float(np.sum(np.asarray(vj[i]) * d))
            a = abs(num - ana)
            r = a / max(abs(num), abs(ana), 1e-12)
            worst_a, worst_r = max(worst_a, a), max(worst_r, r)
            ok &= a <= 1e-6 + 1e-5 * max(abs(num), abs(ana))
    return Result(info.name, "fd", "cpu", worst_a, worst_r, bool(ok), s.desc)


def check_bad(info: OpInfo, device: str, rng) -> list[Result]:
    out = []
    for b in info.bad(rng):
        vals = []
        for x in b.inputs:
            x = np.asarray(x)
            vals.append(get_kernels(device).from_host(x, np.float32 if x.dtype.kind == "f" else x.dtype))
        try:
            run_op(info.name, vals, b.attrs, fast=True)
            out.append(Result(info.name, "bad", device, 0, 0, False, f"{b.desc}: no error raised"))
        except b.error as e:
            msg = str(e)
            good = info.name in msg and b.match in msg
            out.append(Result(info.name, "bad", device, 0, 0, good,
                              f"{b.desc}: {type(e).__name__}" + ("" if good else f" message lacks op/{b.match!r}: {msg}")))
        except TorchLeanError as e:
            out.append(Result(info.name, "bad", device, 0, 0, False,
                              f"{b.desc}: raised {type(e).__name__}, expected {b.error.__name__}: {e}"))
        except Exception as e:  # noqa: BLE001 - a crash is exactly what this check reports
            out.append(Result(info.name, "bad", device, 0, 0, False,
                              f"{b.desc}: crashed with {type(e).__name__}: {e}"))
    return out


def check_samples(info: OpInfo, samples, device: str, rng, kind: str = "") -> list[Result]:
    """Forward and VJP of every sample against the spec; ``kind`` prefixes the check's name
    (``"edge "``: the kink, tie and large-magnitude samples of ``info.edge``; ``"tiny "``: the
    subnormal samples of :func:`.opinfo.edge.tiny`, whose absolute allowance is one smallest
    subnormal per input element instead of the device's, so that a flush to zero fails)."""
    out = []
    for s in samples:
        atol, fns = None, (lambda: check_forward(info, s, device), lambda: check_vjp(info, s, device, rng))
        if info.name in INFER:
            fns += (lambda: check_infer(info, s, device),)
        if kind == "tiny ":
            atol = SUBNORMAL_SPACING * sum(np.size(x) for x in s.inputs)
            fns = (lambda: check_forward(info, s, device, atol),) + (
                () if info.name in TINY_FORWARD_ONLY else (lambda: check_vjp(info, s, device, rng, atol=atol),))
        for fn in fns:
            try:
                r = fn()
                r.check = kind + r.check
                out.append(r)
            except Exception as e:  # noqa: BLE001 - a crash is exactly what this check reports
                out.append(Result(info.name, kind + "error", device, float("nan"), float("nan"), False,
                                  f"{s.desc}: {type(e).__name__}: {e}"))
    return out


def run_checks(device: str = "cpu", pattern: str | None = None, seed: int = 0,
               all_devices: bool = False, dtype: str = "float32") -> list[Result]:
    """Every op's contract on ``device`` (ops whose name contains ``pattern``).

    ``all_devices=True`` also checks ops whose record does not (yet) claim ``device``. With ``dtype``
    ``"float16"`` or ``"bfloat16"`` the forward and VJP of the ordinary samples run in that dtype
    against the float64 meaning on the same (rounded) inputs (:func:`check_low`).
    """
    import fnmatch
    if dtype != "float32":
        low_dtype(dtype, device)
    rng = np.random.default_rng(seed)
    results = []
    for name, info in sorted(OPINFOS.items()):
        if pattern and not (pattern in name or fnmatch.fnmatch(name, pattern)):
            continue
        if device not in info.devices and not all_devices:
            continue
        if dtype != "float32":
            for s in info.samples(rng):
                results.extend(check_low(info, s, device, rng, dtype))
            continue
        for kind, samples in (("", info.samples(rng)), ("edge ", info.edge(rng)), ("tiny ", tiny(name, rng))):
            results.extend(check_samples(info, samples, device, rng, kind))
        results.extend(check_bad(info, device, rng))
    return results


# ---- half precision: each op's error against its float64 meaning, in units of the dtype's roundoff -----

def low_dtype(dtype: str, device: str):
    """The NumPy dtype of ``dtype`` for checks on ``device`` (DTypeError where it has no kernels yet)."""
    if dtype not in UNIT_ROUNDOFF:
        raise DTypeError(f"check: --dtype must be float32, float16 or bfloat16, got {dtype!r}")
    if device != "cpu":
        raise DTypeError(f"check: --dtype {dtype} on {device}: half-precision kernels are checked on the CPU only "
                         f"for now (issue 20)")
    if dtype == "bfloat16" and BF16_NP is None:
        raise DTypeError("check: --dtype bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
    return np.dtype(np.float16) if dtype == "float16" else BF16_NP


def _low_err(got, ref, u, tol32):
    """(max abs error, max error in units of u·|ref|, within the bound |got - ref| <= u|ref| + tol32)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf"), float("inf"), False
    if ref.size == 0:
        return 0.0, 0.0, True
    d = np.abs(got - ref)
    if not np.isfinite(d).all():
        return float("nan"), float("nan"), False
    units = d / np.maximum(u * np.abs(ref), 1e-300)
    return float(d.max()), float(np.min([units.max(), 1e300])), bool(np.all(d <= u * np.abs(ref) + tol32))


def check_low(info: OpInfo, s: Sample, device: str, rng, dtype: str) -> list[Result]:
    """Forward and VJP of sample ``s`` in ``dtype``. The float inputs (and the cotangent) are rounded to
    ``dtype`` first and the float64 spec runs on those rounded values, so what is measured is the op's own
    error: on the CPU each op computes in float32 and rounds its result once, so every element must
    satisfy ``|y - y64| <= u |y64| + e32`` with ``u`` the dtype's unit roundoff and ``e32`` the float32
    kernel's allowance (DEVICE_TOL x the op's tol_scale, relative to the largest |y64|). Samples whose
    meaning is not finite in ``dtype`` (overflow) are skipped. Rows ``<dtype> forward`` / ``<dtype> vjp``;
    the relative column is the worst error in units of ``u |y64|``."""
    low = low_dtype(dtype, device)
    u = UNIT_ROUNDOFF[dtype]
    big = float(np.finfo(np.float16).max) if dtype == "float16" else 3.0e38
    K = get_kernels(device)
    xs = [np.asarray(x).astype(np.float32).astype(low).astype(np.float64) if np.asarray(x).dtype.kind == "f"
          else np.asarray(x) for x in s.inputs]
    spec = SPEC[info.name]
    out = []
    try:
        ref = np.asarray(spec.forward(*xs, **s.attrs), dtype=np.float64)
    except Exception as e:  # noqa: BLE001 - a rounded input outside the op's domain: nothing to compare
        return [Result(info.name, f"{dtype} skipped", device, 0.0, 0.0, True, f"{s.desc}: {type(e).__name__}")]
    if not np.isfinite(ref).all() or (ref.size and np.abs(ref).max() > big / 2):
        return [Result(info.name, f"{dtype} skipped", device, 0.0, 0.0, True, f"{s.desc}: not finite in {dtype}")]
    atol, rtol = DEVICE_TOL["cpu"]

    def tol32(r):
        return (atol + rtol * (float(np.abs(r).max()) if np.size(r) else 0.0)) * info.tol_scale

    vals = [K.from_host(x, low if x.dtype.kind == "f" else x.dtype) for x in xs]
    try:
        y, _ = run_op(info.name, vals, s.attrs, fast=True)
        a, units, ok = _low_err(np.asarray(K.to_host(y)).astype(np.float64), ref, u, tol32(ref))
        out.append(Result(info.name, f"{dtype} forward", device, a, units, ok, s.desc))
        diff = info.differentiable(len(xs))
        if diff and ref.size:
            g = cotangent(rng, ref.shape).astype(np.float32).astype(low).astype(np.float64)
            want = spec.vjp(g, *xs, **s.attrs)
            t = Tape(fast_kernels=True)
            ids = [t.leaf(v, requires_grad=(i in diff)) for i, v in enumerate(vals)]
            grads = t.backward(t.op(info.name, *ids, **s.attrs), seed=K.from_host(g, low))
            worst_a = worst_u = 0.0
            good = True
            for i in diff:
                got = np.asarray(K.to_host(grads[ids[i]])).astype(np.float64)
                if want[i] is None:
                    good &= not np.any(got)
                    continue
                a, units, ok = _low_err(got, want[i], u, tol32(want[i]))
                worst_a, worst_u, good = max(worst_a, a), max(worst_u, units), good and ok
            out.append(Result(info.name, f"{dtype} vjp", device, worst_a, worst_u, good, s.desc))
    except Exception as e:  # noqa: BLE001 - a crash is exactly what this check reports
        out.append(Result(info.name, f"{dtype} error", device, float("nan"), float("nan"), False,
                          f"{s.desc}: {type(e).__name__}: {e}"))
    return out


# ---- optimizers: each fused step kernel against a float64 reference step ----------------------

def _ref_sgd(p, g, st, t, lr, momentum, dampening, weight_decay, nesterov, **_):
    d = g + weight_decay * p
    if momentum:
        st["buf"] = d.copy() if t == 1 else momentum * st["buf"] + (1 - dampening) * d
        d = d + momentum * st["buf"] if nesterov else st["buf"]
    return p - lr * d


def _ref_adam(p, g, st, t, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize=False, **_):
    g = -g if maximize else g
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    st["m"] = beta1 * st["m"] + (1 - beta1) * g
    st["v"] = beta2 * st["v"] + (1 - beta2) * g * g
    v = st["v"]
    if amsgrad:
        st["vmax"] = v = np.maximum(st["vmax"], st["v"])
    m_hat = st["m"] / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def _ref_adagrad(p, g, st, t, lr, lr_decay, weight_decay, eps, **_):
    g = g + weight_decay * p
    st["sum_sq"] = st["sum_sq"] + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(st["sum_sq"]) + eps)


def _ref_rmsprop(p, g, st, t, lr, alpha, eps, weight_decay, momentum, centered, **_):
    g = g + weight_decay * p
    st["sq_avg"] = alpha * st["sq_avg"] + (1 - alpha) * g * g
    if centered:
        st["grad_avg"] = alpha * st["grad_avg"] + (1 - alpha) * g
        avg = np.sqrt(st["sq_avg"] - st["grad_avg"] ** 2) + eps
    else:
        avg = np.sqrt(st["sq_avg"]) + eps
    if momentum > 0:
        st["buf"] = momentum * st["buf"] + g / avg
        return p - lr * st["buf"]
    return p - lr * g / avg


def _ref_adadelta(p, g, st, t, lr, rho, eps, weight_decay, **_):
    g = g + weight_decay * p
    st["sq_avg"] = rho * st["sq_avg"] + (1 - rho) * g * g
    delta = np.sqrt(st["acc_delta"] + eps) / np.sqrt(st["sq_avg"] + eps) * g
    st["acc_delta"] = rho * st["acc_delta"] + (1 - rho) * delta * delta
    return p - lr * delta


#: kernel -> (float64 reference step, state arrays, configurations): PyTorch's documented update
#: rules written out again in float64, independently of the host kernels they check.
OPTIMIZER_CHECKS = {
    "sgd_step": (_ref_sgd, ("buf",), [
        dict(lr=0.1), dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2),
        dict(lr=0.1, momentum=0.9, nesterov=True)]),
    "adam_step": (_ref_adam, ("m", "v", "vmax"), [
        dict(), dict(weight_decay=1e-2), dict(weight_decay=1e-2, decoupled=True),
        dict(weight_decay=1e-2, decoupled=True, amsgrad=True), dict(amsgrad=True)]),
    "adam_step_multi": (_ref_adam, ("m", "v", "vmax"), [
        dict(), dict(weight_decay=0.1, decoupled=True), dict(amsgrad=True), dict(maximize=True, weight_decay=0.05)]),
    "adagrad_step": (_ref_adagrad, ("sum_sq",), [dict(lr=0.1, lr_decay=0.01, weight_decay=1e-3, eps=1e-10)]),
    "rmsprop_step": (_ref_rmsprop, ("sq_avg", "buf", "grad_avg"), [
        dict(weight_decay=1e-3), dict(weight_decay=1e-3, momentum=0.9, centered=True),
        dict(weight_decay=1e-3, momentum=0.5)]),
    "adadelta_step": (_ref_adadelta, ("sq_avg", "acc_delta"), [dict(lr=1.0, eps=1e-6),
                                                               dict(lr=1.0, eps=1e-6, weight_decay=1e-2)]),
}
_HYPER = dict(lr=1e-2, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, beta1=0.9, beta2=0.999,
              eps=1e-8, decoupled=False, amsgrad=False, maximize=False, lr_decay=0.0, alpha=0.99, rho=0.9,
              centered=False)


def _device_step(K, name, p, g, st, t, h):
    """One call of the fused kernel ``name`` on device arrays (state arrays in ``st``, in place)."""
    if name == "sgd_step":
        K.sgd_step(p, g, st["buf"] if h["momentum"] else None, h["lr"], h["momentum"], h["dampening"],
                   h["weight_decay"], h["nesterov"], t == 1)
    elif name == "adam_step":
        K.adam_step(p, g, st["m"], st["v"], t, h["lr"], h["beta1"], h["beta2"], h["eps"], h["weight_decay"],
                    h["decoupled"], st["vmax"] if h["amsgrad"] else None)
    elif name == "adam_step_multi":
        K.adam_step_multi([p], [g], [st["m"]], [st["v"]], [st["vmax"] if h["amsgrad"] else None], [t], h["lr"],
                          h["beta1"], h["beta2"], h["eps"], h["weight_decay"], h["decoupled"], h["maximize"])
    elif name == "adagrad_step":
        K.adagrad_step(p, g, st["sum_sq"], t, h["lr"], h["lr_decay"], h["weight_decay"], h["eps"])
    elif name == "rmsprop_step":
        K.rmsprop_step(p, g, st["sq_avg"], st["buf"] if h["momentum"] > 0 else None,
                       st["grad_avg"] if h["centered"] else None, h["lr"], h["alpha"], h["eps"],
                       h["weight_decay"], h["momentum"])
    elif name == "adadelta_step":
        K.adadelta_step(p, g, st["sq_avg"], st["acc_delta"], h["lr"], h["rho"], h["eps"], h["weight_decay"])
    else:
        raise KeyError(name)


def check_optimizer(name: str, device: str, rng, steps: int = 5, shape=(7, 5)) -> list[Result]:
    """Kernel ``name`` run for ``steps`` steps in float32 on ``device`` (random gradients) against
    the float64 reference step from the same float32 start; every configuration of
    :data:`OPTIMIZER_CHECKS`, the parameter and every state array compared after each step."""
    ref_step, state_names, configs = OPTIMIZER_CHECKS[name]
    K = get_kernels(device)
    atol, rtol = DEVICE_TOL[device]
    out = []
    for cfg in configs:
        h = dict(_HYPER, **cfg)
        p64 = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
        st64 = {s: np.zeros(shape) for s in state_names}
        p = K.from_host(p64, np.float32)
        st = {s: K.from_host(np.zeros(shape), np.float32) for s in state_names}
        worst_a = worst_r = 0.0
        ok = True
        for t in range(1, steps + 1):
            g64 = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
            _device_step(K, name, p, K.from_host(g64, np.float32), st, t, h)
            p64 = ref_step(p64, g64, st64, t, **h)
            pairs = [(K.to_host(p), p64)] + [(K.to_host(st[s]), st64[s]) for s in state_names
                                             if np.any(st64[s] != 0)]
            for got, ref in pairs:
                a, r = _err(got, ref)
                scale = float(np.abs(ref).max())
                ok &= bool(np.isfinite(a)) and a <= 5 * (atol + rtol * scale)
                worst_a, worst_r = max(worst_a, a), max(worst_r, r)
        desc = ", ".join(f"{k}={v}" for k, v in cfg.items()) or "defaults"
        out.append(Result(name, "optim step", device, worst_a, worst_r, bool(ok), f"{steps} steps, {desc}"))
    return out


def run_optimizer_checks(device: str = "cpu", pattern: str | None = None, seed: int = 0) -> list[Result]:
    """:func:`check_optimizer` for every fused optimizer kernel whose name contains ``pattern``."""
    import fnmatch
    rng = np.random.default_rng(seed)
    out = []
    for name in OPTIMIZER_CHECKS:
        if pattern and not (pattern in name or fnmatch.fnmatch(name, pattern)):
            continue
        try:
            out.extend(check_optimizer(name, device, rng))
        except Exception as e:  # noqa: BLE001 - a crash is exactly what this check reports
            out.append(Result(name, "optim error", device, float("nan"), float("nan"), False,
                              f"{type(e).__name__}: {e}"))
    return out
