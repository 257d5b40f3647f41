"""torchvision.transforms.v2 under torchlean: the v1 transforms (:mod:`torchlean.vision.transforms`) under
their v2 names, plus ``ToImage``, ``ToDtype`` and ``ToPureTensor``. A v2 transform takes one image, or
several inputs (``img, label`` or a tuple of them): it transforms the first image among them (a PIL
Image, NumPy array or tensor) and passes the others through unchanged. Bounding boxes, masks and the
``tv_tensors`` types are not supported (docs/differences.md).

    >>> import numpy as np
    >>> import torchlean as tl
    >>> from torchlean.vision.transforms import v2
    >>> t = v2.Compose([v2.ToImage(), v2.ToDtype(tl.float32, scale=True)])
    >>> x, y = t(np.full((1, 2, 3), 255, np.uint8), 7)
    >>> tuple(x.shape), x.max().item(), y
    ((3, 1, 2), 1.0, 7)
"""

from __future__ import annotations

import numpy as np

from .... import ops
from ....tensor import Tensor
from ... import transforms as _v1
from .. import functional as F

_NAMES = ["CenterCrop", "ColorJitter", "ConvertImageDtype", "Grayscale", "Lambda", "Normalize", "Pad", "PILToTensor",
          "RandomApply", "RandomChoice", "RandomCrop", "RandomErasing", "RandomHorizontalFlip", "RandomOrder", "RandomResizedCrop",
          "RandomVerticalFlip", "Resize", "ToPILImage", "ToTensor"]
__all__ = ["Compose", "ToImage", "ToDtype", "ToPureTensor", "InterpolationMode", "functional"] + _NAMES
InterpolationMode = _v1.InterpolationMode
functional = F


def _is_image(x):
    return isinstance(x, (Tensor, np.ndarray)) or type(x).__module__.startswith("PIL.")


def _on_first_image(fn, inputs):
    """``fn`` applied to the first image among ``inputs`` (one input, or a tuple/list of them)."""
    single = len(inputs) == 1
    items = inputs[0] if single else inputs
    if single and not isinstance(items, (tuple, list)):
        return fn(items)
    out, done = [], False
    for x in items:
        if not done and _is_image(x):
            x, done = fn(x), True
        out.append(x)
    return type(items)(out) if single else tuple(out)


def _v2(cls):
    """The v2 form of v1 transform class ``cls``."""
    def __call__(self, *inputs):
        return _on_first_image(lambda img: cls.__call__(self, img), inputs)
    return type(cls.__name__, (cls,), {"__call__": __call__, "__doc__": cls.__doc__, "__module__": __name__})


for _n in _NAMES:
    globals()[_n] = _v2(getattr(_v1, _n))


class Compose(_v1.Compose):
    """Apply ``transforms`` in order to the inputs (one image, or several inputs)."""

    def __call__(self, *inputs):
        out = inputs if len(inputs) > 1 else inputs[0]
        for t in self.transforms:
            out = t(*out) if len(inputs) > 1 else t(out)
        return out


class ToImage(_v1._Plain):
    """PIL Image or ``(H, W[, C])`` array -> ``(C, H, W)`` tensor of the same dtype (no scaling); tensors
    pass through."""

    def __call__(self, *inputs):
        def one(img):
            if isinstance(img, Tensor):
                return img
            if isinstance(img, np.ndarray):
                a = img[:, :, None] if img.ndim == 2 else img
                return ops.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))
            return F.pil_to_tensor(img)
        return _on_first_image(one, inputs)


class ToDtype:
    """Cast a tensor image to ``dtype``; with ``scale``, integer ranges map to [0, 1] and back
    (:func:`functional.convert_image_dtype`)."""

    def __init__(self, dtype, scale=False):
        self.dtype, self.scale = dtype, scale

    def __call__(self, *inputs):
        def one(img):
            return F.convert_image_dtype(img, self.dtype) if self.scale else img.to(self.dtype)
        return _on_first_image(one, inputs)

    def __repr__(self):
        return f"ToDtype(dtype={self.dtype}, scale={self.scale})"


class ToPureTensor(_v1._Plain):
    """Leaves tensors as they are (there are no ``tv_tensors`` subclasses here to unwrap)."""

    def __call__(self, *inputs):
        return inputs[0] if len(inputs) == 1 else inputs
