"""torchvision.transforms.functional under torchlean: the image operations behind the transforms.

An image is a PIL Image (what the datasets give, as torchvision's do), a NumPy array ``(H, W)`` or
``(H, W, C)``, or a tensor ``(..., C, H, W)``; each function returns the kind it was given.
PIL images are resized by Pillow itself (the same call torchvision makes); tensors are resized by
``nn.functional.interpolate``. Pillow is needed only for PIL images and for ``to_pil_image``.

    >>> import torchlean as tl
    >>> from torchlean.vision.transforms import functional as TF
    >>> x = tl.arange(12.0).reshape(1, 3, 4)
    >>> TF.hflip(x)[0, 0].tolist(), TF.center_crop(x, 2).shape
    ([3.0, 2.0, 1.0, 0.0], torchlean.Size([1, 2, 2]))
"""

from __future__ import annotations

import numbers
from enum import Enum

import numpy as np

from ... import ops
from ...dtypes import float32, int64, uint8
from ...errors import DatasetError, DomainError, DTypeError, ShapeError
from ...nn import functional as F
from ...tensor import Tensor

__all__ = ["InterpolationMode", "to_tensor", "pil_to_tensor", "to_pil_image", "normalize", "resize", "crop",
           "center_crop", "pad", "hflip", "vflip", "rgb_to_grayscale", "to_grayscale", "resized_crop",
           "get_image_size", "get_dimensions", "convert_image_dtype", "adjust_brightness", "adjust_contrast",
           "adjust_saturation", "adjust_hue", "erase"]


class InterpolationMode(Enum):
    """torchvision's interpolation modes (their values are the names Pillow and interpolate use)."""
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def pil():
    """The PIL.Image module, or an error saying how to install it."""
    try:
        from PIL import Image
    except ImportError:
        raise DatasetError("torchlean.vision: PIL images need Pillow (pip install pillow, or torchlean[vision])") from None
    return Image


def _is_pil(img):
    return type(img).__module__.startswith("PIL.")


def _check(img, op):
    if isinstance(img, (Tensor, np.ndarray)) or _is_pil(img):
        return
    raise DTypeError(f"{op}: expected a PIL Image, a NumPy array or a tensor, got {type(img).__name__}")


def get_dimensions(img):
    """``[channels, height, width]``."""
    _check(img, "get_dimensions")
    if _is_pil(img):
        return [len(img.getbands()), img.height, img.width]
    if isinstance(img, np.ndarray):
        return [1 if img.ndim == 2 else img.shape[2], img.shape[0], img.shape[1]]
    if img.dim() < 2:
        raise ShapeError(f"get_dimensions: a tensor image has at least 2 dimensions, got {tuple(img.shape)}")
    return [1 if img.dim() == 2 else int(img.shape[-3]), int(img.shape[-2]), int(img.shape[-1])]


def get_image_size(img):
    """``[width, height]`` (torchvision's order)."""
    _, h, w = get_dimensions(img)
    return [w, h]


def to_tensor(pic):
    """A PIL Image or an ``(H, W[, C])`` array -> a ``(C, H, W)`` tensor; 8-bit images become float32
    in [0, 1] (divided by 255), other arrays keep their dtype."""
    if isinstance(pic, Tensor):
        raise DTypeError(f"to_tensor: pic should be a PIL Image or ndarray, got {type(pic).__name__}")
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ShapeError(f"to_tensor: pic should be 2 or 3 dimensional, got {pic.ndim} dimensions")
        a = pic[:, :, None] if pic.ndim == 2 else pic
        t = ops.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))
        return t.to(float32) / 255 if t.dtype == uint8 else t
    _check(pic, "to_tensor")
    mode = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
    a = np.array(pic, dtype=mode, copy=True)
    if pic.mode == "1":
        a = a * 255
    if a.ndim == 2:
        a = a[:, :, None]
    t = ops.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))
    return t.to(float32) / 255 if mode is np.uint8 else t


def pil_to_tensor(pic):
    """A PIL Image -> a ``(C, H, W)`` tensor of its own dtype (no scaling)."""
    if not _is_pil(pic):
        raise DTypeError(f"pil_to_tensor: pic should be a PIL Image, got {type(pic).__name__}")
    a = np.asarray(pic)
    a = a[:, :, None] if a.ndim == 2 else a
    return ops.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))


