"""Contract checks driven by the op registry, shared by pytest and ``torchlean check``.

For an op, a sample and a device:

* ``forward``: the device rule in float32 against the spec in float64;
* ``vjp``: the tape's backward (device rule) against the spec VJP, random cotangent;
* ``fd``: the spec VJP against float64 central differences along random directions;
* ``spec_mode``: the tape in reference mode (``fast_kernels=False``) against the spec;
* ``bad``: each bad input raises its documented error, naming the op.

Each returns a :class:`Result` (max abs error, max relative error, passed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..autograd.tape import Tape, run_op
from ..errors import TorchLeanError
from ..kernels import get_kernels
from ..spec import SPEC
from .opinfo import DEVICE_TOL, OPINFOS, OpInfo, Sample


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


def _ok(a, r, device, info: OpInfo, scale_of_ref) -> bool:
    atol, rtol = DEVICE_TOL[device]
    atol *= info.tol_scale
    rtol *= info.tol_scale
    return bool(np.isfinite(a)) and a <= atol + rtol * scale_of_ref


def _to_device(x, device, dtype=np.float32):
    K = get_kernels(device)
    return K.from_host(np.asarray(x), dtype)


def _attrs_to_device(attrs, device):
    return attrs  # rules upload array attrs themselves (host index sequences stay on the host)


def cotangent(rng, shape):
    return rng.standard_normal(shape)


def check_forward(info: OpInfo, s: Sample, device: str) -> Result:
    spec = SPEC[info.name]
    ref = spec.forward(*s.inputs, **s.attrs)
    vals = [_to_device(x, device) for x in s.inputs]
    y, _ = run_op(info.name, vals, s.attrs, fast=True)
    y = get_kernels(device).to_host(y)
    a, r = _err(y, ref)
    scale = float(np.abs(ref).max()) if np.size(ref) else 0.0
    return Result(info.name, "forward", device, a, r, _ok(a, r, device, info, scale), s.desc)


def check_vjp(info: OpInfo, s: Sample, device: str, rng, fast=True) -> Result:
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
        ok &= _ok(a, r, device, info, scale)
        worst_a, worst_r = max(worst_a, a), max(worst_r, r)
    return Result(info.name, "vjp" if fast else "spec_mode", device, worst_a, worst_r, ok, s.desc)


def check_fd(info: OpInfo, s: Sample, rng, eps=1e-6, directions=3) -> Result:
    """<g, J d> by central differences vs <vjp(g), d>, float64, random g and d."""
    spec = SPEC[info.name]
    xs = [np.asarray(x, dtype=np.float64) for x in s.inputs]
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


def run_checks(device: str = "cpu", pattern: str | None = None, seed: int = 0,
               all_devices: bool = False) -> list[Result]:
    """Every op's contract on ``device`` (ops whose name contains ``pattern``).

    ``all_devices=True`` also checks ops whose record does not (yet) claim ``device``.
    """
    import fnmatch
    rng = np.random.default_rng(seed)
    results = []
    for name, info in sorted(OPINFOS.items()):
        if pattern and not (pattern in name or fnmatch.fnmatch(name, pattern)):
            continue
        if device not in info.devices and not all_devices:
            continue
        for s in info.samples(rng):
            for fn in (lambda: check_forward(info, s, device),
                       lambda: check_vjp(info, s, device, rng)):
                try:
                    results.append(fn())
                except Exception as e:  # noqa: BLE001
                    results.append(Result(name, "error", device, float("nan"), float("nan"), False,
                                          f"{s.desc}: {type(e).__name__}: {e}"))
        results.extend(check_bad(info, device, rng))
    return results
