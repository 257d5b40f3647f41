"""Test records of convolution and pooling (1-D to 4-D samples, batched and unbatched).

The torch oracle uses ``torch.nn.functional`` for 1 to 3 spatial axes. torch has
no 4-D convolution or pooling, so for those samples the oracle builds the op from
``Tensor.unfold`` windows (and, for the transposed convolution, as the gradient of
that convolution in its input) -- still torch's arithmetic, not ours.
"""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand

# ---- torch oracles ---------------------------------------------------------------------------


def _F(torch):
    return torch.nn.functional


def _unfold(torch, x, k, s, dil, pad, value):
    """(N, C, *out, *k) windows of x (batched, d spatial axes), padded by ``pad`` with ``value``."""
    d = len(k)
    pads = []
    for v in reversed(pad):
        pads += [v, v]
    xp = _F(torch).pad(x, pads, value=value) if any(pad) else x
    for i in range(d):
        xp = xp.unfold(2 + i, dil[i] * (k[i] - 1) + 1, s[i])
    return xp[(Ellipsis,) + tuple(slice(None, None, di) for di in dil)]


def _torch_conv_unfold(torch, x, w, stride, padding, dilation, groups):
    d = w.ndim - 2
    n, c = x.shape[:2]
    win = _unfold(torch, x, tuple(w.shape[2:]), stride, dilation, padding, 0.0)
    out = win.shape[2:2 + d]
    win = win.reshape((n, groups, c // groups) + tuple(win.shape[2:]))
    wg = w.reshape((groups, w.shape[0] // groups) + tuple(w.shape[1:]))
    O, Kl = "pqrstuvw"[:d], "ABCDEFGH"[:d]
    y = torch.einsum(f"ngc{O}{Kl},goc{Kl}->ngo{O}", win, wg)
    return y.reshape((n, w.shape[0]) + tuple(out))


def _batched(x, d):
    return x.ndim == d + 2


def _torch_conv(torch, x, w, b=None, *, stride, padding, dilation, groups):
    d = w.ndim - 2
    if d <= 3:
        return getattr(_F(torch), f"conv{d}d")(x, w, b, stride, padding, dilation, groups)
    xb = x if _batched(x, d) else x.unsqueeze(0)
    y = _torch_conv_unfold(torch, xb, w, stride, padding, dilation, groups)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * d)
    return y if _batched(x, d) else y[0]


def _torch_convt(torch, x, w, b=None, *, stride, padding, output_padding, dilation, groups):
    d = w.ndim - 2
    if d <= 3:
        return getattr(_F(torch), f"conv_transpose{d}d")(x, w, b, stride, padding, output_padding,
                                                         groups, dilation)
    xb = x if _batched(x, d) else x.unsqueeze(0)
    out = [(S - 1) * s - 2 * p + di * (k - 1) + o + 1 for S, s, p, di, k, o
           in zip(xb.shape[2:], stride, padding, dilation, w.shape[2:], output_padding)]
    z = torch.zeros([xb.shape[0], w.shape[1] * groups] + out, dtype=x.dtype, requires_grad=True)
    # The transposed convolution is the adjoint of the convolution in its input.
    y = _torch_conv_unfold(torch, z, w, stride, padding, dilation, groups)
    y = torch.autograd.grad(y, z, grad_outputs=xb, create_graph=True)[0]
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * d)
    return y if _batched(x, d) else y[0]


def _lead_2(torch, x, d):
    """View x (any leading axes) as (N, C, *spatial) for unfold, and a function to undo it."""
    lead = x.shape[:x.ndim - d]
    xb = x.reshape((-1, 1) + tuple(x.shape[x.ndim - d:]))
    return xb, lambda y: y.reshape(tuple(lead) + tuple(y.shape[2:]))


def _torch_max_pool(torch, x, *, kernel_size, stride=None, padding=0, dilation=1):
    d = len(kernel_size)
    stride = kernel_size if stride is None else stride
    if d <= 3:
        return getattr(_F(torch), f"max_pool{d}d")(x, kernel_size, stride, padding, dilation)
    xb, back = _lead_2(torch, x, d)
    win = _unfold(torch, xb, kernel_size, stride, dilation, padding, float("-inf"))
    return back(win.flatten(start_dim=win.ndim - d).max(dim=-1).values)


def _torch_avg_pool(torch, x, *, kernel_size, stride=None, padding=0):
    d = len(kernel_size)
    stride = kernel_size if stride is None else stride
    if d <= 3:
        return getattr(_F(torch), f"avg_pool{d}d")(x, kernel_size, stride, padding)
    xb, back = _lead_2(torch, x, d)
    win = _unfold(torch, xb, kernel_size, stride, (1,) * d, padding, 0.0)
    return back(win.flatten(start_dim=win.ndim - d).mean(dim=-1))


def _torch_smooth(torch, x, *, kernel_size, beta, stride=None, padding=0):
    d = len(kernel_size)
    stride = kernel_size if stride is None else stride
    xb, back = _lead_2(torch, x, d)
    win = _unfold(torch, xb * beta, kernel_size, stride, (1,) * d, padding, float("-inf"))
    return back(torch.logsumexp(win.flatten(start_dim=win.ndim - d), dim=-1) / beta)


# ---- conv samples ----------------------------------------------------------------------------
# (x shape, w shape, stride, padding, dilation, groups, description)

_CONV = [
    ((2, 3, 9), (4, 3, 3), (1,), (1,), (1,), 1, "1-D batched pad 1"),
    ((4, 11), (6, 2, 3), (2,), (2,), (2,), 2, "1-D unbatched stride 2 dilation 2 groups 2"),
    ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2, "2-D batched mixed stride/dilation groups 2"),
    ((3, 5, 5), (2, 3, 1, 1), (1, 1), (0, 0), (1, 1), 1, "2-D unbatched 1x1"),
    ((1, 4, 6, 6), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4, "2-D depthwise stride 2"),
    ((1, 1, 1, 5), (2, 1, 1, 3), (1, 1), (0, 1), (1, 1), 1, "2-D size-1 axes"),
    ((2, 2, 4, 5, 4), (3, 2, 2, 3, 2), (1, 2, 1), (0, 1, 1), (1, 1, 1), 1, "3-D batched"),
    ((2, 4, 4, 4), (2, 1, 2, 2, 2), (1, 1, 1), (1, 0, 0), (2, 1, 1), 2, "3-D unbatched dilation groups 2"),
    ((1, 2, 3, 4, 3, 4), (2, 2, 2, 2, 2, 3), (1, 2, 1, 1), (1, 0, 0, 1), (1, 1, 1, 1), 1, "4-D batched"),
    ((2, 3, 3, 3, 3), (2, 2, 2, 2, 2, 2), (1, 1, 1, 1), (0, 1, 0, 0), (1, 1, 2, 1), 1, "4-D unbatched"),
]


def _conv_samples(bias):
    def samples(rng):
        out = []
        for xs, ws, s, p, dil, g, desc in _CONV:
            co = ws[0]
            ins = (rand(rng, *xs), rand(rng, *ws)) + ((rand(rng, co),) if bias else ())
            out.append(Sample(ins, dict(stride=s, padding=p, dilation=dil, groups=g), desc))
        return out
    return samples


def _conv_bad(bias):
    def bad(rng):
        def mk(xs, ws, **attrs):
            a = dict(stride=1, padding=0, dilation=1, groups=1)
            a.update(attrs)
            ins = (np.ones(xs), np.ones(ws)) + ((np.ones(ws[0]),) if bias else ())
            return ins, a

        cases = [
            (mk((1, 2, 3, 3), (4, 2, 5, 5)), "empty output: input spatial shape (3, 3), kernel (5, 5)", "empty"),
            (mk((1, 2, 5, 5), (4, 2, 0, 3)), "zero-size", "zero-size kernel"),
            (mk((1, 3, 5, 5), (4, 1, 3, 3), groups=2), "input channels 3 are not divisible by groups 2",
             "groups"),
            (mk((1, 3, 5, 5), (4, 2, 3, 3)), "expects 2 input channels", "weight in-channels"),
            (mk((1, 1) + (1,) * 9, (1, 1) + (1,) * 9), "supported are 1 to 8", "9 spatial axes"),
            (mk((1, 2, 5, 5), (4, 2, 3, 3), stride=(0, 1)), "stride (0, 1) must be positive", "stride 0"),
            (mk((1, 2, 5, 5), (4, 2, 3, 3), padding=(-1, 0)), "padding", "negative padding"),
            (mk((1, 2, 5, 5), (4, 2, 3, 3), stride=(1, 1, 1)), "must have 2 entries", "wrong-length stride"),
            (mk((2, 5, 5, 5, 5), (4, 2, 3, 3)), "axes", "input rank"),
            (mk((1, 2, 5, 5), (4, 2, 3, 3), groups=0), "groups", "groups 0"),
        ]
        out = [BadInput(ins, a, ShapeError, m, desc) for (ins, a), m, desc in cases]
        if bias:
            out.append(BadInput((np.ones((1, 2, 5)), np.ones((4, 2, 3)), np.ones(3)),
                                dict(stride=1, padding=0, dilation=1, groups=1), ShapeError,
                                "bias (3,) must have shape (4,)", "bias shape"))
        return out
    return bad


defop(OpInfo("conv", _conv_samples(True), _conv_bad(True), torch_ref=_torch_conv, tol_scale=2.0))
defop(OpInfo("conv_nobias", _conv_samples(False), _conv_bad(False),
             torch_ref=lambda torch, x, w, **a: _torch_conv(torch, x, w, None, **a), tol_scale=2.0))

# ---- conv_transpose samples ------------------------------------------------------------------
# (x shape, w shape, stride, padding, output_padding, dilation, groups, description)

_CONVT = [
    ((2, 3, 5), (3, 2, 3), (2,), (1,), (1,), (1,), 1, "1-D batched stride 2 output_padding 1"),
    ((4, 6), (4, 1, 2), (1,), (0,), (0,), (1,), 2, "1-D unbatched groups 2"),
    ((1, 4, 4, 3), (4, 3, 3, 2), (2, 1), (1, 0), (0, 0), (1, 2), 2, "2-D groups 2 dilation"),
    ((2, 2, 3, 3), (2, 3, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1, "2-D batched stride 2 output_padding"),
    ((3, 4, 4), (3, 2, 2, 2), (1, 1), (0, 0), (1, 0), (2, 1), 1, "2-D unbatched output_padding < dilation"),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), (1, 2, 1), (0, 1, 0), (0, 1, 0), (1, 1, 1), 1, "3-D batched"),
    ((2, 2, 2, 2), (2, 1, 2, 1, 2), (2, 1, 1), (0, 0, 1), (0, 0, 0), (1, 1, 1), 2, "3-D unbatched groups 2"),
    ((1, 2, 2, 3, 2, 2), (2, 2, 2, 2, 1, 2), (2, 1, 1, 1), (0, 1, 0, 0), (1, 0, 0, 0), (1, 1, 1, 2), 1,
     "4-D batched"),
]


