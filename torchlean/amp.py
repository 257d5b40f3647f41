"""``torchlean.amp``: torch's mixed-precision names, honest about what runs.

:class:`autocast` runs torch's CPU op lists in float16 or bfloat16 (bfloat16 storage through
``ml_dtypes``); CUDA autocast is not supported yet (issue 20) and raises
:class:`MixedPrecisionUnsupported`; ``autocast(..., enabled=False)`` changes nothing. :class:`GradScaler` is torch's dynamic loss scaler, enabled or
not (a disabled one is a pass-through: ``scale`` returns the loss, ``step`` calls
``optimizer.step``). As in torch, asking for CUDA autocast or a CUDA scaler where CUDA is not
available warns and disables them.

    >>> import torchlean as tl
    >>> scaler = tl.amp.GradScaler(enabled=False)
    >>> with tl.autocast("cpu", enabled=False):
    ...     loss = (tl.ones(2, requires_grad=True) * 3).sum()
    >>> scaler.scale(loss) is loss, scaler.state_dict()
    (True, {})
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections import abc

from .errors import BackendUnavailableError, DeviceError, DTypeError

__all__ = ["GradScaler", "MixedPrecisionUnsupported", "autocast", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "reference_step"]

_ISSUE_CUDA = ("mixed precision on CUDA (float16 / bfloat16 autocast) is not supported by torchlean yet "
               "(issue 20); pass enabled=False, or remove the autocast")


class MixedPrecisionUnsupported(BackendUnavailableError):
    """An enabled autocast or GradScaler: this installation cannot run mixed precision yet."""


def _cuda_available() -> bool:
    from .kernels import cuda_available
    return cuda_available()


def is_autocast_available(device_type: str) -> bool:
    """torch's: whether autocast exists for ``device_type``: the CPU; not CUDA yet (issue 20)."""
    if not isinstance(device_type, str):
        raise DeviceError(f"is_autocast_available: expected device_type of type str, got {type(device_type)}")
    return device_type == "cpu"


# ---- autocast's op lists (torch's, by the public name of the function) ----------------------------

#: CPU autocast (torch's AutocastCPU kernels): "lower" ops run in the autocast dtype, "fp32" ops in
#: float32, "promote" ops in the widest floating dtype of their inputs. Ops not listed run in the dtypes
#: they are given. Names are torchlean's public functions (``linalg_`` / ``fft_`` prefixed for those
#: modules); ``_conv`` / ``_conv_transpose`` are the helpers the convolution modules call.
CPU_POLICY = {
    **dict.fromkeys(("conv1d", "conv2d", "conv3d", "_conv", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm",
                     "addbmm", "linear", "matmul", "__matmul__", "__rmatmul__", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d", "_conv_transpose", "prelu",
                     "scaled_dot_product_attention",
                     "lstm_layer"), "lower"),        # torch's mkldnn_rnn_layer: LSTM layers (not GRU or RNN)
    **dict.fromkeys(("avg_pool3d", "binary_cross_entropy", "grid_sample", "polar", "prod", "quantile",
                     "nanquantile", "stft", "cdist", "trace", "view_as_complex", "cholesky", "cholesky_inverse",
                     "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d",
                     "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "mse_loss", "cosine_embedding_loss",
                     "nll_loss", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy",
                     "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
                     "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
                     "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn",
                     "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn",
                     "fft_hfft", "fft_ihfft", "linalg_cond", "linalg_matrix_rank", "linalg_solve",
                     "linalg_cholesky", "linalg_svdvals", "linalg_eigvals", "linalg_eigvalsh", "linalg_inv",
                     "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve", "geqrf", "qr", "svd",
                     "triangular_solve", "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d",
                     "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq",
                     "linalg_inv_ex"), "fp32"),
    **dict.fromkeys(("stack", "cat", "concat", "concatenate", "index_copy"), "promote"),
}


class _AutocastState(threading.local):
    """Per thread: the autocast dtype of each device type (None: off) and how deep the calls of
    autocast ops are (an op's own inner calls run as written, as in torch)."""

    def __init__(self):
        self.dtypes = {"cpu": None, "cuda": None}
        self.active = 0
        self.inside = 0


