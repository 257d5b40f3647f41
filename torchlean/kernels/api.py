"""The buffer kernel surface: one contract, several devices.

``get_kernels("cpu")`` (NumPy, :mod:`torchlean.kernels.host`) and
``get_kernels("cuda")`` (CuPy + our ``.cu`` kernels, :mod:`torchlean.kernels.cuda`)
return objects with exactly the names below. Arrays are row-major contiguous
NumPy / CuPy arrays that carry their shapes; float32 by default, float64 works
everywhere. A kernel never changes the dtype of its float inputs. Kernels do not
validate shapes: the tape's shape rules do that before any launch, so a bad
input is a :class:`TorchLeanError` raised on the host, never a device fault.

Index arguments are host integer sequences (lists, tuples or NumPy int arrays).
Negative indices or indices >= 2**32 raise :class:`IndexRangeError` (checked by
:func:`check_indices`); indices in uint32 range but out of bounds make gather
yield 0 (a zero row) and make scatter ignore them; repeated scatter indices
accumulate.

``KERNELS`` maps every name to its signature and semantics; :func:`check_surface`
asserts that an implementation has all of them and names any that is missing.
"""

from __future__ import annotations

from ..spec.index import UINT32_LIMIT, check_indices  # noqa: F401  (part of the contract)

