"""``DataParallel`` on a backend that drives one device per process.

torch's single-process multi-GPU wrapper splits each batch across GPUs. torchlean uses one CUDA
device per process (scale-out is one process per GPU, ``torchlean launch`` with
DistributedDataParallel), so here the wrapper runs its module on that one device: with the same
``.module`` attribute, ``module.``-prefixed state_dict keys and repr as torch's, so code and
checkpoints written for ``nn.DataParallel`` work unchanged. More than one device id raises.
"""

from __future__ import annotations

import numbers

from ...device import cuda_index
from ...errors import DeviceError, TorchLeanError
from ...kernels import cuda_available
from ...tensor import Tensor
from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_index(d, op) -> int:
    """The CUDA index of a device id (``0``, ``"cuda"``, ``"cuda:1"``, a device object)."""
    if isinstance(d, numbers.Integral) and not isinstance(d, bool):
        return int(d)
    kind, idx = (d, None) if isinstance(d, str) else (getattr(d, "type", None), getattr(d, "index", None))
    if isinstance(kind, str) and ":" in kind:
        kind, _, i = kind.partition(":")
        idx = int(i) if i.isdigit() else i
    if kind != "cuda" or not (idx is None or isinstance(idx, int)):
        raise DeviceError(f"{op}: expected a CUDA device id (an int or 'cuda:i'), got {d!r}")
    return 0 if idx is None else idx


def _device_ids(device_ids, output_device, op):
    """The (device_ids, output_device) to use: [] and None without CUDA (ignored, as torch does) or
    with ``device_ids=[]``; more than one device raises."""
    if device_ids is None:
        if not cuda_available():
            return [], None
        device_ids = [0]
    ids = [_device_index(d, op) for d in device_ids]
    if len(ids) > 1:
        raise DeviceError(f"{op}: device_ids={list(device_ids)} names {len(ids)} devices, but this backend drives "
                          "one CUDA device per process; run one process per GPU (torchlean launch) with "
                          "DistributedDataParallel")
    out = ids[0] if output_device is None and ids else (
        None if output_device is None else _device_index(output_device, op))
    for i in ids + ([] if out is None else [out]):
        if i != cuda_index():
            raise DeviceError(f"{op}: device cuda:{i} is not this process's GPU (cuda:{cuda_index()}); torchlean "
                              f"drives one GPU per process (torch.cuda.set_device chooses it)")
    if not cuda_available():
        return [], None
    return ids, out


def _to_device(obj, device):
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_device(o, device) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, device)) for k, v in obj.items())
    return obj


def _check_on_device(module, op):
    for t in list(module.parameters()) + list(module.buffers()):
        if t.device != "cuda":
            raise DeviceError(f"{op}: module must have its parameters and buffers on device cuda:{cuda_index()} "
                              f"(device_ids[0]) but found one of them on device: {t.device}")


class DataParallel(Module):
    """torch's ``nn.DataParallel(module, device_ids=None, output_device=None, dim=0)`` on one device.

    There is no batch splitting: the backend drives one device per process, so the wrapper moves
    the module and the inputs to ``cuda:0`` (when CUDA is available and ``device_ids`` is not
    empty) and calls the module, as torch's wrapper does with a single GPU; without CUDA it calls
    the module as is. ``device_ids`` naming more than one device raises DeviceError; use one
    process per GPU with DistributedDataParallel instead. State dict keys are ``module.<name>``.

        >>> import torchlean as tl
        >>> dp = DataParallel(tl.nn.Linear(2, 3))
        >>> list(dp.state_dict())
        ['module.weight', 'module.bias']
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TorchLeanError(f"DataParallel: module must be a Module, got {type(module).__name__}")
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
            raise TorchLeanError(f"DataParallel: dim must be an int, got {dim!r}")
        ids, out = _device_ids(device_ids, output_device, "DataParallel")
        self.module = module
        self.device_ids = ids
        if not ids:
            return
        self.dim = int(dim)
        self.output_device = out
        self.src_device_obj = f"cuda:{cuda_index()}"
        self.module.to("cuda")

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on_device(self.module, "DataParallel")
        return self.module(*_to_device(inputs, "cuda"), **_to_device(kwargs, "cuda"))


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """torch's ``nn.parallel.data_parallel``: ``module(*inputs, **module_kwargs)`` on the one device
    (see :class:`DataParallel`); ``inputs`` is a tuple of arguments or a single one."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    module_kwargs = {} if module_kwargs is None else module_kwargs
    ids, _ = _device_ids(device_ids, output_device, "data_parallel")
    if not ids:
        return module(*inputs, **module_kwargs)
    _check_on_device(module, "data_parallel")
    return module(*_to_device(inputs, "cuda"), **_to_device(module_kwargs, "cuda"))
