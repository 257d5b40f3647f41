"""``torchlean quickstart``: a short guided tour that runs in a few seconds.

Three sections, each a plain function that prints as it goes:

* :func:`tensors` — creation, broadcasting, matmul, reductions, indexing;
* :func:`autograd` — gradients of a tensor function and of a model loss, in
  fast mode (float32 kernels) and in reference mode (``fast_kernels=False``: the
  spec functions, float64), with the largest difference between the two;
* :func:`mlp` — an MLP 2 -> 8 -> 1 trained with Adam on a 5 x 5 grid.

    >>> from torchlean import quickstart
    >>> out = quickstart.mlp(steps=60, echo=lambda *a: None)
    >>> out["loss_after"] < out["loss_before"] / 3
    True
"""

from __future__ import annotations

import numpy as np

import torchlean as tl

from . import nn, optim

SECTIONS = ("tensors", "autograd", "mlp")


def _fmt(v) -> str:
    if isinstance(v, tl.Tensor):
        v = v.numpy()
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return repr(v.item())
    if isinstance(v, np.ndarray):
        return np.array2string(v, precision=4, suppress_small=True, floatmode="maxprec")
    return repr(v)


def _heading(echo, title: str) -> None:
    echo()
    echo(f"== {title} " + "=" * max(0, 66 - len(title)))


def tensors(device: str = "cpu", echo=print) -> dict:
    """Print a few tensor expressions and their values; returns them by expression."""
    _heading(echo, "tensors")
    dev = "" if device == "cpu" else f", device={device!r}"
    env = {"tl": tl}
    shown = {}

    def show(expr: str, note: str = "", bind: str | None = None):
        v = eval(expr, env)  # noqa: S307 - evaluating our own literal examples, so shown code == run code
        if bind:
            env[bind] = v
        shown[expr] = v
        echo(f">>> {bind + ' = ' if bind else ''}{expr}" + (f"    # {note}" if note else ""))
        if not bind or isinstance(v, tl.Tensor):
            for line in _fmt(v).splitlines():
                echo(line)

    echo("# creation (float32 by default; float64 on request)")
    show(f"tl.tensor([[1., 2., 3.], [4., 5., 6.]]{dev})", bind="x")
    show(f"tl.arange(6{dev}).reshape(3, 2)", "arange gives int64; reshape is a view")
    show(f"tl.ones(2, 2, dtype=tl.float64{dev})")
    echo("# broadcasting, as in NumPy and PyTorch")
    show(f"x + tl.tensor([10., 20., 30.]{dev})", "(2, 3) + (3,)")
    show(f"x * tl.tensor([[1.], [-1.]]{dev})", "(2, 3) * (2, 1)")
    echo("# matmul")
    show("x @ x.T", "(2, 3) @ (3, 2)")
    echo("# reductions")
    show("x.sum()")
    show("x.sum(dim=0)")
    show("x.mean(dim=1, keepdim=True)")
    show("x.max(dim=1)")
    show("x.softmax(dim=-1)")
    echo("# indexing: ints, slices, None, Ellipsis")
    show("x[1]")
    show("x[:, 1:]")
    show("x[..., None].shape")
    return shown


def _max_abs(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def _f(x):
    return (x.sin() * x ** 2).sum()


def _linear_mse(dtype, device: str, w0, b0, X, Y):
    """Gradients of MSE(Linear(X), Y) w.r.t. weight and bias (loss, {name: grad})."""
    model = nn.Linear(w0.shape[1], w0.shape[0])
    model.load_state_dict({"weight": w0, "bias": b0})
    model.to(device=device, dtype=dtype)
    x = tl.tensor(X, dtype=dtype, device=device)
    y = tl.tensor(Y, dtype=dtype, device=device)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()}


