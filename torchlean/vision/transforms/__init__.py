"""torchvision.transforms under torchlean: the transform classes of torchvision's v1 API over the
functions of :mod:`.functional`. Random transforms draw from torchlean's generator (``tl.manual_seed``
makes them repeat), as torchvision's draw from torch's.

    >>> import numpy as np
    >>> import torchlean as tl
    >>> from torchlean.vision import transforms
    >>> t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    >>> t(np.full((2, 2), 255, np.uint8)).tolist()
    [[[1.0, 1.0], [1.0, 1.0]]]
"""

from __future__ import annotations

import math
import numbers

from ... import ops
from ...errors import DomainError, DTypeError
from ...nn import Module
from . import functional as F
from .functional import InterpolationMode

__all__ = ["Compose", "ToTensor", "PILToTensor", "ToPILImage", "ConvertImageDtype", "Normalize", "Resize",
           "CenterCrop", "RandomCrop", "Pad", "Lambda", "RandomHorizontalFlip", "RandomVerticalFlip",
           "RandomResizedCrop", "Grayscale", "RandomApply", "RandomChoice", "RandomOrder", "ColorJitter",
           "RandomErasing", "InterpolationMode", "functional"]


def _pair(size, name):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return int(size[0]), int(size[0])
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return int(size[0]), int(size[1])
    raise DomainError(f"{name}: size should be an int or a sequence of 1 or 2 ints, got {size!r}")


class Compose:
    """Apply ``transforms`` in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        inner = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({inner}\n)"


class _Plain:
    def __repr__(self):
        return f"{type(self).__name__}()"


class ToTensor(_Plain):
    """PIL Image or ``(H, W[, C])`` array -> ``(C, H, W)`` tensor, 8-bit values scaled to [0, 1]."""

    def __call__(self, pic):
        return F.to_tensor(pic)


class PILToTensor(_Plain):
    """PIL Image -> ``(C, H, W)`` tensor of the image's own dtype."""

    def __call__(self, pic):
        return F.pil_to_tensor(pic)


class ToPILImage:
    """Tensor or array -> PIL Image (``mode`` as Pillow's, inferred when None)."""

    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)

    def __repr__(self):
        return f"{type(self).__name__}(mode={self.mode})"


class ConvertImageDtype(Module):
    """Convert a tensor image to ``dtype``, scaling its values."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, image):
        return F.convert_image_dtype(image, self.dtype)


class Normalize(Module):
    """``(x - mean[c]) / std[c]`` per channel."""

    def __init__(self, mean, std, inplace=False):
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor):
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def extra_repr(self):
        return f"mean={self.mean}, std={self.std}"


class Resize(Module):
    """Resize to ``size`` (``(h, w)``, or an int for the smaller edge)."""

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
        super().__init__()
        if not isinstance(size, (numbers.Number, list, tuple)):
            raise DTypeError(f"Resize: size should be an int or a sequence, got {type(size).__name__}")
        self.size, self.interpolation, self.max_size, self.antialias = size, interpolation, max_size, antialias

    def forward(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def extra_repr(self):
        return f"size={self.size}, interpolation={self.interpolation.value}, max_size={self.max_size}, " \
               f"antialias={self.antialias}"


class CenterCrop(Module):
    """The central ``size`` window."""

    def __init__(self, size):
        super().__init__()
        self.size = _pair(size, "CenterCrop")

    def forward(self, img):
        return F.center_crop(img, self.size)

    def extra_repr(self):
        return f"size={self.size}"


class Pad(Module):
    """Pad the borders (see :func:`functional.pad`)."""

    def __init__(self, padding, fill=0, padding_mode="constant"):
        super().__init__()
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def forward(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


def _box_sides(area, scale, ratio):
    """One draw of torchvision's box sampler (RandomResizedCrop, RandomErasing): a target area uniform
    in ``scale`` times ``area`` and an aspect ratio log-uniform in ``ratio``, in that order; the sides
    ``sqrt(target * aspect)`` and ``sqrt(target / aspect)``, rounded."""
    target = area * float(ops.empty(1).uniform_(scale[0], scale[1]).item())
    aspect = math.exp(float(ops.empty(1).uniform_(math.log(ratio[0]), math.log(ratio[1])).item()))
    return int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))


def _randint(low, high):
    """One draw in ``[low, high)`` from torchlean's generator."""
    return int(ops.randint(low, high, (1,)).item())


class RandomCrop(Module):
    """A random ``size`` window, after optional padding (and padding up to ``size`` if asked)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        super().__init__()
        self.size = _pair(size, "RandomCrop")
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode

    @staticmethod
    def get_params(img, output_size):
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise DomainError(f"RandomCrop: required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if (w, h) == (tw, th):
            return 0, 0, h, w
        return _randint(0, h - th + 1), _randint(0, w - tw + 1), th, tw

    def forward(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, h, w = F.get_dimensions(img)
        th, tw = self.size
        if self.pad_if_needed and w < tw:
            img = F.pad(img, [tw - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < th:
            img = F.pad(img, [0, th - h], self.fill, self.padding_mode)
        return F.crop(img, *self.get_params(img, self.size))

    def extra_repr(self):
        return f"size={self.size}, padding={self.padding}"


class RandomResizedCrop(Module):
    """A random crop of random area (``scale``) and aspect ratio (``ratio``), resized to ``size``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
        super().__init__()
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise DomainError(f"RandomResizedCrop: scale and ratio should be (min, max), got {scale}, {ratio}")
        self.size, self.scale, self.ratio = _pair(size, "RandomResizedCrop"), scale, ratio
        self.interpolation, self.antialias = interpolation, antialias

    @staticmethod
    def get_params(img, scale, ratio):
        _, h, w = F.get_dimensions(img)
        for _ in range(10):
            cw, ch = _box_sides(h * w, scale, ratio)
            if 0 < cw <= w and 0 < ch <= h:
                return _randint(0, h - ch + 1), _randint(0, w - cw + 1), ch, cw
        in_ratio = w / h                                  # fallback: the central crop
        if in_ratio < min(ratio):
            cw, ch = w, int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            ch, cw = h, int(round(h * max(ratio)))
        else:
            cw, ch = w, h
        return (h - ch) // 2, (w - cw) // 2, ch, cw

    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, i, j, h, w, self.size, self.interpolation, antialias=self.antialias)