def to_pil_image(pic, mode=None):
    """A ``(C, H, W)`` tensor or an ``(H, W[, C])`` array -> a PIL Image. Float values are taken as
    [0, 1] and scaled by 255 (then truncated to 8 bits, as torchvision's ``mul(255).byte()``)."""
    Image = pil()
    if isinstance(pic, Tensor):
        if pic.dim() not in (2, 3):
            raise ShapeError(f"to_pil_image: pic should be 2 or 3 dimensional, got {tuple(pic.shape)}")
        a = pic.detach().cpu().numpy()
        a = a[None] if a.ndim == 2 else a
        a = a.transpose(1, 2, 0)
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ShapeError(f"to_pil_image: pic should be 2 or 3 dimensional, got {pic.shape}")
        a = pic[:, :, None] if pic.ndim == 2 else pic
    else:
        raise DTypeError(f"to_pil_image: pic should be a tensor or ndarray, got {type(pic).__name__}")
    if a.dtype.kind == "f" and mode != "F":
        a = (a * 255).astype(np.int64).astype(np.uint8)      # torch's byte(): wraps modulo 256
    if a.shape[2] == 1:
        a = a[:, :, 0]
        if mode is None:
            mode = {np.dtype(np.uint8): "L", np.dtype(np.int16): "I;16", np.dtype(np.int32): "I",
                    np.dtype(np.float32): "F"}.get(a.dtype)
        if mode is None:
            raise DTypeError(f"to_pil_image: input type {a.dtype} is not supported")
    elif mode is None:
        mode = {2: "LA", 3: "RGB", 4: "RGBA"}.get(a.shape[2])
        if mode is None:
            raise ShapeError(f"to_pil_image: {a.shape[2]} channels are not supported")
    if mode in ("L", "LA", "RGB", "RGBA", "YCbCr", "HSV", "RGBX", "CMYK") and a.dtype != np.uint8:
        a = a.astype(np.uint8)
    return Image.fromarray(np.ascontiguousarray(a), mode=mode)


