"""torchvision.utils under torchlean: :func:`make_grid` tiles a batch of images into one, and
:func:`save_image` writes it as a PNG (or any format Pillow knows), as torchvision's do.

    >>> import torchlean as tl
    >>> from torchlean.vision.utils import make_grid
    >>> tuple(make_grid(tl.zeros(5, 3, 4, 4), nrow=2, padding=1).shape)
    (3, 16, 11)
"""

from __future__ import annotations

import math

from .. import ops
from ..dtypes import uint8
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .transforms.functional import pil

__all__ = ["make_grid", "save_image"]


def _norm_range(t, low, high):
    t.clamp_(min=low, max=high)
    t.sub_(low).div_(max(high - low, 1e-5))


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """``(B, C, H, W)`` (or a list of ``(C, H, W)``) -> one ``(C, rows, cols)`` image, ``nrow`` images
    per row with ``padding`` cells of ``pad_value`` around each; ``normalize`` maps ``value_range``
    (default: the min and max, per image with ``scale_each``) to [0, 1]."""
    if isinstance(tensor, (list, tuple)):
        tensor = ops.stack(list(tensor), dim=0)
    if not isinstance(tensor, Tensor):
        raise DTypeError(f"make_grid: tensor or list of tensors expected, got {type(tensor).__name__}")
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.shape[0] == 1:
            tensor = ops.cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4:
        raise ShapeError(f"make_grid: expected a 2, 3 or 4 dimensional tensor, got {tuple(tensor.shape)}")
    if tensor.shape[1] == 1:
        tensor = ops.cat((tensor, tensor, tensor), 1)
    if normalize:
        tensor = tensor.clone()
        if value_range is not None and not isinstance(value_range, tuple):
            raise DTypeError("make_grid: value_range has to be a tuple (min, max) if specified")
        if scale_each:
            for t in tensor:
                lo, hi = value_range or (float(t.min()), float(t.max()))
                _norm_range(t, lo, hi)
        else:
            lo, hi = value_range or (float(tensor.min()), float(tensor.max()))
            _norm_range(tensor, lo, hi)
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    nmaps = tensor.shape[0]
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.shape[2] + padding), int(tensor.shape[3] + padding)
    grid = ops.full((tensor.shape[1], height * ymaps + padding, width * xmaps + padding), pad_value,
                    dtype=tensor.dtype, device=tensor.device)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= nmaps:
                break
            top, left = y * height + padding, x * width + padding
            grid[:, top:top + height - padding, left:left + width - padding] = tensor[k]
            k += 1
    return grid


def save_image(tensor, fp, format=None, **kwargs):  # noqa: A002 - torchvision's name
    """:func:`make_grid` of ``tensor`` (values in [0, 1]) written to ``fp`` (a path or a file object)
    as 8-bit RGB through Pillow; ``format`` as Pillow's (inferred from the file name when None)."""
    grid = make_grid(tensor, **kwargs)
    nd = (grid.detach() * 255 + 0.5).clamp(0, 255).permute(1, 2, 0).to(device="cpu", dtype=uint8).numpy()
    pil().fromarray(nd).save(fp, format=format)