def _convt_samples(bias):
    def samples(rng):
        out = []
        for xs, ws, s, p, op, dil, g, desc in _CONVT:
            co = ws[1] * g
            ins = (rand(rng, *xs), rand(rng, *ws)) + ((rand(rng, co),) if bias else ())
            out.append(Sample(ins, dict(stride=s, padding=p, output_padding=op, dilation=dil, groups=g), desc))
        return out
    return samples


def _convt_bad(bias):
    def bad(rng):
        def mk(xs, ws, **attrs):
            a = dict(stride=1, padding=0, output_padding=0, dilation=1, groups=1)
            a.update(attrs)
            co = ws[1] * a["groups"] if a["groups"] else ws[1]
            ins = (np.ones(xs), np.ones(ws)) + ((np.ones(co),) if bias else ())
            return ins, a

        cases = [
            (mk((1, 2, 4, 4), (2, 3, 3, 3), stride=(2, 2), output_padding=(2, 0)),
             "output_padding (2, 0) must be smaller than stride (2, 2) or dilation (1, 1)", "output_padding"),
            (mk((1, 3, 4, 4), (2, 3, 3, 3)), "expects 2 input channels", "weight in-channels"),
            (mk((1, 3, 4, 4), (3, 3, 3, 3), groups=2), "not divisible by groups 2", "groups"),
            (mk((1, 2, 2), (2, 3, 1), padding=(1,)), "empty output", "empty output"),
            (mk((1, 2, 4), (2, 3, 0)), "zero-size", "zero-size kernel"),
            (mk((1, 2, 4), (2, 3, 2), stride=(0,)), "stride (0,) must be positive", "stride 0"),
            (mk((1, 1) + (1,) * 9, (1, 1) + (1,) * 9), "supported are 1 to 8", "9 spatial axes"),
        ]
        return [BadInput(ins, a, ShapeError, m, desc) for (ins, a), m, desc in cases]
    return bad


