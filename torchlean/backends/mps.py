"""``torchlean.backends.mps``: Apple's Metal backend, which torchlean does not have.

    >>> import torchlean as tl
    >>> tl.backends.mps.is_available(), tl.backends.mps.is_built()
    (False, False)
"""

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: torchlean has no MPS backend."""
    return False


def is_built() -> bool:
    """False: torchlean has no MPS backend."""
    return False