_STATE = _AutocastState()


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for ``device_type`` in this thread."""
    return _STATE.dtypes.get(device_type) is not None


def get_autocast_dtype(device_type: str):
    """The autocast dtype of ``device_type`` (the default one when autocast is off: bfloat16 on the CPU,
    float16 on CUDA, as torch's)."""
    from .dtypes import bfloat16, float16
    d = _STATE.dtypes.get(device_type)
    return d if d is not None else (bfloat16 if device_type == "cpu" else float16)


def _eligible(t, device_type):
    return t.dtype.kind == "f" and t.dtype.name != "float64" and t.device.type == device_type


def _cast_args(policy, dtype, device_type, args, kwargs):
    from .dtypes import float32, promote_types
    from .tensor import Tensor
    if policy == "promote":
        target = dtype
        for a in [*args, *kwargs.values()]:
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, Tensor) and _eligible(t, device_type):
                    target = promote_types(target, t.dtype)
    else:
        target = dtype if policy == "lower" else float32

    def cast(a):
        if isinstance(a, Tensor):
            return a.to(target) if _eligible(a, device_type) and a.dtype != target else a
        if isinstance(a, (list, tuple)) and any(isinstance(t, Tensor) for t in a):
            return type(a)(cast(t) for t in a)
        return a

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def autocast_op(name: str, fn):
    """``fn`` (the public function ``name``) under autocast's policy for ``name``; ``fn`` itself when
    no device type lists it. The check costs one attribute read while autocast is off."""
    policy = CPU_POLICY.get(name)
    if policy is None or getattr(fn, "_autocast", False):
        return fn

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        st = _STATE
        if not st.active or st.inside:
            return fn(*args, **kwargs)
        dtype = st.dtypes["cpu"]
        if dtype is not None:
            args, kwargs = _cast_args(policy, dtype, "cpu", args, kwargs)
        st.inside += 1
        try:
            return fn(*args, **kwargs)
        finally:
            st.inside -= 1

    wrapped._autocast = True
    return wrapped


def autocast_namespace(namespace: dict, prefix: str = "", names=None) -> None:
    """Put :func:`autocast_op` around every function of ``namespace`` (a module's globals) that the op
    lists name (as ``prefix + name``), or only around ``names``."""
    for n in list(namespace) if names is None else names:
        f = namespace.get(n)
        if callable(f) and not isinstance(f, type) and (prefix + n) in CPU_POLICY:
            namespace[n] = autocast_op(prefix + n, f)


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None).

    A context manager and decorator. Enabled on the CPU (bfloat16 by default, which needs the
    ``ml_dtypes`` package, or float16), the ops of :data:`CPU_POLICY` cast their floating-point CPU
    inputs (float64 excepted) as torch's CPU autocast does: matrix products, linear, convolutions,
    ``prelu`` and attention to the low dtype; losses, pooling
    in 3-d, decompositions and FFTs to float32; ``cat``/``stack``/``index_copy`` to the widest input.
    The casts are recorded ops, so gradients reach float32 parameters in float32. Regions nest; an
    ``enabled=False`` region inside turns it off. An op's own inner calls are not cast again.

    Disabled (``enabled=False``, or CUDA asked for where CUDA is not available, or a CPU dtype
    that torch's CPU autocast refuses, each with torch's warning) it runs the block or function
    unchanged. CUDA autocast raises :class:`MixedPrecisionUnsupported` (issue 20), as does bfloat16
    without ``ml_dtypes``. ``cache_enabled`` concerns torch's cache of casts of
    the same weight within a region: no effect here (each use casts again, to the same values).

        >>> import torchlean as tl
        >>> with tl.autocast(device_type="cpu", dtype=tl.float16):
        ...     y = tl.nn.functional.linear(tl.ones(2, 3), tl.ones(4, 3))
        ...     loss = tl.nn.functional.mse_loss(y, tl.zeros(2, 4))
        >>> y.dtype, loss.dtype
        (torchlean.float16, torchlean.float32)
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise DeviceError(f"autocast: expected device_type of type str, got {type(device_type)}")
        from .device import normalize
        from .dtypes import as_dtype, bfloat16, float16
        normalize(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = as_dtype(dtype) if dtype is not None else (float16 if device_type == "cuda"
                                                                     else bfloat16)
        if self.fast_dtype is None:
            raise DTypeError(f"autocast: dtype must be a dtype, got {dtype!r}")
        self._cache_enabled = cache_enabled
        if enabled and device_type == "cuda" and not _cuda_available():
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          UserWarning, stacklevel=2)
            enabled = False
        if enabled and device_type == "cpu" and self.fast_dtype not in (bfloat16, float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          UserWarning, stacklevel=2)
            enabled = False
        if enabled and device_type == "cuda":
            raise MixedPrecisionUnsupported(
                f"autocast(device_type={device_type!r}, dtype={self.fast_dtype.name}): {_ISSUE_CUDA}")
        if enabled and self.fast_dtype == bfloat16 and bfloat16.np is None:
            raise MixedPrecisionUnsupported(
                "autocast(device_type='cpu', dtype=bfloat16): bfloat16 on the CPU needs the ml_dtypes package "
                "(pip install ml_dtypes), or pass dtype=torch.float16")
        self._enabled = bool(enabled)
        self._prev = []

    def __enter__(self):
        st = _STATE
        old = st.dtypes[self.device]
        self._prev.append(old)
        new = self.fast_dtype if self._enabled else None
        st.dtypes[self.device] = new
        st.active += (new is not None) - (old is not None)
        return self

    def __exit__(self, *exc):
        st = _STATE
        old = self._prev.pop()
        new = st.dtypes[self.device]
        st.dtypes[self.device] = old
        st.active += (old is not None) - (new is not None)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped


class _Stage:
    READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True): dynamic loss scaling, as torch's.

    ``scale(loss)`` multiplies by the scale (a float32 0-d tensor on the loss's device, made at the
    first call); ``unscale_(optimizer)`` multiplies every gradient of the optimizer in place by the
    reciprocal (computed in float64, rounded to float32) and records on the device whether any was
    inf or NaN; ``step(optimizer)`` unscales if that was not done, reads that flag (the one host
    synchronisation of the step) and calls ``optimizer.step`` only when every gradient was finite;
    ``update()`` then multiplies the scale by ``backoff_factor`` after a skipped step, or by
    ``growth_factor`` after ``growth_interval`` finite steps in a row (when the product is finite).
    The stage checks, error messages, ``state_dict`` and pickling are torch's.

    Disabled (``enabled=False``, or a CUDA scaler where CUDA is not available, with torch's warning)
    it is torch's disabled scaler: ``scale`` returns its argument, ``unscale_`` and ``update`` do
    nothing, ``step(optimizer, *args, **kwargs)`` returns ``optimizer.step(*args, **kwargs)``,
    ``get_scale()`` is 1.0, ``state_dict()`` is ``{}`` and ``load_state_dict`` ignores its argument.

        >>> import torchlean as tl
        >>> w = tl.nn.Parameter(tl.tensor([1.0, 2.0]))
        >>> opt = tl.optim.SGD([w], lr=0.5)
        >>> scaler = tl.amp.GradScaler("cpu", init_scale=1024.0)
        >>> scaler.scale((w * w).sum()).backward()     # gradients 1024 x [2, 4]
        >>> scaler.step(opt); scaler.update()
        >>> w.tolist(), scaler.get_scale()
        ([0.0, 0.0], 1024.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        from .device import normalize
        self._device = device
        normalize(device, "GradScaler")
        if enabled and device == "cuda" and not _cuda_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            enabled = False
        self._enabled = bool(enabled)
        self._init_scale, self._growth_factor = init_scale, growth_factor
        self._backoff_factor, self._growth_interval = backoff_factor, growth_interval
        if self._enabled:
            if not growth_factor > 1.0:
                raise ValueError("GradScaler: the growth factor must be > 1.0.")
            if not backoff_factor < 1.0:
                raise ValueError("GradScaler: the backoff factor must be < 1.0.")
            self._init_growth_tracker = 0
            self._scale = None            # float32 0-d tensor, made by the first scale()
            self._growth_tracker = None   # int32 0-d tensor
            self._per_optimizer_states: dict = {}

    def is_enabled(self) -> bool:
        return self._enabled

    # -- the scale ------------------------------------------------------------------------------
    def _state(self, optimizer) -> dict:
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": _Stage.READY, "found_inf": None})

    def _check(self, funcname: str):
        if self._scale is None or self._growth_tracker is None:
            raise RuntimeError(f"Attempted {funcname} but _scale is None.  This may indicate your script did not "
                               f"use scaler.scale(loss or outputs) earlier in the iteration.")
        return self._scale, self._growth_tracker

    def _lazy_init(self, like) -> None:
        from .dtypes import float32, int32
        self._scale = like.new_full((), self._init_scale, dtype=float32)
        self._growth_tracker = like.new_full((), self._init_growth_tracker, dtype=int32)

    def scale(self, outputs):
        """``outputs`` times the scale: a tensor, or (recursively) a list, tuple or other iterable of them
        (lists and tuples keep their type; another iterable gives a ``map``). Disabled: ``outputs``."""
        if not self._enabled:
            return outputs
        from .tensor import Tensor

        def apply(v):
            if isinstance(v, Tensor):
                if self._scale is None:
                    self._lazy_init(v.detach())
                return v * self._scale.to(v.device)
            if isinstance(v, (list, tuple)):
                return type(v)(map(apply, v))
            if isinstance(v, abc.Iterable):
                return map(apply, v)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16: bool):
        """Multiply every gradient by ``inv_scale`` in place; ``found_inf`` (a float32 0-d tensor per
        device) becomes 1.0 where a gradient held an inf or NaN. Returns ``{device: found_inf}``."""
        from .autograd import no_grad
        from .dtypes import float16
        per_device = {}
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype == float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    dev = str(g.device)
                    if dev not in per_device:
                        per_device[dev] = (found_inf.to(g.device), inv_scale.to(g.device))
                    flag, inv = per_device[dev]
                    flag.masked_fill_(~g.isfinite().all(), 1.0)
                    g.mul_(inv.to(g.dtype) if g.dtype != inv.dtype else inv)
        return {d: f for d, (f, _) in per_device.items()}

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of ``optimizer`` by the scale in place (at most once per step), noting
        on the device whether any is inf or NaN; no host synchronisation."""
        if not self._enabled:
            return
        self._check("unscale_")
        state = self._state(optimizer)
        if state["stage"] == _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        from .dtypes import float32, float64
        inv_scale = self._scale.to(float64).reciprocal().to(float32)
        found_inf = self._scale.new_zeros(())
        state["found_inf"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``unscale_(optimizer)`` unless done, then ``optimizer.step(*args, **kwargs)`` if every gradient
        was finite (its return value returned; None when the step was skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check("step")
        state = self._state(optimizer)
        if state["stage"] == _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _Stage.READY:
            self.unscale_(optimizer)
        if not state["found_inf"]:
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        retval = None
        if not any(v.item() for v in state["found_inf"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Back off after a skipped step, grow after ``growth_interval`` finite ones (class docs), or
        set the scale to ``new_scale`` (a float, or a one-element tensor without grad)."""
        if not self._enabled:
            return
        scale, tracker = self._check("update")
        from .autograd import no_grad
        from .tensor import Tensor
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, Tensor):
                    if new_scale.numel() != 1 or new_scale.requires_grad:
                        raise ValueError("new_scale should be a float or a 1-element tensor with "
                                         "requires_grad=False.")
                    scale.copy_(new_scale.reshape(()).to(scale.device))
                else:
                    scale.fill_(new_scale)
            else:
                infs = [f.to(scale.device) for st in self._per_optimizer_states.values()
                        for f in (st["found_inf"] or {}).values()]
                if not infs:
                    raise RuntimeError("No inf checks were recorded prior to update.")
                found = infs[0]
                for f in infs[1:]:
                    found = found + f
                _update_scale_(scale, tracker, found, self._growth_factor, self._backoff_factor,
                               self._growth_interval)
        self._per_optimizer_states = {}

    def get_scale(self) -> float:
        """The scale as a Python float (the initial one before the first ``scale``; 1.0 disabled)."""
        if not self._enabled:
            return 1.0
        return float(self._init_scale) if self._scale is None else float(self._scale.item())

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def state_dict(self) -> dict:
        """torch's: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker``; ``{}`` when disabled (so checkpoints load across torch and torchlean)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict) -> None:
        """Restore :meth:`state_dict` (ignored when disabled; an empty dict raises, as torch's)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        from .autograd import no_grad
        with no_grad():
            if self._scale is not None:
                self._scale.fill_(self._init_scale)
            if self._growth_tracker is not None:
                self._growth_tracker.fill_(self._init_growth_tracker)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if self._per_optimizer_states:
                raise RuntimeError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                   "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def _update_scale_(scale, tracker, found_inf, growth_factor, backoff_factor, growth_interval) -> None:
    """torch's ``_amp_update_scale_`` on the device, in place: after an inf or NaN the scale times
    ``backoff_factor`` and the tracker 0; otherwise the tracker counts finite steps and at
    ``growth_interval`` the scale grows by ``growth_factor`` (kept when the product is not finite)
    and the tracker restarts."""
    bad = found_inf > 0
    count = tracker + 1
    grow = count == growth_interval
    grown = scale * growth_factor
    new_scale = (scale * backoff_factor).where(bad, grown.where(grow & grown.isfinite(), scale))
    new_tracker = (count * 0).where(bad | grow, count)
    scale.copy_(new_scale)
    tracker.copy_(new_tracker.to(tracker.dtype))


class CudaAutocast(autocast):
    """torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True): deprecated in
    torch for ``autocast("cuda", ...)`` and warned the same way here."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        from .dtypes import float16
        super().__init__("cuda", dtype=float16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)


class CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True): deprecated in torch for ``amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


# ---- how far a mixed-precision step is from its meaning --------------------------------------------

def reference_step(model, loss_fn, *batch, device_type: str = "cpu", dtype=None) -> dict:
    """Replay one training step of ``model`` on ``batch`` twice, under ``autocast(device_type, dtype)``
    and in float64 without autocast (a float64 copy of the model and of the batch's float tensors), and
    report how far the mixed-precision loss and gradients are from the float64 ones:

    ``{"dtype", "unit_roundoff", "loss", "loss64", "loss_rel_err", "grads": {name: (max abs err,
    max abs err / max |g64|)}, "worst": (name, relative error)}``.

    ``loss_fn(model, *batch)`` returns the scalar loss. The model's parameters, gradients and buffers
    are left as they were (batch-norm statistics included: the step runs on copies).

        >>> import torchlean as tl
        >>> net = tl.nn.Sequential(tl.nn.Linear(4, 8), tl.nn.Tanh(), tl.nn.Linear(8, 2))
        >>> x, y = tl.randn(16, 4), tl.randint(0, 2, (16,))
        >>> r = tl.amp.reference_step(net, lambda m, a, b: tl.nn.functional.cross_entropy(m(a), b), x, y,
        ...                           dtype=tl.float16)
        >>> r["loss_rel_err"] < 1e-2 and r["worst"][1] < 5e-2
        True
    """
    import copy
    from .dtypes import UNIT_ROUNDOFF, as_dtype, bfloat16, float16
    from .tensor import Tensor
    low = as_dtype(dtype) if dtype is not None else (bfloat16 if device_type == "cpu" else float16)
    u = UNIT_ROUNDOFF.get(low.name)
    if u is None:
        raise DTypeError(f"reference_step: dtype must be float16 or bfloat16, got {low.name}")

    def run(m, args, cast):
        for p in m.parameters():
            p.grad = None
        if cast:
            with autocast(device_type, dtype=low):
                loss = loss_fn(m, *args)
        else:
            loss = loss_fn(m, *args)
        loss.backward()
        return float(loss.item()), {n: p.grad for n, p in m.named_parameters() if p.grad is not None}

    lp = copy.deepcopy(model)
    ref = copy.deepcopy(model).double()
    wide = tuple(b.double() if isinstance(b, Tensor) and b.is_floating_point() else b for b in batch)
    loss, grads = run(lp, batch, True)
    loss64, grads64 = run(ref, wide, False)
    report = {}
    for name, g64 in grads64.items():
        g = grads.get(name)
        if g is None:
            continue
        d = (g.double() - g64).abs().max().item()
        scale = g64.abs().max().item()
        report[name] = (d, d / scale if scale > 0 else d)
    worst = max(report.items(), key=lambda kv: kv[1][1]) if report else (None, 0.0)
    return {"dtype": low.name, "unit_roundoff": u, "loss": loss, "loss64": loss64,
            "loss_rel_err": abs(loss - loss64) / max(abs(loss64), 1e-300), "grads": report,
            "worst": (worst[0], worst[1][1] if report else 0.0)}