def normalize(tensor, mean, std, inplace=False):
    """``(x - mean[c]) / std[c]`` per channel of a float ``(..., C, H, W)`` tensor."""
    if not isinstance(tensor, Tensor):
        raise DTypeError(f"normalize: img should be a tensor, got {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise DTypeError(f"normalize: input tensor should be a float tensor, got {tensor.dtype}")
    if tensor.dim() < 3:
        raise ShapeError(f"normalize: expected a tensor image of size (..., C, H, W), got {tuple(tensor.shape)}")
    m = ops.as_tensor(mean, dtype=tensor.dtype, device=tensor.device)
    s = ops.as_tensor(std, dtype=tensor.dtype, device=tensor.device)
    if bool((s == 0).any()):
        raise DomainError(f"normalize: std evaluated to zero after conversion to {tensor.dtype}, "
                          "leading to division by zero")
    m = m.reshape(-1, 1, 1) if m.dim() == 1 else m
    s = s.reshape(-1, 1, 1) if s.dim() == 1 else s
    if inplace:
        return tensor.sub_(m).div_(s)
    return (tensor - m) / s


def _size_hw(size, h, w, max_size=None):
    """torchvision's output size: an int matches the smaller edge (keeping the aspect ratio)."""
    if isinstance(size, numbers.Number) or (isinstance(size, (list, tuple)) and len(size) == 1):
        s = int(size if isinstance(size, numbers.Number) else size[0])
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = s, int(s * long / short)
        if max_size is not None:
            if max_size <= s:
                raise DomainError(f"resize: max_size = {max_size} must be strictly greater than the requested size {s}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_long, new_short) if w <= h else (new_short, new_long)
    if max_size is not None:
        raise DomainError("resize: max_size is only supported for a single int size")
    if len(size) != 2:
        raise ShapeError(f"resize: size should be an int or a sequence of length 1 or 2, got {size!r}")
    return int(size[0]), int(size[1])


_PIL_MODES = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    """Resize to ``size`` (``(h, w)``, or an int for the smaller edge)."""
    _check(img, "resize")
    mode = interpolation.value if isinstance(interpolation, InterpolationMode) else str(interpolation)
    _, h, w = get_dimensions(img)
    oh, ow = _size_hw(size, h, w, max_size)
    if (oh, ow) == (h, w):
        return img
    if _is_pil(img) or isinstance(img, np.ndarray):
        p = img if _is_pil(img) else to_pil_image(img)
        if mode not in _PIL_MODES:
            raise DomainError(f"resize: interpolation {mode!r} is not supported for PIL images")
        out = p.resize((ow, oh), _PIL_MODES[mode])
        return out if _is_pil(img) else np.asarray(out)
    if mode not in ("nearest", "nearest-exact", "bilinear", "bicubic"):
        raise DomainError(f"resize: interpolation {mode!r} is not supported for tensors")
    x, lead = img, tuple(img.shape[:-3])
    x = x.reshape((-1,) + tuple(x.shape[-3:])) if x.dim() >= 3 else x[None, None]
    dtype = x.dtype
    xf = x if dtype.is_floating_point else x.to(float32)
    kw = {} if mode.startswith("nearest") else {"align_corners": False, "antialias": bool(antialias)}
    y = F.interpolate(xf, size=(oh, ow), mode=mode, **kw)
    if not dtype.is_floating_point:
        y = y.round().clamp(0, 255 if dtype == uint8 else None).to(dtype)
    return y.reshape(lead + tuple(y.shape[-3:])) if img.dim() >= 3 else y[0, 0]


def crop(img, top, left, height, width):
    """The ``height x width`` window at ``(top, left)``; cells outside the image are zero."""
    _check(img, "crop")
    if _is_pil(img):
        return img.crop((left, top, left + width, top + height))
    _, h, w = get_dimensions(img)
    if top >= 0 and left >= 0 and top + height <= h and left + width <= w:
        return img[..., top:top + height, left:left + width]
    pads = [max(-left, 0), max(left + width - w, 0), max(-top, 0), max(top + height - h, 0)]
    t0, l0 = max(top, 0), max(left, 0)
    inner = img[..., t0:min(top + height, h), l0:min(left + width, w)]
    return pad(inner, [pads[0], pads[2], pads[1], pads[3]], fill=0)


def center_crop(img, output_size):
    """The central ``output_size`` window (zero-padded when the image is smaller)."""
    if isinstance(output_size, numbers.Number):
        output_size = (int(output_size), int(output_size))
    elif isinstance(output_size, (tuple, list)) and len(output_size) == 1:
        output_size = (output_size[0], output_size[0])
    th, tw = output_size
    _, h, w = get_dimensions(img)
    if th > h or tw > w:
        padding = [(tw - w) // 2 if tw > w else 0, (th - h) // 2 if th > h else 0,
                   (tw - w + 1) // 2 if tw > w else 0, (th - h + 1) // 2 if th > h else 0]
        img = pad(img, padding, fill=0)
        _, h, w = get_dimensions(img)
        if (h, w) == (th, tw):
            return img
    return crop(img, int(round((h - th) / 2.0)), int(round((w - tw) / 2.0)), th, tw)


def _pad4(padding):
    if isinstance(padding, numbers.Number):
        return [int(padding)] * 4
    padding = list(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) == 4:
        return padding
    raise ShapeError(f"pad: padding must be an int or a 1, 2 or 4 element sequence, got {len(padding)} elements")


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad the borders: ``padding`` is an int, ``(left/right, top/bottom)`` or ``(left, top, right, bottom)``."""
    _check(img, "pad")
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise DomainError(f"pad: padding_mode should be constant, edge, reflect or symmetric, got {padding_mode!r}")
    left, top, right, bottom = _pad4(padding)
    if isinstance(img, Tensor):
        mode = {"edge": "replicate"}.get(padding_mode, padding_mode)
        if mode == "symmetric":
            a = img.detach().cpu().numpy()
            widths = [(0, 0)] * (a.ndim - 2) + [(top, bottom), (left, right)]
            return ops.tensor(np.pad(a, widths, mode="symmetric"), device=img.device)
        x = img if img.dim() >= 3 else img[None]
        squeeze = img.dim() < 3
        x4 = x.reshape((-1,) + tuple(x.shape[-3:]))
        if mode == "constant":
            y = F.pad(x4, (left, right, top, bottom), mode="constant", value=fill)
        else:
            dt = x4.dtype
            y = F.pad(x4 if dt.is_floating_point else x4.to(float32), (left, right, top, bottom), mode=mode).to(dt)
        y = y.reshape(tuple(x.shape[:-3]) + tuple(y.shape[-3:]))
        return y[0] if squeeze else y
    a = np.asarray(img)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (a.ndim - 2)
    if padding_mode == "constant":
        out = np.pad(a, widths, mode="constant", constant_values=fill if np.isscalar(fill) else 0)
    else:
        out = np.pad(a, widths, mode=padding_mode)
    if _is_pil(img):
        return pil().fromarray(out, mode=img.mode)
    return out


def hflip(img):
    """Mirror left-right."""
    _check(img, "hflip")
    if _is_pil(img):
        return img.transpose(pil().Transpose.FLIP_LEFT_RIGHT)
    if isinstance(img, np.ndarray):
        return img[:, ::-1].copy()
    return img.flip(-1)


def vflip(img):
    """Mirror top-bottom."""
    _check(img, "vflip")
    if _is_pil(img):
        return img.transpose(pil().Transpose.FLIP_TOP_BOTTOM)
    if isinstance(img, np.ndarray):
        return img[::-1].copy()
    return img.flip(-2)


def rgb_to_grayscale(img, num_output_channels=1):
    """ITU-R 601-2 luma (0.2989 R + 0.587 G + 0.114 B), repeated to ``num_output_channels``."""
    if num_output_channels not in (1, 3):
        raise DomainError(f"rgb_to_grayscale: num_output_channels should be either 1 or 3, got {num_output_channels}")
    _check(img, "rgb_to_grayscale")
    if _is_pil(img) or isinstance(img, np.ndarray):
        p = img if _is_pil(img) else to_pil_image(img)
        g = p.convert("L")
        if num_output_channels == 3:
            g = pil().merge("RGB", [g, g, g])
        return g if _is_pil(img) else np.asarray(g)
    c = get_dimensions(img)[0]
    if c == 1:
        g = img
    elif c == 3:
        dt = img.dtype
        x = img if dt.is_floating_point else img.to(float32)
        g = (0.2989 * x[..., 0:1, :, :] + 0.587 * x[..., 1:2, :, :] + 0.114 * x[..., 2:3, :, :])
        if not dt.is_floating_point:
            g = g.clamp(0, 255).to(dt)
    else:
        raise ShapeError(f"rgb_to_grayscale: input image should have 1 or 3 channels, got {c}")
    return g.expand(tuple(g.shape[:-3]) + (3,) + tuple(g.shape[-2:])).clone() if num_output_channels == 3 else g


def to_grayscale(img, num_output_channels=1):
    """The PIL form of :func:`rgb_to_grayscale`."""
    return rgb_to_grayscale(img, num_output_channels)


def resized_crop(img, top, left, height, width, size, interpolation=InterpolationMode.BILINEAR, antialias=True):
    """:func:`crop` then :func:`resize`."""
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def convert_image_dtype(image, dtype=float32):
    """Integer images scale to [0, 1] floats; floats to integers scale by the integer range."""
    if not isinstance(image, Tensor):
        raise DTypeError(f"convert_image_dtype: expected a tensor, got {type(image).__name__}")
    if image.dtype == dtype:
        return image
    if image.dtype.is_floating_point:
        if dtype.is_floating_point:
            return image.to(dtype)
        top = float(np.iinfo(dtype.dtype).max)
        return (image * (top + 1.0 - 1e-3)).to(dtype)
    top_in = float(np.iinfo(image.dtype.dtype).max)
    if dtype.is_floating_point:
        return image.to(dtype) / top_in
    top_out = float(np.iinfo(dtype.dtype).max)
    if top_out > top_in:                         # torchvision's bit shifts: exact powers of two
        return image.to(dtype) * int((top_out + 1) // (top_in + 1))
    return (image // int((top_in + 1) // (top_out + 1))).to(dtype)


# ---- colour ----------------------------------------------------------------------------------------

def _blend(img1, img2, ratio):
    """``ratio img1 + (1 - ratio) img2``, clamped to the image's range, in ``img1``'s dtype."""
    fl = img1.dtype.is_floating_point
    bound = 1.0 if fl else 255.0
    x = img1 if fl else img1.to(float32)
    y = img2 if isinstance(img2, (int, float)) else (img2 if img2.dtype.is_floating_point else img2.to(float32))
    return (x * ratio + y * (1.0 - ratio)).clamp(0, bound).to(img1.dtype)


def _pil_enhance(img, kind, factor):
    from PIL import ImageEnhance
    return getattr(ImageEnhance, kind)(img).enhance(factor)


def _check_factor(op, factor, name):
    if factor < 0:
        raise DomainError(f"{op}: {name} ({factor}) is not non-negative.")


def adjust_brightness(img, brightness_factor):
    """Scale the intensities by ``brightness_factor`` (0: black, 1: the image)."""
    _check(img, "adjust_brightness")
    _check_factor("adjust_brightness", brightness_factor, "brightness_factor")
    if not isinstance(img, Tensor):
        return _pil_enhance(img if _is_pil(img) else to_pil_image(img), "Brightness", brightness_factor)
    return _blend(img, 0.0, brightness_factor)


def adjust_contrast(img, contrast_factor):
    """Blend with the image's mean grey level (0: uniform grey, 1: the image)."""
    _check(img, "adjust_contrast")
    _check_factor("adjust_contrast", contrast_factor, "contrast_factor")
    if not isinstance(img, Tensor):
        return _pil_enhance(img if _is_pil(img) else to_pil_image(img), "Contrast", contrast_factor)
    grey = rgb_to_grayscale(img) if get_dimensions(img)[0] == 3 else img
    grey = grey if grey.dtype.is_floating_point else grey.to(float32)
    return _blend(img, grey.mean(dim=(-3, -2, -1), keepdim=True), contrast_factor)


def adjust_saturation(img, saturation_factor):
    """Blend with the grey image (0: grey, 1: the image, 2: doubled saturation)."""
    _check(img, "adjust_saturation")
    _check_factor("adjust_saturation", saturation_factor, "saturation_factor")
    if not isinstance(img, Tensor):
        return _pil_enhance(img if _is_pil(img) else to_pil_image(img), "Color", saturation_factor)
    if get_dimensions(img)[0] == 1:
        return img
    return _blend(img, rgb_to_grayscale(img), saturation_factor)


def _rgb2hsv(img):
    r, g, b = img[..., 0, :, :], img[..., 1, :, :], img[..., 2, :, :]
    maxc, minc = img.max(dim=-3).values, img.min(dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = ops.ones_like(maxc)
    s = cr / ops.where(eqc, ones, maxc)
    cr_div = ops.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / cr_div, (maxc - g) / cr_div, (maxc - b) / cr_div
    hr = (maxc == r).to(img.dtype) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)).to(img.dtype) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)).to(img.dtype) * (4.0 + gc - rc)
    h = ops.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return ops.stack((h, s, maxc), dim=-3)


