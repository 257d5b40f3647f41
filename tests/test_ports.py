"""The port suite: plain PyTorch programs (``tests/ports/*.py``) run unchanged under torch and under
``torchlean run``, and must agree.

Each program trains or computes something small from data it makes itself, checks its own pass
criterion (it exits non-zero when the criterion fails) and prints one line
``PORT-RESULT {json}``. Keys starting with ``same_`` are values that do not depend on the random
stream of the backend (the programs draw their data and initial weights with NumPy), so torch and
torchlean must give them to float32 training precision; the other keys are reported only. A program
runs under torch only where torch is installed (the oracle); under torchlean always.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

PORTS = Path(__file__).parent / "ports"
PROGRAMS = sorted(p for p in PORTS.glob("*.py") if not p.name.startswith("_"))
HAS_TORCH = importlib.util.find_spec("torch") is not None
TIMEOUT = 300


def _run(cmd, tmp_path):
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="2")
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("PORT-RESULT ")]
    assert len(lines) == 1, f"expected one PORT-RESULT line, got {len(lines)}:\n{p.stdout[-3000:]}"
    return json.loads(lines[0][len("PORT-RESULT "):])


def _close(a, b, rtol):
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)
    return a == b


def test_there_are_enough_ports():
    assert len(PROGRAMS) >= 15, [p.name for p in PROGRAMS]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_port_agrees_with_torch(program, tmp_path):
    ours = _run([sys.executable, "-m", "torchlean", "run", str(program)], tmp_path)
    assert "backend" not in ours or ours["backend"] == "torchlean"
    if not HAS_TORCH:
        return
    ref = _run([sys.executable, str(program)], tmp_path)
    rtol = float(ours.get("rtol", 1e-3))
    same = sorted(k for k in ref if k.startswith("same_"))
    assert same == sorted(k for k in ours if k.startswith("same_"))
    bad = {k: (ours[k], ref[k]) for k in same if not _close(ours[k], ref[k], rtol)}
    assert not bad, f"{program.name}: torchlean vs torch differ (rtol {rtol}): {bad}"
