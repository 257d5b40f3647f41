"""Host kernels of the optim family: PyTorch's update rules, in place on parameter and state arrays."""

from __future__ import annotations

import math

import numpy as np

from .base import _c


# ---- optimizer steps (PyTorch's update rules, in place) -------------------------------------


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, first):
    d = g + _c(p, weight_decay) * p if weight_decay else g
    if momentum:
        if first:
            buf[...] = d
        else:
            buf *= _c(buf, momentum)
            buf += _c(buf, 1 - dampening) * d
        d = d + _c(p, momentum) * buf if nesterov else buf
    p -= _c(p, lr) * d


def adam_step(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, vmax=None):
    if weight_decay:
        if decoupled:
            p *= _c(p, 1 - lr * weight_decay)
        else:
            g = g + _c(p, weight_decay) * p
    m *= _c(m, beta1)
    m += _c(m, 1 - beta1) * g
    v *= _c(v, beta2)
    v += _c(v, 1 - beta2) * g * g
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    vv = v
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
        vv = vmax
    denom = np.sqrt(vv) / _c(p, math.sqrt(bc2)) + _c(p, eps)
    p -= _c(p, lr / bc1) * m / denom


def adagrad_step(p, g, sum_sq, step, lr, lr_decay, weight_decay, eps):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    clr = lr / (1 + (step - 1) * lr_decay)
    sum_sq += g * g
    p -= _c(p, clr) * g / (np.sqrt(sum_sq) + _c(p, eps))


def rmsprop_step(p, g, sq_avg, buf, grad_avg, lr, alpha, eps, weight_decay, momentum):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    sq_avg *= _c(p, alpha)
    sq_avg += _c(p, 1 - alpha) * g * g
    if grad_avg is not None:
        grad_avg *= _c(p, alpha)
        grad_avg += _c(p, 1 - alpha) * g
        avg = np.sqrt(sq_avg - grad_avg * grad_avg) + _c(p, eps)
    else:
        avg = np.sqrt(sq_avg) + _c(p, eps)
    if momentum > 0:
        buf *= _c(p, momentum)
        buf += g / avg
        p -= _c(p, lr) * buf
    else:
        p -= _c(p, lr) * g / avg


def adadelta_step(p, g, sq_avg, acc_delta, lr, rho, eps, weight_decay):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    sq_avg *= _c(p, rho)
    sq_avg += _c(p, 1 - rho) * g * g
    delta = np.sqrt(acc_delta + _c(p, eps)) / np.sqrt(sq_avg + _c(p, eps)) * g
    acc_delta *= _c(p, rho)
    acc_delta += _c(p, 1 - rho) * delta * delta
    p -= _c(p, lr) * delta


def adam_step_multi(ps, gs, ms, vs, vmaxs, steps, lr, beta1, beta2, eps, weight_decay, decoupled, maximize=False):
    for p, g, m, v, vmax, step in zip(ps, gs, ms, vs, vmaxs, steps):
        adam_step(p, -g if maximize else g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, vmax)
