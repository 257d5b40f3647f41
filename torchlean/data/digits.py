"""The 8x8 handwritten digits (1797 images, 10 classes), shipped with torchlean.

The images are the test set of the UCI "Optical Recognition of Handwritten Digits" data set
(E. Alpaydin and C. Kaynak, 1998; https://archive.ics.uci.edu/dataset/80, CC BY 4.0), the same
rows scikit-learn's ``load_digits`` returns: 32x32 bitmaps reduced to 8x8 blocks counting set
pixels, so each pixel is an integer in 0..16. They ship inside the package (``digits.npz``,
45 KB, uint8), so the base install trains on them without a download or scikit-learn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DomainError, ShapeError
from ..ops import from_numpy
from ..tensor import Tensor
from .loader import permutation

_SPLIT_STREAM = 0x44494749  # "DIGI": keeps the split's permutations apart from other uses of a seed
def _raw():
    with np.load(Path(__file__).with_name("digits.npz")) as f:
        return f["images"].astype(np.float32), f["labels"].astype(np.int64)


def split_indices(y: np.ndarray, seed: int, test_fraction: float):
    """Stratified (train, test) index arrays, each sorted ascending.

    Class ``c`` puts ``round(test_fraction * n_c)`` of its samples in the test set,
    chosen by the counter-based permutation keyed by ``(seed, c)``; so class
    proportions match in both parts and the split is the same on every machine.
    """
    test = []
    for c in np.unique(y):
        members = np.nonzero(y == c)[0]
        k = int(round(test_fraction * len(members)))
        test.append(members[permutation(len(members), seed, _SPLIT_STREAM + int(c))[:k]])
    test = np.sort(np.concatenate(test))
    train = np.setdiff1d(np.arange(len(y)), test)
    return train, test


def load_digits(split: str = "train", seed: int = 0, test_fraction: float = 0.2, normalize: bool = True):
    """``(x, y)``: float32 Tensor (N, 64) of pixel rows and int64 Tensor (N,) of labels 0..9.

    ``split`` is ``"train"``, ``"test"`` or ``"all"``; the train/test split is
    stratified by class and keyed by ``seed`` (see :func:`split_indices`); with the
    defaults the test set has 359 images (35 to 37 per class) and the train set
    the other 1438. ``normalize=True`` scales pixels to [0, 1]
    (``pixels / 16``); ``False`` keeps the raw counts 0..16 (still float32).
    Raises BackendUnavailableError when scikit-learn is not installed.

        >>> x, y = load_digits("test")
        >>> x.shape, y.shape, float(x.max()) <= 1.0
        (torchlean.Size([359, 64]), torchlean.Size([359]), True)
    """
    if split not in ("train", "test", "all"):
        raise DomainError(f"load_digits: split must be 'train', 'test' or 'all', got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise DomainError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction}")
    x, y = _raw()
    if split == "all":
        idx = np.arange(len(y))
    else:
        train, test = split_indices(y, int(seed), float(test_fraction))
        idx = train if split == "train" else test
    xs = x[idx] / np.float32(16.0) if normalize else x[idx].copy()
    return from_numpy(xs.astype(np.float32)), from_numpy(y[idx].copy())


def as_images(x):
    """Rows of 64 pixels as images (N, 1, 8, 8), channels-first; Tensor or NumPy in, same out."""
    shape = tuple(x.shape)
    if len(shape) != 2 or shape[1] != 64:
        raise ShapeError(f"as_images: expects (N, 64) pixel rows, got shape {shape}")
    if isinstance(x, Tensor):
        return x.reshape(shape[0], 1, 8, 8)
    return np.asarray(x).reshape(shape[0], 1, 8, 8)
