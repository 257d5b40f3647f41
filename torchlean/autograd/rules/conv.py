"""Runtime rules of convolution and pooling (meaning: :mod:`torchlean.spec.conv`).

The kernels take a batched input; an unbatched ``(C, *spatial)`` input gets a
leading axis of 1 here (a view) and loses it again on the way out. Pools act on
the last ``d`` axes whatever leads them, so they need no such step.
"""

from __future__ import annotations

from ...spec.conv import check_beta, conv_params, pool_params
from .registry import defrule


def _lead(a):
    return a.reshape((1,) + a.shape)


def _unlead(a):
    return a.reshape(a.shape[1:])


# ---- conv / conv_transpose -------------------------------------------------------------------

def _conv_bwd(has_bias, transpose):
    def bwd(K, saved, g, needs):
        xb, w, P = saved
        gb = g if P.batched else _lead(g)
        need_b = has_bias and needs[2]
        if transpose:
            dx, dw, db = K.conv_transpose_backward(xb, w, gb, P.stride, P.padding, P.output_padding,
                                                   P.dilation, P.groups, needs[0], needs[1], need_b)
        else:
            dx, dw, db = K.conv_backward(xb, w, gb, P.stride, P.padding, P.dilation, P.groups,
                                         needs[0], needs[1], need_b)
        if dx is not None and not P.batched:
            dx = _unlead(dx)
        return (dx, dw, db) if has_bias else (dx, dw)
    return bwd


def _conv_rule(name, has_bias):
    def fwd(K, x, w, *rest, stride=1, padding=0, dilation=1, groups=1):
        b = rest[0] if has_bias else None
        P = conv_params(name, x.shape, w.shape, None if b is None else b.shape, stride=stride,
                        padding=padding, dilation=dilation, groups=groups)
        xb = x if P.batched else _lead(x)
        y = K.conv_forward(xb, w, b, P.stride, P.padding, P.dilation, P.groups)
        return (y if P.batched else _unlead(y)), (xb, w, P)

    defrule(name, fwd, _conv_bwd(has_bias, False))


def _conv_transpose_rule(name, has_bias):
    def fwd(K, x, w, *rest, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
        b = rest[0] if has_bias else None
        P = conv_params(name, x.shape, w.shape, None if b is None else b.shape, stride=stride,
                        padding=padding, dilation=dilation, groups=groups, output_padding=output_padding,
                        transpose=True)
        xb = x if P.batched else _lead(x)
        y = K.conv_transpose_forward(xb, w, b, P.stride, P.padding, P.output_padding, P.dilation, P.groups)
        return (y if P.batched else _unlead(y)), (xb, w, P)

    defrule(name, fwd, _conv_bwd(has_bias, True))


_conv_rule("conv", True)
_conv_rule("conv_nobias", False)
_conv_transpose_rule("conv_transpose", True)
_conv_transpose_rule("conv_transpose_nobias", False)


# ---- pooling ---------------------------------------------------------------------------------

def _max_pool_fwd(K, x, *, kernel_size, stride=None, padding=0, dilation=1):
    P = pool_params("max_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding,
                    dilation=dilation)
    y, idx = K.max_pool_forward(x, P.kernel, P.stride, P.padding, P.dilation)
    return y, (idx, x.shape, P)


def _max_pool_bwd(K, saved, g, needs):
    idx, shape, P = saved
    return (K.max_pool_backward(g, idx, shape, P.kernel, P.stride, P.padding, P.dilation),)


def _max_pool_infer(K, x, *, kernel_size, stride=None, padding=0, dilation=1):
    P = pool_params("max_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding,
                    dilation=dilation)
    return K.max_pool_forward(x, P.kernel, P.stride, P.padding, P.dilation, winners=False)[0]


defrule("max_pool", _max_pool_fwd, _max_pool_bwd, infer=_max_pool_infer)


def _avg_pool_fwd(K, x, *, kernel_size, stride=None, padding=0):
    P = pool_params("avg_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    return K.avg_pool_forward(x, P.kernel, P.stride, P.padding), (x.shape, P)


def _avg_pool_bwd(K, saved, g, needs):
    shape, P = saved
    return (K.avg_pool_backward(g, shape, P.kernel, P.stride, P.padding),)


defrule("avg_pool", _avg_pool_fwd, _avg_pool_bwd)


def _smooth_fwd(K, x, *, kernel_size, beta, stride=None, padding=0):
    P = pool_params("smooth_max_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    beta = check_beta("smooth_max_pool", beta)
    y, m, lse = K.smooth_max_pool_forward(x, P.kernel, beta, P.stride, P.padding)
    return y, (x, m, lse, beta, P)


def _smooth_bwd(K, saved, g, needs):
    x, m, lse, beta, P = saved
    return (K.smooth_max_pool_backward(x, m, lse, g, P.kernel, beta, P.stride, P.padding),)


defrule("smooth_max_pool", _smooth_fwd, _smooth_bwd)
