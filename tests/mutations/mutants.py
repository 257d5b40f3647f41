"""The planted bugs of the mutation test: realistic one-edit mistakes in the CPU kernels and rules.

Each :class:`Mutant` replaces ``old`` (which must occur exactly once) by ``new`` in ``file``
(relative to the package directory) of a *copy* of the package. ``kind`` says what the bug
changes: ``"value"`` — a forward value or a gradient of an op, or an optimizer step, which
``torchlean check`` must catch; ``"kernel"`` — a contract kernel that no op rule calls, which the
CPU kernel tests (tests/test_checker_catches.py) must catch. ``model`` says whether the bug
changes a node's value or gradient in one of the exported models (tests/mutations/models.py) on
the inputs ``check --model`` uses (random normal, and x100), so that check must catch it.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    desc: str
    kind: str = "value"
    model: bool = False


EW = "kernels/host/elementwise.py"

MUTANTS = [
    Mutant("softmax_no_shift", "kernels/host/softmax.py",
           "def softmax(x):\n    z = x - x.max(axis=-1, keepdims=True)\n", "def softmax(x):\n    z = x.copy()\n",
           "softmax without the row-max shift (exact for |x| <= 3, inf/NaN at x100)", model=True),
    Mutant("cross_entropy_no_lse_shift", "autograd/rules/loss.py",
           "    lp = K.log_softmax(_rows(K, logits))\n",
           "    z = _rows(K, logits)\n    lp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))\n",
           "cross-entropy's log-sum-exp without the max shift"),
    Mutant("relu_grad_at_zero", "autograd/rules/elementwise.py",
           'defrule("relu", lambda K, x: ((y := K.relu(x)), y), lambda K, y, g, n: (K.relu_bwd(y, g),))',
           'defrule("relu", lambda K, x: (K.relu(x), x), '
           'lambda K, x, g, n: (np.where(x >= 0, g, np.zeros_like(g)),))',
           "relu'(0) = 1 instead of 0 (the rule saves the input and lets x = 0 through)"),
    Mutant("relu_bwd_ge", EW, "def relu_bwd(x, g):\n    return np.where(x > 0, g, _c(g, 0))",
           "def relu_bwd(x, g):\n    return np.where(x >= 0, g, _c(g, 0))",
           "relu_bwd tests >= 0 on the saved output (which is 0 wherever the input was negative)",
           model=True),
    Mutant("slice1d_off_by_one", "kernels/host/shape.py", "    return x[start:start + length].copy()",
           "    return x[start + 1:start + 1 + length].copy()", "slice1d reads one element late", kind="kernel"),
    Mutant("log_softmax_no_shift", "kernels/host/softmax.py",
           "def log_softmax(x):\n    z = x - x.max(axis=-1, keepdims=True)\n", "def log_softmax(x):\n    z = x\n",
           "log_softmax without the row-max shift", model=True),
    Mutant("abs_grad_at_zero", EW, "def abs_bwd(x, g):\n    return g * np.sign(x)",
           "def abs_bwd(x, g):\n    return g * np.where(x >= 0, _c(g, 1), _c(g, -1))", "abs'(0) = 1 instead of 0"),
    Mutant("clamp_grad_at_bound", EW, "        inside &= x > lo\n", "        inside &= x >= lo\n",
           "clamp' = 1 at the lower bound (not strictly inside)"),
    Mutant("maximum_tie_split", EW, "np.where(a == b, _c(g, 0.5), _c(g, 0))", "np.where(a == b, _c(g, 1), _c(g, 0))",
           "maximum/minimum give the whole cotangent to both sides on ties"),
    Mutant("tanh_bwd_sign", EW, "    return g * (_c(y, 1) - y * y)", "    return g * (y * y - _c(y, 1))",
           "sign error in tanh's VJP", model=True),
    Mutant("softplus_unstable", EW,
           "def softplus(x):\n    return np.maximum(x, _c(x, 0)) + np.log1p(np.exp(-np.abs(x)))",
           "def softplus(x):\n    return np.log1p(np.exp(x))", "softplus as log1p(exp(x)): overflows at x100",
           model=True),
    Mutant("layer_norm_eps_outside_sqrt", "kernels/host/norm.py",
           "    mu, var = _stats(x, (1,))\n    rstd = 1.0 / xp.sqrt(var + eps)",
           "    mu, var = _stats(x, (1,))\n    rstd = 1.0 / (xp.sqrt(var) + eps)",
           "layer norm adds eps to the standard deviation instead of the variance"),
    Mutant("conv_stride_padding_swapped", "autograd/rules/conv.py",
           "y = K.conv_forward(xb, w, b, P.stride, P.padding, P.dilation, P.groups)",
           "y = K.conv_forward(xb, w, b, P.padding, P.stride, P.dilation, P.groups)",
           "convolution called with stride and padding swapped", model=True),
    Mutant("reduce_sum_axis0_wrong_axis", "kernels/host/reduce.py",
           "def reduce_sum_axis0(x):\n    return x.sum(axis=0)", "def reduce_sum_axis0(x):\n    return x.sum(axis=1)",
           "reduce_sum_axis0 sums the wrong axis", kind="kernel"),
    Mutant("layer_norm_bwd_wrong_axis", "kernels/host/norm.py",
           "    m1 = gx.sum(axis=1, keepdims=True, dtype=np.float64) / n\n",
           "    m1 = gx.sum(axis=0, keepdims=True, dtype=np.float64) / n\n",
           "layer norm's backward takes the mean of the cotangent over the wrong axis", model=True),
    Mutant("gather_bounds_off_by_one", "kernels/host/index.py",
           "    idx = check_indices(indices, op)\n    ok = idx < mat.shape[0]\n    if ok.all():",
           "    idx = check_indices(indices, op)\n    ok = idx < mat.shape[0] - 1\n    if ok.all():", "gather treats the last row as out of bounds (a zero row)"),
    Mutant("linear_bwd_transposed", "kernels/host/linalg.py",
           "    dw = g2.T @ x.reshape(rows, x.shape[-1]) if need_w else None",
           "    dw = (x.reshape(rows, x.shape[-1]).T @ g2).reshape(g2.shape[-1], -1) if need_w else None",
           "linear's weight gradient computed transposed (then reshaped)", model=True),
    Mutant("adam_bias_correction", "kernels/host/optim.py",
           "    denom = np.sqrt(vv) / _c(p, math.sqrt(bc2)) + _c(p, eps)",
           "    denom = np.sqrt(vv) / _c(p, bc2) + _c(p, eps)", "Adam divides by 1 - beta2^t, not its square root"),
    Mutant("dropout_no_rescale", "autograd/rules/rng.py",
           "    m = K.scale(K.bernoulli_mask(x.shape, 1.0 - p, seed, counter, x.dtype), 1.0 / (1.0 - p))",
           "    m = K.bernoulli_mask(x.shape, 1.0 - p, seed, counter, x.dtype)",
           "dropout without the 1/(1-p) scaling"),
    Mutant("broadcast_bwd_mean", "kernels/host/reduce.py",
           "    return g.sum(axis=broadcast_axes(shape, g.shape)).reshape(shape)",
           "    return g.mean(axis=broadcast_axes(shape, g.shape)).reshape(shape)",
           "the backward of a broadcast averages instead of summing"),
    Mutant("max_pool_last_winner", "kernels/host/conv.py", "    idx = xp.argmax(cols, axis=-1)\n",
           "    idx = cols.shape[-1] - 1 - xp.argmax(cols[..., ::-1], axis=-1)\n",
           "max-pool routes the cotangent to the last tied winner, not the first", model=True),
    Mutant("sgd_dampening", "kernels/host/optim.py", "            buf += _c(buf, 1 - dampening) * d",
           "            buf += _c(buf, dampening) * d", "SGD momentum uses dampening instead of 1 - dampening"),
    Mutant("nll_mean_by_count", "kernels/host/loss.py",
           "    return xp.asarray(picked.sum() / w.sum(), dtype=logp.dtype)",
           "    return xp.asarray(picked.sum() / n, dtype=logp.dtype)",
           "weighted NLL mean divides by the row count, not the weight sum"),
    Mutant("sigmoid_bwd_sign", EW, "    return g * y * (_c(y, 1) - y)", "    return g * y * (y - _c(y, 1))",
           "sign error in sigmoid's VJP", model=True),
    Mutant("softmax_bwd_no_subtract", "kernels/host/softmax.py",
           "    return y * (g - (g * y).sum(axis=-1, keepdims=True))", "    return y * g",
           "softmax's VJP forgets the subtracted row sum", model=True),
    Mutant("attention_scale_dropped", "kernels/host/attention.py", "    qs = q * _c(q, scale)", "    qs = q",
           "flash attention forgets to scale the logits", model=True),
    Mutant("rmsprop_centered_sign", "kernels/host/optim.py",
           "        avg = np.sqrt(sq_avg - grad_avg * grad_avg) + _c(p, eps)",
           "        avg = np.sqrt(sq_avg + grad_avg * grad_avg) + _c(p, eps)",
           "centered RMSprop adds the squared mean instead of subtracting it"),
    Mutant("cumsum_exclusive", "kernels/host/scan.py",
           "    return xp.cumsum(x, axis=axis, dtype=_acc(x, xp)).astype(x.dtype, copy=False)",
           "    return (xp.cumsum(x, axis=axis, dtype=_acc(x, xp)) - x).astype(x.dtype, copy=False)",
           "cumsum computes the exclusive prefix sum"),
    Mutant("mse_bwd_factor", "kernels/host/loss.py", "_c(yhat, 2.0 / max(yhat.size, 1))",
           "_c(yhat, 1.0 / max(yhat.size, 1))", "MSE's gradient misses the factor 2"),
    Mutant("concat1d_swapped", "kernels/host/shape.py", "    return np.concatenate([a, b])",
           "    return np.concatenate([b, a])", "concat1d puts b before a", kind="kernel"),
    Mutant("reduce_max_axis1_is_min", "kernels/host/reduce.py",
           "def reduce_max_axis1(x):\n    return x.max(axis=1)", "def reduce_max_axis1(x):\n    return x.min(axis=1)",
           "reduce_max_axis1 takes the minimum", kind="kernel"),
    Mutant("broadcast_vec_to_rows_reversed", "kernels/host/shape.py",
           "    return np.ascontiguousarray(np.broadcast_to(v, (rows, v.shape[0])))",
           "    return np.ascontiguousarray(np.broadcast_to(v[::-1], (rows, v.shape[0])))",
           "broadcast_vec_to_rows writes the vector reversed", kind="kernel"),
]
