"""Atomic file writes: every file torchlean saves appears whole or not at all.

The data goes to a temporary file in the destination folder (named after the destination and
the writing process), is flushed to disk (``fsync``), replaces the destination in one
``os.replace``, and the folder is flushed too, so the rename itself survives a power loss. A kill
at any instant leaves the previous file (or none) in place, never a truncated one; what it can
leave is a temporary file, which the next write to the same destination removes
(:func:`remove_stale_temporaries`: only those of processes that no longer run). New files get
the permissions the user's umask gives (``mkstemp`` alone would make them 0600).
"""

from __future__ import annotations

import os
import re
import tempfile


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _prefix(path: str) -> str:
    return "." + os.path.basename(path) + "."


def remove_stale_temporaries(path) -> list:
    """Remove the temporary files that interrupted writes to ``path`` left; returns their names.

    A temporary belongs to a write while its process runs; those of live processes (another
    writer right now) are kept.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape(_prefix(path)) + r"(\d+)\.[^.]+\.tmp$")
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m is None or _alive(int(m.group(1))):
            continue
        try:
            os.remove(os.path.join(folder, name))
            removed.append(name)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process is not writing it now (writes are not interleaved in one thread)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def fsync_dir(folder) -> None:
    """Flush a folder's entries (a rename in it) to disk, where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def atomic_write(path, data) -> None:
    """Write ``data`` (bytes, str, or a callable taking a binary file object) to ``path`` atomically."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{_prefix(path)}{os.getpid()}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
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
    fsync_dir(folder)
