"""torch.onnx under torchlean: the module exists so programs that import it run; exporting does not yet.

torchlean reads ONNX (:func:`torchlean.ir.from_onnx`) but does not write it. :func:`export` and
:func:`dynamo_export` raise :class:`~torchlean.errors.BackendUnavailableError` saying so, naming
the route that exists: ``ir.trace`` + ``ir.save`` write the model as torchlean IR (JSON and
safetensors). :func:`is_in_onnx_export` is False, which is true here: no export ever runs.

    >>> import torchlean as tl
    >>> tl.onnx.is_in_onnx_export()
    False
"""

from __future__ import annotations

from .errors import BackendUnavailableError

__all__ = ["export", "dynamo_export", "is_in_onnx_export", "OnnxExporterError"]


class OnnxExporterError(BackendUnavailableError):
    """ONNX export was asked for; torchlean cannot write ONNX yet."""


def _refuse(name):
    raise OnnxExporterError(f"torch.onnx.{name}: exporting to ONNX is not supported by torchlean yet; "
                            "save the model as torchlean IR instead (torchlean.ir.trace + torchlean.ir.save), "
                            "or export it with PyTorch")


def export(model, args=(), f=None, *rest, **kwargs):
    """torch.onnx.export: raises :class:`OnnxExporterError` (not supported yet)."""
    _refuse("export")


def dynamo_export(model, *args, **kwargs):
    """torch.onnx.dynamo_export: raises :class:`OnnxExporterError` (not supported yet)."""
    _refuse("dynamo_export")


def is_in_onnx_export() -> bool:
    """False: no ONNX export ever runs in torchlean."""
    return False
