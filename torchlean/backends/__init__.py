"""``torchlean.backends``: torch's backend flags (``cudnn``, ``cuda``, ``mps``).

``backends.cuda.matmul.allow_tf32``, ``backends.cudnn.allow_tf32`` and
:func:`torchlean.set_float32_matmul_precision` drive this backend's one TF32 switch (see
:mod:`torchlean.backends.cudnn`); the other flags are stored and read back as torch's, and their
docstrings say what they change here.

    >>> import torchlean as tl
    >>> tl.backends.cudnn.benchmark, tl.backends.cuda.matmul.allow_tf32, tl.backends.mps.is_available()
    (False, False, False)
"""

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
