"""``torchlean run``: an unmodified PyTorch program with torchlean standing in for ``torch``.

An import hook (:class:`TorchAlias`, first on ``sys.meta_path`` of this process only) answers
``import torch`` and ``import torch.<a>.<b>`` with torchlean's module of the same dotted name
(``torch.nn.functional`` is ``torchlean.nn.functional``). A program that reaches a name torchlean
lacks stops with one line naming the missing ``torch.X`` and the program's source line
(:func:`run_script`), not a traceback into the hook. :func:`report` scans programs without running
them: every ``torch`` name they use, and which exist here.

    >>> import torchlean.runner as r
    >>> names = r.torch_names("import torch\\nimport torch.nn as nn\\nx = nn.Linear(2, 3)\\n")
    >>> sorted(names)
    ['torch', 'torch.nn', 'torch.nn.Linear']
    >>> r.resolve("torch.nn.Linear") is not None, r.resolve("torch.nn.NoSuchLayer")
    (True, None)
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys
import traceback

__all__ = ["TorchAlias", "run_script", "torch_names", "resolve", "report", "MissingTorchName"]

_ROOT = "torch"
# The top-level names answered here, and the torchlean package that stands for each.
_ALIASES = {"torch": "torchlean", "torchvision": "torchlean.vision"}


def _root_of(fullname: str) -> str | None:
    """The aliased top-level name ``fullname`` is or lies under, else None."""
    top = fullname.split(".", 1)[0]
    return top if top in _ALIASES else None


def _source(module: str) -> str:
    """The program's name for torchlean module ``module`` (``torchlean.vision.x`` -> ``torchvision.x``)."""
    for root, target in sorted(_ALIASES.items(), key=lambda kv: -len(kv[1])):
        if module == target or module.startswith(target + "."):
            return root + module[len(target):]
    return module


class MissingTorchName(ImportError):
    """A ``torch`` module the program imports that torchlean does not have."""


def _target(fullname: str) -> str:
    root = _root_of(fullname) or _ROOT
    return _ALIASES[root] + fullname[len(root):]


class _Loader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module  # torchlean's module itself: one object under both names

    def exec_module(self, module):
        pass


class TorchAlias(importlib.abc.MetaPathFinder):
    """Maps ``torch`` and ``torch.*`` imports to ``torchlean`` and ``torchlean.*``, and ``torchvision``
    and ``torchvision.*`` to ``torchlean.vision`` and ``torchlean.vision.*``."""

    def find_spec(self, fullname, path=None, target=None):
        if _root_of(fullname) is None:
            return None
        try:
            module = importlib.import_module(_target(fullname))
        except ModuleNotFoundError:
            raise MissingTorchName(f"{fullname} is not available in torchlean", name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _Loader(module))

    def __enter__(self):
        self._saved = {k: v for k, v in sys.modules.items() if _root_of(k)}
        for k in self._saved:
            del sys.modules[k]
        sys.meta_path.insert(0, self)
        return self

    def __exit__(self, *exc):
        sys.meta_path.remove(self)
        for k in [k for k in sys.modules if _root_of(k)]:
            del sys.modules[k]
        sys.modules.update(self._saved)
        return False


_CHILD_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_alias")


