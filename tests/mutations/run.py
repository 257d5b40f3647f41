#!/usr/bin/env python
"""The mutation test: plant each bug of ``mutants.MUTANTS`` in a copy of the package and see what
catches it.

    python tests/mutations/run.py [--jobs N] [--only ID,ID] [--list] [--keep DIR]

The package is copied to a temporary directory (the working tree is never edited); small
models are exported from the clean copy to IR JSON (``models.py``). Then, one mutant at a time,
the edit is applied to the copy and, in subprocesses with ``PYTHONPATH`` at the copy:

* ``check``: ``torchlean check`` on the CPU (every op's forward and VJP, edge samples included,
  and the fused optimizer steps) — caught when it exits non-zero;
* ``--model``: ``torchlean check --model`` on each exported model — caught when one exits
  non-zero;
* ``kernels``: for mutants of kernels no op rule calls, the CPU kernel oracle tests of
  tests/test_checker_catches.py;
* ``plain`` (for comparison): the op checks on the ordinary samples only — no edge samples, no
  optimizer steps — which is what the checker ran before those were added.

Prints one row per mutant (which mechanisms caught it, the ops ``check`` named, the first node
``--model`` named) and the catch rates; exits 1 when ``check`` misses a value-changing mutant,
``--model`` misses one that changes a model's node, or the kernel tests miss a kernel mutant.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from mutants import MUTANTS, Mutant  # noqa: E402

MODELS = ("mlp", "cnn", "attn")
TIMEOUT = 300


def _env(pkg: Path, cache: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pkg)
    env["PYTHONPYCACHEPREFIX"] = str(cache)   # a fresh bytecode cache per mutant: no stale .pyc
    env["PYTHONWARNINGS"] = "ignore"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(cmd, pkg: Path, cache: Path, cwd: Path):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=_env(pkg, cache), capture_output=True, text=True, timeout=TIMEOUT)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", "timeout"


def _copy(dst: Path) -> Path:
    pkg = dst / "pkg"
    shutil.copytree(ROOT / "torchlean", pkg / "torchlean", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


_PLAIN = ("import sys\n"
          "from torchlean.testing.opinfo import OPINFOS\n"
          "from torchlean.testing.checks import run_checks\n"
          "for info in OPINFOS.values():\n"
          "    info.edge = lambda rng: []\n"
          "sys.exit(1 if any(not r.passed for r in run_checks('cpu')) else 0)\n")


def _mechanisms(m: Mutant | None, pkg: Path, work: Path, models: Path, tag: str) -> dict:
    cache = work / "pycache" / tag
    row = {}
    rc, out, err = _run([sys.executable, "-m", "torchlean", "check"], pkg, cache, work)
    fails = re.findall(r"^FAIL (\S+) ([a-z ]+?) on cpu", out, re.M)
    row["check"] = rc != 0
    row["check_ops"] = sorted({op for op, _ in fails}) if fails else ([] if rc == 0 else
                                                                        [f"exit {rc}: {err.strip()[-120:]}"])
    # The same op checks without the edge samples and the optimizer steps: what the checker
    # caught before those were added (for comparison only).
    rc, out, err = _run([sys.executable, "-c", _PLAIN], pkg, cache, work)
    row["plain"] = rc != 0
    row["model"] = False
    row["model_where"] = ""
    for name in MODELS:
        rc, out, err = _run([sys.executable, "-m", "torchlean", "check", "--model", str(models / f"{name}.json")],
                            pkg, cache, work)
        if rc != 0:
            row["model"] = True
            hit = re.search(r"diverges from the meaning first at node (\d+) \((\w+)\), its (\w+)(.*):", err)
            where = f"{name}: node {hit.group(1)} {hit.group(2)} {hit.group(3)}{hit.group(4)}" if hit else \
                f"{name}: {err.strip().splitlines()[-1][:80] if err.strip() else f'exit {rc}'}"
            row["model_where"] = (row["model_where"] + "; " if row["model_where"] else "") + where
    if m is None or m.kind == "kernel":
        rc, out, err = _run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                             str(ROOT / "tests" / "test_checker_catches.py"), "-k", "cpu_kernel_against_its_oracle"],
                            pkg, cache, work)
        row["kernel_tests"] = rc != 0
    else:
        row["kernel_tests"] = None
    return row


def _one(m: Mutant, pkg: Path, work: Path, models: Path) -> dict:
    path = pkg / "torchlean" / m.file
    src = path.read_text()
    if src.count(m.old) != 1:
        raise SystemExit(f"mutant {m.id}: the old text occurs {src.count(m.old)} times in {m.file}")
    path.write_text(src.replace(m.old, m.new))
    try:
        row = _mechanisms(m, pkg, work, models, m.id)
    finally:
        path.write_text(src)
    row.update(id=m.id, file=m.file, desc=m.desc, kind=m.kind, model_expected=m.model)
    return row


def run(mutants=MUTANTS, jobs: int = 2, workdir=None, verbose=True) -> list:
    """Run the mutation test; one dict per mutant (``check``, ``model``, ``kernel_tests``: caught)."""
    own = workdir is None
    base = Path(tempfile.mkdtemp(prefix="tl_mut_")) if own else Path(workdir)
    try:
        models = base / "models"
        pkgs = [_copy(base / f"w{i}") for i in range(max(1, jobs))]
        rc, out, err = _run([sys.executable, str(HERE / "models.py"), str(models)], pkgs[0], base / "pycache" / "m",
                            base)
        if rc != 0:
            raise SystemExit(f"exporting the models failed:\n{err}")
        clean = _mechanisms(None, pkgs[0], base / "w0", models, "clean")
        if clean["check"] or clean["model"] or clean["kernel_tests"]:
            raise SystemExit(f"the unmutated copy does not pass: {clean}")
        todo = list(mutants)
        rows: list = [None] * len(todo)

        def worker(i):
            pkg = pkgs[i % len(pkgs)]
            rows[i] = _one(todo[i], pkg, pkg.parent, models)
            if verbose:
                print(f"  {todo[i].id}: check {_mark(rows[i]['check'])}, --model {_mark(rows[i]['model'])}",
                      file=sys.stderr, flush=True)

        # each worker owns one copy: mutant i runs on copy i % jobs, one at a time per copy
        with ThreadPoolExecutor(max_workers=len(pkgs)) as ex:
            lanes = [[i for i in range(len(todo)) if i % len(pkgs) == k] for k in range(len(pkgs))]
            list(ex.map(lambda lane: [worker(i) for i in lane], lanes))
        return rows
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


def _mark(v) -> str:
    return "-" if v is None else ("caught" if v else "MISSED")


def table(rows) -> str:
    head = ("mutant", "kind", "check", "--model", "kernels", "plain", "check named", "--model named")
    body = [(r["id"], r["kind"] + ("+model" if r["model_expected"] else ""), _mark(r["check"]),
             _mark(r["model"]) if (r["model_expected"] or r["model"]) else ("caught" if r["model"] else "-"),
             _mark(r["kernel_tests"]), _mark(r["plain"]), ", ".join(r["check_ops"])[:48], r["model_where"][:60])
            for r in rows]
    w = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip() for row in [head, tuple("-" * x for x in w)]
             + body]
    return "\n".join(lines)


def rates(rows) -> dict:
    value = [r for r in rows if r["kind"] == "value"]
    model = [r for r in rows if r["model_expected"]]
    kernel = [r for r in rows if r["kind"] == "kernel"]
    anyc = [r for r in rows if r["check"] or r["model"] or r["kernel_tests"]]
    return {"check_value": (sum(r["check"] for r in value), len(value)),
            "check_all": (sum(r["check"] for r in rows), len(rows)),
            "model_expected": (sum(r["model"] for r in model), len(model)),
            "model_all": (sum(r["model"] for r in rows), len(rows)),
            "kernel_tests": (sum(bool(r["kernel_tests"]) for r in kernel), len(kernel)),
            "any": (len(anyc), len(rows)),
            "plain_value": (sum(r["plain"] for r in value), len(value))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    a = ap.parse_args(argv)
    if a.list:
        for m in MUTANTS:
            print(f"{m.id:32s} {m.kind:6s} {m.file:32s} {m.desc}")
        return 0
    todo = [m for m in MUTANTS if not a.only or m.id in a.only.split(",")]
    rows = run(todo, a.jobs, a.keep)
    print(table(rows))
    r = rates(rows)

    def pct(k):
        c, n = r[k]
        return f"{c}/{n} ({100.0 * c / n:.0f}%)" if n else "0/0"
    print()
    print(f"torchlean check:          {pct('check_value')} of the value-changing mutants, {pct('check_all')} of all")
    print(f"torchlean check --model:  {pct('model_expected')} of the mutants that change a model node, "
          f"{pct('model_all')} of all")
    print(f"CPU kernel tests:         {pct('kernel_tests')} of the kernel mutants")
    print(f"any mechanism:            {pct('any')}")
    print(f"for comparison, the op checks on ordinary samples only (no edge samples, no optimizer steps): "
          f"{pct('plain_value')} of the value-changing mutants")
    ok = r["check_value"][0] == r["check_value"][1] and r["model_expected"][0] == r["model_expected"][1] \
        and r["kernel_tests"][0] == r["kernel_tests"][1]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
