"""``torchlean.device``: torch's device objects, and the default device of the creation functions.

A device is a type (``"cpu"`` or ``"cuda"``) and an optional index, written and compared as
torch writes and compares them: ``str(tl.device("cuda", 0)) == "cuda:0"``,
``tl.device("cuda") != tl.device("cuda:0")``. Every function that takes a device takes a string
or one of these objects; :func:`normalize` is the one place where both are read.

A device is also a ``str`` whose value is its type (``"cpu"``/``"cuda"``), so ``x.device`` works
both as torch's object (``x.device.type``, ``x.device == tl.device("cpu")``) and where a device
string is expected (``x.device == "cpu"`` is True, where torch says False).

    >>> import torchlean as tl
    >>> d = tl.device("cuda:0")
    >>> d.type, d.index, str(d), d
    ('cuda', 0, 'cuda:0', device(type='cuda', index=0))
    >>> tl.zeros(2).device == tl.device("cpu")
    True
"""

from __future__ import annotations

from .errors import DeviceError

__all__ = ["device", "get_default_device", "normalize", "set_default_device", "cuda_index", "cuda_device", "use_cuda"]

#: The device types this backend runs on; torch knows more (mps, xpu, meta, ...), refused here.
TYPES = ("cpu", "cuda")


def _parse(spec: str, where: str):
    t, sep, i = spec.partition(":")
    if t not in TYPES:
        raise DeviceError(f"{where}: unknown device {spec!r}; expected 'cpu' or 'cuda' (or 'cuda:<index>')")
    if not sep:
        return t, None
    if not i.isdigit() or (len(i) > 1 and i[0] == "0"):
        raise DeviceError(f"{where}: invalid device string {spec!r}")
    return t, int(i)


class device(str):
    """torch.device: ``device("cuda:0")``, ``device("cuda", 0)``, ``device(type="cpu")``, ``device(other)``.

    ``.type`` and ``.index`` (None when not given), ``str()`` (``"cuda:0"``), ``repr()``
    (``device(type='cuda', index=0)``) and ``==`` between devices are torch's; hashable.

        >>> import torchlean as tl
        >>> tl.device("cuda", 1), tl.device("cpu") == tl.device("cpu")
        (device(type='cuda', index=1), True)
    """

    def __new__(cls, type=None, index=None):
        if isinstance(type, device):
            if index is not None:
                raise DeviceError(f"device: {type!r} already names its index; got index={index!r} too")
            t, i = type._type, type._index
        elif isinstance(type, int) and not isinstance(type, bool) and index is None:
            raise DeviceError(f"device: an index alone ({type}) needs an accelerator; give 'cuda:{type}'")
        elif isinstance(type, str):
            t, i = _parse(type, "device")
            if index is not None:
                if i is not None:
                    raise DeviceError(f"device: type string {type!r} must not include an index because "
                                      f"index={index!r} was passed explicitly")
                if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                    raise DeviceError(f"device: index must be a non-negative int, got {index!r}")
                i = int(index)
        else:
            raise DeviceError(f"device: expected a device string such as 'cuda:0', got {type!r}")
        self = str.__new__(cls, t)
        self.__dict__.update(_type=t, _index=i)
        return self

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self):
        return self._index

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __format__(self, spec):
        return format(str(self), spec)

    def __repr__(self):
        if self._index is None:
            return f"device(type={self._type!r})"
        return f"device(type={self._type!r}, index={self._index})"

    def __eq__(self, other):
        if isinstance(other, device):
            return (self._type, self._index) == (other._type, other._index)
        if isinstance(other, str):
            return str.__eq__(self, other)   # a plain device string: compares the type
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __setattr__(self, name, value):
        raise AttributeError(f"device: {name!r} is read-only")

    def __reduce__(self):
        return (device, (self._type, self._index))