def alias_in_child(name: str) -> None:
    """In a process a ``torchlean run`` program started (multiprocessing's spawn), make ``name`` (``torch``
    or ``torchvision``) torchlean's module, with the import hook installed for its submodules. Imported
    under any other name (``torchlean._alias.torch``, by a tool that imports every module) it does nothing."""
    if name not in _ALIASES:
        return
    if not any(isinstance(f, TorchAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchAlias())
    sys.modules[name] = importlib.import_module(_target(name))


def _program_line(tb, script: str) -> str:
    """``file:line: source`` of the innermost frame outside torchlean and the import machinery."""
    here = os.path.dirname(os.path.abspath(__file__))
    best = None
    for fs in traceback.extract_tb(tb):
        f = os.path.abspath(fs.filename)
        if f.startswith(here + os.sep) or "importlib" in f or fs.filename.startswith("<frozen"):
            continue
        if os.path.basename(f) == "runpy.py":
            continue
        best = fs
    if best is None:
        return os.path.basename(script)
    return f"{os.path.relpath(best.filename)}:{best.lineno}: {(best.line or '').strip()}"


def _missing_name(e: BaseException) -> str | None:
    """The ``torch.X`` a program asked for and torchlean lacks, from the exception, or None."""
    if isinstance(e, MissingTorchName):
        return e.name
    if isinstance(e, AttributeError):
        obj = getattr(e, "obj", None)
        name = getattr(e, "name", None)
        mod = getattr(obj, "__name__", None) if obj is not None else None
        if isinstance(mod, str) and name and (mod == "torchlean" or mod.startswith("torchlean.")):
            return _source(mod) + "." + name
        msg = str(e)
        if msg.startswith("module 'torchlean") and "has no attribute" in msg:
            mod = msg.split("'")[1]
            attr = msg.split("'")[3] if msg.count("'") >= 4 else "?"
            return _source(mod) + "." + attr
    if isinstance(e, ImportError) and getattr(e, "name", None) and str(getattr(e, "name")).startswith("torchlean"):
        msg = str(e)
        if msg.startswith("cannot import name"):
            return _source(e.name) + "." + msg.split("'")[1]
    return None


def run_script(script: str, args=(), out=None) -> int:
    """Run ``script`` as ``__main__`` with ``torch`` bound to torchlean; returns an exit code
    (0, the program's own ``sys.exit`` code, 1 on an exception or a missing file, 2 when it needs a
    torch name that torchlean lacks: then one line says which and where). Messages go to ``out``
    (default ``sys.stderr``)."""
    out = sys.stderr if out is None else out
    if not os.path.isfile(script):
        print(f"torchlean run: no such file: {script}", file=out)
        return 1
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.path.insert(1, _CHILD_PATH)   # found only by spawned children: the hook answers here first
    try:
        with TorchAlias():
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - a program's failure becomes an exit code and a message
        if isinstance(e, KeyboardInterrupt):
            raise
        name = _missing_name(e)
        where = _program_line(e.__traceback__, script)
        if name is not None:
            print(f"torchlean run: {where}\n  {name} is not available in torchlean "
                  f"(see docs/differences.md; `torchlean run --report {script}` lists every torch name used)",
                  file=out)
            return 2
        tb = e.__traceback__
        target = os.path.abspath(script)
        t = tb
        while t is not None and os.path.abspath(t.tb_frame.f_code.co_filename) != target:
            t = t.tb_next
        traceback.print_exception(type(e), e, t or tb, file=out)  # from the program's own frame on
        return 1
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    return 0


# ---- the static report ------------------------------------------------------------------------------

def torch_names(source: str) -> set:
    """Every dotted ``torch`` (and ``torchvision``) name a program's source uses: imported modules and
    names, and attribute chains read from names bound to their modules (``nn = torch.nn``; ``F.relu``)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}
    names: set = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = _root_of(a.name)
                if root:
                    parts = a.name.split(".")
                    names.update(".".join(parts[:i + 1]) for i in range(len(parts)))
                    if a.asname:
                        bound[a.asname] = a.name
                    else:
                        bound[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _root_of(node.module):
            parts = node.module.split(".")
            names.update(".".join(parts[:i + 1]) for i in range(len(parts)))
            for a in node.names:
                if a.name != "*":
                    full = f"{node.module}.{a.name}"
                    names.add(full)
                    bound[a.asname or a.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            cur = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id in bound:
                full = bound[cur.id]
                for attr in reversed(chain):
                    full = f"{full}.{attr}"
                    names.add(full)
    return names


def resolve(name: str):
    """The torchlean object standing for dotted ``torch`` name ``name``, or None when it has none."""
    parts = _target(name).split(".")
    obj = None
    i = len(parts)
    while i > 0:
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            i -= 1
    if obj is None:
        return None
    for p in parts[i:]:
        try:
            obj = getattr(obj, p)
        except Exception:  # noqa: BLE001 - any failure to produce the name means it is missing
            return None
    return obj


def _leading(names: set) -> set:
    """The names a program uses directly: each chain's longest prefix that resolves, plus the first
    missing link (a method read off a class, ``x.weight.data``, is not a torch name of its own)."""
    out = set()
    for n in names:
        parts = n.split(".")
        for i in range(1, len(parts) + 1):
            pre = ".".join(parts[:i])
            out.add(pre)
            if resolve(pre) is None:
                break
            obj = resolve(pre)
            if i < len(parts) and not isinstance(obj, type(sys)):
                break  # past a module: attributes of classes and functions are not torch's names
    return out


def report(paths, out=None) -> tuple:
    """Scan ``paths`` (files or directories of ``.py`` programs) and print every torch name they use
    and whether torchlean has it; returns ``(names found, names used)``."""
    out = sys.stdout if out is None else out
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, fs in os.walk(p):
                files += [os.path.join(root, f) for f in sorted(fs) if f.endswith(".py")]
        else:
            files.append(p)
    used: dict[str, list] = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            try:
                names = _leading(torch_names(fh.read()))
            except SyntaxError as e:
                print(f"{f}: not Python ({e.msg}, line {e.lineno})", file=out)
                continue
        for n in names:
            used.setdefault(n, []).append(os.path.relpath(f))
    found = 0
    for n in sorted(used):
        ok = resolve(n) is not None
        found += ok
        where = ", ".join(sorted(set(used[n]))[:3]) + (" ..." if len(set(used[n])) > 3 else "")
        print(f"{'ok     ' if ok else 'MISSING'}  {n:45s} {where}", file=out)
    total = len(used)
    share = 100.0 * found / total if total else 100.0
    print(f"\n{found} of {total} torch names used by {len(files)} file(s) exist in torchlean ({share:.1f}%)", file=out)
    return found, total
