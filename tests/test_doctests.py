"""The runnable examples in the package's docstrings stay true."""

import doctest
import importlib
import pkgutil

import pytest

import torchlean

_SKIP = ("torchlean.__main__", "torchlean.cuda")  # the CLI entry point; CUDA needs a GPU
MODULES = [m.name for m in pkgutil.walk_packages(torchlean.__path__, "torchlean.")
           if m.name not in _SKIP and ".kernels.cuda" not in m.name]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if name.startswith("torchlean.bench.") and e.name in ("cupy", "torch"):
            pytest.skip(f"{name} is a benchmark script that needs {e.name}")
        raise
    r = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert r.failed == 0, f"{r.failed} of {r.attempted} examples failed in {name}"