class _RandomFlip(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, img):
        return self._flip(img) if float(ops.rand(1).item()) < self.p else img

    def extra_repr(self):
        return f"p={self.p}"


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``p``."""
    _flip = staticmethod(F.hflip)


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``p``."""
    _flip = staticmethod(F.vflip)


class Grayscale(Module):
    """To grayscale with 1 or 3 output channels."""

    def __init__(self, num_output_channels=1):
        super().__init__()
        self.num_output_channels = num_output_channels

    def forward(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)


class Lambda:
    """A user function as a transform."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise DTypeError(f"Lambda: argument should be callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self):
        return f"{type(self).__name__}()"


class RandomApply(Module):
    """Apply all of ``transforms`` with probability ``p``."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms, self.p = transforms, p

    def forward(self, img):
        if self.p < float(ops.rand(1).item()):
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomChoice:
    """Apply one of ``transforms``, chosen with weights ``p`` (uniform when None)."""

    def __init__(self, transforms, p=None):
        self.transforms = list(transforms)
        self.p = [1.0] * len(self.transforms) if p is None else list(p)
        if len(self.p) != len(self.transforms):
            raise DomainError(f"RandomChoice: {len(self.p)} probabilities for {len(self.transforms)} transforms")

    def __call__(self, *args):
        w = ops.tensor(self.p)
        return self.transforms[int(ops.multinomial(w / w.sum(), 1).item())](*args)


class RandomOrder:
    """Apply ``transforms`` in a random order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for i in ops.randperm(len(self.transforms)).tolist():
            img = self.transforms[i](img)
        return img


def _jitter_range(value, name, center=1.0, bound=(0.0, float("inf")), clip_first_on_zero=True):
    """torchvision's ranges: a number v means [center - v, center + v] (clipped at 0 for the factors)."""
    if isinstance(value, numbers.Number):
        if value < 0:
            raise DomainError(f"ColorJitter: if {name} is a single number, it must be non negative, got {value}")
        value = [center - float(value), center + float(value)]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        value = [float(value[0]), float(value[1])]
    else:
        raise DTypeError(f"ColorJitter: {name} should be a single number or a list/tuple with length 2")
    if not bound[0] <= value[0] <= value[1] <= bound[1]:
        raise DomainError(f"ColorJitter: {name} values should be between {bound}, got {value}")
    return None if value[0] == value[1] == center else tuple(value)


class ColorJitter(Module):
    """Random brightness, contrast, saturation and hue changes, applied in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.saturation = _jitter_range(saturation, "saturation")
        self.hue = _jitter_range(hue, "hue", center=0.0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        order = ops.randperm(4).tolist()
        draw = [None if r is None else float(ops.empty(1).uniform_(r[0], r[1]).item())
                for r in (brightness, contrast, saturation, hue)]
        return (order, *draw)

    def forward(self, img):
        order, b, c, s, h = self.get_params(self.brightness, self.contrast, self.saturation, self.hue)
        fns = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
        for k in order:
            factor = (b, c, s, h)[k]
            if factor is not None:
                img = fns[k](img, factor)
        return img

    def extra_repr(self):
        return (f"brightness={self.brightness}, contrast={self.contrast}, saturation={self.saturation}, "
                f"hue={self.hue}")


class RandomErasing(Module):
    """With probability ``p``, a random rectangle of a tensor image (area ``scale``, aspect ``ratio``) set
    to ``value`` (a number, one per channel, or ``"random"``: standard normal noise)."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        super().__init__()
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise DTypeError("RandomErasing: argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise DomainError(f"RandomErasing: if value is str, it should be 'random', got {value!r}")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise DomainError(f"RandomErasing: scale and ratio should be (min, max), got {scale}, {ratio}")
        if not 0 <= scale[0] <= 1 or not 0 <= scale[1] <= 1 or not 0 <= p <= 1:
            raise DomainError(f"RandomErasing: scale {scale} and p {p} should be within [0, 1]")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    @staticmethod
    def get_params(img, scale, ratio, value=None):
        c, h_img, w_img = F.get_dimensions(img)
        for _ in range(10):
            h, w = _box_sides(h_img * w_img, scale, ratio)
            if not (h < h_img and w < w_img):
                continue
            v = ops.randn(c, h, w) if value is None else ops.tensor(list(value), dtype=img.dtype)[:, None, None]
            return _randint(0, h_img - h + 1), _randint(0, w_img - w + 1), h, w, v
        return 0, 0, h_img, w_img, img

    def forward(self, img):
        if float(ops.rand(1).item()) >= self.p:
            return img
        value = None if isinstance(self.value, str) else (
            [self.value] if isinstance(self.value, numbers.Number) else list(self.value))
        c = F.get_dimensions(img)[0]
        if value is not None and len(value) not in (1, c):
            raise DomainError(f"RandomErasing: value should be a number or a sequence of length 1 or {c} "
                              f"(the image's channels), got {len(value)} values")
        i, j, h, w, v = self.get_params(img, self.scale, self.ratio, value)
        return F.erase(img, i, j, h, w, v.to(img.dtype), self.inplace)
