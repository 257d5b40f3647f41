"""The 8x8 handwritten digits shipped with scikit-learn (1797 images, 10 classes).

The images come from the UCI "Optical Recognition of Handwritten Digits" test set:
32x32 bitmaps reduced to 8x8 blocks counting set pixels, so each pixel is an integer
in 0..16. scikit-learn ships them inside its wheel (no download); it is the
optional extra ``data`` (``pip install scikit-learn``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, DomainError, ShapeError
from ..ops import from_numpy
from ..tensor import Tensor
from .loader import permutation

_SPLIT_STREAM = 0x44494749  # "DIGI": keeps the split's permutations apart from other uses of a seed
def _raw():
    # Read scikit-learn's bundled CSV directly: importing sklearn.datasets costs over a second
    # (it pulls in SciPy); the file is the same one its load_digits parses (about 30 ms).
    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        raise BackendUnavailableError(
            "load_digits needs scikit-learn, which ships the data set: pip install scikit-learn "
            "(or pip install 'torchlean[data]')")
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
    if path.exists():
        a = np.loadtxt(path, delimiter=",", dtype=np.float64)
        data, target = a[:, :-1], a[:, -1]
    else:
        from sklearn.datasets import load_digits as _sk_load
        d = _sk_load()
        data, target = d.data, d.target
    return np.asarray(data, dtype=np.float32), np.asarray(target, dtype=np.int64)


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