#: The devices that ``Tensor.device`` returns: the CPU, and the process's GPU with its index
#: (``cuda:0`` unless :func:`use_cuda` chose another).
CPU = device("cpu")
CUDA0 = device("cuda", 0)
CUDA = CUDA0

_default = "cpu"

# One GPU per process: the index of the GPU this process uses (CUDA_VISIBLE_DEVICES numbering); the
# function the CUDA backend installs once loaded that makes another GPU current, or raises
# DeviceError when CUDA memory is already in use on this one (see :func:`use_cuda`); and the one the
# kernel layer installs at import that loads the CUDA backend (BackendUnavailableError without one).
_cuda_index = 0
_cuda_switch = None
_cuda_load = None


def set_cuda_hooks(load=None, switch=None) -> None:
    """Install the kernel layer's CUDA loader and, once CUDA is loaded, its GPU switch (see :func:`use_cuda`)."""
    global _cuda_load, _cuda_switch
    if load is not None:
        _cuda_load = load
    if switch is not None:
        _cuda_switch = switch


def cuda_device() -> device:
    """This process's GPU as a device object (``Tensor.device`` of its CUDA tensors)."""
    return CUDA


def cuda_index() -> int:
    """The index of the GPU this process uses (``0`` unless :func:`use_cuda` chose another)."""
    return _cuda_index


def use_cuda(index: int, where: str = "set_device") -> None:
    """Make GPU ``index`` the one this process uses (``torch.cuda.set_device``, or the first use of
    ``cuda:<index>``). The backend drives one GPU per process: the choice can change only while no CUDA
    memory is in use; afterwards another index raises :class:`~torchlean.errors.DeviceError`."""
    global _cuda_index, CUDA
    index = int(index)
    if index == _cuda_index:
        return
    if index < 0:
        raise DeviceError(f"{where}: invalid CUDA device index {index}")
    if _cuda_switch is None and _cuda_load is not None:
        _cuda_load()
    if _cuda_switch is not None:
        _cuda_switch(index, where)
    _cuda_index, CUDA = index, device("cuda", index)


def normalize(d, where: str = "device") -> str:
    """``"cpu"`` or ``"cuda"`` from a device string or object (``None`` gives the default device).

    This backend uses one GPU per process, ``cuda:0`` unless another was chosen: the first index a
    process names before any CUDA memory is in use becomes its GPU (:func:`use_cuda`); naming another
    index afterwards raises :class:`~torchlean.errors.DeviceError`.

        >>> from torchlean.device import normalize
        >>> normalize("cuda:0"), normalize(None)
        ('cuda', 'cpu')
    """
    if d is None:
        return _default
    if isinstance(d, device):
        t, i = d.type, d.index
    elif isinstance(d, str):
        t, i = _parse(d, where)
    elif isinstance(getattr(d, "type", None), str):       # a torch.device, or any (type, index) object
        t, i = d.type, getattr(d, "index", None)
        if t not in TYPES:
            raise DeviceError(f"{where}: unknown device {d!r}; expected 'cpu' or 'cuda' (or 'cuda:<index>')")
    elif isinstance(d, int) and not isinstance(d, bool):
        t, i = "cuda", d                                   # torch reads a bare int as a CUDA index
    else:
        raise DeviceError(f"{where}: expected a device string or torchlean.device, got {d!r}")
    if t == "cuda" and i is not None and i != _cuda_index:
        use_cuda(i, f"{where}: device {str(d)!r}")
    return t


def set_default_device(d) -> None:
    """The device of tensors that creation functions make without ``device=`` (``None``: the CPU).

        >>> import torchlean as tl
        >>> tl.set_default_device("cpu"); tl.get_default_device()
        device(type='cpu')
    """
    global _default
    _default = "cpu" if d is None else normalize(d, "set_default_device")


def get_default_device() -> device:
    """The default device as a :class:`device` (``cuda:0`` when the default is CUDA, as torch's)."""
    return CPU if _default == "cpu" else CUDA
