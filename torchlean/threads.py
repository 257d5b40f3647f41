"""Thread counts: ``set_num_threads`` / ``get_num_threads`` over the BLAS thread pool.

torchlean's CPU kernels are NumPy's; the threads that matter are those of its BLAS (OpenBLAS,
MKL, BLIS). With ``threadpoolctl`` installed, :func:`set_num_threads` limits those pools in this
process and :func:`get_num_threads` reads them back. Without it this is a best effort: the
count is kept, and the ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS``
variables are set, which only a BLAS not loaded yet will read.

    >>> import torchlean as tl
    >>> n = tl.get_num_threads()
    >>> tl.set_num_threads(1); tl.get_num_threads()
    1
    >>> tl.set_num_threads(n)
"""

from __future__ import annotations

import os

from .errors import TorchLeanError

__all__ = ["get_num_threads", "set_num_threads"]

_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


class _Asked:
    n = None   # the count set without threadpoolctl


def _blas_pools():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in the BLAS of the CPU kernels (``n`` a positive int, as torch requires)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TorchLeanError(f"set_num_threads expects a positive integer, got {n!r}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        threadpool_limits(limits=n, user_api="blas")
    else:
        for k in _ENV:
            os.environ[k] = str(n)
    _Asked.n = n


def get_num_threads() -> int:
    """The threads of the BLAS pool (the largest, when several are loaded); without threadpoolctl,
    the count last set, or the CPU count."""
    pools = _blas_pools()
    if pools:
        return max(p["num_threads"] for p in pools)
    if _Asked.n is not None:
        return _Asked.n
    return os.cpu_count() or 1