defop(OpInfo("conv_transpose", _convt_samples(True), _convt_bad(True), torch_ref=_torch_convt, tol_scale=2.0))
defop(OpInfo("conv_transpose_nobias", _convt_samples(False), _convt_bad(False),
             torch_ref=lambda torch, x, w, **a: _torch_convt(torch, x, w, None, **a), tol_scale=2.0))

# ---- pooling samples -------------------------------------------------------------------------
# (x shape, kernel_size, stride, padding, dilation, description)

_POOL = [
    ((2, 3, 8), (3,), (2,), (1,), (1,), "1-D batched pad 1"),
    ((3, 7), (2,), None, (0,), (1,), "1-D unbatched default stride"),
    ((2, 2, 6, 7), (2, 3), (2, 2), (1, 1), (1, 1), "2-D batched"),
    ((1, 3, 7, 7), (3, 2), (1, 1), (1, 0), (2, 1), "2-D dilation"),
    ((2, 1, 5), (1, 5), (1, 1), (0, 2), (1, 1), "2-D unbatched size-1 axis"),
    ((1, 2, 4, 5, 4), (2, 2, 2), (1, 2, 2), (1, 0, 1), (1, 1, 1), "3-D batched"),
    ((2, 4, 4, 4), (2, 2, 2), None, (0, 0, 0), (1, 1, 1), "3-D unbatched"),
    ((1, 2, 3, 4, 3, 4), (2, 2, 2, 2), (1, 2, 1, 2), (1, 0, 0, 1), (1, 1, 1, 1), "4-D batched"),
]


