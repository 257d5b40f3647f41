"""A character-level corpus from the Python standard library's own sources.

Every Python installation carries its standard library as ``.py`` files, so this
corpus needs no download. :func:`text_corpus` walks ``sysconfig.get_paths()["stdlib"]``,
keeps the ``*.py`` files outside test suites, installed packages, codec tables and
the documentation dump (directories ``site-packages``, ``dist-packages``, ``test``,
``tests``, ``idle_test``, ``encodings``, ``pydoc_data`` are skipped), orders
them by relative path, shuffles that order with the counter-based permutation
of ``seed``, and concatenates them until ``max_chars``. The text is the same on
every machine with the same Python version (the library's sources differ between
versions).

    >>> text, vocab = text_corpus(max_chars=10_000)
    >>> tok = CharTokenizer(vocab)
    >>> tok.decode(tok.encode(text[:20])) == text[:20]
    True
"""

from __future__ import annotations

import math
import os
import sysconfig
from pathlib import Path

import numpy as np

from ..errors import DomainError, IndexRangeError, ShapeError, TorchLeanError
from ..spec.rng import uniform
from ..ops import from_numpy
from ..tensor import Tensor
from .loader import Dataset, _check_index, _check_indices, _wrap, permutation

# Test suites, installed packages, codec tables (encodings/) and the documentation
# dump (pydoc_data/) are left out: the corpus is meant to be ordinary Python code.
_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "encodings",
              "pydoc_data"}
_FILE_STREAM = 0x54455854  # "TEXT"
_BATCH_STREAM = 0x43484152  # "CHAR"
# Printable ASCII plus newline; everything else (tabs, form feeds, non-ASCII letters
# in comments) becomes "?" so the vocabulary stays small and the same everywhere.
_KEEP = frozenset(chr(c) for c in range(32, 127)) | {"\n"}


def stdlib_files(root=None) -> list:
    """Relative paths (POSIX form, sorted) of the corpus' source files under ``root``."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for f in filenames:
            if f.endswith(".py"):
                out.append(Path(dirpath, f).relative_to(root).as_posix())
    return sorted(out)


def _clean(s: str) -> str:
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    if all(c in _KEEP for c in set(s)):
        return s
    return "".join(c if c in _KEEP else "?" for c in s)


def text_corpus(max_chars: int = 1_000_000, seed: int = 0, root=None):
    """``(text, vocab)``: up to ``max_chars`` characters of standard-library source and its sorted characters.

    Files are read as UTF-8 (a file that is not valid UTF-8 is skipped), line endings
    normalized to ``\\n``, and characters other than printable ASCII and newline
    replaced by ``?``. ``seed`` shuffles the file order (``seed=None`` keeps the
    sorted order). ``vocab`` is the string of distinct characters, sorted.
    ``root`` overrides the standard-library directory.
    """
    max_chars = int(max_chars)
    if max_chars < 1:
        raise ShapeError(f"text_corpus: max_chars must be >= 1, got {max_chars}")
    base = Path(root or sysconfig.get_paths()["stdlib"])
    files = stdlib_files(base)
    if not files:
        raise TorchLeanError(f"text_corpus: no .py files found under {base}")
    if seed is not None:
        files = [files[i] for i in permutation(len(files), int(seed), _FILE_STREAM)]
    parts, total = [], 0
    for rel in files:
        try:
            s = (base / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        s = _clean(s)
        if not s.endswith("\n"):
            s += "\n"
        parts.append(s[:max_chars - total])
        total += len(parts[-1])
        if total >= max_chars:
            break
    text = "".join(parts)
    return text, "".join(sorted(set(text)))


class CharTokenizer:
    """Characters <-> integer ids (the index of the character in the sorted vocabulary).

    ``CharTokenizer(vocab)`` takes the vocabulary string (as :func:`text_corpus`
    returns it) or any text (its distinct characters, sorted, become the vocabulary).

        >>> tok = CharTokenizer("hello")
        >>> tok.vocab, tok.encode("hole").tolist(), tok.decode([2, 1])
        ('ehlo', [1, 3, 2, 0], 'lh')
    """

    def __init__(self, vocab: str):
        self.vocab = "".join(sorted(set(vocab)))
        if not self.vocab:
            raise ShapeError("CharTokenizer: empty vocabulary")
        self.stoi = {c: i for i, c in enumerate(self.vocab)}
        # A 0x110000-entry lookup would be large; a table over the code points in use is enough.
        self._codes = np.array([ord(c) for c in self.vocab], dtype=np.int64)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self):
        return len(self.vocab)

    def encode(self, text: str) -> np.ndarray:
        """int64 ids of ``text``; a character outside the vocabulary raises IndexRangeError."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        pos = np.searchsorted(self._codes, codes)
        pos_c = np.minimum(pos, len(self._codes) - 1)
        bad = self._codes[pos_c] != codes
        if bad.any():
            c = text[int(np.argmax(bad))]
            raise IndexRangeError(f"CharTokenizer.encode: character {c!r} is not in the vocabulary")
        return pos_c.astype(np.int64)

    def decode(self, ids) -> str:
        """The text of ``ids`` (a sequence, NumPy array or Tensor of ints)."""
        a = ids.numpy() if isinstance(ids, Tensor) else np.asarray(ids)
        a = a.reshape(-1).astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= len(self.vocab)):
            bad = a[(a < 0) | (a >= len(self.vocab))][0]
            raise IndexRangeError(f"CharTokenizer.decode: id {int(bad)} out of range for a vocabulary of "
                                  f"{len(self.vocab)}")
        return "".join(self.vocab[i] for i in a.tolist())


