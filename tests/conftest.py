import zlib

import numpy as np
import pytest


def _cuda_ok():
    try:
        from torchlean.kernels import cuda_available
        return cuda_available()
    except Exception:
        return False


CUDA = _cuda_ok()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])


def pytest_collection_modifyitems(config, items):
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    # A fresh, reproducible generator per test, keyed by the test's name (crc32: str hashes
    # are salted per process, which gave every run different data).
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