def _distinct(rng, shape):
    """Distinct values (spacing 2/size) in random order: no ties, so max-pool is smooth nearby."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * (2.0 / n) - 1.0).reshape(shape)


def _max_pool_samples(rng):
    return [Sample((_distinct(rng, xs),), dict(kernel_size=k, stride=s, padding=p, dilation=dil), desc)
            for xs, k, s, p, dil, desc in _POOL]


def _no_dil(rows):
    return [r for r in rows if all(v == 1 for v in r[4])]


def _avg_pool_samples(rng):
    return [Sample((rand(rng, *xs),), dict(kernel_size=k, stride=s, padding=p), desc)
            for xs, k, s, p, dil, desc in _no_dil(_POOL)]


def _smooth_samples(rng):
    out = []
    for (xs, k, s, p, dil, desc), beta in zip(_no_dil(_POOL), (1.0, 5.0, -2.0, 0.5, 3.0, -1.0, 2.0)):
        out.append(Sample((rand(rng, *xs),), dict(kernel_size=k, beta=beta, stride=s, padding=p),
                          f"{desc} beta {beta}"))
    return out


def _pool_bad(name, dilation):
    def bad(rng):
        def a(**kw):
            base = dict(kernel_size=(2, 2), stride=(1, 1), padding=(0, 0))
            if name == "smooth_max_pool":
                base["beta"] = 1.0
            base.update(kw)
            return base

        x = np.ones((1, 2, 5, 5))
        cases = [
            BadInput((x,), a(padding=(2, 0)), ShapeError, "at most half of kernel_size (2, 2)", "padding > k/2"),
            BadInput((np.ones((1, 2, 3, 3)),), a(kernel_size=(5, 5), padding=(0, 0)), ShapeError,
                     "empty output: input spatial shape (3, 3), kernel (5, 5), stride (1, 1), padding (0, 0)",
                     "empty output"),
            BadInput((x,), a(stride=(0, 1)), ShapeError, "stride (0, 1) must be positive", "stride 0"),
            BadInput((x,), a(kernel_size=(0, 2)), ShapeError, "zero-size kernel", "zero-size kernel"),
            BadInput((np.ones((5,)),), a(), ShapeError, "axes", "input rank"),
            BadInput((np.ones((1,) * 10),), a(kernel_size=(1,) * 9, stride=None, padding=0), ShapeError,
                     "supported are 1 to 8", "9 spatial axes"),
            BadInput((x,), a(kernel_size=2), ShapeError, "one entry per spatial axis", "int kernel_size"),
        ]
        if dilation:
            cases.append(BadInput((np.ones((1, 2, 2)),), a(kernel_size=(2,), stride=(1,), padding=(1,), dilation=(3,)),
                                  ShapeError, "wholly in padding", "window wholly in padding"))
        if name == "smooth_max_pool":
            for beta in (0.0, float("inf"), float("nan")):
                cases.append(BadInput((x,), a(beta=beta), DomainError, "beta", f"beta {beta}"))
        return cases
    return bad


defop(OpInfo("max_pool", _max_pool_samples, _pool_bad("max_pool", True), torch_ref=_torch_max_pool))
defop(OpInfo("avg_pool", _avg_pool_samples, _pool_bad("avg_pool", False), torch_ref=_torch_avg_pool))
defop(OpInfo("smooth_max_pool", _smooth_samples, _pool_bad("smooth_max_pool", False), torch_ref=_torch_smooth))
