"""The house rules, checked: one family vocabulary in every layer, every op in every table, a
closed kernel contract, imports that only run downward, and no module-level cache outside the
CUDA backend and the one dispatch cache."""

import ast
import importlib.util
from pathlib import Path

import pytest

import torchlean
from torchlean.autograd import RULES
from torchlean.ir import LOWERING
from torchlean.ir.graph import IR_KINDS, PARAM_INPUTS
from torchlean.ir.interpret import DOMAINS
from torchlean.ir.onnx import CONVERTERS
from torchlean.kernels import HOST, surface
from torchlean.kernels.api import KERNEL_FAMILIES, KERNELS
from torchlean.spec import COMPOUNDS, FAMILIES, SPEC
from torchlean.testing.opinfo import OPINFOS

PKG = Path(torchlean.__file__).parent

# The layers, bottom up (DESIGN.md): a module may import its own layer and those below.
LAYERS = [
    {"errors", "shape", "options", "fileio", "dtypes", "device", "threads"},
    {"spec"},
    {"kernels"},
    {"autograd"},
    {"testing"},
    {"tensor", "serialization", "torch_pickle", "capture", "cuda", "amp", "accelerator", "backends", "onnx"},
    {"ops", "linalg", "autograd_api", "fft", "special", "jit", "futures", "sparse"},
    {"nn", "optim", "multiprocessing", "distributions", "distributed"},
    {"ir"},
    {"models", "data", "train", "utils", "hub", "vision"},
    {"", "quickstart"},          # "" is the package itself: the public namespace
    {"cli", "__main__", "runner", "bench", "_alias"},
]


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next(i for i, layer in enumerate(LAYERS) if top in layer)


def _modules():
    for f in sorted(PKG.rglob("*.py")):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, f, parts[-1] == "__init__"


def _imports():
    """(importer, imported module, inside a function, line) for every torchlean import."""
    out = []
    for name, f, is_pkg in _modules():
        tree = ast.parse(f.read_text())
        inner = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(fn) if n is not fn}
        pkg = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # "from .x import y" imports x, and y too when y is a submodule
                subs = [f"{base}.{a.name}" for a in node.names
                        if base.startswith("torchlean") and _is_module(f"{base}.{a.name}")]
                targets = subs if node.module is None and subs else [base] + subs
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                # A package that contains the importer is imported before it anyway: no edge.
                if (t == "torchlean" or t.startswith("torchlean.")) and not name.startswith(t + "."):
                    out.append((name, t, id(node) in inner, node.lineno))
    return out


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PKG / rel).with_suffix(".py").exists() or (PKG / rel / "__init__.py").exists()


def _owner(target: str) -> str:
    """The module a dotted import target lives in (``torchlean.tensor.Tensor`` -> ``torchlean.tensor``)."""
    parts = target.split(".")
    while len(parts) > 1 and not _is_module(".".join(parts)):
        parts.pop()
    return ".".join(parts)


IMPORTS = _imports()


def test_imports_run_downward():
    up = [f"{a}:{line} imports {b}" for a, b, _, line in IMPORTS if _layer(_owner(b)) > _layer(a)]
    assert not up, "imports that run upward:\n" + "\n".join(up)


def test_no_function_level_import_dodges_a_cycle():
    """A function-level import of a torchlean module would dodge a cycle if the imported module
    reached the importer through module-level imports; none does, and module level is acyclic."""
    graph: dict = {}
    for a, b, inner, _ in IMPORTS:
        if not inner:
            graph.setdefault(a, set()).add(_owner(b))

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for n in graph.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    for a, b, inner, line in IMPORTS:
        b = _owner(b)
        if inner:
            assert a not in reach(b) or b == a, f"{a}:{line} imports {b} in a function: {b} imports {a} back"
    cyclic = [m for m in graph if m in reach(m) and not all(_is_pkg_edge(m, n) for n in graph[m] if m in reach(n))]
    assert not cyclic, f"module-level import cycles through: {cyclic}"


def _is_pkg_edge(a, b):
    return a.startswith(b + ".") or b.startswith(a + ".")


def _module_level_containers(tree):
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            for d in n.decorator_list:
                if "cache" in ast.unparse(d):
                    yield n.name, n.lineno, ast.unparse(d)
            continue
        tgt, val = (n.targets[0], n.value) if isinstance(n, ast.Assign) else \
            (n.target, n.value) if isinstance(n, ast.AnnAssign) else (None, None)
        if val is None:
            continue
        src = ast.unparse(val)
        if src in ("{}", "[]", "dict()", "set()", "[None]", "[0]") or "OrderedDict(" in src or "Weak" in src:
            yield ast.unparse(tgt), n.lineno, src


# Tables that registration fills at import time (they are the registries, not caches of results).
REGISTRIES = {"torchlean.spec.registry": {"SPEC"}, "torchlean.autograd.rules.registry": {"RULES", "INFER"},
              "torchlean.testing.opinfo": {"OPINFOS"}, "torchlean.spec.compound": {"COMPOUNDS"},
              "torchlean.testing.kernel_cases": {"GENERATORS"},
              "torchlean.autograd.dispatch": {"DISPATCH"},   # DISPATCH: the one dispatch cache
              "torchlean.bench.bench_cuda_kernels": {"ROWS"},  # a script's result table, one run per process
              "torchlean.distributions.kl": {"_KL_REGISTRY"},  # register_kl's table, filled at import
              "torchlean.optim.optimizer": {"_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"},  # registered hooks
              "torchlean.ops.table": {"FUNCTIONS", "METHODS"},
              "torchlean.autograd.record": {"DIFFERENTIABLE_VJPS"}, "torchlean.dtypes": {"NAMES", "_BY_NP", "_NP_ALIASES", "_CATEGORY"}}


