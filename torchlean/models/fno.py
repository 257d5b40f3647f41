"""A 1-D Fourier neural operator (Li et al., 2021)."""

from __future__ import annotations

import numpy as np

from .. import nn
from ..nn.layers import SpectralConv1d
from ..ops import cat
from ..tensor import Tensor


class FNO1d(nn.Module):
    """Maps a function sampled on a periodic grid to another: ``(N, grid) -> (N, grid)``.

    The input ``u(x)`` and the coordinate ``x = i / grid`` are lifted pointwise to
    ``width`` channels (``lift``), passed through ``n_layers`` Fourier layers
    ``v <- gelu(spectral(v) + pointwise(v))`` (a :class:`~torchlean.nn.SpectralConv1d`
    keeping ``modes`` Fourier modes plus a 1x1 map, here a ``Linear`` on the channel
    axis; the last layer has no activation, as in the paper's code), and projected
    back pointwise (``proj1`` - GELU - ``proj2``). Channels are last throughout.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> FNO1d(modes=8, width=16)(tl.zeros(3, 32)).shape
        torchlean.Size([3, 32])
    """

    def __init__(self, modes: int = 16, width: int = 32, n_layers: int = 4, in_channels: int = 1,
                 hidden: int = 128):
        super().__init__()
        self.config = {"modes": int(modes), "width": int(width), "n_layers": int(n_layers),
                       "in_channels": int(in_channels), "hidden": int(hidden)}
        self.in_channels = int(in_channels)
        self.lift = nn.Linear(in_channels + 1, width)
        self.spectral = nn.ModuleList([SpectralConv1d(width, width, modes) for _ in range(n_layers)])
        self.pointwise = nn.ModuleList([nn.Linear(width, width) for _ in range(n_layers)])
        self.proj1 = nn.Linear(width, hidden)
        self.proj2 = nn.Linear(hidden, 1)

    def _coords(self, u):
        """The grid coordinates ``i / grid`` as an ``(N, grid, 1)`` constant on ``u``'s device.

        Kept per shape, dtype and device: a GPU copy made at every call would be an upload from
        host memory, which makes the host wait for the GPU at every step."""
        n, grid = u.shape[0], u.shape[1]
        key = (n, grid, u.dtype.name, u.device)
        cache = self.__dict__.setdefault("_coords_cache", {})
        x = cache.get(key)
        if x is None:
            coords = np.broadcast_to((np.arange(grid) / grid).astype(u.dtype)[None, :, None], (n, grid, 1))
            x = Tensor(np.ascontiguousarray(coords))
            if u.device != "cpu":
                x = x.to(device=u.device)
            if len(cache) >= 8:
                cache.clear()
            cache[key] = x
        return x

    def forward(self, u):
        squeeze = u.ndim == 2
        if squeeze:
            u = u.unsqueeze(-1)                        # (N, grid, 1)
        v = self.lift(cat([u, self._coords(u)], dim=-1))
        last = len(self.spectral) - 1
        for i, (sc, pw) in enumerate(zip(self.spectral, self.pointwise)):
            v = sc(v) + pw(v)
            if i < last:
                v = nn.F.gelu(v)
        out = self.proj2(nn.F.gelu(self.proj1(v)))
        return out.squeeze(-1) if squeeze else out
