"""The layer kernels (convolution and pooling, normalization, attention, real FFT, spectral
convolution, selective scan) on CuPy arrays, by running the host modules' own code with CuPy
in the place of NumPy.

:mod:`torchlean.kernels.host_conv` and :mod:`torchlean.kernels.host_nn` are written as whole-array
NumPy (im2col + matmul, ``np.fft``, einsum, strided views), and CuPy implements that API on
the GPU: matmul and einsum go to cuBLAS, ``fft`` to cuFFT, everything else to CuPy's kernels.
Executing the same source against CuPy gives the CUDA device these kernels with the host's
semantics by construction (one algorithm, one place to change it). The source is run
verbatim; only the module that ``import numpy`` binds differs.
"""

from __future__ import annotations

import builtins
import importlib
import types

import cupy
import cupy.lib.stride_tricks

from ..api import KERNELS

HOST_MODULES = ("torchlean.kernels.host_conv", "torchlean.kernels.host_nn")

_REDIRECT = {"numpy": cupy, "numpy.lib.stride_tricks": cupy.lib.stride_tricks}


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name in _REDIRECT:
        return _REDIRECT[name]
    return builtins.__import__(name, globals, locals, fromlist, level)


def port(module_name: str) -> types.ModuleType:
    """A twin of host module ``module_name`` whose ``numpy`` is CuPy."""
    host = importlib.import_module(module_name)
    with open(host.__file__, encoding="utf-8") as f:
        src = f.read()
    mod = types.ModuleType(module_name.replace(".host_", ".cuda_"), host.__doc__)
    pkg = module_name.rpartition(".")[0]
    mod.__dict__.update(__package__=pkg, __file__=host.__file__,
                        __builtins__={**builtins.__dict__, "__import__": _import})
    exec(compile(src, host.__file__, "exec"), mod.__dict__)
    return mod


_TWINS: dict = {}


def twin(module_name: str) -> types.ModuleType:
    """The ported twin of host module ``module_name``, built once per process: the fallback of
    the native kernels for inputs they do not take (float64 attention, empty axes, ...)."""
    m = _TWINS.get(module_name)
    if m is None:
        m = _TWINS[module_name] = port(module_name)
    return m


def load(skip=()) -> types.ModuleType:
    """One module with the surface's names defined by the ported host modules (minus ``skip``)."""
    out = types.ModuleType("torchlean.kernels.cuda.ported_surface")
    for name in HOST_MODULES:
        m = twin(name)
        for k in KERNELS:
            if k not in skip and callable(getattr(m, k, None)):
                setattr(out, k, getattr(m, k))
    return out
