"""``Module`` and the containers (``Sequential``, ``ModuleList``, ``ModuleDict``).

Parameter names follow PyTorch's dotted paths (``"0.weight"``, ``"encoder.fc.bias"``)
so a PyTorch ``state_dict`` (its tensors' ``.numpy()`` arrays) loads as is.

    >>> import torchlean as tl
    >>> net = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.ReLU(), tl.nn.Linear(4, 2))
    >>> [name for name, _ in net.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
"""

from __future__ import annotations

import contextvars
import functools
import operator
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Iterable, Mapping

import numpy as np

from ..errors import DomainError, DTypeError, IndexRangeError, TorchLeanError
from ..kernels import get_kernels
from ..autograd import Function
from ..tensor import Tensor, as_dtype, device_name, no_grad
from .parameter import Buffer, Parameter

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


_EXTRA_STATE_KEY = "_extra_state"
#: The writes of the load_state_dict in progress, applied only once every entry has been validated.
_LOAD_PENDING = contextvars.ContextVar("torchlean_load_pending", default=None)


def _write_state(module, name, t, a, assign, original):
    """Write one validated state-dict entry: copy into ``t`` in place, or (``assign``) replace it by
    the checkpoint's tensor, a Parameter keeping ``t``'s requires_grad."""
    if not assign:
        t._value[...] = get_kernels(t.device).from_host(np.ascontiguousarray(a, dtype=t.dtype), t.dtype)
        return
    new = original if isinstance(original, Tensor) else Tensor(np.ascontiguousarray(a))
    if isinstance(t, Parameter):
        new = Parameter(new, requires_grad=t.requires_grad)
        module._parameters[name] = new
    else:
        module._buffers[name] = new


