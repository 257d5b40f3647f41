"""Recurrent modules: ``RNN``, ``LSTM``, ``GRU`` and the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Parameter names, shapes, order and initialization are PyTorch's (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``weight_hr_l0``, ``..._reverse``; all U(-1/sqrt(H), 1/sqrt(H))), so
a PyTorch ``state_dict`` loads with ``strict=True``. Each layer and direction costs one input
projection matmul over all time steps and one call of a layer function of
:mod:`torchlean.nn.functional_recurrent`, which holds the time loop. The reverse direction of a
bidirectional layer reverses every sequence within its own length (a row gather), runs forward in
time, and reverses back.

    >>> import torchlean as tl
    >>> from torchlean.nn.recurrent import LSTM
    >>> _ = tl.manual_seed(0)
    >>> lstm = LSTM(4, 8, num_layers=2, batch_first=True)
    >>> out, (h, c) = lstm(tl.randn(3, 5, 4))
    >>> out.shape, h.shape, c.shape
    (torchlean.Size([3, 5, 8]), torchlean.Size([2, 3, 8]), torchlean.Size([2, 3, 8]))
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..ops import cat, stack
from ..tensor import Tensor, as_dtype, float32
from . import functional as F
from . import init
from .functional_recurrent import gru_layer, lstm_layer, rnn_layer
from .module import Module
from .parameter import Parameter, zeros_value
from .utils.rnn import PackedSequence, _packed_to_time_major, _time_major_to_packed

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _param(shape, device, dtype):
    dt = as_dtype(dtype) or float32
    return Parameter(Tensor(zeros_value(shape, dt, device)))


def _check_int(name, what, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise DTypeError(f"{name}: {what} should be of type int, got: {type(v).__name__}")


def _reverse_rows(T, N, lengths):
    """Flat (t * N + n) row indices reversing each sequence within its length (padding rows stay)."""
    t = np.arange(T)[:, None]
    L = np.broadcast_to(np.asarray(lengths)[None, :], (T, N))
    src = np.where(t < L, L - 1 - t, t)
    return (src * N + np.arange(N)[None, :]).reshape(-1)


class RNNBase(Module):
    """The shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU` (PyTorch's ``RNNBase``);
    ``mode`` is ``"LSTM"``, ``"GRU"``, ``"RNN_TANH"`` or ``"RNN_RELU"``.

    Inputs are ``(T, N, input_size)`` (``(N, T, input_size)`` with ``batch_first``), unbatched
    ``(T, input_size)``, or a :class:`~torchlean.nn.utils.rnn.PackedSequence` (the output is then
    packed too). Initial states default to zeros of shape ``(num_layers * num_directions, N, H_out)``.
    In training mode, ``dropout`` applies to the output of every layer but the last.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise DomainError(f"{name}: Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise DomainError(f"{name}: dropout should be a number in range [0, 1] representing the probability "
                              f"of an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        for what, v in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(v, bool):
                raise DTypeError(f"{name}: {what} should be of type bool, got: {type(v).__name__}")
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers),
                        ("proj_size", proj_size)):
            _check_int(name, what, v)
        if input_size <= 0:
            raise DomainError(f"{name}: input_size must be greater than zero, got {input_size}")
        if hidden_size <= 0:
            raise DomainError(f"{name}: hidden_size must be greater than zero, got {hidden_size}")
        if num_layers <= 0:
            raise DomainError(f"{name}: num_layers must be greater than zero, got {num_layers}")
        if proj_size < 0:
            raise DomainError(f"{name}: proj_size should be a positive integer or zero to disable projections, "
                              f"got {proj_size}")
        if proj_size >= hidden_size:
            raise DomainError(f"{name}: proj_size has to be smaller than hidden_size, got proj_size={proj_size} "
                              f"and hidden_size={hidden_size}")
        if proj_size and mode != "LSTM":
            raise DomainError(f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = int(input_size), int(hidden_size), int(num_layers)
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, int(proj_size)
        D = 2 if bidirectional else 1
        gate = _GATES[mode] * self.hidden_size
        real = self.proj_size or self.hidden_size
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(self.num_layers):
            for d in range(D):
                suffix = "_reverse" if d == 1 else ""
                i_size = self.input_size if layer == 0 else real * D
                shapes = [("weight_ih_l{}{}", (gate, i_size)), ("weight_hh_l{}{}", (gate, real))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate,)), ("bias_hh_l{}{}", (gate,))]
                if self.proj_size:
                    shapes += [("weight_hr_l{}{}", (self.proj_size, self.hidden_size))]
                names = []
                for fmt, shape in shapes:
                    n = fmt.format(layer, suffix)
                    setattr(self, n, _param(shape, device, dtype))
                    names.append(n)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, as lists in PyTorch's order."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """PyTorch packs the weights into one cuDNN buffer here; this runtime needs no such layout,
        so the call has no effect."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -- forward ---------------------------------------------------------------------------------
    def _layer_params(self, k):
        ps = dict(zip(("w_ih", "w_hh"), (getattr(self, n) for n in self._all_weights[k][:2])))
        rest = [getattr(self, n) for n in self._all_weights[k][2:]]
        ps["b_ih"], ps["b_hh"] = (rest[0], rest[1]) if self.bias else (None, None)
        ps["w_hr"] = rest[-1] if self.proj_size else None
        return ps

    def _run_direction(self, x, p, h0, c0, mask):
        T, N, I = x.shape
        gx = x.reshape(T * N, I) @ p["w_ih"].t()
        if self.mode == "GRU":
            if p["b_ih"] is not None:
                gx = gx + p["b_ih"]
            return gru_layer(gx.reshape(T, N, gx.shape[-1]), p["w_hh"], p["b_hh"], h0, mask=mask) + (None,)
        if p["b_ih"] is not None:
            gx = gx + (p["b_ih"] + p["b_hh"])
        gx = gx.reshape(T, N, gx.shape[-1])
        if self.mode == "LSTM":
            return lstm_layer(gx, p["w_hh"], h0, c0, mask=mask, w_hr=p["w_hr"])
        act = "tanh" if self.mode == "RNN_TANH" else "relu"
        return rnn_layer(gx, p["w_hh"], h0, nonlinearity=act, mask=mask) + (None,)

    def _check_hidden(self, name, h, expected, which):
        if not isinstance(h, Tensor):
            raise TorchLeanError(f"{name}: {which} must be a Tensor, got {type(h).__name__}")
        if tuple(h.shape) != expected:
            raise ShapeError(f"{name}: Expected {which} size {expected}, got {tuple(h.shape)}")

    def forward(self, input, hx=None):
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        D = 2 if self.bidirectional else 1
        real = self.proj_size or self.hidden_size
        packed = isinstance(input, PackedSequence)
        sorted_indices = unsorted_indices = None
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            if data.ndim != 2:
                raise ShapeError(f"{name}: packed input data must be 2-D (steps, input_size), got {data.ndim}-D")
            x, mask = _packed_to_time_major(data, batch_sizes)
            batched = True
            if mask.all():
                mask = None
        else:
            if not isinstance(input, Tensor):
                raise TorchLeanError(f"{name}: input must be a Tensor or a PackedSequence, "
                                     f"got {type(input).__name__}")
            if input.ndim not in (2, 3):
                raise ShapeError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D instead")
            batched = input.ndim == 3
            x = input.unsqueeze(1) if not batched else input.transpose(0, 1) if self.batch_first else input
            mask = None
        T, N, I = x.shape
        if I != self.input_size:
            raise ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                             f"got {I}")
        w0 = getattr(self, self._flat_weights_names[0])
        if x.dtype != w0.dtype:
            raise DTypeError(f"{name}: input must have the type {w0.dtype}, got type {x.dtype}")
        h_shape, c_shape = (self.num_layers * D, N, real), (self.num_layers * D, N, self.hidden_size)
        if hx is None:
            h0 = x.new_zeros(h_shape)
            c0 = x.new_zeros(c_shape) if lstm else None
        else:
            if lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TorchLeanError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            want = 3 if batched else 2
            dims = [h.ndim for h in (h0, c0) if isinstance(h, Tensor)]
            if any(d != want for d in dims):
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise ShapeError(f"{name}: For {kind} input, hx should also be {want}-D but got "
                                 f"{', '.join(f'{d}-D' for d in dims)} tensor(s)")
            if not batched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if lstm else None
            self._check_hidden(name, h0, h_shape, "hidden" if not lstm else "hidden[0]")
            if lstm:
                self._check_hidden(name, c0, c_shape, "hidden[1]")
            if sorted_indices is not None:
                h0 = h0.index_select(1, sorted_indices)
                c0 = c0.index_select(1, sorted_indices) if lstm else None
        rev = None
        if D == 2:
            rev = _reverse_rows(T, N, mask.sum(0) if mask is not None else np.full(N, T))
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                xin = x
                if d == 1:
                    xin = x.reshape(T * N, x.shape[-1]).index_select(0, rev).reshape(T, N, x.shape[-1])
                out, h_n, c_n = self._run_direction(xin, self._layer_params(k), h0[k], c0[k] if lstm else None,
                                                    mask)
                if d == 1:
                    out = out.reshape(T * N, out.shape[-1]).index_select(0, rev).reshape(T, N, out.shape[-1])
                outs.append(out)
                hs.append(h_n)
                cs.append(c_n)
            x = outs[0] if D == 1 else cat(outs, 2)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = stack(hs)
        c_n = stack(cs) if lstm else None
        if packed:
            output = PackedSequence(_time_major_to_packed(x, batch_sizes), batch_sizes, sorted_indices,
                                    unsorted_indices)
            if unsorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = c_n.index_select(1, unsorted_indices) if lstm else None
        elif not batched:
            output, h_n = x.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        else:
            output = x.transpose(0, 1) if self.batch_first else x
        return (output, (h_n, c_n)) if lstm else (output, h_n)


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)``, ``act`` tanh or relu.

    Returns ``(output, h_n)``: output ``(T, N, D*H)`` holds the last layer's states at every step.
    Arguments as PyTorch's, including the positional form ``RNN(input_size, hidden_size, num_layers,
    nonlinearity, bias, batch_first, dropout, bidirectional)``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import RNN
        >>> rnn = RNN(3, 5, nonlinearity="relu", bidirectional=True)
        >>> out, h = rnn(tl.randn(7, 2, 3))
        >>> out.shape, h.shape
        (torchlean.Size([7, 2, 10]), torchlean.Size([2, 2, 5]))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise DomainError("RNN: proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.__dict__["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        else:
            self.__dict__["nonlinearity"] = kwargs.pop("nonlinearity", "tanh")
        nl = self.__dict__["nonlinearity"]
        if nl not in ("tanh", "relu"):
            raise DomainError(f"RNN: Unknown nonlinearity '{nl}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nl == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory (PyTorch's gates i, f, g, o): ``c_t = f*c_{t-1} + i*g``,
    ``h_t = o*tanh(c_t)``, projected by ``weight_hr`` (``proj_size`` > 0) to ``h_t @ W_hr.T``.

    ``hx`` is a tuple ``(h_0, c_0)``; returns ``(output, (h_n, c_n))``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import LSTM
        >>> lstm = LSTM(3, 6, proj_size=2)
        >>> out, (h, c) = lstm(tl.randn(4, 3))
        >>> out.shape, h.shape, c.shape
        (torchlean.Size([4, 2]), torchlean.Size([1, 2]), torchlean.Size([1, 6]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (PyTorch's gates r, z, n): ``n = tanh(W_in x + b_in + r*(W_hn h + b_hn))``,
    ``h_t = (1 - z)*n + z*h_{t-1}``. Returns ``(output, h_n)``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import GRU
        >>> gru = GRU(3, 4, num_layers=2, batch_first=True)
        >>> out, h = gru(tl.randn(2, 5, 3))
        >>> out.shape, h.shape
        (torchlean.Size([2, 5, 4]), torchlean.Size([2, 2, 4]))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise DomainError("GRU: proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """The parameters of a single recurrent step (PyTorch's ``RNNCellBase``): ``weight_ih``
    ``(chunks*H, input_size)``, ``weight_hh`` ``(chunks*H, H)``, ``bias_ih``, ``bias_hh`` ``(chunks*H,)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_int(name, "input_size", input_size)
        _check_int(name, "hidden_size", hidden_size)
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bias
        self.weight_ih = _param((num_chunks * self.hidden_size, self.input_size), device, dtype)
        self.weight_hh = _param((num_chunks * self.hidden_size, self.hidden_size), device, dtype)
        if bias:
            self.bias_ih = _param((num_chunks * self.hidden_size,), device, dtype)
            self.bias_hh = _param((num_chunks * self.hidden_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, hx):
        """``(x (N, I), hx list (N, H) or None, batched)`` after PyTorch's checks."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TorchLeanError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ShapeError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        hs = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
        for h in hs:
            if h.ndim not in (1, 2):
                raise ShapeError(f"{name}: Expected hidden to be 1D or 2D, got {h.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise ShapeError(f"{name}: input has inconsistent input_size: got {x.shape[1]} expected "
                             f"{self.input_size}")
        if x.dtype != self.weight_ih.dtype:
            raise DTypeError(f"{name}: input must have the type {self.weight_ih.dtype}, got type {x.dtype}")
        hs = [h if batched else h.unsqueeze(0) for h in hs]
        for k, h in enumerate(hs):
            if h.shape[0] != x.shape[0]:
                raise ShapeError(f"{name}: Input batch size {x.shape[0]} doesn't match hidden{k} batch size "
                                 f"{h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise ShapeError(f"{name}: hidden{k} has inconsistent hidden_size: got {h.shape[1]}, expected "
                                 f"{self.hidden_size}")
        return x, (hs or None), batched

    def _gx(self, x, both_biases=True):
        gx = x @ self.weight_ih.t()
        if self.bias_ih is not None:
            gx = gx + (self.bias_ih + self.bias_hh if both_biases else self.bias_ih)
        return gx.unsqueeze(0)


class RNNCell(RNNCellBase):
    """One Elman step ``h' = act(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)``; input ``(N, I)`` or ``(I,)``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import RNNCell
        >>> cell = RNNCell(3, 4)
        >>> cell(tl.randn(2, 3)).shape
        torchlean.Size([2, 4])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise DomainError(f"RNNCell: Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, hs, batched = self._prepare(input, None if hx is None else [hx])
        h0 = hs[0] if hs else x.new_zeros((x.shape[0], self.hidden_size))
        _, h = rnn_layer(self._gx(x), self.weight_hh, h0, nonlinearity=self.nonlinearity)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``hx = (h, c)`` (zeros when omitted); returns ``(h', c')``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import LSTMCell
        >>> h, c = LSTMCell(3, 4)(tl.randn(3))
        >>> h.shape, c.shape
        (torchlean.Size([4]), torchlean.Size([4]))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TorchLeanError(f"LSTMCell: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        x, hs, batched = self._prepare(input, hx)
        if hs is None:
            hs = [x.new_zeros((x.shape[0], self.hidden_size))] * 2
        _, h, c = lstm_layer(self._gx(x), self.weight_hh, hs[0], hs[1])
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (PyTorch's gates r, z, n); input ``(N, I)`` or ``(I,)``, returns ``h'``.

        >>> import torchlean as tl
        >>> from torchlean.nn.recurrent import GRUCell
        >>> GRUCell(3, 4)(tl.randn(5, 3), tl.zeros(5, 4)).shape
        torchlean.Size([5, 4])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, hs, batched = self._prepare(input, None if hx is None else [hx])
        h0 = hs[0] if hs else x.new_zeros((x.shape[0], self.hidden_size))
        _, h = gru_layer(self._gx(x, both_biases=False), self.weight_hh, self.bias_hh, h0)
        return h if batched else h.squeeze(0)
