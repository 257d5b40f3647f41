"""torch.autograd.gradcheck / gradgradcheck: a function's analytical gradients (the recorded backward)
against central finite differences, per output element and input element, as torch's slow mode does.

    >>> import torchlean as tl
    >>> x = tl.tensor([0.5, -1.0], dtype=tl.float64, requires_grad=True)
    >>> tl.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
    True
"""

from __future__ import annotations

import numpy as np

from ..errors import AutogradError


class GradcheckError(AutogradError):
    """Raised by :func:`gradcheck` when the analytical and numerical Jacobians differ (a RuntimeError)."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _is_diff(t, Tensor):
    return isinstance(t, Tensor) and t.dtype.is_floating_point


def _numerical(func, inputs, k, out_idx, eps, Tensor, tl):
    """Jacobian columns of every differentiable output w.r.t. input ``k``: (numel_in, numel_out) per output."""
    x = inputs[k]
    base = x.detach().cpu().numpy().astype(np.float64 if x.dtype == tl.float64 else np.float32, copy=True)
    flat = base.reshape(-1)
    cols = [np.zeros((flat.size, int(np.prod(shape, dtype=np.int64)))) for shape in out_idx.values()]

    def run(arr):
        args = list(inputs)
        args[k] = tl.tensor(arr.reshape(base.shape), dtype=x.dtype, device=x.device,
                            requires_grad=x.requires_grad)
        outs = _as_tuple(func(*args))   # with grad enabled, as torch: func may differentiate inside
        return [outs[j].detach().cpu().numpy().astype(np.float64).reshape(-1) for j in out_idx]

    for e in range(flat.size):
        orig = flat[e]
        flat[e] = orig + eps
        plus = run(flat)
        flat[e] = orig - eps
        minus = run(flat)
        flat[e] = orig
        for c, p, m in zip(cols, plus, minus):
            c[e] = (p - m) / (2 * eps)
    return cols


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None):
    """torch.autograd.gradcheck: ``True`` when, for every floating output and every input with
    ``requires_grad``, the backward's Jacobian equals the central-difference one (``eps``) within
    ``atol + rtol * |numerical|``; otherwise raises :class:`GradcheckError` (or returns ``False`` with
    ``raise_exception=False``). Use float64 inputs, as with torch."""
    import torchlean as tl
    from .record import Variable as Tensor
    from .record import grad as autograd_grad

    inputs = _as_tuple(inputs)
    diff_in = [k for k, t in enumerate(inputs) if _is_diff(t, Tensor) and t.requires_grad]
    if not diff_in:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of "
                         "the them have requires_grad=True.")

    def fail(msg):
        if raise_exception:
            raise GradcheckError(msg)
        return False

    for k in diff_in:
        if inputs[k].dtype != tl.float64:
            import warnings
            warnings.warn(f"Input #{k} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision "
                          "floating point.", UserWarning, stacklevel=2)
    if not check_backward_ad:
        return True
    outputs = _as_tuple(func(*inputs))
    out_idx = {j: tuple(o.shape) for j, o in enumerate(outputs) if _is_diff(o, Tensor)}
    for k in diff_in:
        numerical = _numerical(func, inputs, k, out_idx, eps, Tensor, tl)
        for (j, shape), num in zip(out_idx.items(), numerical):
            o = outputs[j]
            n_out = num.shape[1]
            ana = np.zeros_like(num)
            if o.requires_grad:
                for c in range(n_out):
                    seed = np.zeros(n_out, dtype=np.float64)
                    seed[c] = 1.0
                    go = tl.tensor(seed.reshape(shape), dtype=o.dtype, device=o.device)
                    g = autograd_grad(o, [inputs[i] for i in diff_in], grad_outputs=go, retain_graph=True,
                                      allow_unused=True)[diff_in.index(k)]
                    if g is not None:
                        if tuple(g.shape) != tuple(inputs[k].shape):
                            return fail(f"Gradient has incorrect shape: {tuple(g.shape)} for input #{k} of "
                                        f"shape {tuple(inputs[k].shape)}")
                        if check_grad_dtypes and g.dtype != inputs[k].dtype:
                            return fail(f"Gradient has dtype mismatch for input #{k}")
                        ana[:, c] = g.detach().cpu().numpy().astype(np.float64).reshape(-1)
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                return fail(f"Jacobian mismatch for output {j} with respect to input {k},\n"
                            f"numerical:{num}\nanalytical:{ana}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """torch.autograd.gradgradcheck: :func:`gradcheck` of the function mapping (inputs, grad_outputs) to
    the gradients of ``func`` (computed with ``create_graph=True``); random ``grad_outputs`` by default."""
    import torchlean as tl
    from .record import Variable as Tensor
    from .record import grad as autograd_grad

    inputs = _as_tuple(inputs)
    outputs = _as_tuple(func(*inputs))
    diff_out = [o for o in outputs if _is_diff(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(tl.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device,
                                       requires_grad=True) for o in diff_out)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_in = [k for k, t in enumerate(inputs) if _is_diff(t, Tensor) and t.requires_grad]

    def first_grads(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = [o for o in _as_tuple(func(*ins)) if _is_diff(o, Tensor) and o.requires_grad]
        gs = autograd_grad(outs, [ins[k] for k in diff_in], grad_outputs=list(gos), create_graph=True,
                           allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
