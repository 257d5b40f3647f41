"""``Module`` and the containers (``Sequential``, ``ModuleList``, ``ModuleDict``).

Parameter names follow PyTorch's dotted paths (``"0.weight"``, ``"encoder.fc.bias"``)
so a PyTorch ``state_dict`` (its tensors' ``.numpy()`` arrays) loads as is.

    >>> import torchlean as tl
    >>> net = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.ReLU(), tl.nn.Linear(4, 2))
    >>> [name for name, _ in net.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from ..errors import TorchLeanError
from ..kernels import get_kernels
from ..autograd import Function
from ..tensor import Tensor, as_dtype, device_name, no_grad
from .parameter import Parameter

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """What the ``register_*_hook`` methods return: ``remove()`` unregisters the hook."""

    _next = [0]

    def __init__(self, table):
        self.table = table
        self.id = RemovableHandle._next[0]
        RemovableHandle._next[0] += 1

    def remove(self):
        self.table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _as_args(v):
    return v if isinstance(v, tuple) else (v,)


def _call_with_hooks(module, hooks, args, kwargs):
    """Module.__call__ with forward pre/post hooks and full backward hooks (torch's order)."""
    for hook, flags in list(hooks.get("forward_pre", {}).values()):
        if flags.get("with_kwargs"):
            r = hook(module, args, kwargs)
            if r is not None:
                args, kwargs = r
        else:
            r = hook(module, args)
            if r is not None:
                args = _as_args(r)
    bw, bw_pre = hooks.get("backward"), hooks.get("backward_pre")
    tracker = None
    if (bw or bw_pre) and any(isinstance(a, Tensor) and a.requires_grad for a in args):
        tracker = _BackwardTracker(module, bw, bw_pre)
        args = tracker.wrap_inputs(args)
    out = module.forward(*args, **kwargs)
    for hook, flags in list(hooks.get("forward", {}).values()):
        r = hook(module, args, kwargs, out) if flags.get("with_kwargs") else hook(module, args, out)
        if r is not None:
            out = r
    if tracker is not None:
        out = tracker.wrap_outputs(out)
    return out


class _BackwardTracker:
    """Identity Functions around a call's tensor inputs and outputs: the outputs' backward sees
    grad_output (the pre hooks run there), the inputs' backward sees grad_input (the hooks run there)."""

    def __init__(self, module, bw, bw_pre):
        self.module, self.bw, self.bw_pre = module, bw or {}, bw_pre or {}
        self.grad_output = None

    def wrap_inputs(self, args):
        pos = [k for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        tracker = self

        class _Inputs(Function):
            @staticmethod
            def forward(ctx, *xs):
                return tuple(Tensor(x._value) for x in xs)

            @staticmethod
            def backward(ctx, *gs):
                gs = tuple(gs)
                for hook, _ in list(tracker.bw.values()):
                    r = hook(tracker.module, gs, tracker.grad_output)
                    if r is not None:
                        gs = _as_args(r)
                return gs

        wrapped = _Inputs.apply(*[args[k] for k in pos])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        out = list(args)
        for k, w in zip(pos, wrapped):
            out[k] = w
        return tuple(out)

    def wrap_outputs(self, out):
        single = isinstance(out, Tensor)
        outs = (out,) if single else tuple(out) if isinstance(out, (tuple, list)) else None
        if outs is None:
            return out
        pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not pos:
            return out
        tracker = self

        class _Outputs(Function):
            @staticmethod
            def forward(ctx, *ys):
                return tuple(Tensor(y._value) for y in ys)

            @staticmethod
            def backward(ctx, *gs):
                gs = tuple(gs)
                for hook, _ in list(tracker.bw_pre.values()):
                    r = hook(tracker.module, gs)
                    if r is not None:
                        gs = _as_args(r)
                tracker.grad_output = gs
                return gs

        wrapped = _Outputs.apply(*[outs[k] for k in pos])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        res = list(outs)
        for k, w in zip(pos, wrapped):
            res[k] = w
        return res[0] if single else type(out)(res)


def _host_array(v, key):
    """A state-dict entry (Tensor, NumPy array, torch tensor, number) as a host array."""
    if isinstance(v, Tensor):
        return v.numpy()
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, without importing torch
        return np.asarray(v.detach().cpu().numpy())
    if hasattr(v, "get") and hasattr(v, "__cuda_array_interface__"):  # a CuPy array
        return v.get()
    try:
        return np.asarray(v)
    except Exception as e:  # noqa: BLE001 - report which entry could not be read
        raise TorchLeanError(f"load_state_dict: entry {key!r} of type {type(v).__name__} is not an array") from e


def _convert_value(v, device, dtype):
    """``v`` (a device array) moved to ``device`` and, if it is a float array, cast to ``dtype``."""
    with no_grad():
        t = Tensor(v)
        if dtype is not None and v.dtype.kind == "f":
            t = t.to(dtype=dtype)
        if device is not None:
            t = t.to(device=device)
    return t._value


class Module:
    """Base class of every layer and model (PyTorch's ``nn.Module``).

    Assigning a :class:`Parameter` or a :class:`Module` to an attribute registers it;
    :meth:`register_buffer` registers non-trainable state (running statistics).
    Subclasses call ``super().__init__()`` first and define :meth:`forward`.
    """

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())

    # -- registration ----------------------------------------------------------------------------
    def _registries(self):
        d = self.__dict__
        if "_parameters" not in d:
            raise TorchLeanError(f"{type(self).__name__}: call super().__init__() before assigning "
                                 "parameters, buffers or submodules")
        return d["_parameters"], d["_buffers"], d["_modules"]

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            params, buffers, modules = self._registries()
            self.__dict__.pop(name, None)
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
            return
        if isinstance(value, Module):
            params, buffers, modules = self._registries()
            self.__dict__.pop(name, None)
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
            return
        d = self.__dict__
        if name in d.get("_parameters", ()):
            if value is not None:
                raise TorchLeanError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                     "(a Parameter or None is expected)")
            d["_parameters"][name] = None
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TorchLeanError(f"cannot assign {type(value).__name__} as child module {name!r} "
                                     "(a Module or None is expected)")
            d["_modules"][name] = None
        elif name in d.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TorchLeanError(f"cannot assign {type(value).__name__} as buffer {name!r} "
                                     "(a Tensor or None is expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __delattr__(self, name):
        for reg in ("_parameters", "_buffers", "_modules"):
            r = self.__dict__.get(reg)
            if r is not None and name in r:
                del r[name]
                self.__dict__["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        """Register ``param`` (a :class:`Parameter` or None) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise TorchLeanError(f"register_parameter: {name!r} must be a Parameter or None, "
                                 f"got {type(param).__name__}")
        params, _, _ = self._registries()
        if param is None:
            params[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register non-trainable state; persistent buffers are part of :meth:`state_dict`."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TorchLeanError(f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        params, buffers, modules = self._registries()
        if name in params or name in modules:
            raise TorchLeanError(f"register_buffer: attribute {name!r} already exists")
        self.__dict__.pop(name, None)
        buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module) -> None:
        """Register ``module`` (or None) as a child named ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TorchLeanError(f"add_module: {name!r} must be a Module or None, got {type(module).__name__}")
        if not isinstance(name, str) or "." in name or not name:
            raise TorchLeanError(f"add_module: invalid module name {name!r}")
        _, _, modules = self._registries()
        if module is None:
            modules[name] = None
        else:
            setattr(self, name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at dotted path ``target`` ("" is self)."""
        mod = self
        for part in target.split(".") if target else ():
            child = mod._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (path {target!r})")
            mod = child
        return mod

    # -- traversal -------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """Yield ``(dotted name, module)`` for self and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, v in mod.__dict__[registry].items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """Yield ``(dotted name, Parameter)``; a shared parameter appears once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- state -----------------------------------------------------------------------------------
    def _state_items(self):
        """``(key, tensor)`` for every parameter and persistent buffer, in PyTorch's order."""
        for mod_prefix, mod in self.named_modules(remove_duplicate=False):
            pre = f"{mod_prefix}." if mod_prefix else ""
            for name, p in mod._parameters.items():
                if p is not None:
                    yield pre + name, p
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    yield pre + name, b

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ordered ``{dotted name: Tensor}`` of parameters and persistent buffers.

        The tensors are detached and share the module's buffers (as in PyTorch);
        ``keep_vars=True`` returns the parameters themselves.
        """
        out = OrderedDict() if destination is None else destination
        for key, t in self._state_items():
            out[prefix + key] = t if keep_vars else Tensor(t._value)
        return out

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy values into the parameters and buffers, in place.

        Values may be Tensors, NumPy arrays or PyTorch tensors (or their ``.numpy()``
        arrays); they are cast to each parameter's dtype and moved to its device.
        Every entry is validated before anything is written: a shape mismatch, or
        with ``strict=True`` a missing or unexpected key, raises
        :class:`~torchlean.TorchLeanError` listing all of them and leaves the module
        unchanged. Returns ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys"):
            raise TorchLeanError(f"load_state_dict: expected a mapping, got {type(state_dict).__name__}")
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        arrays, mismatched = {}, []
        for k, t in own.items():
            if k not in state_dict:
                continue
            a = _host_array(state_dict[k], k)
            if tuple(a.shape) != t.shape:
                mismatched.append(f"{k}: checkpoint shape {tuple(a.shape)}, model shape {t.shape}")
            arrays[k] = a
        problems = []
        if mismatched:
            problems.append("size mismatch for " + "; ".join(mismatched))
        if strict and missing:
            problems.append("missing keys: " + ", ".join(repr(k) for k in missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        if problems:
            raise TorchLeanError(f"load_state_dict for {type(self).__name__}: " + " | ".join(problems))
        for k, a in arrays.items():
            t = own[k]
            t._value[...] = get_kernels(t.device).from_host(np.ascontiguousarray(a, dtype=t.dtype), t.dtype)
        return IncompatibleKeys(missing, unexpected)

    # -- modes and placement ---------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode on self and every descendant (Dropout, BatchNorm react to it)."""
        if not isinstance(mode, bool):
            raise TorchLeanError(f"train: mode must be a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move parameters and buffers to a device and/or cast float ones to a dtype, in place
        (torch's overloads: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``).

        The Parameter objects stay the same (an optimizer built earlier keeps working);
        their gradients move with them.
        """
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TorchLeanError(f"Module.to: unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, str) or hasattr(a, "type") and not isinstance(a, type):
                device = a
            elif a is not None:
                dtype = a
        if device is not None:
            device = device_name(device)
        dtype = as_dtype(dtype)
        for m in self.modules():
            for reg in (m._parameters, m._buffers):
                for t in reg.values():
                    if t is None:
                        continue
                    t._value = _convert_value(t._value, device, dtype)
                    if t._grad is not None:
                        t._grad = Tensor(_convert_value(t._grad._value, device, dtype))
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    def get_parameter(self, target: str):
        """The parameter at dotted path ``target`` (``"encoder.fc.weight"``)."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r} (path {target!r})")
        return mod._parameters[name]

    def get_buffer(self, target: str):
        """The buffer at dotted path ``target``."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer {name!r} (path {target!r})")
        return mod._buffers[name]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear parameter gradients (None by default, else fresh zeros)."""
        for p in self.parameters():
            if p._grad is None:
                continue
            if set_to_none:
                p._grad = None
            else:
                # A fresh array: gradient buffers may be shared between leaves.
                p._grad = Tensor(get_kernels(p.device).zeros(p.shape, p.dtype))

    def apply(self, fn) -> "Module":
        """Call ``fn(m)`` on every descendant, then on self (PyTorch's order)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- calling ---------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise TorchLeanError(f"{type(self).__name__} has no forward(); subclasses of Module define it")

    def __call__(self, *args, **kwargs):
        hooks = self.__dict__.get("_call_hooks")
        if not hooks:
            return self.forward(*args, **kwargs)
        return _call_with_hooks(self, hooks, args, kwargs)

    def _hooks(self, kind):
        d = self.__dict__
        if "_call_hooks" not in d:
            object.__setattr__(self, "_call_hooks", {})
        return d["_call_hooks"].setdefault(kind, OrderedDict())

    def _add_hook(self, kind, hook, prepend=False, **flags):
        table = self._hooks(kind)
        handle = RemovableHandle(table)
        table[handle.id] = (hook, flags)
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``(module, args, kwargs)``) before forward; a returned value
        replaces the arguments (a tuple, a single value, or ``(args, kwargs)`` with kwargs)."""
        return self._add_hook("forward_pre", hook, prepend, with_kwargs=with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) after forward; a
        returned value replaces the output."""
        return self._add_hook("forward", hook, prepend, with_kwargs=with_kwargs)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` when the gradients of the outputs are known; a returned tuple
        replaces them."""
        return self._add_hook("backward_pre", hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` when the gradients of the tensor inputs are known;
        a returned tuple replaces ``grad_input``."""
        return self._add_hook("backward", hook, prepend)

    # -- printing --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (extra if extra else "")
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))


# ---- containers -----------------------------------------------------------------------------

class Sequential(Module):
    """Modules applied in order; children are named ``"0"``, ``"1"``, ... (or by an OrderedDict)."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def _index(self, idx):
        n = len(self._modules)
        i = int(idx)
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return i % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules)[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[self._index(idx)]]):
            del self._modules[k]
        # torch renumbers what is left, so the names stay "0", "1", ...
        rest = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(rest):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module) -> "Sequential":
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for Sequential of length {n}")
        mods.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self

    def pop(self, index=-1):
        m = self[index]
        del self[index]
        return m

    def __add__(self, other) -> "Sequential":
        return Sequential(*self, *other)

    def __iadd__(self, other) -> "Sequential":
        return self.extend(other)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules whose parameters are registered (names ``"0"``, ``"1"``, ...)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx):
        n = len(self._modules)
        i = int(idx)
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range for ModuleList of length {n}")
        return i % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        del mods[idx]
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise TorchLeanError("ModuleList is not callable; iterate over it in your forward()")


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, m)

    def forward(self, *args, **kwargs):
        raise TorchLeanError("ModuleDict is not callable; index it in your forward()")


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... (tensors become Parameters)."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        vals = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(vals[idx])
        return vals[idx]

    def __setitem__(self, idx, value):
        key = list(self._parameters)[idx]
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def append(self, value) -> "ParameterList":
        self.register_parameter(str(len(self)), value if isinstance(value, Parameter) else Parameter(value))
        return self

    def extend(self, values) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for k, p in self._parameters.items())


class ParameterDict(Module):
    """A dict of parameters keyed by name (tensors become Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        return self._parameters.pop(key)

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v
