"""Atomic file writes: every file torchlean saves appears whole or not at all.

The data goes to a temporary file in the destination folder, is flushed to disk,
and then replaces the destination in one ``os.replace``; a crash mid-write leaves
the previous file (or none), never a truncated one.
"""

from __future__ import annotations

import os
import tempfile


def atomic_write(path, data) -> None:
    """Write ``data`` (bytes, str, or a callable taking a binary file object) to ``path`` atomically."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