#: The contract by family: kernel name -> signature and semantics. A family is one file name in
#: ``kernels/host/`` and ``kernels/cuda/`` (beside ``kernels/cuda/src/<family>.cu``).
CONTRACT: dict[str, dict[str, str]] = {
    "reduce": {
        # the seeds' Cuda.Kernels reductions
        "reduce_sum_axis0": "(x[rows, cols]) -> [cols]: sum down the rows",
        "reduce_sum_axis1": "(x[rows, cols]) -> [rows]: sum across the columns",
        "reduce_max_axis0": "(x[rows, cols]) -> [cols]: max down the rows (rows >= 1)",
        "reduce_max_axis1": "(x[rows, cols]) -> [rows]: max across the columns (cols >= 1)",
        "reduce_sum_axis": "(x, axis) -> x with `axis` summed out (N-D, row-major)",
        "sum": "(x, axes: tuple | None, keepdim) -> sum over axes (all if None)",
        "mean": "(x, axes, keepdim)",
        "amax": "(x, axis, keepdim) -> max over one axis",
        "max_bwd": "(x, y_keepdim, g_keepdim, axis) -> g routed to the first maximal entry along axis",
        "argmax": ("(x, axis: int | None, keepdim) -> int64 index of the first maximal entry along axis (NaN counts "
                   "as maximal); axis None: of the flattened x (keepdim keeps every axis as 1)"),
        "argmin": "(x, axis: int | None, keepdim) -> int64 index of the first minimal entry, as argmax",
        "sum_to_shape": "(g, shape) -> adjoint of NumPy broadcasting of an array of `shape` to g.shape",
        # sorting and counting (integer results, data-dependent shapes)
        "argsort": ("(x, axis, descending) -> int64 array: indices of a stable sort along axis (ties keep their "
                    "order, descending too); NaN sorts as the largest value"),
        "unique": ("(x, axis: int | None) -> (values, inverse, counts): the sorted distinct entries of the "
                   "flattened x (axis None; NaNs all distinct) or distinct slices along axis; inverse (x's shape, or "
                   "[x.shape[axis]]) and counts int64"),
        "bincount": ("(x, weights | None, minlength) -> [max(max(x) + 1, minlength)] counts of each value of the "
                     "non-negative int64 1-D x: int64, or sums of weights in weights' dtype"),
        "histc": ("(x, bins, lo, hi) -> [bins] counts in x's float dtype of the entries in [lo, hi] (lo < hi), "
                  "bin int((v - lo) * bins / (hi - lo)) in x's dtype, v = hi in the last bin"),
        "searchsorted": ("(seq, values, right) -> int64 array of values' shape: insertion indices into the sorted "
                         "last axis of seq (1-D seq: shared; else one row per leading index of values), right: "
                         "after equal entries"),
    },
    "shape": {
        # the seeds' Cuda.Kernels layout kernels
        "concat1d": "(a[n], b[m]) -> [n + m]",
        "slice1d": "(x[n], start, length) -> [length] = x[start:start+length] (start+length <= n)",
        "broadcast_vec_to_rows": "(v[cols], rows) -> [rows, cols] with out[i, j] = v[j]",
        "broadcast_vec_to_cols": "(v[rows], cols) -> [rows, cols] with out[i, j] = v[i]",
        "broadcast_to": "(x, in_dims, out_dims, axis_map) -> [out_dims]: the seeds' axis-map broadcast (shape.py)",
        "reduce_from_broadcast_to": "(g, in_dims, out_dims, axis_map) -> [in_dims]: adjoint of broadcast_to (sums)",
        "swap_adjacent_at_depth": "(x, dims, depth) -> swaps axes depth and depth+1; identity if depth+1 >= len(dims)",
        "transpose2d": "(x[rows, cols]) -> [cols, rows] (a contiguous copy)",
        # general data movement
        "permute": "(x, perm) -> contiguous copy with out axis i = x axis perm[i]",
        "concat": "(xs: sequence of arrays, axis) -> their concatenation along axis",
        "stack": "(xs: sequence of same-shape arrays, axis) -> stacked along a new axis",
        "basic_index": "(x, key) -> contiguous copy of x[key]; key a tuple of ints, slices, None and Ellipsis",
        "basic_index_bwd": "(g, shape, key) -> zeros of `shape` with g written at x[key] (the adjoint of basic_index)",
        "basic_index_add": ("(x, key, g) -> None: x[key] += g in place (x contiguous, g of x[key]'s shape): "
                            "basic_index_bwd's result added into a gradient that is already there"),
        "flip": "(x, axes: tuple of distinct non-negative ints) -> contiguous copy of x reversed along each of axes",
    },
    "index": {
        "gather_vec": "(v[n], indices[k]) -> [k]; out-of-bounds -> 0",
        "gather_rows": "(mat[rows, cols], indices[k]) -> [k, cols]; out-of-bounds -> zero row",
        "scatter_add": "(x[n], values[k], indices[k]) -> copy of x with out[idx[j]] += values[j]; OOB ignored",
        "scatter_add_row": "(mat[rows, cols], row[cols], i) -> copy of mat with out[i, :] += row; OOB ignored",
        "scatter_add_rows": "(mat[rows, cols], values[k, cols], indices[k]) -> copy with rows added; OOB ignored",
        "device_ints": ("(a: host int array) -> int64 array of the device with a's values, same shape: a itself "
                        "on the CPU; on CUDA the buffer a was copied from (host_ints), else an upload (small arrays "
                        "once per content)"),
        "host_ints": ("(x: int array of the device) -> read-only host copy of its values; on CUDA the copy is "
                      "kept per buffer until an integer array is written in place (fill), and device_ints and "
                      "the index kernels given it read x's buffer with no upload"),
    },
    "linalg": {
        "bmm": "(a[batch, m, n], b[batch, n, p]) -> [batch, m, p]",
        "matmul": "(a, b) -> NumPy matmul semantics (2-D, batched with broadcast prefixes)",
        "matmul_t": ("(a, b, ta, tb) -> matmul(a with its last two axes swapped if ta, b likewise if tb) (both "
                     "at least 2-D); a swap is an operand flag where the device's products take strides"),
        "linear": "(x[..., in], w[out, in], b[out] | None) -> x @ w.T + b",
        "linear_bwd": "(x, w, g, need_x, need_w, need_b) -> (dx, dw, db), None where not needed",
        # decompositions (LAPACK on the host, cuSOLVER on CUDA); batch axes lead everywhere; where a
        # matrix is singular (solve) or not positive-definite (cholesky) the whole result is NaN
        "linalg_solve": "(a[..., n, n], b[..., n, k]) -> x[..., n, k]: a x = b, batch axes broadcast",
        "linalg_cholesky": "(a[..., n, n]) -> l[..., n, n]: lower factor, a = l l^T (a's lower triangle read)",
        "linalg_cholesky_bwd": "(l, g) -> da: symmetric cotangent of a",
        "linalg_qr": ("(a[..., m, n], mode) mode in {'reduced', 'complete', 'r'} -> (q, r): Householder QR, "
                      "LAPACK's signs; q of shape (0,) in mode 'r'"),
        "linalg_qr_bwd": "(a, q, r, gq, gr, mode) -> da (modes 'reduced', and 'complete' with m <= n)",
        "linalg_svd": ("(a[..., m, n], full_matrices) -> (u, s, vh): a = u diag(s) vh, s descending; each column "
                       "of u (and each row of vh beyond min(m, n)) has its largest-magnitude entry positive"),
        "linalg_svd_bwd": "(u, s, vh, gu, gs, gvh) -> da, from the first min(m, n) singular vectors",
        "linalg_eigh": ("(a[..., n, n], upper) -> (w, v): ascending eigenvalues and eigenvectors of the symmetric "
                        "matrix read from the lower (upper=True: upper) triangle; each column of v has its "
                        "largest-magnitude entry positive"),
        "linalg_eigh_bwd": "(w, v, gw, gv) -> da: symmetric cotangent of a",
        "linalg_det": "(a[..., n, n]) -> [...]: determinant (1 for n = 0)",
        "linalg_det_bwd": "(a, g) -> da = g * cofactor(a) (finite for singular a)",
        "linalg_slogdet": "(a[..., n, n]) -> (sign, logabsdet): det = sign * exp(logabsdet), in a's dtype",
        "linalg_slogdet_bwd": "(a, g) -> da = g * inv(a)^T, g the cotangent of logabsdet",
    },
    "memory": {
        "zeros": "(shape, dtype) -> zero-filled array",
        "full": "(shape, value, dtype) -> array filled with value",
        "empty": "(shape, dtype) -> uninitialised array (callers write every element)",
        "copy": "(x) -> a contiguous copy",
        "fill": "(x, value) -> None: every element of x set to value, in place",
        "assign": "(dst, src) -> None: dst[...] = src in place; src an array of any device, a scalar or a "
                  "list, broadcast to dst's shape and cast to its dtype",
        "from_host": "(a: np.ndarray, dtype) -> device array; float64 -> float32 rounds to nearest even",
        "to_host": "(x) -> np.ndarray copy on the host",
        "to_device": "(x: an array of any device, device) -> x's values on `device` (x itself if already there)",
        "astype": "(x, dtype) -> x converted (a copy only if the dtype differs)",
        "ascontiguous": "(x) -> x if row-major contiguous, else a contiguous copy",
        "from_dlpack": "(obj) -> an array of this device sharing the memory of DLPack-capable obj (no copy)",
        "dlpack": ("(x, **kw) -> x.__dlpack__(**kw); on CUDA the buffer is noted as shared, so host copies of it "
                   "are never reused (host_ints)"),
        "bool_mask": ("(mask: host 0/1 or bool array, or a device array, shape) -> bool array of the device "
                      "(nonzero = True) broadcast to shape; a view where possible, and on CUDA a host mask "
                      "is uploaded once per content (only its distinct entries travel)"),
    },
    "elementwise": {
        # NumPy broadcasting
        "add": "(a, b) -> a + b", "sub": "(a, b) -> a - b", "mul": "(a, b) -> a * b",
        "div": "(a, b) -> a / b", "maximum": "(a, b)", "minimum": "(a, b)",
        "scale": "(x, c) -> c * x for a Python scalar c",
        "add_scalar": "(x, c) -> x + c",
        "neg": "(x)", "pow_scalar": "(x, p) -> x ** p", "abs": "(x)", "sqrt": "(x)",
        "exp": "(x)", "log": "(x) (IEEE: -inf at 0, nan below)", "inv": "(x) -> 1 / x",
        "sin": "(x)", "cos": "(x)", "relu": "(x)", "sigmoid": "(x)", "tanh": "(x)",
        "softplus": "(x) -> max(x, 0) + log1p(exp(-|x|))", "silu": "(x)",
        "gelu": "(x, approximate) approximate in {'none', 'tanh'}",
        "safe_log": "(x) -> log(softplus(x) + 1e-6)",
        "erf": "(x) -> the error function 2/sqrt(pi) int_0^x exp(-t^2) dt",
        "tan": "(x)", "asin": "(x)", "acos": "(x)", "atan": "(x)",
        "sinh": "(x)", "cosh": "(x)", "asinh": "(x)", "acosh": "(x)", "atanh": "(x)",
        "expm1": "(x) -> exp(x) - 1, accurate for |x| << 1", "log1p": "(x) -> log(1 + x), accurate for |x| << 1",
        "erfc": "(x) -> 1 - erf(x), accurate in the right tail",
        "erfinv": "(x) -> the inverse of erf on [-1, 1]; +-inf at +-1, NaN outside",
        "floor": "(x) float", "ceil": "(x) float", "round": "(x) float, half to even", "trunc": "(x) float",
        "atan2": "(a, b) -> the angle of (b, a) in [-pi, pi]",
        "fmod": "(a, b) -> a - b * trunc(a / b), exactly (C's fmod); integer a, b (b != 0) too",
        "remainder": "(a, b) -> a - b * floor(a / b), exactly, with b's sign (Python's %); integer a, b (b != 0) too",
        "floor_divide": "(a, b) -> Python's a // b (float: floor((a - fmod(a, b)) / b)); integer a, b (b != 0) too",
        "power": "(a, b) -> a ** b elementwise (NumPy broadcasting); integers with b >= 0 too",
        "bitwise": ("(a, b, op) integer or bool arrays, op in {'and','or','xor','left_shift','right_shift'}; "
                    "a shift by < 0 or >= the bit width gives 0 (-1 for a negative a shifted right); "
                    "a float array is read as its int64 values (truncated; NaN, inf and |x| >= 2**62 as 0)"),
        "bitwise_not": "(x) integer or bool array -> ~x; a float array is read as bitwise's",
        "clamp": "(x, lo, hi) lo/hi may be None",
        "where": "(cond: bool array, a, b)",
        "sign": "(x) -> -1, 0 or 1 in x's dtype, (x > 0) - (x < 0) (NaN gives 0); bool x is returned as is",
        "compare": "(a, b, op) op in {'lt','le','gt','ge','eq','ne'} -> bool array",
        # fused backward (one pass on CUDA)
        "relu_bwd": "(x, g) -> g * (x > 0)",
        "abs_bwd": "(x, g) -> g * sign(x)",
        "sqrt_bwd": "(y, g) -> g * 0.5 / y where y > 0 else 0 (y = sqrt(x))",
        "sigmoid_bwd": "(y, g) -> g * y * (1 - y)",
        "tanh_bwd": "(y, g) -> g * (1 - y * y)",
        "softplus_bwd": "(x, g) -> g * sigmoid(x)",
        "silu_bwd": "(x, g) -> g * s * (1 + x * (1 - s)), s = sigmoid(x)",
        "gelu_bwd": "(x, g, approximate)",
        "safe_log_bwd": "(x, g) -> g * sigmoid(x) / (softplus(x) + 1e-6)",
        "clamp_bwd": "(x, g, lo, hi) -> g where lo < x < hi else 0",
        "minmax_bwd": "(a, b, g, is_max) -> (ga, gb) full-size; ties split 1/2-1/2",
        "pow_bwd": "(x, g, p) -> g * p * x ** (p - 1)",
    },
    "softmax": {
        # last axis, leading axes folded into rows
        "softmax": "(x) -> softmax over the last axis",
        "softmax_bwd": "(y, g) -> y * (g - sum(g * y, -1))",
        "log_softmax": "(x) -> x - max - log sum exp(x - max), directly",
        "log_softmax_bwd": "(y, g) -> g - exp(y) * sum(g, -1)",
        "masked_softmax": "(x, mask) -> softmax with blocked (mask == 0) weights exactly 0; fully blocked rows 0",
    },
    "loss": {
        "mse_loss": "(yhat, target) -> 0-d mean((yhat - target) ** 2)",
        "mse_loss_bwd": "(yhat, target, g) -> (2 g (yhat - t) / n, -same)",
        "nll_loss": "(logp[N, C], target[N] int64, weight[C] | None, ignore_index, reduction) -> loss",
        "nll_loss_bwd": "(logp, target, weight, ignore_index, reduction, g) -> dlogp",
    },
    "rng": {
        # counter-based: the same numbers on every device (torchlean.spec.rng)
        "rand_uniform": "(shape, seed, counter, dtype) -> U[0, 1) keyed by (seed, counter, element index)",
        "randn": "(shape, seed, counter, dtype) -> N(0, 1) by Box-Muller over the same stream",
        "bernoulli_mask": "(shape, p_keep, seed, counter, dtype) -> 1.0 where U < p_keep else 0.0",
    },
    "optim": {
        # PyTorch's update rules, in place on param and state arrays
        "sgd_step": "(p, g, buf | None, lr, momentum, dampening, weight_decay, nesterov, first) -> None",
        "adam_step": "(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad_vmax | None) -> None",
        "adam_step_multi": ("(ps, gs, ms, vs, vmaxs, steps, lr, beta1, beta2, eps, weight_decay, decoupled, maximize) "
                            "-> None: adam_step of every parameter (parallel lists; vmaxs entries None without "
                            "AMSGrad; maximize negates each gradient), bit for bit adam_step's update"),
        "adagrad_step": "(p, g, sum_sq, step, lr, lr_decay, weight_decay, eps) -> None",
        "rmsprop_step": "(p, g, sq_avg, buf | None, grad_avg | None, lr, alpha, eps, weight_decay, momentum) -> None",
        "adadelta_step": "(p, g, sq_avg, acc_delta, lr, rho, eps, weight_decay) -> None",
    },
    "conv": {
        "conv_forward": ("(x[N, C_in, *S], w[C_out, C_in/G, *k], b[C_out] | None, stride, padding, dilation, groups) "
                         "-> [N, C_out, *out]; zero padding"),
        "conv_backward": ("(x, w, g, stride, padding, dilation, groups, need_x, need_w, need_b) -> (dx, dw, db), "
                          "None where not needed"),
        "conv_transpose_forward": ("(x[N, C_in, *S], w[C_in, C_out/G, *k], b | None, stride, padding, output_padding, "
                                   "dilation, groups) -> [N, C_out, *out]"),
        "conv_transpose_backward": ("(x, w, g, stride, padding, output_padding, dilation, groups, need_x, need_w, "
                                    "need_b) -> (dx, dw, db)"),
        "max_pool_forward": ("(x[..., *S], kernel, stride, padding, dilation, winners=True) -> (y, idx): idx = "
                             "row-major window offset of the first winner; padding never wins; idx None when "
                             "winners is False"),
        "max_pool_backward": "(g, idx, x_shape, kernel, stride, padding, dilation) -> dx: g routed to idx",
        "avg_pool_forward": "(x[..., *S], kernel, stride, padding) -> window sums / prod(kernel) (padding counts as zeros)",
        "avg_pool_backward": "(g, x_shape, kernel, stride, padding) -> dx",
        "smooth_max_pool_forward": ("(x[..., *S], kernel, beta, stride, padding) -> (y, m, lse): y = (m + lse)/beta, "
                                    "m = window max of beta x, lse = log sum exp(beta x - m); real cells only"),
        "smooth_max_pool_backward": ("(x, m, lse, g, kernel, beta, stride, padding) -> dx = sum over windows of "
                                     "g * exp(beta x - m - lse)"),
    },
    "norm": {
        "layer_norm_fwd": "(x[rows, n], gamma[n] | None, beta[n] | None, eps) -> (y, mean[rows], rstd[rows]); biased var",
        "layer_norm_bwd": "(x, gamma | None, mean, rstd, g) -> (dx, dgamma, dbeta); dgamma/dbeta None if gamma is None",
        "batch_norm_fwd": "(x[N, C, S], gamma[C], beta[C], eps) -> (y, mean[C], rstd[C]); stats over N and S, biased var",
        "batch_norm_bwd": "(x[N, C, S], gamma, mean, rstd, g) -> (dx, dgamma[C], dbeta[C])",
        "batch_norm_running_update": ("(x[N, C, S], running_mean[C] | None, running_var[C] | None, momentum) -> None: "
                                      "in place, running = (1 - momentum) running + momentum stat, stat the batch mean "
                                      "and the unbiased batch variance (divisor N S - 1), in float64; x's dtype"),
    },
    "attention": {
        "flash_attention_fwd": ("(q[b, n, d], k[b, m, d], v[b, m, e], mask[b, n, m] bool | None, scale, hard, causal) "
                                "-> (out[b, n, e], lse[b, n]): softmax(q k^T scale) v over key tiles (online "
                                "softmax); blocked logits -> -1000.0, or with hard weights 0 (no allowed key: out 0, "
                                "lse +inf); causal (hard only) also blocks keys j > query i, and skips the key tiles "
                                "wholly above the diagonal"),
        "flash_attention_bwd": ("(q, k, v, mask, out, lse, g, scale, hard, causal) -> (dq, dk, dv); probabilities "
                                "recomputed from lse"),
        "flash_attention_bwd_q": "(q, k, v, mask, out, lse, g, scale, hard, causal) -> dq",
        "flash_attention_bwd_k": "(q, k, v, mask, out, lse, g, scale, hard, causal) -> dk",
        "flash_attention_bwd_v": "(q, k, v, mask, out, lse, g, scale, hard, causal) -> dv",
    },
    "spectral": {
        "rfft1d_packed": "(x[batch, n]) -> [batch, n//2+1, 2]: unnormalized real DFT, [re, im] last",
        "irfft1d_packed": "(p[batch, n//2+1, 2], n) -> [batch, n]: (1/n) inverse; imag at DC (and Nyquist, n even) ignored",
        "spectral_conv1d_rfft_fwd": ("(x[batch, grid, in], w_re[modes, in, out], w_im) -> [batch, grid, out]: "
                                     "irfft(Y), Y[k] = rfft(x)[k] (w_re[k] + i w_im[k]) for k < modes, else 0"),
        "spectral_conv1d_rfft_bwd_x": "(x, w_re, w_im, g) -> dx = irfft(rfft(g)[:modes] W^H)",
        "spectral_conv1d_rfft_bwd_wre": "(x, w_re, w_im, g) -> dw_re = Re(X^H c rfft(g)), c = 1/n at DC/Nyquist, 2/n inside",
        "spectral_conv1d_rfft_bwd_wim": "(x, w_re, w_im, g) -> dw_im = Im(X^H c rfft(g))",
        "spectral_conv1d_rfft_bwd": ("(x, w_re, w_im, g, need_x, need_w) -> (dx, dw_re, dw_im), None where not "
                                     "needed: the three gradients above, each spectrum computed once"),
    },
    "graphs": {
        "graph_capture": ("() -> a GraphCapture: a private memory pool, a capture stream and the cuBLAS capture "
                          "scope; capture(fn) returns the CUDA graph of fn's kernels (kernels/cuda/graphs.py). "
                          "CUDA only: the CPU raises DeviceError"),
    },
    "scan": {
        "selective_scan_diag_fwd": "(a[S], b[S], x[..., L, S], h0[..., S]) -> h[..., L, S], h[t] = a h[t-1] + b x[t]",
        "selective_scan_diag_bwd": "(a, b, x, h0, h, g) -> (da[S], db[S], dx, dh0); g[t] = dY[t] + a g[t+1]",
        "selective_scan_diag_var_fwd": "(a[..., L, S], b[..., L, S], x, h0[..., S]) -> h, h[t] = a[t] h[t-1] + b[t] x[t]",
        "selective_scan_diag_var_bwd": "(a, b, x, h0, h, g) -> (da, db, dx, dh0) of x's shape (dh0: h0's)",
        # recurrences, time-major: gx (T, N, G*H) holds every step's input projection; mask None or a
        # host bool (T, N) array (False: the state is held). One product and one fused cell per step.
        "lstm_scan_fwd": ("(gx[T, N, 4H], w_hh[4H, H], h0[N, H], c0[N, H], mask) -> (states[2, T, N, H], "
                          "acts[T, N, 4H]); states: every h, then every c; acts: the activated gates i, f, g, o, "
                          "kept for the backward"),
        "lstm_scan_bwd": "(w_hh, h0, c0, mask, states, acts, g[2, T, N, H]) -> (dgx, dw_hh, dh0, dc0)",
        "gru_scan_fwd": ("(gx[T, N, 3H], w_hh[3H, H], b_hh[3H], h0[N, H], mask) -> (h[T, N, H], acts[T, N, 4H]); "
                         "acts: r, z, n and a_n = (h w_hh^T + b_hh)_n"),
        "gru_scan_bwd": "(w_hh, h0, mask, h, acts, g) -> (dgx, dw_hh, db_hh, dh0)",
        "rnn_scan_fwd": "(gx[T, N, H], w_hh[H, H], h0[N, H], mask, relu) -> h[T, N, H]: tanh or relu(gx[t] + h w_hh^T)",
        "rnn_scan_bwd": "(w_hh, h0, mask, h, g, relu) -> (dgx, dw_hh, dh0); relu'(0) = 0",
        # cumulative ops along one axis of an N-d x (ints too); float32 accumulates in double
        "cumsum": "(x, axis) -> running sums along axis, x's shape and dtype",
        "cumprod": "(x, axis) -> running products along axis, x's shape and dtype",
        "cumprod_bwd": ("(x, y, g, axis) -> dx = sum_{j >= i} g[j] prod_{m <= j, m != i} x[m]; exact with zeros in x "
                        "(never divides by a zero entry)"),
        "cumargmax": "(x, axis) -> int64 array: index of the running maximum along axis, the last of ties; NaN wins",
        "cumargmin": "(x, axis) -> int64 array: index of the running minimum along axis, the last of ties; NaN wins",
    },
}

#: Every kernel: name -> signature and semantics.
KERNELS: dict[str, str] = {name: doc for family in CONTRACT.values() for name, doc in family.items()}
#: The family of every kernel.
KERNEL_FAMILY: dict[str, str] = {name: fam for fam, family in CONTRACT.items() for name in family}
#: The kernel families (the op families of :data:`torchlean.spec.FAMILIES`, plus ``optim``).
KERNEL_FAMILIES: tuple = tuple(CONTRACT)


def check_surface(impl, device: str) -> list[str]:
    """Names of KERNELS that ``impl`` lacks (empty when the surface is complete)."""
    return [n for n in KERNELS if not callable(getattr(impl, n, None))]
