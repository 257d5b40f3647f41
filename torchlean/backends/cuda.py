"""``torchlean.backends.cuda``: ``matmul.allow_tf32`` (torch's), wired to this backend's TF32 switch.

``matmul.allow_tf32`` is True exactly when :func:`torchlean.get_float32_matmul_precision` is not
``"highest"``; setting it sets that precision to ``"high"`` or ``"highest"``, as torch's does.

    >>> import torchlean as tl
    >>> tl.backends.cuda.matmul.allow_tf32 = True
    >>> tl.get_float32_matmul_precision()
    'high'
    >>> tl.backends.cuda.matmul.allow_tf32 = False
"""

from .. import cuda as _cuda

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """Whether this torchlean can drive CUDA: True when CUDA is available (through CuPy)."""
    return _cuda.is_available()


class _Matmul:
    """torch.backends.cuda.matmul: ``allow_tf32`` only (other attributes raise AttributeError, as torch's)."""

    @property
    def allow_tf32(self) -> bool:
        return _cuda.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value) -> None:
        _cuda.set_float32_matmul_precision("high" if value else "highest")

    def __getattr__(self, name):
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name, value):
        if name != "allow_tf32":
            raise AttributeError("Unknown attribute " + name)
        object.__setattr__(self, name, value)


matmul = _Matmul()