def autograd(device: str = "cpu", echo=print) -> dict:
    """Gradients in fast mode vs reference mode (spec functions, float64); returns the errors."""
    _heading(echo, "autograd")
    echo("Fast mode runs the float32 kernels; reference mode (tl.options(fast_kernels=False))")
    echo("runs every op through its spec function. Here the spec runs in float64, so the")
    echo("difference is float32 rounding in the fast path.")
    echo()
    x0 = np.linspace(-1.5, 2.5, 6)
    echo("f(x) = sum(sin(x) * x**2),  x = linspace(-1.5, 2.5, 6)")
    x = tl.tensor(x0, dtype=tl.float32, device=device, requires_grad=True)
    y = _f(x)
    y.backward()
    g_fast = x.grad.numpy()
    with tl.options(fast_kernels=False):
        xs = tl.tensor(x0, dtype=tl.float64, requires_grad=True)
        ys = _f(xs)
        ys.backward()
        g_spec = xs.grad.numpy()
    g_exact = np.cos(x0) * x0 ** 2 + 2 * x0 * np.sin(x0)
    err_f = _max_abs(g_fast, g_spec)
    echo(f"  {'f(x)':<12}fast {y.item():.6f}   spec {ys.item():.6f}")
    echo(f"  {'df/dx':<12}fast {_fmt(g_fast)}")
    echo(f"  {'df/dx':<12}spec {_fmt(g_spec)}")
    echo(f"  max abs error fast vs spec: {err_f:.2e}   (spec vs cos(x) x^2 + 2x sin(x): "
         f"{_max_abs(g_spec, g_exact):.1e})")
    echo()

    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((2, 3)) * 0.5
    b0 = rng.standard_normal(2) * 0.1
    X = rng.standard_normal((8, 3))
    Y = rng.standard_normal((8, 2))
    echo("loss = mse_loss(Linear(3, 2)(X), Y),  X: (8, 3), Y: (8, 2)")
    l_fast, g_fast_m = _linear_mse(tl.float32, device, w0, b0, X, Y)
    with tl.options(fast_kernels=False):
        l_spec, g_spec_m = _linear_mse(tl.float64, "cpu", w0, b0, X, Y)
    echo(f"  {'loss':<12}fast {l_fast:.6f}   spec {l_spec:.6f}")
    errs = {}
    for name in g_spec_m:
        errs[name] = _max_abs(g_fast_m[name], g_spec_m[name])
        echo(f"  {name + '.grad':<12}fast {_fmt(g_fast_m[name].ravel())}")
        echo(f"  {name + '.grad':<12}spec {_fmt(g_spec_m[name].ravel())}")
    err_m = max(errs.values())
    echo(f"  max abs error fast vs spec: {err_m:.2e}   ("
         + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()) + ")")
    return {"function_err": err_f, "model_err": err_m}


def _target(X):
    x1, x2 = X[:, 0], X[:, 1]
    return 0.8 * np.maximum(x1 + x2, 0) - 0.4 * np.maximum(x2 - x1, 0) + 0.2


def mlp(steps: int = 200, device: str = "cpu", echo=print) -> dict:
    """Train Linear(2, 8) -> ReLU -> Linear(8, 1) with Adam (lr 0.03) on a 5 x 5 grid.

    Target 0.8 relu(x1 + x2) - 0.4 relu(x2 - x1) + 0.2 over [-1, 1]^2, full batch,
    MSE loss, seed 0. Returns the losses before and after and the probe predictions.
    """
    _heading(echo, "mlp")
    tl.manual_seed(0)
    g = np.linspace(-1.0, 1.0, 5)
    X = np.array([(a, b) for a in g for b in g])
    Y = _target(X)[:, None]
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    opt = optim.Adam(model.parameters(), lr=0.03)
    x = tl.tensor(X, device=device)
    y = tl.tensor(Y, device=device)
    echo("model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))")
    echo("target 0.8*relu(x1+x2) - 0.4*relu(x2-x1) + 0.2 on a 5 x 5 grid over [-1, 1]^2")
    echo(f"Adam lr 0.03, full batch, MSE loss, {steps} steps on {device}")
    with tl.no_grad():
        before = nn.functional.mse_loss(model(x), y).item()
    echo(f"  step {0:>5}  loss {before:.6f}")
    report = {max(1, steps * k // 5) for k in range(1, 6)}
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step in report and step < steps:
            echo(f"  step {step:>5}  loss {loss.item():.6f}")
    with tl.no_grad():
        after = nn.functional.mse_loss(model(x), y).item()
        probes = np.array([[0.0, 0.0], [0.25, -0.75]])
        preds = model(tl.tensor(probes, device=device)).numpy()[:, 0]
    echo(f"  step {steps:>5}  loss {after:.6f}")
    echo(f"mean loss before {before:.6f}, after {after:.6f} ({before / max(after, 1e-30):.1f}x lower)")
    targets = _target(probes)
    for (p1, p2), pr, t in zip(probes, preds, targets):
        echo(f"  prediction at ({p1:g}, {p2:g}): {pr:.4f}   target {t:.4f}")
    return {"loss_before": before, "loss_after": after, "predictions": preds.tolist(),
            "targets": targets.tolist()}


_RUN = {"tensors": tensors, "autograd": autograd, "mlp": mlp}


def run(sections=SECTIONS, steps: int = 200, device: str = "cpu", echo=print) -> dict:
    """Run the named sections in order; returns each section's results."""
    out = {}
    for s in sections:
        if s not in _RUN:
            raise tl.TorchLeanError(f"quickstart: unknown section {s!r}; expected one of {SECTIONS}")
        kw = {"steps": steps} if s == "mlp" else {}
        out[s] = _RUN[s](device=device, echo=echo, **kw)
    return out
