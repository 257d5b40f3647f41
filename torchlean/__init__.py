"""torchlean: a deep-learning runtime whose every op has a reference meaning.

    >>> import torchlean as tl
    >>> x = tl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x @ x).sum()
    >>> y.backward()
    >>> x.grad.tolist()
    [[7.0, 11.0], [9.0, 13.0]]
"""

from . import errors
from .errors import TorchLeanError
from .options import get_options, options, set_options
from .tensor import *  # noqa: F401,F403 - Tensor, dtypes, creation and math functions, grad mode
from .dtypes import (bfloat16, can_cast, finfo, float16, get_default_dtype, iinfo, int8, int16,  # noqa: F401
                     promote_types, result_type, set_default_dtype, uint8)
from .dtypes import DType as dtype  # noqa: F401 - torch.dtype
from .device import device, get_default_device, set_default_device  # noqa: F401 - torch.device, ...
from .dtypes import NAMES as _DTYPE_NAMES
from .ops import *  # noqa: F401,F403 - PyTorch's functions, by family (torchlean.ops.table)

globals().update({n: d for n, d in _DTYPE_NAMES.items() if n != "bool_"})  # tl.long, tl.float, tl.half, tl.bool, ...

__version__ = "0.1.0"


def __getattr__(name):
    # Subpackages load lazily so `import torchlean` stays light (nn, optim, ir, cuda, models, data).
    import importlib
    if name in ("nn", "optim", "ir", "cuda", "models", "data", "autograd", "kernels", "spec", "testing", "linalg",
                "backends", "accelerator", "amp", "utils", "multiprocessing", "hub", "serialization", "distributions", "onnx",
                "distributed", "fft", "special", "jit", "futures", "sparse"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("set_float32_matmul_precision", "get_float32_matmul_precision"):
        return getattr(importlib.import_module(f"{__name__}.cuda"), name)
    if name in ("set_num_threads", "get_num_threads"):
        return getattr(importlib.import_module(f"{__name__}.threads"), name)
    if name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):
        return getattr(importlib.import_module(f"{__name__}.amp"), name)
    if name in ("save", "load"):
        from . import serialization
        return getattr(serialization, name)
    if name == "compile":
        from .ir.jit import compile
        return compile
    raise AttributeError(f"module 'torchlean' has no attribute {name!r}")