def _hsv2rgb(img):
    h, s, v = img[..., 0, :, :], img[..., 1, :, :], img[..., 2, :, :]
    i = (h * 6.0).floor()
    f = h * 6.0 - i
    i = i.to(int64) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = [ops.zeros_like(v) for _ in range(3)]
    for k, rgb in enumerate(table):
        m = i == k
        out = [ops.where(m, c, o) for c, o in zip(rgb, out)]
    return ops.stack(out, dim=-3)


def adjust_hue(img, hue_factor):
    """Rotate the hue by ``hue_factor`` of a turn (in [-0.5, 0.5])."""
    if not -0.5 <= hue_factor <= 0.5:
        raise DomainError(f"adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    _check(img, "adjust_hue")
    if not isinstance(img, Tensor):
        p = img if _is_pil(img) else to_pil_image(img)
        if p.mode in ("L", "1", "I", "F"):
            return p
        h, s, v = p.convert("HSV").split()
        np_h = np.array(h, dtype=np.uint8)
        with np.errstate(over="ignore"):
            np_h += np.array(hue_factor * 255).astype(np.uint8)
        out = pil().merge("HSV", (pil().fromarray(np_h, "L"), s, v)).convert(p.mode)
        return out if _is_pil(img) else np.asarray(out)
    if get_dimensions(img)[0] == 1:
        return img
    dt = img.dtype
    x = img if dt.is_floating_point else img.to(float32) / 255.0
    hsv = _rgb2hsv(x)
    h = ops.fmod(hsv[..., 0:1, :, :] + hue_factor, 1.0)
    h = ops.where(h < 0, h + 1.0, h)
    rgb = _hsv2rgb(ops.cat((h, hsv[..., 1:, :, :]), dim=-3))
    return rgb if dt.is_floating_point else (rgb * 255.0).to(dt)


def erase(img, i, j, h, w, v, inplace=False):
    """``img`` with the ``h x w`` window at ``(i, j)`` set to ``v`` (a tensor image)."""
    if not isinstance(img, Tensor):
        raise DTypeError(f"erase: img should be a tensor image, got {type(img).__name__}")
    out = img if inplace else img.clone()
    out[..., i:i + h, j:j + w] = v
    return out