def _ids(ids) -> np.ndarray:
    a = ids.numpy() if isinstance(ids, Tensor) else np.asarray(ids)
    if a.ndim != 1:
        raise ShapeError(f"expected a 1-D sequence of token ids, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ShapeError(f"token ids must be integers, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def train_val_split(ids, val_fraction: float = 0.1):
    """``(train, val)``: the first ``1 - val_fraction`` of the sequence and the rest (no shuffling)."""
    a = _ids(ids)
    if not 0.0 <= val_fraction < 1.0:
        raise DomainError(f"train_val_split: val_fraction must be in [0, 1), got {val_fraction}")
    cut = len(a) - int(round(val_fraction * len(a)))
    return a[:cut], a[cut:]


class CharDataset(Dataset):
    """Windows of a token sequence for next-token prediction.

    Sample ``i`` is ``(x, y)`` with ``x = ids[i : i + block_size]`` and
    ``y = ids[i + 1 : i + block_size + 1]`` (int64); there are
    ``len(ids) - block_size`` samples. Batches are gathered with one strided
    index, no per-sample loop.
    """

    def __init__(self, ids, block_size: int):
        self.ids = _ids(ids)
        self.block_size = int(block_size)
        if self.block_size < 1:
            raise ShapeError(f"CharDataset: block_size must be >= 1, got {block_size}")
        if len(self.ids) <= self.block_size:
            raise ShapeError(f"CharDataset: a sequence of {len(self.ids)} tokens has no window of "
                             f"{self.block_size} + 1")
        self._offsets = np.arange(self.block_size + 1, dtype=np.int64)

    def __len__(self):
        return len(self.ids) - self.block_size

    def __getitem__(self, i):
        i = _check_index(i, len(self), "CharDataset")
        w = self.ids[i:i + self.block_size + 1]
        return from_numpy(w[:-1].copy()), from_numpy(w[1:].copy())

    def batch(self, indices, device=None):
        idx = _check_indices(indices, len(self), "CharDataset")
        w = self.ids[idx[:, None] + self._offsets]
        return _wrap(w[:, :-1], device), _wrap(w[:, 1:], device)


def char_lm_batches(ids, block_size: int, batch_size: int, seed: int = 0, num_batches=None, device=None):
    """Random ``(x, y)`` windows, int64 (batch_size, block_size): an endless stream (or ``num_batches``).

    Batch ``j`` draws its window starts from the counter-based uniforms of key
    ``(seed, j)``, so the stream is reproducible and batch ``j`` does not depend on
    how many batches were taken before. The usual sampling for a char-level LM.
    """
    ds = CharDataset(ids, block_size)
    if int(batch_size) < 1:
        raise ShapeError(f"char_lm_batches: batch_size must be >= 1, got {batch_size}")
    n = len(ds)
    j = 0
    while num_batches is None or j < num_batches:
        u = uniform(int(batch_size), int(seed), _BATCH_STREAM + j, np.float64)
        starts = np.minimum((u * n).astype(np.int64), n - 1)
        yield ds.batch(starts, device)
        j += 1


def unigram_baseline(ids_train, ids_val, vocab_size=None) -> float:
    """Cross-entropy (nats per character) on ``ids_val`` of the unigram model of ``ids_train``.

    Probabilities are add-one (Laplace) smoothed counts over ``vocab_size`` symbols
    (default: one more than the largest id seen), so a character absent from the
    training part costs a finite amount. A language model that does not beat this
    has learned nothing beyond character frequencies.
    """
    tr, va = _ids(ids_train), _ids(ids_val)
    if len(va) == 0:
        raise ShapeError("unigram_baseline: empty validation sequence")
    if (tr.size and tr.min() < 0) or va.min() < 0:
        raise IndexRangeError("unigram_baseline: negative token id")
    v = int(vocab_size) if vocab_size is not None else int(max(tr.max(initial=0), va.max())) + 1
    if max(tr.max(initial=0), va.max()) >= v:
        raise IndexRangeError(f"unigram_baseline: an id is >= vocab_size {v}")
    counts = np.bincount(tr, minlength=v).astype(np.float64) + 1.0
    logp = np.log(counts) - math.log(counts.sum())
    return float(-logp[va].mean())
