"""The on-disk cache for generated data sets (``.npz`` files keyed by their parameters).

The directory is, in order: the ``cache_dir`` argument, the ``TORCHLEAN_CACHE``
environment variable, ``~/.cache/torchlean``. Files are written to a temporary
name in the same directory and renamed, so a reader never sees half a file and
two processes generating the same data set at once both end with a whole one.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..fileio import atomic_write


def cache_root(cache_dir=None) -> Path:
    """The cache directory to use (not created here)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("TORCHLEAN_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "torchlean"


def cache_path(name: str, params: dict, cache_dir=None) -> Path:
    """``<root>/<name>-<sha256 of the sorted JSON of params, 16 hex digits>.npz``."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":")).encode()
    return cache_root(cache_dir) / f"{name}-{hashlib.sha256(blob).hexdigest()[:16]}.npz"


def load_npz(path: Path):
    """The arrays of ``path`` as a dict, or None when it is missing or unreadable."""
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def save_npz_atomic(path: Path, **arrays) -> None:
    """Write ``arrays`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    atomic_write(path, lambda f: np.savez(f, **arrays))