def test_no_module_level_cache_outside_the_cuda_backend():
    found = []
    for name, f, _ in _modules():
        if name.startswith("torchlean.kernels.cuda"):
            continue
        for target, line, src in _module_level_containers(ast.parse(f.read_text())):
            if target not in REGISTRIES.get(name, set()):
                found.append(f"{name}:{line} {target} = {src}")
    assert not found, "module-level caches:\n" + "\n".join(found)


# ---- the kernel contract ----------------------------------------------------------------------

def _kernel_attrs(path):
    tree = ast.parse(path.read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "K":
            yield n.attr, n.lineno
        if isinstance(n, ast.Compare) and any(isinstance(x, ast.Attribute) and ast.unparse(x) == "K.device"
                                              for x in [n.left, *n.comparators]):
            yield "device check", n.lineno


@pytest.mark.parametrize("path", sorted((PKG / "autograd" / "rules").glob("*.py")) + [PKG / "optim" / "optimizer.py"],
                         ids=lambda p: p.stem)
def test_rules_and_optimizers_call_only_the_contract(path):
    bad = [f"{path.name}:{line} K.{attr}" for attr, line in _kernel_attrs(path)
           if attr not in KERNELS and attr != "device"]
    assert not bad, bad


def test_nothing_above_the_kernels_reaches_for_the_array_module():
    bad = []
    for name, f, _ in _modules():
        if name.startswith("torchlean.kernels"):
            continue
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Attribute) and n.attr == "xp":
                bad.append(f"{name}:{n.lineno}")
    assert not bad, bad


def test_surfaces_hold_the_contract_and_nothing_else():
    extra = {"device", "unsupported"}
    assert set(vars(HOST)) == set(KERNELS) | extra
    assert not HOST.unsupported
    if importlib.util.find_spec("cupy") is not None:
        k = surface("cuda", "torchlean.kernels.cuda", strict=False)   # imports the modules, needs no GPU
        assert set(vars(k)) == set(KERNELS) | extra
        assert not k.unsupported, f"kernels missing on cuda: {k.unsupported}"


def test_kernel_families_are_files_in_both_backends():
    assert set(FAMILIES) <= set(KERNEL_FAMILIES)
    for fam in KERNEL_FAMILIES:
        assert (PKG / "kernels" / "host" / f"{fam}.py").exists(), fam
        assert (PKG / "kernels" / "cuda" / f"{fam}.py").exists(), fam
    for cu in (PKG / "kernels" / "cuda" / "src").glob("*.cu"):
        assert cu.stem in KERNEL_FAMILIES, f"{cu.name} has no family module beside it"
        src = (PKG / "kernels" / "cuda" / f"{cu.stem}.py").read_text()
        assert f'build.declare("{cu.stem}"' in src, f"kernels/cuda/{cu.stem}.py does not declare src/{cu.name}"


# ---- every op in every table -----------------------------------------------------------------

def test_every_op_in_every_table_with_one_family():
    for name, op in SPEC.items():
        assert name in RULES and name in OPINFOS and name in LOWERING, name
        assert op.family in FAMILIES, (name, op.family)
        assert RULES[name].family == op.family == OPINFOS[name].family, (
            name, op.family, RULES[name].family, OPINFOS[name].family)
        if op.compound:
            assert name in COMPOUNDS, name
        else:
            for layer in ("spec", "autograd/rules", "testing/opinfo"):
                assert (PKG / layer / f"{op.family}.py").exists(), (name, layer)
    assert set(RULES) == set(SPEC) and set(OPINFOS) == set(SPEC)


def test_compounds_are_made_of_primitives_of_the_table():
    import numpy as np
    from torchlean.spec.compound import run_formula
    for name, c in COMPOUNDS.items():
        assert SPEC[name].compound
        for shapes in c.shapes:
            for attrs in c.cases:
                _, parts = run_formula(c, [tuple(s) for s in shapes], attrs,
                                       lambda op, ss, a: tuple(SPEC[op].shape(*ss, **a)), shape_of=tuple)
                assert parts.steps and all(op in SPEC and not SPEC[op].compound for op, *_ in parts.steps), name
        assert np.isfinite(c.domain).all()


def test_ir_tables_name_spec_kinds():
    for kind in list(PARAM_INPUTS) + list(DOMAINS):
        assert kind in SPEC, kind
    assert not set(IR_KINDS) & set(SPEC)
    assert not [k for k in LOWERING if LOWERING[k].op is not None and LOWERING[k].op not in RULES]


def test_onnx_converters_produce_spec_kinds():
    """Every kind the ONNX importer's converters write (a string literal given to the builder's
    ``add`` or to a converter factory) is a kind of the IR."""
    tree = ast.parse((PKG / "ir" / "onnx.py").read_text())
    kinds = {n.args[0].value for n in ast.walk(tree)
             if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
             and isinstance(n.args[0].value, str)
             and ast.unparse(n.func).split(".")[-1] in ("add", "_unary", "_binary", "_pool", "_reduce")}
    assert kinds and len(CONVERTERS) > 30
    assert not [k for k in kinds if k not in SPEC and k not in IR_KINDS], sorted(kinds - set(SPEC) - set(IR_KINDS))