class Module:
    """Base class of every layer and model (PyTorch's ``nn.Module``).

    Assigning a :class:`Parameter` or a :class:`Module` to an attribute registers it;
    :meth:`register_buffer` registers non-trainable state (running statistics).
    Subclasses call ``super().__init__()`` first and define :meth:`forward`. ``_version`` is
    recorded in :meth:`state_dict`'s metadata so that :meth:`_load_from_state_dict` can convert
    checkpoints saved by older versions of a layer.
    """

    _version = 1

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
        if isinstance(value, Buffer):
            params, buffers, modules = self._registries()
            params.pop(name, None)
            modules.pop(name, None)
            self.register_buffer(name, value, persistent=value.persistent)
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
    def _state_hook_table(self, kind):
        d = self.__dict__
        if "_state_hooks" not in d:
            object.__setattr__(self, "_state_hooks", {})
        return d["_state_hooks"].setdefault(kind, OrderedDict())

    def _state_hooks_of(self, kind):
        return list(self.__dict__.get("_state_hooks", {}).get(kind, {}).values())

    def _add_state_hook(self, kind, hook, public):
        table = self._state_hook_table(kind)
        handle = RemovableHandle(table)
        table[handle.id] = (hook, public)
        return handle

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before this module's entries are saved."""
        return self._add_state_hook("state_pre", hook, True)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after this module's entries (and its
        children's) are saved; it edits ``state_dict`` in place and returns None."""
        return self._add_state_hook("state_post", hook, True)

    def _register_state_dict_hook(self, hook):
        """The older post hook: like :meth:`register_state_dict_post_hook`, but a returned mapping
        replaces the state dict when this module is the root of the call."""
        return self._add_state_hook("state_post", hook, False)

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` before this module loads its entries (it may rename or add keys in place)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        return self._add_state_hook("load_pre", hook, with_module)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after this module and its children loaded; editing the
        key lists in place changes what ``strict=True`` reports."""
        return self._add_state_hook("load_post", hook, True)

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        """This module's own parameters and persistent buffers (not its children's) into ``destination``."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else Tensor(p._value)
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else Tensor(b._value)
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY] = self.get_extra_state()

    def get_extra_state(self):
        """Extra (non-tensor) state saved under ``_extra_state`` when a subclass overrides this and
        :meth:`set_extra_state` (torch's protocol)."""
        raise TorchLeanError(f"{type(self).__name__}: get_extra_state is not implemented; override it and "
                             "set_extra_state to save extra state")

    def set_extra_state(self, state) -> None:
        """Restore what :meth:`get_extra_state` returned (called by :meth:`load_state_dict`)."""
        raise TorchLeanError(f"{type(self).__name__}: set_extra_state is not implemented; override it and "
                             "get_extra_state to load extra state")

    def _get_name(self) -> str:
        return type(self).__name__

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ordered ``{dotted name: Tensor}`` of parameters and persistent buffers.

        The tensors are detached and share the module's buffers (as in PyTorch);
        ``keep_vars=True`` returns the parameters themselves. A new dict carries torch's
        ``_metadata`` (``{module path: {"version": cls._version}}``), which
        :meth:`load_state_dict` hands to each module's :meth:`_load_from_state_dict`.
        """
        if args:
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning,
                          stacklevel=2)
            destination = args[0] if destination is None else destination
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook, _ in self._state_hooks_of("state_pre"):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook, public in self._state_hooks_of("state_post"):
            r = hook(self, destination, prefix, local_metadata)
            if public and r is not None:
                raise TorchLeanError("state_dict post-hook must return None (edit the state dict in place)")
            if not public and r is not None:
                destination = r
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Load this module's own entries from ``state_dict`` (keys ``prefix + name``): torch's hook point.

        Subclasses override it to convert older checkpoints (``local_metadata["version"]``) and call
        ``super()``. Problems are appended to the lists; inside :meth:`load_state_dict` the values are
        written only when the whole load succeeds.
        """
        for hook, with_module in self._state_hooks_of("load_pre"):
            args = (state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
            hook(self, *args) if with_module else hook(*args)
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        local_state.update((k, v) for k, v in self._buffers.items()
                           if v is not None and k not in self._non_persistent)
        assign = local_metadata.get("assign_to_params_buffers", False)
        pending = _LOAD_PENDING.get()
        for name, t in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            try:
                a = _host_array(state_dict[key], key)
            except TorchLeanError as e:
                error_msgs.append(f'While copying the parameter named "{key}": {e}')
                continue
            if t.ndim == 0 and a.ndim == 1 and a.shape[0] == 1:
                a = a[0]
            if tuple(a.shape) != t.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(a.shape)} from "
                                  f"checkpoint, the shape in current model is {t.shape}.")
                continue
            write = functools.partial(_write_state, self, name, t, a, assign, state_dict[key])
            if pending is None:
                write()
            else:
                pending.append(write)
        extra_key = prefix + _EXTRA_STATE_KEY
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                write = functools.partial(self.set_extra_state, state_dict[extra_key])
                if pending is None:
                    write()
                else:
                    pending.append(write)
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    first = key[len(prefix):].split(".", 1)[0]
                    if first not in self._modules and first not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the parameters and buffers, in place (torch's traversal and hooks).

        Values may be Tensors, NumPy arrays or PyTorch tensors (or their ``.numpy()``
        arrays); they are cast to each parameter's dtype and moved to its device
        (``assign=True`` keeps the checkpoint's tensors instead, as torch).
        Every entry is validated before anything is written: a shape mismatch, or
        with ``strict=True`` a missing or unexpected key, raises
        :class:`~torchlean.TorchLeanError` listing all of them and leaves the module
        unchanged. Returns ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys"):
            raise TorchLeanError(f"load_state_dict: expected a mapping, got {type(state_dict).__name__}")
        missing, unexpected, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_sd, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_sd, prefix, local_metadata, True, missing, unexpected, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in local_sd.items() if k.startswith(cp)}, cp)
            keys = IncompatibleKeys(missing, unexpected)
            for hook, _ in module._state_hooks_of("load_post"):
                if hook(module, keys) is not None:
                    raise TorchLeanError("load_state_dict post-hooks must return None (edit incompatible_keys "
                                         "in place)")

        pending = []
        token = _LOAD_PENDING.set(pending)
        try:
            load(self, state_dict)
        finally:
            _LOAD_PENDING.reset(token)
        if strict:
            if unexpected:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                                  + ". ")
            if missing:
                error_msgs.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if error_msgs:
            raise TorchLeanError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                 + "\n\t".join(error_msgs))
        for write in pending:
            write()
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

    def share_memory(self) -> "Module":
        """Move every parameter, buffer and existing gradient into shared memory
        (:meth:`Tensor.share_memory_`), so that processes the module is sent to update the same
        values (Hogwild training with :mod:`torchlean.multiprocessing`). CPU modules only."""
        for t in [*self.parameters(), *self.buffers()]:
            t.share_memory_()
            if t._grad is not None:
                t._grad.share_memory_()
        return self

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
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        if not lines:
            return f"{type(self).__name__}()"
        if len(extra_lines) == 1 and not child_lines:
            return f"{type(self).__name__}({extra_lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))


# ---- containers -----------------------------------------------------------------------------

class Sequential(Module):
    """Modules applied in order; children are named ``"0"``, ``"1"``, ... (or by an OrderedDict).

        >>> import torchlean as tl
        >>> seq = tl.nn.Sequential(tl.nn.Linear(2, 3), tl.nn.ReLU())
        >>> len(seq * 2), type(seq[:1]).__name__
        (4, 'Sequential')
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def _key(self, idx):
        n = len(self._modules)
        i = operator.index(idx)
        if not -n <= i < n:
            raise IndexRangeError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return list(self._modules)[i % n]

    def _renumber(self):
        object.__setattr__(self, "_modules", OrderedDict((str(i), m) for i, m in enumerate(self._modules.values())))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for k in keys:
            del self._modules[k]
        self._renumber()

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential) -> "Sequential":
        for m in sequential:
            self.append(m)
        return self

    def insert(self, index: int, module) -> "Sequential":
        if not isinstance(module, Module):
            raise DTypeError(f"Sequential.insert: module should be a Module, got {type(module).__name__}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexRangeError(f"Sequential.insert: index {index} is out of range for length {n}")
        mods = list(self._modules.values())
        mods.insert(index + n if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def __add__(self, other) -> "Sequential":
        if not isinstance(other, Sequential):
            raise DomainError(f"Sequential +: supports only Sequential operands, got {type(other).__name__}")
        return Sequential(*self, *other)

    def __iadd__(self, other) -> "Sequential":
        if not isinstance(other, Sequential):
            raise DomainError(f"Sequential +=: supports only Sequential operands, got {type(other).__name__}")
        return self.extend(list(other))

    def _repeat_check(self, other, op):
        if not isinstance(other, int) or isinstance(other, bool):
            raise DTypeError(f"Sequential {op}: unsupported operand type {type(other).__name__} (an int is expected)")
        if other <= 0:
            raise DomainError(f"Sequential {op}: non-positive multiplication factor {other}")

    def __mul__(self, other) -> "Sequential":
        """``seq * n``: the same modules (shared, not copied) repeated ``n`` times, as torch."""
        self._repeat_check(other, "*")
        return Sequential(*(list(self) * other))

    __rmul__ = __mul__

    def __imul__(self, other) -> "Sequential":
        self._repeat_check(other, "*=")
        mods = list(self)
        for _ in range(other - 1):
            self.extend(mods)
        return self

    def forward(self, input):  # noqa: A002
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules whose parameters are registered (names ``"0"``, ``"1"``, ...).

        >>> import torchlean as tl
        >>> ml = tl.nn.ModuleList([tl.nn.ReLU(), tl.nn.Tanh()])
        >>> ml.append(tl.nn.ReLU())[-1]
        ReLU()
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def _key(self, idx):
        n = len(self._modules)
        i = operator.index(idx)
        if not -n <= i < n:
            raise IndexRangeError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return str(i % n)

    def _renumber(self):
        object.__setattr__(self, "_modules", OrderedDict((str(i), m) for i, m in enumerate(self._modules.values())))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = [str(k) for k in range(len(self._modules))[idx]] if isinstance(idx, slice) else [self._key(idx)]
        for k in keys:
            del self._modules[k]
        self._renumber()

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other) -> "ModuleList":
        combined = ModuleList()
        for i, m in enumerate(list(self) + list(other)):
            combined.add_module(str(i), m)
        return combined

    def append(self, module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        if not isinstance(modules, Iterable):
            raise DTypeError(f"ModuleList.extend should be called with an iterable, but got "
                             f"{type(modules).__name__}")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index: int, module) -> None:
        """Insert before ``index`` (Python's list rule, negative indices included)."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def __repr__(self):
        """torch's: runs of modules with equal reprs print once, as ``(i-j): n x Module(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return f"{type(self).__name__}()"
        runs = []
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for a, b, r in runs:
            s = f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}"
            lines.append(s.replace("\n", "\n  "))
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args, **kwargs):
        raise TorchLeanError("ModuleList is not callable; iterate over it in your forward()")


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys (insertion order kept).

        >>> import torchlean as tl
        >>> md = tl.nn.ModuleDict({"act": tl.nn.ReLU()})
        >>> md.update([("out", tl.nn.Linear(2, 1))])
        >>> list(md.keys()), "out" in md
        (['act', 'out'], True)
    """

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
        v = self[key]
        del self[key]
        return v

    def clear(self):
        self._modules.clear()

    def update(self, modules) -> None:
        """Add or overwrite entries from a mapping or an iterable of ``(key, module)`` pairs."""
        if not isinstance(modules, Iterable):
            raise DTypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, but got "
                             f"{type(modules).__name__}")
        if isinstance(modules, (Mapping, ModuleDict)):
            for k, m in modules.items():
                self[k] = m
            return
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise DTypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                 f"{type(pair).__name__}")
            pair = list(pair)
            if len(pair) != 2:
                raise DomainError(f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

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
