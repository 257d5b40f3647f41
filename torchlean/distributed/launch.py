"""``torchlean launch``: torchrun's launcher for one machine's share of a job.

    torchlean launch --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] script.py ...

starts ``N`` workers, each running ``script.py`` through ``torchlean run`` (so ``import torch`` gives
torchlean) with torchrun's environment: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``ROLE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_RUN_ID`` (and
``OMP_NUM_THREADS=1`` when ``N > 1`` and it is not set, as torchrun does). On each of ``M`` machines
one launcher runs with its ``--node-rank``.

It fails fast: when a worker exits with a non-zero code the others are stopped (SIGTERM, then SIGKILL
after ``--grace`` seconds), a line names the rank that failed, and the launcher exits with that
worker's code. SIGINT and SIGTERM sent to the launcher are forwarded to every worker; on Linux a
launcher killed outright (SIGKILL) takes its workers with it (each gets SIGTERM).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

__all__ = ["launch", "worker_env"]


def worker_env(base: dict, local_rank: int, nproc_per_node: int, nnodes: int, node_rank: int, master_addr: str,
               master_port: int, run_id: str) -> dict:
    """The environment of worker ``local_rank`` (torchrun's variables over ``base``)."""
    rank = node_rank * nproc_per_node + local_rank
    world = nnodes * nproc_per_node
    env = dict(base)
    env.update(RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world),
               LOCAL_WORLD_SIZE=str(nproc_per_node), GROUP_RANK=str(node_rank), GROUP_WORLD_SIZE=str(nnodes),
               ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world), ROLE_NAME="default", MASTER_ADDR=master_addr,
               MASTER_PORT=str(master_port), TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT="0",
               TORCHELASTIC_MAX_RESTARTS="0")
    if nproc_per_node > 1 and "OMP_NUM_THREADS" not in base:
        env["OMP_NUM_THREADS"] = "1"
    return env


def _command(script, args, module, no_python):
    if no_python:
        return [script, *args]
    if module:
        return [sys.executable, "-m", script, *args]
    return [sys.executable, "-m", "torchlean", "run", script, *args]


def _die_with_the_launcher():
    """In a worker before it runs: a SIGTERM when the launcher dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so that a killed launcher leaves no worker waiting for its job."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: nothing to ask for
        pass


def _stop(procs, grace):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch(script, args=(), nproc_per_node=1, nnodes=1, node_rank=0, master_addr="127.0.0.1", master_port=29500,
           module=False, no_python=False, grace=5.0, monitor_interval=0.05, err=None) -> int:
    """Run the workers of this machine and monitor them; returns the exit code (module docs)."""
    err = err or sys.stderr
    if not 0 <= node_rank < nnodes:
        print(f"torchlean launch: --node-rank {node_rank} must be in [0, {nnodes})", file=err)
        return 1
    run_id = os.environ.get("TORCHELASTIC_RUN_ID") or secrets.token_hex(4)
    cmd = _command(script, list(args), module, no_python)
    procs = []
    received = []

    def forward(sig, _frame):
        received.append(sig)
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for local in range(nproc_per_node):
            env = worker_env(os.environ, local, nproc_per_node, nnodes, node_rank, master_addr, master_port, run_id)
            procs.append(subprocess.Popen(cmd, env=env,
                                          preexec_fn=_die_with_the_launcher if sys.platform == "linux" else None))
        while True:
            if received:
                _stop(procs, grace)
                return 128 + int(received[0])
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                local, code = failed[0]
                rank = node_rank * nproc_per_node + local
                others = sum(c is None for c in codes)
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                print(f"torchlean launch: worker rank {rank} (local rank {local}, pid {procs[local].pid}) failed "
                      f"with {how}; stopping the {others} other running worker(s)", file=err, flush=True)
                _stop(procs, grace)
                return code if code > 0 else 128 - code
            if all(c == 0 for c in codes):
                return 0
            time.sleep(monitor_interval)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if any(p.poll() is None for p in procs):
            _stop(procs, grace)
