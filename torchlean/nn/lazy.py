"""Lazy modules: the input size (``in_features``, ``in_channels``, ``num_features``) is read from
the first input, then the module becomes the ordinary class (torch's ``cls_to_become``).

Before the first call the parameters are :class:`UninitializedParameter` placeholders (an
optimizer may already hold them: materialising fills the same objects, so it keeps working).

    >>> import torchlean as tl
    >>> m = LazyLinear(3)
    >>> m.has_uninitialized_params()
    True
    >>> m(tl.zeros(2, 5)).shape, m
    (torchlean.Size([2, 3]), Linear(in_features=5, out_features=3, bias=True))
"""

from __future__ import annotations

from itertools import chain

from ..errors import DomainError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor, as_dtype, float32, int64, no_grad
from .layers import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .modules import Linear
from .norms import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .parameter import Parameter
from .pooling import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)

__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    "LazyModuleMixin",
    "UninitializedBuffer",
    "UninitializedParameter",
]

_NO_SHAPE = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
             "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. "
             "Call `forward` to initialize the parameters before accessing their attributes.")


def _empty_value(device, dtype):
    return get_kernels(device or "cpu").zeros((0,), as_dtype(dtype) or float32)


class _Uninitialized:
    """Shared behaviour: no shape until :meth:`materialize`, which turns the object itself into
    ``cls_to_become`` with zeros of the given shape (on its own device and dtype by default)."""

    __slots__ = ()
    cls_to_become = Tensor

    @property
    def shape(self):
        raise TorchLeanError(_NO_SHAPE)

    def size(self, dim=None):
        raise TorchLeanError(_NO_SHAPE)

    def dim(self):
        raise TorchLeanError(_NO_SHAPE)

    def materialize(self, shape, device=None, dtype=None):
        if isinstance(shape, int):
            shape = (shape,)
        value = self._value
        dt = as_dtype(dtype) or self.dtype
        self._value = get_kernels(device or self.device).zeros(tuple(int(s) for s in shape), dt)
        del value
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (torch's ``nn.parameter.UninitializedParameter``);
    :meth:`materialize` makes it an ordinary :class:`Parameter` in place."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        Parameter.__init__(self, Tensor(_empty_value(device, dtype)), requires_grad)


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer whose shape is not known yet (torch's ``nn.parameter.UninitializedBuffer``);
    :meth:`materialize` makes it an ordinary Tensor in place."""

    __slots__ = ()
    cls_to_become = Tensor

    def __init__(self, requires_grad=False, device=None, dtype=None):
        Tensor.__init__(self, _empty_value(device, dtype), requires_grad=requires_grad)


def _uninitialized(t):
    return isinstance(t, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """Infers the parameter shapes at the first call (``initialize_parameters(*args)``), then turns the
    module into ``cls_to_become``. Loading a state dict first materialises the parameters from it."""

    cls_to_become = None

    def has_uninitialized_params(self) -> bool:
        return any(_uninitialized(t) for t in chain(self._parameters.values(), self._buffers.values()))

    def __call__(self, *args, **kwargs):
        if not args and "input" in kwargs:
            args = (kwargs["input"],)
        with no_grad():
            self.initialize_parameters(*args[:1])
        if self.has_uninitialized_params():
            raise TorchLeanError(f"{type(self).__name__}: module {self._get_name()} has not been fully "
                                 "initialized")
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become
        return type(self).__call__(self, *args, **kwargs)

    def _get_name(self):
        return type(self).__name__

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for name, t in chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and _uninitialized(t) and not _uninitialized(state_dict[key]):
                t.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _materialize(self, shapes) -> bool:
        """Materialise the still-uninitialised entries of ``{name: shape}``; True if any was."""
        done = False
        for name, shape in shapes.items():
            t = getattr(self, name)
            if _uninitialized(t):
                t.materialize(shape)
                done = True
        return done


# ---- Linear --------------------------------------------------------------------------------

class LazyLinear(LazyModuleMixin, Linear):
    """:class:`Linear` whose ``in_features`` is ``input.shape[-1]`` of the first input.

        >>> import torchlean as tl
        >>> LazyLinear(4)
        LazyLinear(in_features=0, out_features=4, bias=True)
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        Linear.__init__(self, 0, 0, False, device, dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = int(out_features)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            Linear.reset_parameters(self)

    def initialize_parameters(self, input) -> None:
        self.in_features = int(input.shape[-1])
        shapes = {"weight": (self.out_features, self.in_features)}
        if self.bias is not None:
            shapes["bias"] = (self.out_features,)
        if self._materialize(shapes):
            self.reset_parameters()


# ---- convolutions --------------------------------------------------------------------------

class _LazyConvMixin(LazyModuleMixin):
    def _lazy_init(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = int(out_channels)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            self.cls_to_become.reset_parameters(self)

    def _get_in_channels(self, input) -> int:
        d = self._d
        if input.ndim not in (d + 1, d + 2):
            raise ShapeError(f"Expected {d + 1}D (unbatched) or {d + 2}D (batched) input to "
                             f"{type(self).__name__}, but got input of size: {tuple(input.shape)}")
        return int(input.shape[1] if input.ndim == d + 2 else input.shape[0])

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups:
            raise DomainError(f"{type(self).__name__}: in_channels must be divisible by groups "
                              f"({self.in_channels} % {self.groups} != 0)")
        if self._transposed:
            wshape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            wshape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        shapes = {"weight": wshape}
        if self.bias is not None:
            shapes["bias"] = (self.out_channels,)
        if self._materialize(shapes):
            self.reset_parameters()


def _lazy_conv(name, base, d):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        base.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                      device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)

    doc = (f"""{base.__name__} whose ``in_channels`` is read from the first input.

        >>> import torchlean as tl
        >>> m = {name}(4, 3)
        >>> _ = m(tl.zeros({", ".join(["1", "2"] + ["5"] * d)}))
        >>> m.weight.shape
        torchlean.Size([4, 2{", 3" * d}])
    """)
    return type(name, (_LazyConvMixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc,
                                                "__module__": __name__})


def _lazy_conv_transpose(name, base, d):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        base.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                      padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)

    doc = f"{base.__name__} whose ``in_channels`` is read from the first input (weight ``(C_in, C_out/groups, *k)``)."
    return type(name, (_LazyConvMixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc,
                                                "__module__": __name__})


LazyConv1d = _lazy_conv("LazyConv1d", Conv1d, 1)
LazyConv2d = _lazy_conv("LazyConv2d", Conv2d, 2)
LazyConv3d = _lazy_conv("LazyConv3d", Conv3d, 3)
LazyConvTranspose1d = _lazy_conv_transpose("LazyConvTranspose1d", ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy_conv_transpose("LazyConvTranspose2d", ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy_conv_transpose("LazyConvTranspose3d", ConvTranspose3d, 3)


# ---- normalization -------------------------------------------------------------------------

class _LazyNormMixin(LazyModuleMixin):
    def _lazy_init(self, affine, track_running_stats, bias, device, dtype):
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = Tensor(get_kernels(device or "cpu").full((), 0, int64))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            self.cls_to_become.reset_parameters(self)

    def _feature_dim(self, input) -> int:
        return 1

    def initialize_parameters(self, input) -> None:
        if not self.has_uninitialized_params():
            return
        if input.ndim < 2:
            raise ShapeError(f"{type(self).__name__}: expected an input with a channel axis, got shape "
                             f"{tuple(input.shape)}")
        self.num_features = int(input.shape[self._feature_dim(input)])
        shapes = {}
        if self.affine:
            shapes["weight"] = (self.num_features,)
            if self.bias is not None:
                shapes["bias"] = (self.num_features,)
        if self.track_running_stats:
            shapes["running_mean"] = shapes["running_var"] = (self.num_features,)
        if self._materialize(shapes):
            self.reset_parameters()


class _LazyInstanceNormMixin(_LazyNormMixin):
    def _feature_dim(self, input) -> int:
        return 1 if input.ndim == self._no_batch_dim + 1 else 0


def _lazy_norm(name, base, mixin, default_doc):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None,
                 *, bias=True):
        base.__init__(self, 0, eps, momentum, False, False, device, dtype)
        self._lazy_init(affine, track_running_stats, bias, device, dtype)

    doc = f"{base.__name__} whose ``num_features`` is read from the first input. {default_doc}"
    return type(name, (mixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc,
                                      "__module__": __name__})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", BatchNorm1d, _LazyNormMixin, "")
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", BatchNorm2d, _LazyNormMixin, "")
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", BatchNorm3d, _LazyNormMixin, "")
_IN_DOC = ("As in torch, ``affine`` and ``track_running_stats`` default to True here (False in the "
           "ordinary class).")
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", InstanceNorm1d, _LazyInstanceNormMixin, _IN_DOC)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", InstanceNorm2d, _LazyInstanceNormMixin, _IN_DOC)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", InstanceNorm3d, _LazyInstanceNormMixin, _IN_DOC)
